// Conversions between the C++ types of common/ and their wire messages, and between Status and
// grpc::Status. Kept apart from the rest of common/ so that the compiler never sees gRPC.
#pragma once

#include <optional>

#include <grpcpp/support/status.h>

#include "common/config.h"
#include "common/platform.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "tunefarm/v1/common.pb.h"
#include "tunefarm/v1/tracker.pb.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {

v1::DType to_proto(DType dtype);
StatusOr<DType> from_proto(v1::DType dtype);

v1::Workload to_proto(const Workload& workload);
// Validates as parse_workload does; errors name the workload.
StatusOr<Workload> from_proto(const v1::Workload& workload);

v1::Target to_proto(const Target& target);
StatusOr<Target> from_proto(const v1::Target& target);

v1::Config to_proto(const Config& config);
Config from_proto(const v1::Config& config);

// The JSON-lines form of records, which export writes, import reads and `best --json` prints: one
// line (no newline) of protobuf's JSON with the proto's field names. Unknown fields are errors,
// and a line longer than kMaxRecordLineBytes is refused before the JSON parser sees it.
inline constexpr size_t kMaxRecordLineBytes = 64 << 10;
std::string record_to_json_line(const v1::Record& record);
StatusOr<v1::Record> record_from_json_line(std::string_view line);

// What an agent of the tracker's listing can run, and its CPU: an agent lists "cuda" among its
// targets when it found a CUDA driver and a device.
AgentPlatform agent_platform(const v1::AgentInfo& agent);

// A model job's latency (a job of several weighted tasks): the sum over its tasks of weight x
// FLOPs / speed, with the best configs so far and, once every task's default was measured, with
// the templates' untuned defaults (0 until then); plus what the tasks' figures miss: the model's
// other steps (the spec's other_steps and other_bytes: row-wise steps, epilogues, layout
// conversions), their bytes as other_steps_seconds prices them, and a call's cost for every step.
// Nothing for a job of one task or while a task has no figure yet. What `status` and the
// dashboard show for a model rather than GFLOP/s.
struct ModelLatency {
  double tuned_s = 0;
  double untuned_s = 0;
};
std::optional<ModelLatency> model_latency(const v1::Job& job);
// Sets the job's progress.latency_ms and untuned_latency_ms from model_latency (0 where there is
// none): how tunerd shows every job, so that clients read the estimate rather than compute it.
void fill_model_latency(v1::Job& job);

// The time a built model's steps outside the tasks take to move their bytes (spec.other_bytes):
// those of plain arithmetic (spec.other_streaming_bytes: elementwise steps, pooling) at
// kStreamingStepShareOfStream of the key's agents' stream figure (spec.stream_bytes_per_s,
// measure/stream_speed.h), the rest (row-wise steps, transposes, layout conversions) at
// kOtherStepShareOfStream of it; all at kOtherStepBytesPerS where the agents did not say. And the
// cost of a step's call (the model's run loop and a kernel's entry). As measured on built models
// at one thread (bench/RESULTS.md, issue 32): on AMD EPYC Zen 4 their other steps ran at 14-26
// GB/s, and a run took 0.26-0.37 us a step more than its steps' own times; on Zen 5, whose stream
// figure is 195-207 GB/s, Softmax, LayerNorms and Transposes at 25-70 GB/s, squeeze-and-excitation's
// scaling and averages at 90-200 GB/s (priced at 60 GB/s for all, MobileNetV3-Small's estimate
// came out 1.19x its built model).
double other_steps_seconds(const v1::JobSpec& spec);
inline constexpr double kOtherStepBytesPerS = 15e9;
inline constexpr double kOtherStepShareOfStream = 0.3;
inline constexpr double kStreamingStepShareOfStream = 0.6;
inline constexpr double kStepCallS = 0.3e-6;

grpc::Status to_grpc(const Status& status);
Status from_grpc(const grpc::Status& status);

}  // namespace tunefarm
