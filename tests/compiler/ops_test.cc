// Every operator and template: random valid configs on small and odd shapes (non-dividing splits
// included) against the naive C++ reference, through the in-process JIT; and the reference
// kernel itself.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/operators/winograd.h"
#include "compiler/build.h"
#include "compiler/ir/printer.h"
#include "compiler/ops/op.h"
#include "compiler/runtime/kernel_runtime.h"
#include "test_util.h"

namespace tunefarm {
namespace {

using testing_util::compare;
using testing_util::configs_per_workload;
using testing_util::make_buffers;
using testing_util::random_valid_configs;

class CpuTemplates : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuTemplates, RandomValidConfigsMatchReference) {
  Workload w = *parse_workload(GetParam());
  Target host;
  for (const std::string& tname : template_names(w, host)) {
    auto space = config_space(w, host, tname);
    ASSERT_TRUE(space.ok()) << space.status().to_string();
    auto configs = random_valid_configs(*space, configs_per_workload(), 42);
    // Small spaces are covered exhaustively.
    EXPECT_EQ(static_cast<int64_t>(configs.size()), std::min<int64_t>(configs_per_workload(), space->count_valid())) << tname;
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      auto jit = jit_kernel(w, c);
      ASSERT_TRUE(jit.ok()) << jit.status().to_string();
      auto bufs = make_buffers(w, 7 + i);
      auto args = bufs.arg_pointers();
      ASSERT_EQ((*jit)->run(args.data()), 0);
      std::string diff = compare(bufs.output, bufs.expected, bufs.tolerance_scale);
      if (!diff.empty()) {
        auto f = lower_candidate(w, host, c);
        FAIL() << w.to_string() << " " << c.to_json() << ": " << diff << "\n" << (f.ok() ? ir::to_string(*f) : "");
      }
    }
  }
}

TEST_P(CpuTemplates, DefaultConfigMatchesReference) {
  Workload w = *parse_workload(GetParam());
  auto c = default_config(w, Target{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto space = config_space(w, Target{}, c->template_name);
  ASSERT_TRUE(space->check(*c).ok()) << space->check(*c).to_string();
  auto jit = jit_kernel(w, *c);
  ASSERT_TRUE(jit.ok()) << jit.status().to_string();
  auto bufs = make_buffers(w, 3);
  auto args = bufs.arg_pointers();
  ASSERT_EQ((*jit)->run(args.data()), 0);
  EXPECT_EQ(compare(bufs.output, bufs.expected, bufs.tolerance_scale), "");
}

// The GEMM defaults of transformer-like shapes block K and pack B a block at a time inside the
// K loop (with and without an epilogue); a tuned block too large for the stack goes to the
// workspace. All must match the reference.
TEST(GemmBlocks, PackedBlocksOfBInsideTheKLoopMatchReference) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"dense:M=16,N=96,K=512,bias=1", ""},
      {"matmul:M=24,N=64,K=512", ""},
      {"dense:M=8,N=48,K=768,bias=1,relu=1", ""},
      {"dense:M=16,N=96,K=512,bias=1,gelu=1", ""},
      {"dense:M=16,N=96,K=512,bias=1,residual=1", ""},
      {"matmul:M=24,N=70,K=1100",
       R"({"template":"matmul.cpu.packed","knobs":{"tile_m":[-1,2,6],"tile_n":[-1,32,64],"unroll_k":2,)"
       R"("order":[0,1,2,3],"pack_b":1,"parallel":"none","tile_k":512}})"},
      {"dense:M=9,N=40,K=600,bias=1",
       R"({"template":"dense.cpu.packed","knobs":{"tile_m":[-1,1,4],"tile_n":[-1,32,48],"unroll_k":4,)"
       R"("order":[1,0,2,3],"pack_b":1,"parallel":"outer","tile_k":512}})"},
      {"dense:M=9,N=40,K=600,residual=1,gelu=1",
       R"({"template":"dense.cpu.packed","knobs":{"tile_m":[-1,1,4],"tile_n":[-1,32,48],"unroll_k":4,)"
       R"("order":[1,0,2,3],"pack_b":1,"parallel":"outer","tile_k":512}})"},
  };
  for (const auto& [workload, config] : cases) {
    Workload w = *parse_workload(workload);
    auto c = config.empty() ? default_config(w, Target{}) : parse_config_json(config);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    if (config.empty()) {
      EXPECT_GT(std::get<int64_t>(*c->find("tile_k")), 0) << workload << ": " << c->to_json();
      EXPECT_EQ(std::get<int64_t>(*c->find("pack_b")), 1) << workload << ": " << c->to_json();
    }
    auto jit = jit_kernel(w, *c);
    ASSERT_TRUE(jit.ok()) << jit.status().to_string();
    auto bufs = make_buffers(w, 5);
    auto args = bufs.arg_pointers();
    ASSERT_EQ((*jit)->run(args.data()), 0);
    EXPECT_EQ(compare(bufs.output, bufs.expected), "") << workload << " " << c->to_json();
  }
}

