// The public build API: config spaces (size, index <-> config, validity) and clear errors for bad
// input (invalid workloads, unsupported dtype, configs for another template or target, knobs
// unknown, repeated or out of their choices, points the template rejects), and configs recorded
// before a knob existed.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/codegen/codegen.h"
#include "compiler/ir/printer.h"
#include "compiler/lower/lower.h"
#include "compiler/runtime/kernel_runtime.h"

namespace tunefarm {
namespace {

Workload matmul(int64_t m, int64_t n, int64_t k) { return *parse_workload(fmt::format("matmul:M={},N={},K={}", m, n, k)); }

TEST(CompilerConfigSpace, Matmul1024HasAtLeastTenThousandValidConfigs) {
  auto space = config_space(matmul(1024, 1024, 1024), Target{});
  ASSERT_TRUE(space.ok()) << space.status().to_string();
  EXPECT_GE(space->count_valid(), 10000);
  EXPECT_LT(space->count_valid(), space->size());  // Some points are invalid and recognised as such.
}

TEST(CompilerConfigSpace, IndexAndConfigRoundTrip) {
  auto space = *config_space(matmul(64, 64, 64), Target{});
  for (int64_t i : {int64_t{0}, int64_t{1}, space.size() / 3, space.size() - 1}) {
    auto c = space.get(i);
    ASSERT_TRUE(c.ok());
    auto back = space.index_of(*c);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, i);
    auto reparsed = parse_config_json(c->to_json());
    ASSERT_TRUE(reparsed.ok());
    EXPECT_EQ(*space.index_of(*reparsed), i);
  }
  EXPECT_FALSE(space.get(space.size()).ok());
  EXPECT_FALSE(space.get(-1).ok());
}

// The conv templates gained `tile_order` after configs were recorded without it; such a config
// must still name the same kernel (the knob's first choice, the order the template always had).
TEST(CompilerConfigSpace, AConfigRecordedBeforeAKnobExistedReadsAsItsFirstChoice) {
  Workload conv = *parse_workload("conv2d_nchw:N=1,C=8,H=10,W=10,K=8,R=3,S=3,stride=1,pad=1");
  Target host;
  Config full = *default_config(conv, host);
  auto space = *config_space(conv, host);
  auto parsed = parse_config_json(
      R"({"template":"conv2d_nchw.cpu.direct","knobs":{"tile_k":[-1,4],"tile_q":[-1,8],"tile_p":[-1,1],)"
      R"("reduce_order":[1,2,0],"unroll_window":0,"parallel":"none"}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  Config old = *parsed;
  Config expected = old;
  expected.knobs.emplace_back("tile_order", std::vector<int64_t>{0, 1, 2});
  ASSERT_EQ(full.knobs.back().first, "tile_order");
  ASSERT_TRUE(space.check(old).ok());
  EXPECT_EQ(*space.index_of(old), *space.index_of(expected));
  EXPECT_EQ(space.complete(old)->to_json(), expected.to_json());
  auto kernel = build_kernel(conv, host, old);
  EXPECT_TRUE(kernel.ok()) << kernel.status().to_string();
}

// conv2d_nchwc gained `pad_stage` (0: guarded reads) after configs were recorded: an old config
// keeps the padded copy it always had, and builds.
TEST(CompilerConfigSpace, ABlockedConvolutionConfigFromBeforePadStageKeepsThePaddedCopy) {
  Workload conv = *parse_workload("conv2d_nchwc:N=1,C=16,H=7,W=7,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16");
  Target host;
  auto space = *config_space(conv, host);
  auto old = parse_config_json(
      R"({"template":"conv2d_nchwc.cpu.direct","knobs":{"tile_q":[-1,7],"tile_kb":[-1,1],"reduce_order":[0,1,2],)"
      R"("unroll_window":1,"unroll_ci":0,"parallel":"none"}})");
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  ASSERT_TRUE(space.check(*old).ok());
  auto completed = space.complete(*old);
  ASSERT_TRUE(completed.ok());
  EXPECT_EQ(std::get<int64_t>(*completed->find("pad_stage")), 1);
  EXPECT_TRUE(build_kernel(conv, host, *old).ok());
}

// Untuned defaults follow the target CPU's registers: a GEMM's register tile fits AVX-512's 32
// vector registers on this host's target model, AVX2's 16 on a Haswell board and NEON's 32
// four-lane registers on an ARM board.
TEST(CompilerDefaults, RegisterTilesFollowTheTargetCpu) {
  struct Case {
    const char* target;
    int64_t lanes, registers;
  };
  for (const Case& c : {Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 16, 32},
                        Case{"llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 8, 16},
                        Case{"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", 4, 32}}) {
    Target target = *parse_target(c.target);
    auto config = default_config(matmul(1000, 1000, 1000), target);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    int64_t mr = std::get<std::vector<int64_t>>(*config->find("tile_m"))[2];
    int64_t nr = std::get<std::vector<int64_t>>(*config->find("tile_n"))[2];
    EXPECT_EQ(nr, 2 * c.lanes) << c.target;
    EXPECT_LE(mr * nr / c.lanes + 4, c.registers) << c.target << ": " << config->to_json();
    EXPECT_GE(mr, 4) << c.target;
  }
}

// A default block of columns divides the columns where their vectors allow: attention's
// 384 columns in blocks of 128, not 256 and a last one of 128.
TEST(CompilerDefaults, ColumnBlocksDivideTheColumns) {
  Target target = *parse_target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  struct Case {
    const char* workload;
    int64_t columns;
  };
  for (const Case& c : {Case{"batch_matmul:B=16,M=384,N=384,K=64", 384}, Case{"matmul:M=128,N=768,K=3072", 768},
                        Case{"matmul:M=384,N=4096,K=1024", 4096}}) {
    auto config = default_config(*parse_workload(c.workload), target);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto tile_n = std::get<std::vector<int64_t>>(*config->find("tile_n"));
    EXPECT_EQ(c.columns % (tile_n[1] * tile_n[2]), 0) << c.workload << ": " << config->to_json();
  }
}

// Transformer GEMMs: the register tile divides the rows and columns (a partial tile runs through
// memory), K is blocked where it is long, and B is packed by blocks where it is transposed or K
// is blocked; attention's batched GEMMs read B where it lies.
TEST(CompilerDefaults, TransformerGemmTilesDivideAndLongKIsBlocked) {
  Target target = *parse_target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  struct Case {
    const char* workload;
    int64_t rows, columns, tile_k, pack_b;
  };
  for (const Case& c : {Case{"matmul:M=128,N=768,K=3072", 128, 768, 256, 1},
                        Case{"dense:M=128,N=3072,K=768,bias=1", 128, 3072, 256, 1},
                        Case{"matmul:M=384,N=4096,K=1024", 384, 4096, 256, 1},
                        Case{"batch_matmul:B=12,M=128,N=128,K=64", 128, 128, 0, 0},
                        Case{"batch_matmul:B=16,M=384,N=384,K=64", 384, 384, 0, 0}}) {
    auto config = default_config(*parse_workload(c.workload), target);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto tile_m = std::get<std::vector<int64_t>>(*config->find("tile_m"));
    auto tile_n = std::get<std::vector<int64_t>>(*config->find("tile_n"));
    EXPECT_EQ(c.rows % tile_m[2], 0) << c.workload << ": " << config->to_json();
    EXPECT_EQ(c.columns % tile_n[2], 0) << c.workload << ": " << config->to_json();
    EXPECT_GE(tile_m[2] * tile_n[2] / 16, 16) << c.workload << ": " << config->to_json();
    EXPECT_EQ(std::get<int64_t>(*config->find("tile_k")), c.tile_k) << c.workload;
    EXPECT_EQ(std::get<int64_t>(*config->find("pack_b")), c.pack_b) << c.workload;
  }
}

// A ViT's 197 tokens divide into no tile: the default takes all the rows (and columns) as one
// block, so that the partial tile starts at a constant row and stays in registers.
TEST(CompilerDefaults, APartialTileEndsTheOneBlock) {
  Target target = *parse_target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  for (const char* workload : {"batch_matmul:B=12,M=197,N=197,K=64", "dense:M=197,N=768,K=768,bias=1"}) {
    auto config = default_config(*parse_workload(workload), target);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    auto tile_m = std::get<std::vector<int64_t>>(*config->find("tile_m"));
    auto tile_n = std::get<std::vector<int64_t>>(*config->find("tile_n"));
    EXPECT_GE(tile_m[1] * tile_m[2], 197) << workload << ": " << config->to_json();
    if (std::string(workload).find("N=197") != std::string::npos) {
      EXPECT_GE(tile_n[1] * tile_n[2], 197) << workload << ": " << config->to_json();
    }
  }
}

TEST(CompilerConfigSpace, FactorSplitsDivideTheExtent) {
  ops::ConfigSpace s("t");
  s.define_split_factors("tile", 12, 3);
  for (const auto& choice : s.knobs()[0].choices) {
    const auto& f = std::get<std::vector<int64_t>>(choice);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[0], -1);
    EXPECT_EQ(12 % (f[1] * f[2]), 0);
  }
  EXPECT_EQ(s.size(), 18);  // Ordered pairs (a, b) with a*b dividing 12.
}

TEST(CompilerBadInput, InvalidWorkloadsAreRejected) {
  Target host;
  Workload zero = matmul(4, 4, 4);
  zero.params[0].second = 0;
  auto k = build_reference_kernel(zero, host);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("M"), std::string::npos) << k.status().message();

