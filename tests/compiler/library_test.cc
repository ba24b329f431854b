// Kernel libraries (compiler/library.h): the shared library's functions compute what the naive
// reference does, export nothing but the header's names, check their arguments; the static
// library links into a C program; bad names and inputs are errors that say what is wrong.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/helper_program.h"
#include "compiler/build.h"
#include "compiler/codegen/codegen.h"
#include "compiler/library.h"
#include "test_util.h"

namespace tunefarm {
namespace {

using testing_util::compare;
using testing_util::make_buffers;

std::string scratch_dir() {
  std::string d = fmt::format("{}/library_test_{}", ::testing::TempDir(), getpid());
  std::filesystem::create_directories(d);
  return d;
}

void write_files(const std::string& dir, const std::vector<LibraryFile>& files) {
  for (const auto& f : files) std::ofstream(dir + "/" + f.name, std::ios::binary) << f.content;
}

std::vector<LibraryKernel> two_kernels() {
  Target host;
  std::vector<LibraryKernel> kernels;
  for (const char* w : {"matmul:M=37,N=45,K=19", "conv2d_nchw:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1"}) {
    Workload workload = *parse_workload(w);
    kernels.push_back({workload, *default_config(workload, host), {"a note"}});
  }
  return kernels;
}

TEST(KernelLibrary, FunctionNamesSpellTheWorkload) {
  EXPECT_EQ(library_function_name("lib", *parse_workload("matmul:M=512,N=256,K=64")), "lib_matmul_M512_N256_K64");
  EXPECT_TRUE(check_library_name("my_kernels2").ok());
  for (const char* bad : {"", "2fast", "my-lib", "a b", "x/y"}) EXPECT_FALSE(check_library_name(bad).ok()) << bad;
  EXPECT_FALSE(check_library_name(std::string(65, 'a')).ok());
}

TEST(KernelLibrary, SharedLibraryMatchesTheReferenceAndExportsOnlyItsApi) {
  auto files = build_kernel_library("tk", Target{}, two_kernels());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  ASSERT_EQ(files->size(), 3u);
  std::string dir = scratch_dir();
  write_files(dir, *files);
  const std::string& header = (*files)[0].content;
  EXPECT_NE(header.find("int tk_matmul_M37_N45_K19(const float* A, const float* B, float* C);"), std::string::npos) << header;
  EXPECT_NE(header.find("NCHW"), std::string::npos);
  EXPECT_NE(header.find("a note"), std::string::npos);

  void* h = dlopen((dir + "/libtk.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  // The runtime and the kernels' own entries stay private to the library.
  EXPECT_EQ(dlsym(h, "tunefarm_parallel_launch"), nullptr);
  EXPECT_EQ(dlsym(h, "tk__kernel_0"), nullptr);
  using Gemm = int (*)(const float*, const float*, float*);
  auto gemm = reinterpret_cast<Gemm>(dlsym(h, "tk_matmul_M37_N45_K19"));
  auto conv = reinterpret_cast<Gemm>(dlsym(h, "tk_conv2d_nchw_N1_C5_H9_W11_K7_R3_S3_stride1_pad1"));
  auto set_threads = reinterpret_cast<int (*)(int)>(dlsym(h, "tk_set_num_threads"));
  auto error_string = reinterpret_cast<const char* (*)(int)>(dlsym(h, "tk_error_string"));
  ASSERT_TRUE(gemm && conv && set_threads && error_string);
  EXPECT_EQ(set_threads(2), 0);
  EXPECT_NE(set_threads(-1), 0);
  int k = 0;
  for (auto fn : {gemm, conv}) {
    auto bufs = make_buffers(two_kernels()[k++].workload, 21);
    EXPECT_EQ(fn(bufs.inputs[0].data(), bufs.inputs[1].data(), bufs.output.data()), 0);
    EXPECT_EQ(compare(bufs.output, bufs.expected), "");
    int code = fn(nullptr, bufs.inputs[1].data(), bufs.output.data());
    EXPECT_EQ(code, 1);
    EXPECT_STREQ(error_string(code), "a tensor pointer is NULL");
  }
  dlclose(h);
  std::filesystem::remove_all(dir);
}

TEST(KernelLibrary, StaticLibraryLinksIntoACProgram) {
  Workload w = *parse_workload("matmul:M=8,N=8,K=8");
  auto files = build_kernel_library("st", Target{}, {{w, *default_config(w, Target{}), {}}});
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::string dir = scratch_dir();
  write_files(dir, *files);
  std::ofstream(dir + "/main.c") << R"(#include "st.h"
int main(void) {
  float a[64], b[64], c[64];
  for (int i = 0; i < 64; ++i) { a[i] = (float)(i % 8 == i / 8); b[i] = (float)i; }
  if (st_matmul_M8_N8_K8(a, b, c) != ST_OK) return 2;
  for (int i = 0; i < 64; ++i) if (c[i] != b[i]) return 3;
  return 0;
}
)";
  auto tools = codegen::find_toolchain(Target{});
  ASSERT_TRUE(tools.ok()) << tools.status().to_string();
  ASSERT_TRUE(codegen::run_tool({tools->cc, "-std=c11", "-Wall", "-Werror", "-I", dir, dir + "/main.c", dir + "/libst.a",
                                 "-lstdc++", "-lpthread", "-lm", "-o", dir + "/main"}).ok());
  auto run = run_helper({dir + "/main"}, "", std::chrono::seconds(30));
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 0);
  std::filesystem::remove_all(dir);
}

TEST(KernelLibrary, BadInputIsAnErrorThatSaysWhatIsWrong) {
  auto kernels = two_kernels();
  auto twice = kernels;
  twice.push_back(kernels[0]);
  auto r = build_kernel_library("tk", Target{}, twice);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("given twice"), std::string::npos) << r.status().message();
  r = build_kernel_library("bad name", Target{}, kernels);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("C identifier"), std::string::npos);
  EXPECT_FALSE(build_kernel_library("tk", Target{}, {}).ok());
  auto cuda = build_kernel_library("tk", *parse_target("cuda -arch=sm_90"), kernels);
  ASSERT_FALSE(cuda.ok());
  Config wrong = kernels[0].config;
  wrong.template_name = "matmul.cpu.nonexistent";
  r = build_kernel_library("tk", Target{}, {{kernels[0].workload, wrong, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matmul:M=37"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tunefarm
