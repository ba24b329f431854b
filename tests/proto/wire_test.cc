#include "common/wire/wire.h"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

TEST(Wire, WorkloadRoundTripsThroughProto) {
  auto w = parse_workload("conv2d_nhwc:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1");
  ASSERT_TRUE(w.ok());
  v1::Workload p = to_proto(*w);
  EXPECT_EQ(p.op(), "conv2d_nhwc");
  EXPECT_EQ(p.dtype(), v1::FLOAT32);
  std::string bytes = p.SerializeAsString();
  v1::Workload decoded;
  ASSERT_TRUE(decoded.ParseFromString(bytes));
  auto back = from_proto(decoded);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *w);
}

TEST(Wire, InvalidWireWorkloadsAreRejected) {
  v1::Workload p;
  p.set_op("matmul");
  auto* m = p.add_params();
  m->set_name("M");
  m->set_value(-1);
  EXPECT_THAT(from_proto(p).status().message(), HasSubstr("M=-1 is out of range"));
  p.set_op("nonsense");
  EXPECT_THAT(from_proto(p).status().message(), HasSubstr("unknown operator"));
  v1::Workload bad_dtype;
  bad_dtype.set_op("matmul");
  bad_dtype.set_dtype(static_cast<v1::DType>(77));
  EXPECT_FALSE(from_proto(bad_dtype).ok());
}

TEST(Wire, TargetRoundTripsThroughProto) {
  for (const char* text : {"llvm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "cuda -arch=sm_90"}) {
    auto t = parse_target(text);
    ASSERT_TRUE(t.ok());
    auto back = from_proto(to_proto(*t));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->to_string(), text);
  }
  v1::Target bad;
  bad.set_kind("vulkan");
  EXPECT_THAT(from_proto(bad).status().message(), HasSubstr("unknown target kind"));
}

