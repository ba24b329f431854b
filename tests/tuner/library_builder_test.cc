// The library builder's choice of kernel: the history's best record, the template's default when
// there is none (said in a warning) or when the record's config is no longer a point its template
// builds, the default's own record when the best beats it only by noise, and an error with
// require_tuned.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "compiler/build.h"
#include "model/tasks.h"
#include "tests/disassembly.h"
#include "tuner/library_builder.h"

namespace tunefarm {
namespace {

// A convolution small enough to build fast, and its default config with another row tile.
Workload small_conv() {
  return *parse_workload("conv2d_nchwc:N=1,C=32,H=7,W=7,K=32,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16");
}

Config with_tile_q(Config config, int64_t tile_q) {
  for (auto& [name, value] : config.knobs)
    if (name == "tile_q") value = std::vector<int64_t>{-1, tile_q};
  return config;
}

class ChooseKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("choose-kernel-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    store_ = std::move(db::RecordStore::open((dir_ / "history.db").string()).value());
    request_.target = Target{};
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void record(const Workload& w, const Config& config, double seconds, const char* built_for = nullptr,
              int remeasure_round = 0) {
    v1::Record r;
    r.set_remeasure_round(remeasure_round);
    r.mutable_result()->set_started_at_us(++measured_);
    *r.mutable_workload() = to_proto(w);
    *r.mutable_target() = to_proto(Target{});
    if (built_for) *r.mutable_built_for() = to_proto(*parse_target(built_for));
    r.set_device_key("local-cpu");
    r.set_job_id("job-1");
    *r.mutable_config() = to_proto(config);
    r.mutable_result()->add_costs(seconds);
    r.mutable_result()->set_agent_id("agent-1");
    r.set_mean_cost_s(seconds);
    r.set_gflops(1e-9 * *workload_flops(w) / seconds);
    ASSERT_TRUE(store_->insert({r}).ok());
  }

  std::filesystem::path dir_;
  int64_t measured_ = 0;
  std::unique_ptr<db::RecordStore> store_;
  LibraryRequest request_;
};

TEST_F(ChooseKernel, TheBestRecordOrTheDefaultWithAWarning) {
  Workload w = small_conv();
  std::vector<std::string> warnings;
  auto untuned = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(untuned.ok()) << untuned.status().to_string();
  EXPECT_FALSE(untuned->tuned);
  EXPECT_EQ(untuned->config, *default_config(w, Target{}));
  ASSERT_EQ(warnings.size(), 1u);
  request_.require_tuned = true;
  auto refused = choose_kernel(*store_, w, request_, warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);

  Config tuned = with_tile_q(*default_config(w, Target{}), 1);
  record(w, tuned, 1e-4);
  warnings.clear();
  auto chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_TRUE(chosen->tuned);
  EXPECT_EQ(chosen->config, tuned);
  EXPECT_TRUE(warnings.empty());
}

// On a shared machine a few percent is noise: the best record must beat the default's own
// record by more than that to be chosen over it.
TEST_F(ChooseKernel, ABestThatBeatsTheDefaultOnlyByNoiseGivesWayToIt) {
  Workload w = small_conv();
  Config def = *default_config(w, Target{});
  Config other = with_tile_q(def, 1);
  record(w, def, 1.00e-4);
  record(w, other, 0.98e-4);  // 2% faster: noise.
  std::vector<std::string> warnings;
  auto chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_TRUE(chosen->tuned);
  EXPECT_EQ(chosen->config, def);

  Config faster = with_tile_q(def, 2);
  record(w, faster, 0.8e-4);  // 25% faster: chosen.
  chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->config, faster);
}

// A task's default is its first trial, measured while the job's first batches were built beside
// it: where the job re-measured the best and the default side by side, those measurements decide,
// not the figures (the upper median of a trial and one re-measurement is the slower of the two).
TEST_F(ChooseKernel, TheDefaultAndTheBestMeasuredSideBySideDecide) {
  Workload w = small_conv();
  Config def = *default_config(w, Target{});
  Config other = with_tile_q(def, 1);
  record(w, def, 13.7e-6);
  record(w, other, 10.2e-6);
  // By figures alone the other config wins by 28%.
  std::vector<std::string> warnings;
  auto chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->config, other);
  record(w, other, 10.7e-6, nullptr, 1);
  record(w, def, 9.1e-6, nullptr, 1);
  warnings.clear();
  chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->config, def);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("does not beat the template's default by 5%"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("measured side by side"), std::string::npos) << warnings[0];
  // tunerd hands the builder every measurement of the two with the two figures' records.
  auto best = store_->query_best(w, Target{}, "local-cpu", 1);
  ASSERT_TRUE(best.ok() && !best->empty());
  auto d = default_record(*store_, w, request_, "local-cpu");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(best_and_default_records(*store_, w, request_, best->front(), *d).size(), 4u);
}