  Workload negative = matmul(4, 4, 4);
  negative.params[2].second = -3;
  EXPECT_FALSE(default_config(negative, host).ok());

  Workload huge = matmul(4, 4, 4);
  huge.params[0].second = int64_t{1} << 40;
  EXPECT_FALSE(workload_flops(huge).ok());

  Workload unknown = matmul(4, 4, 4);
  unknown.op = "softmax";
  auto s = config_space(unknown, host);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("softmax"), std::string::npos) << s.status().message();
}

TEST(CompilerBadInput, UnsupportedDtypeIsRejected) {
  Workload w = matmul(8, 8, 8);
  w.dtype = DType::kFloat16;
  auto k = build_reference_kernel(w, Target{});
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("float"), std::string::npos) << k.status().message();
}

TEST(CompilerBadInput, InvalidConfigsAreRejectedWithTheReason) {
  Workload w = matmul(32, 32, 32);
  Target host;
  Config good = *default_config(w, host);
  ASSERT_TRUE(build_kernel(w, host, good).ok());

  auto expect_error = [&](const Config& c, const std::string& needle) {
    auto k = build_kernel(w, host, c);
    ASSERT_FALSE(k.ok()) << c.to_json();
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find(needle), std::string::npos) << k.status().message();
  };
  Config wrong_template = good;
  wrong_template.template_name = "matmul.cpu.nonexistent";
  expect_error(wrong_template, "no template");

  Config repeated = good;
  repeated.knobs.push_back(repeated.knobs.front());
  expect_error(repeated, "repeats knob 'tile_m'");

  Config extra = good;
  extra.knobs.back().first = "mystery";
  expect_error(extra, "mystery");

  Config bad_value = good;
  bad_value.knobs[0].second = std::vector<int64_t>{-1, 3, 9};
  expect_error(bad_value, "tile_m");

  Config wrong_type = good;
  wrong_type.knobs[2].second = std::string("fast");
  expect_error(wrong_type, "unroll_k");

  Config too_many_registers = good;
  too_many_registers.knobs[0].second = std::vector<int64_t>{-1, 1, 16};
  too_many_registers.knobs[1].second = std::vector<int64_t>{-1, 1, 64};
  expect_error(too_many_registers, "register tile");

  auto cuda = *parse_target("cuda -arch=sm_80");
  auto cuda_config = *default_config(w, cuda);
  expect_error(cuda_config, "not for target");
}