// A dense workload whose W arrives in panels (w_block) reads them where they lie: its kernels,
// default and tuned, have no packing stage, and every tile's columns are the panels'.
TEST(GemmBlocks, WeightInPanelsIsReadWithoutAPackStage) {
  for (const char* workload : {"dense:M=128,N=96,K=768,bias=1,w_block=48", "dense:M=12,N=40,K=64,w_block=16"}) {
    Workload w = *parse_workload(workload);
    auto c = default_config(w, Target{});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(std::get<std::vector<int64_t>>(*c->find("tile_n"))[2], w.param("w_block")) << c->to_json();
    auto f = lower_candidate(w, Target{}, *c);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(ir::to_string(*f).find("Bp"), std::string::npos) << workload;
    auto space = config_space(w, Target{}, "dense.cpu.packed");
    ASSERT_TRUE(space.ok());
    for (const Config& r : random_valid_configs(*space, 8, 3))
      EXPECT_EQ(std::get<std::vector<int64_t>>(*r.find("tile_n"))[2], w.param("w_block")) << r.to_json();
    auto jit = jit_kernel(w, *c);
    ASSERT_TRUE(jit.ok()) << jit.status().to_string();
    auto bufs = make_buffers(w, 6);
    auto args = bufs.arg_pointers();
    ASSERT_EQ((*jit)->run(args.data()), 0);
    EXPECT_EQ(compare(bufs.output, bufs.expected), "") << workload;
  }
  // The same layer taking W[N, K] packs it at run time, as before.
  Workload plain = *parse_workload("dense:M=128,N=96,K=768,bias=1");
  auto f = lower_candidate(plain, Target{}, *default_config(plain, Target{}));
  ASSERT_TRUE(f.ok());
  EXPECT_NE(ir::to_string(*f).find("Bp"), std::string::npos);
}

// A tile tail whose position depends on the block (45 columns in blocks of 32 in tiles of 16)
// runs as masked vectors; the result must not change.
// The extent of the first parallel loop of a dense config's kernel (`knobs` its tiles and order,
// parallel "outer"), which also computes on two threads what the reference does.
void parallel_extent(const std::string& workload, const std::string& knobs, int& extent) {
  Workload w = *parse_workload(workload);
  auto c = parse_config_json(std::string(R"({"template":"dense.cpu.packed","knobs":{)") + knobs +
                             R"(,"pack_b":0,"parallel":"outer","tile_k":0}})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto f = lower_candidate(w, Target{}, *c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::string text = ir::to_string(*f);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(, 0, (\d+)\) parallel)"))) << text;
  extent = std::stoi(m[1]);
  auto jit = jit_kernel(w, *c);
  ASSERT_TRUE(jit.ok()) << jit.status().to_string();
  auto bufs = make_buffers(w, 3);
  auto args = bufs.arg_pointers();
  tunefarm_runtime_set_num_threads(2);
  ASSERT_EQ((*jit)->run(args.data()), 0);
  tunefarm_runtime_set_num_threads(0);
  EXPECT_EQ(compare(bufs.output, bufs.expected, bufs.tolerance_scale), "");
}