// A record whose config the template no longer builds (its space was narrowed after the record
// was measured) gives way to the default instead of failing the whole library.
TEST_F(ChooseKernel, ARecordTheTemplateNoLongerBuildsFallsBackToTheDefault) {
  Workload w = small_conv();
  Config huge = *default_config(w, Target{});
  for (auto& [name, value] : huge.knobs) {
    if (name == "tile_q") value = std::vector<int64_t>{-1, 7};
    if (name == "tile_kb") value = std::vector<int64_t>{-1, 2};
    if (name == "unroll_ci" || name == "unroll_window") value = int64_t{1};
  }
  ASSERT_FALSE(config_space(w, Target{})->check(huge).ok());
  record(w, huge, 1e-5);
  std::vector<std::string> warnings;
  auto chosen = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_FALSE(chosen->tuned);
  EXPECT_EQ(chosen->config, *default_config(w, Target{}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no longer builds"), std::string::npos) << warnings[0];
}

// A dense layer tuned before models packed their weights at build time has records of its
// workload without w_block: with none of the packed workload's own, they are what the layer is
// built from (as measured, W[N, K]); once the packed workload has a record, that one is.
TEST_F(ChooseKernel, ADenseRecordFromBeforeWeightPanelsBuildsTheLayerAsMeasured) {
  Workload packed = *parse_workload("dense:M=16,N=64,K=64,bias=1,w_block=32");
  Workload plain = *parse_workload("dense:M=16,N=64,K=64,bias=1");
  Config old = *default_config(plain, Target{});
  for (auto& [name, value] : old.knobs)
    if (name == "unroll_k") value = int64_t{4};
  record(plain, old, 1e-5);
  std::vector<std::string> warnings;
  request_.require_tuned = true;
  auto chosen = choose_kernel(*store_, packed, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_TRUE(chosen->tuned);
  EXPECT_EQ(chosen->config, old);
  ASSERT_TRUE(chosen->workload.has_value());
  EXPECT_EQ(chosen->workload->to_string(), plain.to_string());
  EXPECT_TRUE(warnings.empty());

  Config now = *default_config(packed, Target{});
  record(packed, now, 2e-5);
  chosen = choose_kernel(*store_, packed, request_, warnings);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->config, now);
  EXPECT_FALSE(chosen->workload.has_value());
}

// A convolution's Winograd form, tuned beside it, is what a model's node is built from where its
// best record clearly beats the workload's own, or the workload has none; within noise of it the
// workload's own stands. A library of named workloads never switches (its weights' layout is the
// caller's).
TEST_F(ChooseKernel, AModelTakesAWinogradFormWhereItMeasuredClearlyFasterOrWhereItsDefaultWins) {
  Workload w = *parse_workload("conv2d_nchwc:N=1,C=16,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16");
  ASSERT_TRUE(model::winograd_form(w).has_value());
  Workload form = *model::winograd_form(w);
  std::vector<std::string> warnings;
  // Neither measured: a map of 16x16 and 16 channels takes the form (winograd_by_default), its
  // default said in the warning; 1024 channels, or a map of 8x8, keep the direct kernel.
  auto untuned = choose_model_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(untuned.ok()) << untuned.status().to_string();
  EXPECT_FALSE(untuned->tuned);
  ASSERT_TRUE(untuned->workload.has_value());
  EXPECT_EQ(*untuned->workload, form);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("winograd=4"), std::string::npos) << warnings[0];
  for (const char* direct : {"conv2d_nchwc:N=1,C=1024,H=14,W=14,K=1024,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16",
                             "conv2d_nchwc:N=1,C=64,H=8,W=8,K=64,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16"}) {
    ASSERT_TRUE(model::winograd_form(*parse_workload(direct)).has_value()) << direct;
    auto kept = choose_model_kernel(*store_, *parse_workload(direct), request_, warnings);
    ASSERT_TRUE(kept.ok()) << kept.status().to_string();
    EXPECT_FALSE(kept->workload.has_value()) << direct;
  }

  record(form, *default_config(form, Target{}), 1e-4);  // the workload itself has no record
  warnings.clear();
  auto only_form = choose_model_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(only_form.ok()) << only_form.status().to_string();
  ASSERT_TRUE(only_form->workload.has_value());
  EXPECT_EQ(*only_form->workload, form);
  EXPECT_EQ(only_form->config.template_name, "conv2d_nchwc.cpu.winograd");
  EXPECT_TRUE(warnings.empty()) << warnings.front();

  record(w, *default_config(w, Target{}), 1.03e-4);  // the form is 3% faster: noise
  auto own = choose_model_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(own.ok()) << own.status().to_string();
  EXPECT_FALSE(own->workload.has_value());
  EXPECT_EQ(own->config, *default_config(w, Target{}));

  // A history where the form ran twice as fast.
  store_.reset();
  std::filesystem::remove_all(dir_ / "history.db");
  store_ = std::move(db::RecordStore::open((dir_ / "history.db").string()).value());
  record(w, *default_config(w, Target{}), 2e-4);
  record(form, *default_config(form, Target{}), 1e-4);
  auto faster = choose_model_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(faster.ok()) << faster.status().to_string();
  ASSERT_TRUE(faster->workload.has_value());
  EXPECT_EQ(*faster->workload, form);
  EXPECT_DOUBLE_EQ(faster->time_s, 1e-4);
  auto named = choose_kernel(*store_, w, request_, warnings);
  ASSERT_TRUE(named.ok());
  EXPECT_FALSE(named->workload.has_value());
  EXPECT_DOUBLE_EQ(named->time_s, 2e-4);
}

// Records of an `llvm` job on a key of haswell boards were built for haswell: a library of them
// is too, so that it runs what those boards measured, not code for this host's CPU.
TEST_F(ChooseKernel, ALibraryIsBuiltForTheCpuItsRecordsWereBuiltFor) {
  Workload a = *parse_workload("matmul:M=64,N=64,K=64");
  Workload b = *parse_workload("matmul:M=32,N=64,K=48");
  record(a, *default_config(a, Target{}), 1e-4, "llvm -mcpu=haswell");
  record(b, *default_config(b, Target{}), 1e-4, "llvm -mcpu=haswell");
  request_.workloads = {a, b};
  request_.name = "haswell_kernels";
  auto built = build_library(request_, *store_);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  std::string manifest, shared;
  for (const auto& f : built->files) {
    if (f.name == "manifest.json") manifest = f.content;
    if (f.name == "libhaswell_kernels.so") shared = f.content;
  }
  EXPECT_NE(manifest.find("\"target\": \"llvm -mcpu=haswell\""), std::string::npos) << manifest;
  std::string code = testing::disassemble(shared);
  ASSERT_NE(code.find("ymm"), std::string::npos) << "not vectorized: the check below says nothing";
  EXPECT_EQ(code.find("zmm"), std::string::npos) << "AVX-512 code in a library for haswell boards";

  // Records of two kinds of board cannot make one library.
  Workload c = *parse_workload("matmul:M=16,N=16,K=16");
  record(c, *default_config(c, Target{}), 1e-5, "llvm -mcpu=znver4");
  request_.workloads.push_back(c);
  auto mixed = build_library(request_, *store_);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(mixed.status().message().find("'llvm -mcpu=haswell' and 'llvm -mcpu=znver4'"), std::string::npos)
      << mixed.status().message();
}

}  // namespace
}  // namespace tunefarm