TEST(CompilerBadInput, ReferenceRunnerChecksArgumentCount) {
  Workload w = matmul(2, 2, 2);
  std::vector<float> a(4), out(4);
  EXPECT_FALSE(run_reference(w, {a.data()}, out.data()).ok());
}

TEST(CompilerBuildApi, KernelArgumentsAndFlops) {
  auto w = *parse_workload("dense:M=2,N=3,K=5,bias=1,relu=1");
  auto args = *kernel_args(w);
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[1].name, "W");
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(args[3].is_output);
  EXPECT_DOUBLE_EQ(*workload_flops(w), 2.0 * 2 * 3 * 5);
  auto conv = *parse_workload("conv2d_nchw:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1");
  EXPECT_DOUBLE_EQ(*workload_flops(conv), 2.0 * 64 * 56 * 56 * 64 * 9);
}

// The tuner compiles candidates on a thread pool: concurrent builds must not interfere.
TEST(CompilerBuildApi, ConcurrentBuildsSucceed) {
  Workload w = matmul(48, 40, 24);
  auto space = *config_space(w, Target{});
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        auto c = space.get((t * 7919 + i * 104729) % space.size());
        if (!c.ok() || !space.check(*c).ok()) c = default_config(w, Target{});
        auto k = build_kernel(w, Target{}, *c);
        if (k.ok() && !k->binary.empty()) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 12);
}