// A tuned GEMM config whose rows and columns are one block each (MiniLM's FFN layer, tuned on one
// thread) still gives threads a loop to share when a model build makes it parallel: the tiles of
// the block (one thread of two did all the work, 0.68 ms where the default took 0.38), and it
// computes the same on two threads.
TEST(GemmBlocks, OneBlockOfRowsAndColumnsStillSharesItsTilesAmongThreads) {
  // A block of all rows and all columns; then MiniLM's layers as tuned on one thread, with blocks
  // larger than the matrix (32 tiles of 8 rows, 19 of 7, for 128 rows): the parallel loop holds
  // at least 8 tiles' worth of work, and two threads compute what the reference does.
  const std::pair<const char*, const char*> cases[] = {
      {"dense:M=32,N=384,K=64,bias=1,gelu=1,w_block=48", R"("tile_m":[-1,4,8],"tile_n":[-1,8,48],"order":[1,0,3,2])"},
      {"dense:M=128,N=384,K=96,bias=1,w_block=48", R"("tile_m":[-1,32,8],"tile_n":[-1,32,48],"order":[0,1,3,2])"},
      {"dense:M=128,N=384,K=64,bias=1,w_block=48", R"("tile_m":[-1,32,7],"tile_n":[-1,8,48],"order":[0,1,2,3])"}};
  for (const auto& [workload, tiles] : cases) {
    SCOPED_TRACE(std::string(workload) + " " + tiles);
    int extent = 0;
    ASSERT_NO_FATAL_FAILURE(parallel_extent(workload, std::string(tiles) + R"(,"unroll_k":1)", extent));
    EXPECT_GE(extent, 8);
  }
}

// Blocks of rows that do not divide the rows (128 in blocks of 10) stay a loop of their own inside
// the column blocks' parallel loop: fused into it, the last block's bound was a guard in every
// iteration and the kernel ran 2.9x slower on one thread (LLaMA's FFN down projection as tuned).
// A loop of one block leaves the threads the next loop.
TEST(GemmBlocks, APartialBlockOfRowsIsNotFusedIntoTheParallelLoop) {
  int extent = 0;
  ASSERT_NO_FATAL_FAILURE(parallel_extent("dense:M=128,N=512,K=64,residual=1,w_block=32",
                                          R"("tile_m":[-1,1,10],"tile_n":[-1,4,32],"unroll_k":2,"order":[1,0,3,2])", extent));
  EXPECT_EQ(extent, 4) << "the 4 blocks of columns alone";
  // All the rows in one block, the columns in 6 blocks of 256 (the last one shorter): the threads
  // share the blocks of columns (with the row tiles inside each), not the one block of rows.
  ASSERT_NO_FATAL_FAILURE(parallel_extent("dense:M=128,N=1408,K=64,w_block=32",
                                          R"("tile_m":[-1,32,8],"tile_n":[-1,8,32],"unroll_k":2,"order":[0,1,2,3])", extent));
  EXPECT_EQ(extent, 6 * 16) << "the 6 blocks of columns, 16 tiles of rows in each";
}