TEST(Wire, StatusMapsToGrpcCodes) {
  grpc::Status g = to_grpc(invalid_argument("bad trials"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), "bad trials");
  EXPECT_EQ(from_grpc(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token")).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(to_grpc(Status()).ok());
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

TEST(Wire, ConfigRoundTripsThroughProto) {
  Config c{"t", {{"a", int64_t{4}}, {"b", std::string("x")}, {"c", std::vector<int64_t>{-1, 4}}}};
  v1::Config p = to_proto(c);
  EXPECT_EQ(p.knobs_size(), 3);
  EXPECT_EQ(from_proto(p), c);
  // An empty list stays a list (record_fuzz found it coming back as the integer 0).
  Config empty{"t", {{"a", std::vector<int64_t>{}}}};
  EXPECT_EQ(from_proto(to_proto(empty)), empty);
}

// A model's latency estimate: each task's count x FLOPs at its best and its default speed, plus
// the steps outside the tasks (their bytes at kOtherStepBytesPerS, or at the speed the key's agents
// measured) and a call for every step.
TEST(Wire, ModelLatencyAddsTheStepsOutsideTheTasks) {
  v1::Job job;
  for (double gflops : {10.0, 20.0}) {
    v1::TaskProgress* t = job.mutable_progress()->add_tasks();
    t->set_flops(1e6);
    t->set_weight(2);
    t->set_best_gflops(gflops);
    t->set_default_gflops(gflops / 2);
  }
  auto kernels_only = model_latency(job);
  ASSERT_TRUE(kernels_only.has_value());
  double calls = 4 * kStepCallS;
  EXPECT_NEAR(kernels_only->tuned_s, 2e6 / 10e9 + 2e6 / 20e9 + calls, 1e-12);
  EXPECT_NEAR(kernels_only->untuned_s, 2e6 / 5e9 + 2e6 / 10e9 + calls, 1e-12);
  job.mutable_spec()->set_other_steps(3);
  job.mutable_spec()->set_other_bytes(6e6);
  auto with_rest = model_latency(job);
  ASSERT_TRUE(with_rest.has_value());
  double rest = 6e6 / kOtherStepBytesPerS + 3 * kStepCallS;
  EXPECT_NEAR(with_rest->tuned_s - kernels_only->tuned_s, rest, 1e-12);
  EXPECT_NEAR(with_rest->untuned_s - kernels_only->untuned_s, rest, 1e-12);
  // Where the key's agents measured how fast their CPU streams a step's bytes, the other steps
  // move at that CPU's speed: twice the figure, half the time.
  job.mutable_spec()->set_stream_bytes_per_s(100e9);
  double at_100 = model_latency(job)->tuned_s - kernels_only->tuned_s;
  EXPECT_NEAR(at_100, 6e6 / (100e9 * kOtherStepShareOfStream) + 3 * kStepCallS, 1e-12);
  job.mutable_spec()->set_stream_bytes_per_s(200e9);
  EXPECT_NEAR(model_latency(job)->tuned_s - kernels_only->tuned_s - 3 * kStepCallS, (at_100 - 3 * kStepCallS) / 2, 1e-12);
  // Elementwise steps and pooling stream their bytes faster than row-wise steps; a figure past
  // the other bytes counts as all of them.
  job.mutable_spec()->set_other_streaming_bytes(2e6);
  EXPECT_NEAR(model_latency(job)->tuned_s - kernels_only->tuned_s,
              2e6 / (200e9 * kStreamingStepShareOfStream) + 4e6 / (200e9 * kOtherStepShareOfStream) + 3 * kStepCallS, 1e-12);
  job.mutable_spec()->set_other_streaming_bytes(1e300);
  EXPECT_NEAR(model_latency(job)->tuned_s - kernels_only->tuned_s, 6e6 / (200e9 * kStreamingStepShareOfStream) + 3 * kStepCallS,
              1e-12);
  for (double none : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    job.mutable_spec()->set_other_streaming_bytes(none);
    EXPECT_NEAR(model_latency(job)->tuned_s - kernels_only->tuned_s, (at_100 - 3 * kStepCallS) / 2 + 3 * kStepCallS, 1e-12);
  }
  job.mutable_spec()->clear_other_streaming_bytes();
  job.mutable_spec()->clear_stream_bytes_per_s();
  // Until every task has a figure there is no estimate; until every default has one, no untuned.
  job.mutable_progress()->mutable_tasks(1)->set_default_gflops(0);
  EXPECT_EQ(model_latency(job)->untuned_s, 0);
  job.mutable_progress()->mutable_tasks(1)->set_best_gflops(0);
  EXPECT_FALSE(model_latency(job).has_value());
}

// A task that is another way to compute another (a convolution's Winograd form) is no step of its
// own: the estimate counts the faster of the two, the untuned one the workload's own default.
TEST(Wire, ModelLatencyCountsTheFasterOfAWorkloadAndItsOtherForm) {
  const std::string direct = "conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16";
  v1::Job job;
  auto add = [&](const std::string& text, double best, const std::string& of) {
    auto w = parse_workload(text);
    ASSERT_TRUE(w.ok());
    v1::TaskProgress* t = job.mutable_progress()->add_tasks();
    *t->mutable_workload() = to_proto(*w);
    t->set_flops(1e6);
    t->set_weight(2);
    t->set_best_gflops(best);
    t->set_default_gflops(best / 2);
    v1::TuneTask* spec = job.mutable_spec()->add_tasks();
    *spec->mutable_workload() = to_proto(*w);
    spec->set_alternative_of(of);
  };
  add(direct, 10, "");
  add("dense:M=4,N=16,K=16", 20, "");
  add(direct + ",winograd=2", 40, direct);
  double calls = 4 * kStepCallS;  // two steps of weight 2: the alternative is none
  auto faster_form = model_latency(job);
  ASSERT_TRUE(faster_form.has_value());
  EXPECT_NEAR(faster_form->tuned_s, 2e6 / 40e9 + 2e6 / 20e9 + calls, 1e-12);
  EXPECT_NEAR(faster_form->untuned_s, 2e6 / 5e9 + 2e6 / 10e9 + calls, 1e-12);
  job.mutable_progress()->mutable_tasks(2)->set_best_gflops(5);
  EXPECT_NEAR(model_latency(job)->tuned_s, 2e6 / 10e9 + 2e6 / 20e9 + calls, 1e-12);
  // An alternative not measured yet holds no estimate back.
  job.mutable_progress()->mutable_tasks(2)->set_best_gflops(0);
  EXPECT_TRUE(model_latency(job).has_value());
}

// Where an untuned build computes a workload in its other form (a 16x16 map: winograd_by_default),
// the untuned estimate takes that form's default; a task of another operator that names itself
// another's form (a hostile spec) is only an alternative.
TEST(Wire, ModelLatencyOfAnUntunedBuildCountsTheFormItTakes) {
  const std::string direct = "conv2d_nchwc:N=1,C=16,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16";
  v1::Job job;
  auto add = [&](const std::string& text, double best, double def, const std::string& of) {
    auto w = parse_workload(text);
    ASSERT_TRUE(w.ok()) << text;
    v1::TaskProgress* t = job.mutable_progress()->add_tasks();
    *t->mutable_workload() = to_proto(*w);
    t->set_flops(1e6);
    t->set_best_gflops(best);
    t->set_default_gflops(def);
    v1::TuneTask* spec = job.mutable_spec()->add_tasks();
    *spec->mutable_workload() = to_proto(*w);
    spec->set_alternative_of(of);
  };
  add(direct, 10, 8, "");
  add("dense:M=4,N=16,K=16", 20, 20, "");
  add(direct + ",winograd=4", 40, 30, direct);
  add("matmul:M=4,N=16,K=16", 50, 50, "dense:M=4,N=16,K=16");
  double calls = 2 * kStepCallS;
  auto latency = model_latency(job);
  ASSERT_TRUE(latency.has_value());
  EXPECT_NEAR(latency->tuned_s, 1e6 / 40e9 + 1e6 / 50e9 + calls, 1e-12);
  EXPECT_NEAR(latency->untuned_s, 1e6 / 30e9 + 1e6 / 20e9 + calls, 1e-12);
}

}  // namespace
}  // namespace tunefarm