// What makes a register tile fast and that no numeric check sees: its accumulators become SSA
// values (SROA), and the tensors' accesses carry their aliasing facts, so that an FMA's result is
// not stored and reloaded around every access to another tensor. Either going missing made the
// blocked convolutions several times slower.
// The lowered default config of a workload, its outer loop parallel or not.
StatusOr<ir::LoweredFunc> lower_default(const std::string& workload, bool parallel) {
  auto w = *parse_workload(workload);
  Config c = *default_config(w, Target{});
  if (parallel) c = with_outer_parallelism(c);
  return lower_candidate(w, Target{}, c);
}

TEST(CompilerBuildApi, RegisterTilesBecomeValuesAndTensorsCarryAliasScopes) {
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "one thread");
    auto f = lower_default("conv2d_nchwc:N=1,C=32,H=14,W=14,K=32,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16", parallel);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    auto ir = codegen::emit_llvm_ir(*f, Target{}, kKernelEntry);
    ASSERT_TRUE(ir.ok()) << ir.status().to_string();
    EXPECT_NE(ir->find("!alias.scope"), std::string::npos);
    EXPECT_NE(ir->find("!noalias"), std::string::npos);
    // The tile is the output's stage in local memory (`output.local`): no stack object is left of it.
    EXPECT_FALSE(std::regex_search(*ir, std::regex(R"(\.local[0-9]* = alloca)"))) << *ir;
    EXPECT_NE(ir->find(".local"), std::string::npos) << "the schedule has no register tile any more";
  }
}

// A program's step runs its loop on the runtime's threads only where its work is large beside a
// fork/join (FLOPs, or bytes for the streaming steps outside the templates); below, its config's
// parallel knob is "none" and a plain step has no parallel loop.
TEST(CompilerBuildApi, AStepRunsOnThreadsWhereItsWorkRepaysTheForkJoin) {
  EXPECT_FALSE(parallel_pays(matmul(16, 64, 64)));
  EXPECT_TRUE(parallel_pays(matmul(128, 768, 768)));
  EXPECT_FALSE(parallel_pays(0, 32 * 1024));
  EXPECT_TRUE(parallel_pays(0, 4 * 1024 * 1024));
  auto knob = [](const Config& c) {
    for (const auto& [name, value] : c.knobs)
      if (name == "parallel") return std::get<std::string>(value);
    return std::string("(none)");
  };
  Config c = *default_config(matmul(128, 768, 768), Target{});
  EXPECT_EQ(knob(with_parallelism(c, true)), "outer");
  EXPECT_EQ(knob(with_parallelism(with_outer_parallelism(c), false)), "none");

  auto elementwise = [](int64_t rows) {
    te::Tensor x = te::placeholder("x", {1, rows, 256});
    return ops::ComputeDef{{x}, te::compute("y", {1, rows, 256}, [&](const std::vector<ir::Var>& i) { return x(i[0], i[1], i[2]) * ir::float_imm(2.0f); })};
  };
  EXPECT_FALSE(parallel_pays(elementwise(4)));
  EXPECT_TRUE(parallel_pays(elementwise(1024)));
}