TEST(CpuTails, BlockDependentTailRunsMaskedAndMatches) {
  Workload w = *parse_workload("matmul:M=37,N=45,K=19");
  auto c = parse_config_json(
      R"({"template":"matmul.cpu.packed","knobs":{"tile_m":[-1,2,5],"tile_n":[-1,2,16],"unroll_k":2,)"
      R"("order":[0,1,2,3],"pack_b":1,"parallel":"none"}})");
  ASSERT_TRUE(c.ok());
  auto f = lower_candidate(w, Target{}, *c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::string text = ir::to_string(*f);
  EXPECT_NE(text.find(" if (ramp("), std::string::npos) << text;
  auto jit = jit_kernel(w, *c);
  ASSERT_TRUE(jit.ok()) << jit.status().to_string();
  auto bufs = make_buffers(w, 4);
  auto args = bufs.arg_pointers();
  ASSERT_EQ((*jit)->run(args.data()), 0);
  EXPECT_EQ(compare(bufs.output, bufs.expected), "");
}

// A built kernel as a dlopen'ed shared object, the way the agent runs it; the handle stays open.
codegen::KernelFn load_shared(const BuiltKernel& k, void** handle) {
  std::string path = ::testing::TempDir() + "/ref_" + std::to_string(getpid()) + ".so";
  std::ofstream(path, std::ios::binary).write(k.binary.data(), static_cast<std::streamsize>(k.binary.size()));
  *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::remove(path.c_str());
  if (!*handle) {
    ADD_FAILURE() << dlerror();
    return nullptr;
  }
  return reinterpret_cast<codegen::KernelFn>(dlsym(*handle, k.entry.c_str()));
}

// The reference kernel (naive schedule) as a dlopen'ed shared object, the way the agent runs it.
TEST_P(CpuTemplates, ReferenceKernelSharedObjectMatchesReference) {
  Workload w = *parse_workload(GetParam());
  auto k = build_reference_kernel(w, Target{});
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_TRUE(k->template_name.empty());
  void* h = nullptr;
  auto fn = load_shared(*k, &h);
  ASSERT_NE(fn, nullptr);
  auto bufs = make_buffers(w, 5);
  auto args = bufs.arg_pointers();
  EXPECT_EQ(fn(args.data()), 0);
  EXPECT_EQ(compare(bufs.output, bufs.expected, bufs.tolerance_scale), "");
  dlclose(h);
}

// The reference kernel sums in double: over 16,384 products its outputs are the exact sums rounded
// once to float (the C++ reference's, to within one rounding), where a float sum taken in order
// drifts by dozens of ulps. The check against candidates then measures the candidates' error only.
TEST(ReferenceKernel, SumsInDoubleAndRoundsOnce) {
  Workload w = *parse_workload("matmul:M=4,N=8,K=16384");
  auto k = build_reference_kernel(w, Target{});
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  void* h = nullptr;
  auto fn = load_shared(*k, &h);
  ASSERT_NE(fn, nullptr);
  auto bufs = make_buffers(w, 11);
  auto args = bufs.arg_pointers();
  ASSERT_EQ(fn(args.data()), 0);
  dlclose(h);
  float worst_ulps = 0;
  for (size_t i = 0; i < bufs.expected.size(); ++i) {
    float ulp = std::nextafter(std::fabs(bufs.expected[i]), INFINITY) - std::fabs(bufs.expected[i]);
    worst_ulps = std::max(worst_ulps, std::fabs(bufs.output[i] - bufs.expected[i]) / ulp);
  }
  EXPECT_LE(worst_ulps, 1.0f);
  auto f = lower_reference(w, Target{});
  ASSERT_TRUE(f.ok());
  EXPECT_NE(ir::to_string(*f).find("float64"), std::string::npos) << ir::to_string(*f);
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuTemplates, ::testing::ValuesIn(testing_util::small_workloads()));

TEST(OpLibrary, EveryDescribedOperatorHasTemplatesAndEveryOneADescription) {
  for (const auto& description : operators::all_operators()) {
    const ops::OpDef* op = ops::find_op(description.name);
    ASSERT_NE(op, nullptr) << description.name << " is described but the compiler has no templates for it";
    EXPECT_FALSE(op->templates.empty()) << description.name;
  }
  for (const auto& op : ops::op_library()) EXPECT_NE(operators::find_operator(op.name), nullptr) << op.name;
}

TEST(OpLibrary, TilesAreTheLargestDividingCandidateUnderTheCap) {
  EXPECT_EQ(ops::pick_tile({1, 2, 4, 7, 8, 14}, 56, 8), 8);
  EXPECT_EQ(ops::pick_tile({1, 2, 4, 7, 8, 14}, 28, 10), 7);  // 8 does not divide 28
  EXPECT_EQ(ops::pick_tile({4, 8, 14, 16}, 10, 16), 8);        // none divides: the largest that fits
  EXPECT_EQ(ops::pick_tile({8, 16, 32}, 3, 32), 8);            // shorter than every candidate: the first
  EXPECT_EQ(ops::pick_tile({8, 16, 32}, 64, 4), 8);            // nothing under the cap: the first
  EXPECT_EQ(ops::pick_tile({1, 2, 3, 4}, 6, 4), 3);
}

// A register tile of columns that each take several vectors: where the columns under the target
// fill half of it or less, the next dividing candidate whose accumulators fit; the defaults of
// blocks of 40 channels (3 vectors) in a row of 14 take 7 columns.
TEST(OpLibrary, RegisterColumnsFillTheAccumulatorsTheRowAllows) {
  const std::vector<int64_t> columns = {1, 2, 3, 4, 5, 6, 7, 8, 12, 14};
  EXPECT_EQ(ops::pick_register_columns(columns, 14, 3, 14, 28), 7);   // 4 is the target, 2 divides
  EXPECT_EQ(ops::pick_register_columns(columns, 14, 1, 14, 28), 14);  // one vector: as pick_tile
  EXPECT_EQ(ops::pick_register_columns(columns, 14, 2, 14, 28), 7);
  EXPECT_EQ(ops::pick_register_columns(columns, 14, 5, 14, 28), 2);   // 7 x 5 would not fit
  EXPECT_EQ(ops::pick_register_columns(columns, 13, 3, 14, 28), 1);   // nothing else divides 13
  for (const char* w : {"conv2d_nchwc:N=1,C=40,H=14,W=14,K=120,R=1,S=1,stride=1,pad=0,ic_block=40,oc_block=40",
                        "depthwise_conv2d_nchwc:N=1,C=120,H=14,W=14,R=5,S=5,stride=1,pad=2,block=40"}) {
    auto workload = parse_workload(w);
    ASSERT_TRUE(workload.ok()) << w;
    const ops::OpDef* op = ops::find_op(workload->op);
    ASSERT_NE(op, nullptr);
    const ops::Template* t = ops::default_template(*op, Target{}, *workload);
    ASSERT_NE(t, nullptr);
    Config c = t->default_config(*workload, ops::CpuModel{});
    EXPECT_EQ(ops::knob_list(c, "tile_q")[1], 7) << w;
  }
}

// The default takes half the columns and two channel blocks (each input broadcast feeds two
// FMAs) at a stride, and with AVX-512 at stride 1 where the blocks pair up; with one block of
// output channels, or an odd count at stride 1, the columns stay.
TEST(OpLibrary, ConvolutionsTakeTwoChannelBlocksAColumnWhereTheyPairUp) {
  for (auto [w, columns, blocks] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"conv2d_nchwc:N=1,C=128,H=56,W=56,K=128,R=3,S=3,stride=2,pad=1,ic_block=16,oc_block=16", 7, 2},
           {"conv2d_nchwc:N=1,C=256,H=56,W=56,K=512,R=1,S=1,stride=2,pad=0,ic_block=16,oc_block=16", 7, 2},
           {"conv2d_nchwc:N=1,C=128,H=28,W=28,K=128,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16", 7, 2},
           {"conv2d_nchwc:N=1,C=2048,H=28,W=28,K=512,R=1,S=1,stride=1,pad=0,ic_block=16,oc_block=16", 7, 2},
           {"conv2d_nchwc:N=1,C=128,H=28,W=28,K=48,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16", 14, 1},
           {"conv2d_nchwc:N=1,C=64,H=56,W=56,K=16,R=3,S=3,stride=2,pad=1,ic_block=16,oc_block=16", 14, 1}}) {
    auto workload = parse_workload(w);
    ASSERT_TRUE(workload.ok()) << w;
    Config c = ops::default_template(*ops::find_op(workload->op), Target{}, *workload)->default_config(*workload, ops::CpuModel{});
    EXPECT_EQ(ops::knob_list(c, "tile_q")[1], columns) << w;
    EXPECT_EQ(ops::knob_list(c, "tile_kb")[1], blocks) << w;
  }
}

