// aarch64-linux-gnu shared objects from the same compiler, run under qemu-aarch64 by a small
// cross-compiled harness and checked against the naive reference: random valid configs of every
// operator's CPU template and the reference kernels. Skips with a message when qemu-aarch64 or
// the cross toolchain is missing.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "compiler/build.h"
#include "test_util.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

bool on_path(const std::string& tool) {
  return std::system(("command -v " + tool + " > /dev/null 2>&1").c_str()) == 0;
}

class Aarch64 : public ::testing::TestWithParam<std::string> {};

TEST_P(Aarch64, KernelsRunUnderQemuAndMatchReference) {
  std::string harness = TUNEFARM_AARCH64_HARNESS;
  if (harness.empty() || !fs::exists(harness)) GTEST_SKIP() << "aarch64 cross compiler missing: harness not built";
  if (!on_path("qemu-aarch64")) GTEST_SKIP() << "qemu-aarch64 not installed (Debian package qemu-user)";
  Workload w = *parse_workload(GetParam());
  Target arm = *parse_target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  fs::path dir = fs::path(::testing::TempDir()) / ("aarch64_" + std::to_string(getpid()));
  fs::create_directories(dir);

  struct Case {
    std::string what;
    testing_util::Buffers bufs;
    fs::path out;
  };
  std::vector<Case> cases;
  std::ofstream manifest(dir / "manifest");
  auto add = [&](const std::string& what, const BuiltKernel& k) {
    size_t i = cases.size();
    fs::path so = dir / ("k" + std::to_string(i) + ".so");
    std::ofstream(so, std::ios::binary).write(k.binary.data(), static_cast<std::streamsize>(k.binary.size()));
    Case c{what, testing_util::make_buffers(w, 100 + i), {}};
    manifest << so.string() << " " << c.bufs.inputs.size() + 1;
    for (size_t a = 0; a < c.bufs.inputs.size(); ++a) {
      fs::path p = dir / ("k" + std::to_string(i) + "_in" + std::to_string(a));
      std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(c.bufs.inputs[a].data()),
                                               static_cast<std::streamsize>(c.bufs.inputs[a].size() * 4));
      manifest << " " << c.bufs.inputs[a].size() << " " << p.string();
    }
    c.out = dir / ("k" + std::to_string(i) + "_out");
    manifest << " " << c.bufs.expected.size() << " " << c.out.string() << "\n";
    cases.push_back(std::move(c));
  };

  auto space = *config_space(w, arm);
  for (const Config& c : testing_util::random_valid_configs(space, testing_util::configs_per_workload(), 21)) {
    auto k = build_kernel(w, arm, c);
    ASSERT_TRUE(k.ok()) << c.to_json() << ": " << k.status().to_string();
    add(c.to_json(), *k);
  }
  auto ref = build_reference_kernel(w, arm);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  add("reference kernel", *ref);
  manifest.close();

  std::string cmd = "qemu-aarch64 -L /usr/aarch64-linux-gnu " + harness + " " + (dir / "manifest").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (auto& c : cases) {
    std::vector<float> got(c.bufs.expected.size());
    std::ifstream(c.out, std::ios::binary).read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
    EXPECT_EQ(testing_util::compare(got, c.bufs.expected, c.bufs.tolerance_scale), "") << c.what;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ops, Aarch64, ::testing::ValuesIn(testing_util::small_workloads()));
INSTANTIATE_TEST_SUITE_P(Blocked, Aarch64, ::testing::ValuesIn(testing_util::blocked_workloads()));

}  // namespace
}  // namespace tunefarm