// A plain step whose outermost axis is shorter than the threads could use (two heads of a
// row-wise step) runs its heads and rows as one parallel loop, with each row's statistic computed
// inside it; on two threads it gives what it gives on one, bit for bit.
TEST(CompilerBuildApi, APlainStepsFewHeadsFuseWithTheirRowsForThreads) {
  const int64_t H = 2, R = 32, C = 40;
  te::Tensor x = te::placeholder("x", {1, H, R, C});
  te::IterVar k = te::reduce_axis(C, "k");
  te::Tensor m = te::compute("row_max", {1, H, R}, [&](const std::vector<ir::Var>& i) {
    return te::max_reduce(x(i[0], i[1], i[2], k->var), {k});
  });
  te::Tensor y = te::compute("y", {1, H, R, C}, [&](const std::vector<ir::Var>& i) {
    return x(i[0], i[1], i[2], i[3]) - m(i[0], i[1], i[2]);
  });
  ops::ComputeDef def{{x}, y};
  std::vector<float> in(H * R * C);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> outs[2];
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "one thread");
    ops::Scheduled scheduled = ops::plain_schedule(def, true, parallel);
    auto f = lower::lower(*scheduled.schedule, scheduled.args, "step");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    std::string text = ir::to_string(*f);
    if (parallel) EXPECT_TRUE(std::regex_search(text, std::regex(R"(, 0, 64\) parallel)"))) << text;
    else EXPECT_EQ(text.find("parallel"), std::string::npos) << text;
    auto obj = codegen::compile_object(*f, Target{}, "step");
    ASSERT_TRUE(obj.ok()) << obj.status().to_string();
    auto jit = codegen::JitKernel::create(*obj, "step");
    ASSERT_TRUE(jit.ok()) << jit.status().to_string();
    tunefarm_runtime_set_num_threads(parallel ? 2 : 1);
    std::vector<float>& out = outs[parallel ? 1 : 0];
    out.assign(in.size(), NAN);
    void* args[] = {in.data(), out.data()};
    ASSERT_EQ((*jit)->run(args), 0);
    for (int64_t r = 0; r < H * R; ++r) {
      float mx = *std::max_element(in.begin() + r * C, in.begin() + (r + 1) * C);
      for (int64_t c = 0; c < C; ++c) ASSERT_EQ(out[r * C + c], in[r * C + c] - mx) << "row " << r << ", column " << c;
    }
  }
  tunefarm_runtime_set_num_threads(0);
  EXPECT_EQ(outs[0], outs[1]);
}