// A long row that only tiles of one column divide (109, prime; 111 = 3 x 37) takes tiles that do
// not divide it, as many columns as fill the accumulators; a row whole in them (17) stays whole.
TEST(OpLibrary, LongRowsNoTileDividesTakeTilesWithATail) {
  EXPECT_EQ(ops::columns_of_a_long_row({1, 2, 3, 4, 5, 6, 7, 8, 12, 14}, 109, 1, 14), 14);
  EXPECT_EQ(ops::columns_of_a_long_row({1, 2, 3, 4, 5, 6, 7, 8, 12, 14}, 13, 3, 14), 4);
  EXPECT_EQ(ops::columns_of_a_long_row({1, 2, 4, 7, 8, 14, 16, 28}, 15, 1, 16), 14);
  for (auto [w, columns] : std::vector<std::pair<const char*, int64_t>>{
           {"conv2d_nchwc:N=1,C=32,H=109,W=109,K=64,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16", 14},
           {"conv2d_nchwc:N=1,C=32,H=111,W=111,K=32,R=3,S=3,stride=1,pad=0,ic_block=16,oc_block=16", 14},
           {"conv2d_nchwc:N=1,C=768,H=17,W=17,K=192,R=1,S=1,stride=1,pad=0,ic_block=16,oc_block=16", 17},
           {"depthwise_conv2d_nchwc:N=1,C=96,H=109,W=109,R=3,S=3,stride=1,pad=1,block=16", 16}}) {
    auto workload = parse_workload(w);
    ASSERT_TRUE(workload.ok()) << w;
    const ops::Template* t = ops::default_template(*ops::find_op(workload->op), Target{}, *workload);
    ASSERT_NE(t, nullptr);
    Config c = t->default_config(*workload, ops::CpuModel{});
    EXPECT_EQ(ops::knob_list(c, "tile_q")[1], columns) << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Blocked, CpuTemplates, ::testing::ValuesIn(testing_util::blocked_workloads()));

// The Winograd kernel on a weight transformed by winograd_weight (as a model build transforms its
// constant weights) computes what the direct kernel computes on the weight itself: the operator's
// U layout, the template and the weight transform agree. Odd sizes (partial tiles), padding 1 and
// 0, an epilogue; one thread and the pool's.
TEST(Winograd, TheKernelOnTheTransformedWeightMatchesTheDirectKernel) {
  for (const char* shape : {"N=1,C=32,H=11,W=13,K=48,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,residual=1,relu=1",
                            "N=2,C=24,H=10,W=7,K=16,R=3,S=3,stride=1,pad=0,ic_block=8,oc_block=16"}) {
    Workload direct = *parse_workload(std::string("conv2d_nchwc:") + shape);
    operators::ConvShape c = operators::conv_shape(direct);
    auto g = testing_util::random_vector(c.K * c.C * 9, 5);
    std::vector<float> packed(g.size());  // OIHW[ic]i[oc]o, the direct kernel's weight
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t ch = 0; ch < c.C; ++ch)
        for (int64_t rs = 0; rs < 9; ++rs)
          packed[static_cast<size_t>((((k / c.oc * c.cb() + ch / c.ic) * 9 + rs) * c.ic + ch % c.ic) * c.oc + k % c.oc)] =
              g[static_cast<size_t>((k * c.C + ch) * 9 + rs)];
    auto d = jit_kernel(direct, *default_config(direct, Target{}));
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    auto want = testing_util::make_buffers(direct, 9);
    want.inputs[1] = packed;
    auto dargs = want.arg_pointers();
    ASSERT_EQ((*d)->run(dargs.data()), 0);
    for (int m : {2, 4}) {
      Workload w = *parse_workload(fmt::format("conv2d_nchwc:{},winograd={}", shape, m));
      auto config = default_config(w, Target{});
      ASSERT_TRUE(config.ok()) << config.status().to_string();
      EXPECT_EQ(config->template_name, "conv2d_nchwc.cpu.winograd");
      // In parallel too: over blocks of rows of tiles, and (a block of 2 rows: one or two blocks
      // on these maps) inside each block.
      std::vector<Config> configs = {*config};
      for (int64_t rows : {1, 2}) {
        Config parallel = *config;
        for (auto& [name, value] : parallel.knobs) {
          if (name == "parallel") value = std::string("outer");
          if (name == "block_rows") value = rows;
        }
        configs.push_back(parallel);
      }
      for (const Config& cfg : configs) {
        auto k = jit_kernel(w, cfg);
        ASSERT_TRUE(k.ok()) << k.status().to_string();
        auto got = want;
        got.inputs[1].assign(static_cast<size_t>(operators::conv_shape(w).alpha() * operators::conv_shape(w).alpha() * c.K * c.C), 0.f);
        operators::winograd_weight(operators::conv_shape(w), g.data(), got.inputs[1].data());
        auto args = got.arg_pointers();
        ASSERT_EQ((*k)->run(args.data()), 0);
        EXPECT_EQ(compare(got.output, want.output), "") << w.to_string() << " " << cfg.to_json();
      }
      // The cost model reads the candidate's loop nest like any other.
      auto features = candidate_features(w, Target{}, *config);
      ASSERT_TRUE(features.ok()) << features.status().to_string();
      for (float x : *features) EXPECT_TRUE(std::isfinite(x));
    }
  }
}

