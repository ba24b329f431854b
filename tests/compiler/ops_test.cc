// Every operator and template: random valid configs on small and odd shapes (non-dividing splits
// included) against the naive C++ reference, through the in-process JIT; and the reference
// kernel itself.
#include <random>

#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/ir/printer.h"
#include "test_util.h"

namespace tunefarm {
namespace {

using testing_util::compare;
using testing_util::make_buffers;

// Small and odd shapes: primes and sizes just off the vector width.
const std::vector<std::string> kWorkloads = {
    "matmul:M=37,N=45,K=19",
    "matmul:M=5,N=70,K=33",
    "dense:M=3,N=41,K=29,bias=1,relu=1",
    "dense:M=17,N=20,K=13",
    "batch_matmul:B=3,M=11,N=35,K=9",
    "batch_matmul:B=2,M=20,N=17,K=24",
    "conv2d_nchw:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1",
    "conv2d_nchw:N=2,C=3,H=10,W=13,K=6,R=3,S=2,stride=2,pad=1,dilation=2",
    "conv2d_nhwc:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1",
    "conv2d_nhwc:N=2,C=4,H=8,W=7,K=19,R=2,S=3,stride=2,pad=0",
    "depthwise_conv2d_nchw:N=1,C=5,H=9,W=11,R=3,S=3,stride=1,pad=1",
    "depthwise_conv2d_nchw:N=2,C=3,H=12,W=10,R=5,S=3,stride=2,pad=2",
};

int configs_per_workload() {
  const char* env = std::getenv("TUNEFARM_OPS_TEST_CONFIGS");
  return env ? std::atoi(env) : 25;
}

class CpuTemplates : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuTemplates, RandomValidConfigsMatchReference) {
  Workload w = *parse_workload(GetParam());
  Target host;
  for (const std::string& tname : template_names(w, host)) {
    auto space = config_space(w, host, tname);
    ASSERT_TRUE(space.ok()) << space.status().to_string();
    std::mt19937_64 rng(42);
    int tested = 0;
    for (int attempt = 0; tested < configs_per_workload() && attempt < 10000; ++attempt) {
      auto c = space->get(static_cast<int64_t>(rng() % space->size()));
      ASSERT_TRUE(c.ok());
      if (!space->check(*c).ok()) continue;
      ++tested;
      auto jit = jit_kernel(w, *c);
      ASSERT_TRUE(jit.ok()) << jit.status().to_string();
      auto bufs = make_buffers(w, 7 + tested);
      auto args = bufs.arg_pointers();
      ASSERT_EQ((*jit)->run(args.data()), 0);
      std::string diff = compare(bufs.output, bufs.expected);
      if (!diff.empty()) {
        auto f = lower_candidate(w, host, *c);
        FAIL() << w.to_string() << " " << c->to_json() << ": " << diff << "\n" << (f.ok() ? ir::to_string(*f) : "");
      }
    }
    EXPECT_EQ(tested, configs_per_workload()) << tname;
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
  EXPECT_EQ(compare(bufs.output, bufs.expected), "");
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuTemplates, ::testing::ValuesIn(kWorkloads));

}  // namespace
}  // namespace tunefarm