// A step's parallel loop, short (a task per iteration) or long (the pool cuts it into a few shares
// per thread), at odd lengths, gives on any number of threads exactly what it gives on one.
TEST(CompilerBuildApi, AParallelLoopIsRightOnAnyNumberOfThreads) {
  for (int64_t rows : {int64_t{7}, int64_t{131}}) {
    const int64_t C = 19;
    te::Tensor x = te::placeholder("x", {rows, C});
    te::Tensor y = te::compute("y", {rows, C}, [&](const std::vector<ir::Var>& i) { return x(i[0], i[1]) * ir::float_imm(3.0) + ir::float_imm(1.0); });
    ops::Scheduled scheduled = ops::plain_schedule(ops::ComputeDef{{x}, y}, true, true);
    auto f = lower::lower(*scheduled.schedule, scheduled.args, "step");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    ASSERT_NE(ir::to_string(*f).find("parallel"), std::string::npos) << ir::to_string(*f);
    auto obj = codegen::compile_object(*f, Target{}, "step");
    ASSERT_TRUE(obj.ok()) << obj.status().to_string();
    auto jit = codegen::JitKernel::create(*obj, "step");
    ASSERT_TRUE(jit.ok()) << jit.status().to_string();
    std::vector<float> in(static_cast<size_t>(rows * C));
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::cos(0.11f * static_cast<float>(i));
    std::vector<float> one_thread;
    for (int threads : {1, 2, 3, 5}) {
      tunefarm_runtime_set_num_threads(threads);
      std::vector<float> out(in.size(), NAN);
      void* args[] = {in.data(), out.data()};
      ASSERT_EQ((*jit)->run(args), 0);
      for (size_t i = 0; i < in.size(); ++i)
        ASSERT_NEAR(out[i], in[i] * 3.0f + 1.0f, 1e-6) << rows << " rows on " << threads << " threads, element " << i;
      if (threads == 1) one_thread = out;
      EXPECT_EQ(out, one_thread) << rows << " rows on " << threads << " threads";
    }
  }
  tunefarm_runtime_set_num_threads(0);
}

// On a 5x5 map a quarter of a 3x3 window's taps read padding. The default reads the input
// through guards, loop partitioning peels the border rows, and after unrolling no guard is left
// and the padding's taps are gone: 52 + 78 + 52 accumulations (a tile of 5 columns by 2 channel
// blocks: 13 taps a block in each border row's 2 window rows, 13 in each of the interior's 3)
// where the padded copy's kernel computes all 90 in every row.
TEST(CompilerBuildApi, ASmallMapsDefaultSkipsTheTapsInThePadding) {
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "one thread");
    auto f = lower_default("conv2d_nchwc:N=1,C=32,H=5,W=5,K=32,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16", parallel);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    std::string text = to_string(f->body);
    EXPECT_EQ(text.find("select"), std::string::npos) << text;
    EXPECT_EQ(text.find("padded"), std::string::npos) << text;
    std::regex accumulation(R"(output\.local\[ramp\(\d+, 1, 16\)\] = \(output\.local)");
    auto n = std::distance(std::sregex_iterator(text.begin(), text.end(), accumulation), std::sregex_iterator());
    EXPECT_EQ(n, 52 + 78 + 52) << text;
  }
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// A depthwise step built to run on several threads is the kernel tuning measured on one: with
// channel blocks enough to share, threads take blocks and the rows stay a loop of their own, whose
// padding rows loop partitioning peels as it does without threads (rows fused into the parallel
// loop kept their guards in every row: 384@14x14, tile_q 7, 1.5x slower on one thread).
TEST(CompilerBuildApi, ADepthwiseStepOnThreadsKeepsTheGuardsOfItsRowsPeeled) {
  Workload w = *parse_workload("depthwise_conv2d_nchwc:N=1,C=384,H=14,W=14,R=3,S=3,stride=1,pad=1,block=16,bias=1,relu6=1");
  Config config = *default_config(w, Target{});
  for (auto& [name, value] : config.knobs)
    if (name == "tile_q") value = std::vector<int64_t>{-1, 7};
  auto selects = [&](bool parallel) {
    auto f = lower_candidate(w, Target{}, with_parallelism(config, parallel));
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    std::string text = f.ok() ? ir::to_string(*f) : "";
    EXPECT_EQ(text.find("parallel") != std::string::npos, parallel) << text;
    size_t n = 0;
    for (size_t at = text.find("select("); at != std::string::npos; at = text.find("select(", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(selects(true), selects(false));
}

}  // namespace
}  // namespace tunefarm