// A Winograd workload's weight is U: the direct template cannot compute it, nor the Winograd
// template a direct convolution; each says so and names the other. The default is the one that
// can.
TEST(Winograd, EachTemplateRefusesTheOthersWorkloads) {
  Workload wino = *parse_workload("conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,winograd=4");
  Workload direct = *parse_workload("conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16");
  Target host;
  EXPECT_EQ(template_names(wino, host), std::vector<std::string>{"conv2d_nchwc.cpu.winograd"});
  EXPECT_EQ(template_names(direct, host), std::vector<std::string>{"conv2d_nchwc.cpu.direct"});
  EXPECT_EQ(default_config(wino, host)->template_name, "conv2d_nchwc.cpu.winograd");
  EXPECT_EQ(default_config(direct, host)->template_name, "conv2d_nchwc.cpu.direct");

  auto space = config_space(wino, host, "conv2d_nchwc.cpu.direct");
  ASSERT_FALSE(space.ok());
  EXPECT_NE(space.status().message().find("conv2d_nchwc.cpu.direct computes direct convolutions"), std::string::npos)
      << space.status().message();
  EXPECT_NE(space.status().message().find("its template is conv2d_nchwc.cpu.winograd"), std::string::npos);
  auto built = build_kernel(wino, host, *default_config(direct, host));
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("F(4x4, 3x3)"), std::string::npos) << built.status().message();

  auto other = config_space(direct, host, "conv2d_nchwc.cpu.winograd");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("conv2d_nchwc.cpu.winograd computes convolutions with winograd=2 or 4"),
            std::string::npos) << other.status().message();
  EXPECT_NE(other.status().message().find("its template is conv2d_nchwc.cpu.direct"), std::string::npos);
  EXPECT_FALSE(build_kernel(direct, host, *default_config(wino, host)).ok());
}

}  // namespace
}  // namespace tunefarm
