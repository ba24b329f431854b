// How tune-client prints: messages as protobuf JSON for scripts (--json), durations and progress
// for people.
#pragma once

#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "common/status.h"

namespace tunefarm::client {

// Prints why an RPC to the service at `address` failed ("WHAT: reason", naming an unreachable
// server as such) and returns the exit status for it.
int rpc_failure(const std::string& address, const std::string& what, const grpc::Status& status);
// What rpc_failure() prints, for a command that reports it later.
std::string rpc_failure_message(const std::string& address, const std::string& what, const grpc::Status& status);
// Whether `status` is gRPC's own UNAVAILABLE about the channel (no server reached, or the one
// reached went away mid-call), not the server's word about what it could not reach itself (tunerd
// whose tracker or history is down): only the first is helped by another try or another replica.
bool channel_failure(const grpc::Status& status);

// One line of JSON with the proto's field names and every field present.
std::string to_json(const google::protobuf::Message& message);

// "45s", "12m", "1.5h".
std::string format_duration(double seconds);

// Parses "90", "90s", "10m", "1h", "1h30m" into seconds.
StatusOr<double> parse_duration(const std::string& text);

}  // namespace tunefarm::client
