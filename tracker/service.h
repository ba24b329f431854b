// The Tracker gRPC service: one class, one method per RPC, each a thin layer that validates, calls
// the Broker and turns the outcome into messages and a status. Agent sessions and Measure streams
// each hold a handler thread (the synchronous API) plus, for agents, a writer thread.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "common/wire/credentials.h"
#include "tracker/broker.h"
#include "tunefarm/v1/tracker.grpc.pb.h"

namespace tunefarm {

// Who may call an RPC of the tracker. Every caller presents its token in the call's metadata
// ("authorization: Bearer <token>"): trackerd's gate (tracker_gate) lets in only calls that carry
// one of the farm's tokens, before their request is read, and the service then checks that it is
// the one its RPC needs (the agent token for a session, the tuner token for Measure, the tuner or a
// reader token for the listings). Agents and tuners put it in their hello and each Measure request
// too, where the Broker, which sees no metadata, checks it again.
enum class TrackerCaller { kAgent, kTuner, kReader };

// Every RPC of tracker.proto with who may call it: the one place that says so (tests check that no
// RPC is missing). A method missing here is refused.
const std::map<std::string, TrackerCaller, std::less<>>& tracker_access();

// trackerd's gate (serving_credentials): any of the farm's tokens, or none (every call let in)
// while agents or tuners need no token.
CallGate tracker_gate(const BrokerOptions& options);

class TrackerService final : public v1::Tracker::Service {
 public:
  explicit TrackerService(Broker& broker) : broker_(broker) {}

  grpc::Status AgentSession(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<v1::TrackerMessage, v1::AgentMessage>* stream) override;
  grpc::Status Measure(grpc::ServerContext* context, const v1::MeasureRequest* request,
                       grpc::ServerWriter<v1::MeasureResponse>* writer) override;
  grpc::Status ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;
  grpc::Status QueueStatus(grpc::ServerContext* context, const v1::QueueStatusRequest* request,
                           v1::QueueStatusResponse* response) override;

 private:
  // Applies tracker_access() to a call of `rpc`.
  grpc::Status authorize(const grpc::ServerContext* context, std::string_view rpc) const;

  Broker& broker_;
};

// The largest message the tracker accepts: a Measure request carries every artifact of a batch.
// Single artifacts are limited separately (BrokerOptions::max_artifact_bytes).
inline constexpr int kMaxTrackerMessageBytes = 1 << 30;

}  // namespace tunefarm
