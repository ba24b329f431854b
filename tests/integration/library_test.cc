// `tune-client build` end to end: two workloads tuned briefly on a real farm become a kernel
// library that the example C program (examples/kernels) links, as a shared and a static library
// and through its CMake project, and that passes its checks; the same library from exported records
// with no tunerd; an aarch64 library whose example runs under qemu-aarch64; and bad input that
// ends in a one-line error with nothing left in the output directory.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/helper_program.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

namespace fs = std::filesystem;

const std::string kExample = std::string(TUNEFARM_SOURCE_DIR) + "/examples/kernels";
const std::string kGemm = "matmul:M=128,N=96,K=64";
const std::string kConv = "conv2d_nchw:N=1,C=16,H=14,W=14,K=32,R=3,S=3,stride=1,pad=1";

HelperRun run(const std::vector<std::string>& argv, std::chrono::seconds timeout = std::chrono::seconds(300)) {
  auto r = run_helper(argv, "", timeout);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : HelperRun{};
}

std::string on_path(const std::string& tool) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"})
    if (fs::exists(fmt::format("{}/{}", dir, tool))) return fmt::format("{}/{}", dir, tool);
  return {};
}

HelperRun client(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin_path("tune-client")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

nlohmann::json manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.json");
  return nlohmann::json::parse(in, nullptr, false);
}

bool empty_or_absent(const std::string& dir) { return !fs::exists(dir) || fs::is_empty(dir); }

class LibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_.start_agent("cpu-0");
    ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm_.logs();
  }
  std::string dir(const std::string& name) { return farm_.log_dir() + "/" + name; }

  // Compiles the example against the library in `lib_dir` (extra arguments choose how it links)
  // with `cc` and runs it (under `runner` when given): its output.
  HelperRun compile_and_run(const std::string& cc, const std::string& lib_dir, std::vector<std::string> link,
                            const std::vector<std::string>& runner = {}) {
    std::string exe = lib_dir + "/example";
    std::vector<std::string> argv = {cc, "-std=c11", "-O2", "-Wall", "-Werror", "-I", lib_dir, kExample + "/main.c", "-o", exe};
    argv.insert(argv.end(), link.begin(), link.end());
    HelperRun built = run(argv);
    EXPECT_EQ(built.exit_code, 0) << built.err;
    std::vector<std::string> cmd = runner;
    cmd.push_back(exe);
    return run(cmd);
  }

  Farm farm_;
};

