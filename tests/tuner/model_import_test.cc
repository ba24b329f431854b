// tunerd's import of uploaded models in a process of its own (tunefarm-model-import).
#include "tuner/model_tasks.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A stand-in importer: a shell script, for the ways a real one can end badly.
std::string script(const std::string& name, const std::string& body) {
  std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(ModelImport, InItsOwnProcessItGivesTheSameTasks) {
  std::string model = read_file(std::string(TUNEFARM_TEST_MODELS) + "/resnet50_small.onnx");
  ASSERT_FALSE(model.empty());
  auto here = extract_model_tasks(model, "resnet50_small.onnx", {});
  auto there = extract_model_tasks_isolated(model, "resnet50_small.onnx", {});
  ASSERT_TRUE(here.ok()) << here.status().to_string();
  ASSERT_TRUE(there.ok()) << there.status().to_string();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*here, *there));
  EXPECT_EQ(there->tasks_size(), 19);  // 17 convolutions, the classifier, a convolution's Winograd form
  auto bad = extract_model_tasks_isolated("not a model", "bad.onnx", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.onnx: not an ONNX model"));
}

TEST(ModelImport, AnImporterThatCrashesOrHangsIsAnErrorForThatModelOnly) {
  ModelImportOptions crash;
  crash.program = script("crashing-import", "cat > /dev/null; echo 'inferring shapes' >&2; kill -FPE $$");
  auto crashed = extract_model_tasks_isolated(std::string(1 << 20, 'x'), "fpe.onnx", {}, crash);
  ASSERT_FALSE(crashed.ok());
  EXPECT_EQ(crashed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(crashed.status().message(), HasSubstr("fpe.onnx: the model crashed the ONNX importer"));
  EXPECT_THAT(crashed.status().message(), HasSubstr("inferring shapes"));

  ModelImportOptions hang;
  hang.program = script("hanging-import", "sleep 30");
  hang.timeout = std::chrono::milliseconds(500);
  auto start = std::chrono::steady_clock::now();
  auto hung = extract_model_tasks_isolated(std::string(1 << 20, 'x'), "slow.onnx", {}, hang);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(hung.ok());
  EXPECT_THAT(hung.status().message(), HasSubstr("slow.onnx: importing it took longer than"));
}

}  // namespace
}  // namespace tunefarm
