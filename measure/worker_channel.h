// The pipe between the agent (or the tuner's local runner) and one measurement worker: frames of a
// 4-byte little-endian length followed by one serialized message. The request is a LeasedBatch
// holding one candidate, or none to ask for the reference outputs alone; the worker answers with a
// WorkerReport (outputs or a failure), then each WorkerStep the measurer sends with another.
// Everything the worker sends after loading foreign code may be forged: the measurer parses it as
// data, never as a result it believes (measure.h).
#pragma once

#include <cstdint>
#include <string>

#include <google/protobuf/message_lite.h>

#include "common/status.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// The descriptor on which the worker finds its end of the channel.
inline constexpr int kWorkerChannelFd = 3;

// Largest frame either side accepts.
inline constexpr uint32_t kMaxWorkerFrameBytes = 1u << 30;

Status write_frame(int fd, const google::protobuf::MessageLite& message);

// Waits at most until `deadline_ms` (CLOCK_MONOTONIC milliseconds; negative waits forever).
// DEADLINE_EXCEEDED when it passes, UNAVAILABLE when the other side has closed.
Status read_frame(int fd, google::protobuf::MessageLite& message, int64_t deadline_ms);

int64_t monotonic_ms();

// A reply that carries only an error: how both ends of the channel report what went wrong.
v1::MeasureResult failure(v1::ErrorCode code, std::string message);

// Names the reference outputs of one workload, reference kernel and input seed: what the measurer
// caches so that the reference runs once per workload and seed.
std::string reference_cache_key(const v1::Workload& workload, const v1::Artifact& reference, uint64_t input_seed);

}  // namespace tunefarm