TEST_F(LibraryTest, TunedWorkloadsBecomeALibraryThatTheExampleLinksAndRuns) {
  Tunerd tunerd(farm_, dir("data"));
  for (const auto& w : {kGemm, kConv}) {
    auto job = tunerd.submit(w, 16);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_EQ(tunerd.watch(job->id()).state(), v1::SUCCEEDED) << tunerd.log();
  }
  std::string out = dir("lib");
  HelperRun built = client({"--server", tunerd.address(), "build", "--workloads", kExample + "/workloads.txt", "-o", out,
                            "--name", "example_kernels", "--require-tuned"});
  ASSERT_EQ(built.exit_code, 0) << built.err << tunerd.log();
  // A best record that does not clearly beat the default's own is built from the default, and the
  // build says so (the defaults of this GEMM are often within noise of its best).
  auto fell_back = [&](const std::string& workload) {
    return built.err.find(workload + ": the best tuned config") != std::string::npos;
  };
  int defaults = fell_back(kGemm) + fell_back(kConv);
  EXPECT_THAT(built.out, ::testing::HasSubstr(fmt::format("built 2 kernels ({} tuned, {} from template defaults)",
                                                          2 - defaults, defaults)));
  for (const char* f : {"libexample_kernels.so", "libexample_kernels.a", "example_kernels.h", "manifest.json"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 4) << "no scratch left behind";

  // The manifest names, per kernel, the record `best` answers.
  nlohmann::json m = manifest(out);
  ASSERT_EQ(m["kernels"].size(), 2u) << m.dump();
  for (const auto& k : m["kernels"]) {
    EXPECT_EQ(k["config"]["knobs"]["parallel"], "outer") << k.dump();
    if (fell_back(k["workload"].get<std::string>())) continue;
    EXPECT_EQ(k["source"], "tuned");
    auto best = tunerd.best(k["workload"].get<std::string>());
    ASSERT_EQ(best.size(), 1u);
    // The record's config, built with its outer loop split over the library's threads.
    EXPECT_EQ(k.value("chosen_config", k["config"]).dump(),
              nlohmann::json::parse(from_proto(best[0].config()).to_json()).dump());
    EXPECT_DOUBLE_EQ(k["gflops"].get<double>(), best[0].gflops());
    EXPECT_EQ(k["device_key"], "local-cpu");
  }

  std::string cc = on_path("cc");
  HelperRun shared = compile_and_run(cc, out, {"-L", out, "-lexample_kernels", "-Wl,-rpath," + out, "-lm"});
  EXPECT_EQ(shared.exit_code, 0) << shared.err;
  EXPECT_EQ(shared.out, "ok\n");
  HelperRun statically = compile_and_run(cc, out, {out + "/libexample_kernels.a", "-lstdc++", "-lpthread", "-lm"});
  EXPECT_EQ(statically.exit_code, 0) << statically.err;

  // The CMake project of the example, as a user would build it.
  std::string cmake = on_path("cmake"), build_dir = dir("example-build");
  HelperRun configured = run({cmake, "-S", kExample, "-B", build_dir, "-DKERNELS_DIR=" + out});
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  HelperRun made = run({cmake, "--build", build_dir});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_EQ(run({build_dir + "/kernels_example"}).out, "ok\n");

  // Exported records build the same library with no tunerd: the same configs, from the same rule.
  std::string records = dir("records.jsonl");
  ASSERT_EQ(client({"--server", tunerd.address(), "export", records}).exit_code, 0);
  std::string offline = dir("offline");
  HelperRun from_file = client({"--server", "127.0.0.1:1", "build", "--from-records", records, "--workloads",
                                kExample + "/workloads.txt", "-o", offline, "--name", "example_kernels"});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  nlohmann::json m2 = manifest(offline);
  ASSERT_EQ(m2["kernels"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(m2["kernels"][i]["config"].dump(), m["kernels"][i]["config"].dump());
  EXPECT_EQ(compile_and_run(cc, offline, {"-L", offline, "-lexample_kernels", "-Wl,-rpath," + offline, "-lm"}).out, "ok\n");
}

TEST_F(LibraryTest, AnAarch64LibraryCrossLinksAndItsExamplePassesUnderQemu) {
  std::string cross = on_path("aarch64-linux-gnu-gcc"), qemu = on_path("qemu-aarch64");
  if (cross.empty()) GTEST_SKIP() << "aarch64-linux-gnu-gcc not installed (Debian package gcc-aarch64-linux-gnu)";
  if (qemu.empty()) GTEST_SKIP() << "qemu-aarch64 not installed (Debian package qemu-user)";
  Tunerd tunerd(farm_, dir("data"));
  std::string out = dir("arm");
  // The farm here has no ARM board, so nothing is tuned for this target: every kernel is its
  // template's default, and the command says so.
  HelperRun built = client({"--server", tunerd.address(), "build", "--workloads", kExample + "/workloads.txt", "--target",
                            "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "-o", out, "--name", "example_kernels"});
  ASSERT_EQ(built.exit_code, 0) << built.err << tunerd.log();
  EXPECT_THAT(built.err, ::testing::HasSubstr("built from the template's default config"));
  HelperRun file = run({on_path("file"), out + "/libexample_kernels.so"});
  EXPECT_THAT(file.out, ::testing::HasSubstr("aarch64"));
  HelperRun ran = compile_and_run(cross, out, {out + "/libexample_kernels.a", "-lstdc++", "-lpthread", "-lm", "-static"}, {qemu});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "ok\n");
}

TEST_F(LibraryTest, BadInputIsOneLineAndLeavesNothingInTheOutputDirectory) {
  Tunerd tunerd(farm_, dir("data"));
  std::string out = dir("bad");
  auto expect_refused = [&](const std::vector<std::string>& args, const std::string& needle) {
    std::vector<std::string> full = {"--server", tunerd.address(), "build", "-o", out};
    full.insert(full.end(), args.begin(), args.end());
    HelperRun r = client(full);
    EXPECT_NE(r.exit_code, 0) << needle;
    EXPECT_THAT(r.err, ::testing::HasSubstr(needle));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(empty_or_absent(out)) << needle;
  };
  expect_refused({"--workload", "softmax:N=4"}, "softmax");
  expect_refused({"--workload", kGemm, "--require-tuned"}, "no successful record of matmul:M=128,N=96,K=64");
  expect_refused({"--workload", kGemm, "--target", "llvm -mtriple=sparc-linux-gnu"}, "sparc");
  expect_refused({"--workload", kGemm, "--name", "not a name"}, "C identifier");
  expect_refused({"--workload", kGemm, "--workload", kGemm}, "given twice");
  std::string garbage = dir("garbage.jsonl");
  std::ofstream(garbage) << "{\"workload\": 3}\nnot json\n";
  expect_refused({"--workload", kGemm, "--from-records", garbage}, "garbage.jsonl");
  expect_refused({"--workload", kGemm, "--from-records", dir("missing.jsonl")}, "missing.jsonl");

  // An output directory that cannot be made: its parent is a file.
  std::string file = dir("a-file");
  std::ofstream(file) << "x";
  HelperRun r = client({"--server", tunerd.address(), "build", "--workload", kGemm, "-o", file + "/lib"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("output directory"));
}

// The helper on its own, as a user may run it: it makes its output directory (nested, missing),
// and one it cannot make (its parent a file) is one line naming it, exit status 2.
TEST_F(LibraryTest, TheBuildHelperMakesItsOutputDirectory) {
  std::string out = dir("helper/nested/lib");
  HelperRun r = run({bin_path("tunefarm-build-library"), "--workload", kGemm, "--out", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/manifest.json")) << r.out << r.err;
  std::string file = dir("helper-file");
  std::ofstream(file) << "x";
  r = run({bin_path("tunefarm-build-library"), "--workload", kGemm, "--out", file + "/lib"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("cannot create the output directory " + file + "/lib"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A model tuned briefly as one job, then built: its kernels come from the job's records, its
// outputs match ONNX Runtime's, and the example program prints its top five classes.
TEST_F(LibraryTest, ATunedModelBecomesALibraryThatMatchesOnnxRuntime) {
  std::string model = std::string(TUNEFARM_TEST_MODELS) + "/resnet50_small.onnx";
  std::string python = std::string(TUNEFARM_BUILD_DIR) + "/venv/bin/python3";
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: deploy/install-deps.sh makes it (make test runs it)";
  Tunerd tunerd(farm_, dir("data"));
  HelperRun tuned = client({"--server", tunerd.address(), "submit", "--model", model, "--target", "llvm", "--device",
                            "local-cpu", "--trials", "24", "--watch"});
  ASSERT_EQ(tuned.exit_code, 0) << tuned.out << tuned.err << tunerd.log();
  std::string out = dir("model");
  HelperRun built = client({"--server", tunerd.address(), "build", "--model", model, "-o", out, "--name", "resnet_small"});
  ASSERT_EQ(built.exit_code, 0) << built.err << tunerd.log();
  nlohmann::json m = manifest(out);
  int from_records = 0;
  for (const auto& k : m["kernels"]) from_records += k["source"] == "tuned";
  EXPECT_GT(from_records, 0) << m.dump(2);
  EXPECT_LT(m["memory"]["arena_bytes"].get<int64_t>(), m["memory"]["naive_bytes"].get<int64_t>());

  HelperRun checked = run({python, std::string(TUNEFARM_SOURCE_DIR) + "/bench/model_bench.py", "--check", "--model", model,
                           "--artifact", out});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;

  std::string exe = out + "/top5";
  HelperRun compiled = run({on_path("cc"), "-O2", "-DMODEL_NAME=resnet_small", "-DMODEL_HEADER=\"resnet_small.h\"", "-I", out,
                            std::string(TUNEFARM_SOURCE_DIR) + "/examples/models/top5.c", "-L", out, "-lresnet_small",
                            "-Wl,-rpath," + out, "-lm", "-o", exe});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  HelperRun top5 = run({exe, out + "/resnet_small.weights"});
  EXPECT_EQ(top5.exit_code, 0) << top5.err;
  EXPECT_THAT(top5.out, ::testing::HasSubstr("top-5 of"));
  EXPECT_EQ(std::count(top5.out.begin(), top5.out.end(), '\n'), 6) << top5.out;
  // Another build's weights are refused by name.
  HelperRun wrong = run({exe, dir("records-that-are-not-weights")});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.err, ::testing::HasSubstr("weights file"));

  // A model none of whose tasks were tuned, with --require-tuned: refused, nothing written.
  std::string bert = std::string(TUNEFARM_TEST_MODELS) + "/bert_layer_small.onnx", refused = dir("refused");
  HelperRun r = client({"--server", tunerd.address(), "build", "--model", bert, "--input-shape", "hidden_states=1,16,64",
                        "-o", refused, "--require-tuned"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no successful record"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(empty_or_absent(refused));
}

}  // namespace
}  // namespace tunefarm::testing
