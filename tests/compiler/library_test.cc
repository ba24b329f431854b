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
  Config wrong = kernels[0].config;
  wrong.template_name = "matmul.cpu.nonexistent";
  r = build_kernel_library("tk", Target{}, {{kernels[0].workload, wrong, {}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matmul:M=37"), std::string::npos) << r.status().message();
}

// CUDA: the launchers build with the system compiler, the PTX beside them passes ptxas, and without
// a GPU a call answers that CUDA is missing instead of crashing. On a machine with a GPU the
// functions run there and match the reference.
std::vector<LibraryKernel> cuda_kernels() {
  Target sm90 = *parse_target("cuda -arch=sm_90");
  std::vector<LibraryKernel> kernels;
  for (const char* w : {"matmul:M=37,N=45,K=19", "conv2d_nchw:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1"}) {
    Workload workload = *parse_workload(w);
    kernels.push_back({workload, *default_config(workload, sm90), {}});
  }
  return kernels;
}

TEST(KernelLibrary, CudaLaunchersBuildAndThePtxPassesPtxas) {
  auto files = build_kernel_library("gk", *parse_target("cuda -arch=sm_90"), cuda_kernels());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::string dir = scratch_dir();
  write_files(dir, *files);
  EXPECT_NE((*files)[0].content.find("int gk_matmul_M37_N45_K19(const float* A, const float* B, float* C, void* stream);"),
            std::string::npos) << (*files)[0].content;
  std::string ptxas;
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (std::filesystem::exists(p)) ptxas = p;
  int ptx_files = 0;
  for (const auto& f : *files) {
    if (!f.name.ends_with(".ptx")) continue;
    ++ptx_files;
    if (ptxas.empty()) continue;
    Status accepted = codegen::run_tool({ptxas, "-arch=sm_90", dir + "/" + f.name, "-o", dir + "/out.cubin"});
    EXPECT_TRUE(accepted.ok()) << f.name << ": " << accepted.to_string();
  }
  EXPECT_EQ(ptx_files, 2);

  void* h = dlopen((dir + "/libgk.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Launch = int (*)(const float*, const float*, float*, void*);
  auto gemm = reinterpret_cast<Launch>(dlsym(h, "gk_matmul_M37_N45_K19"));
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm(nullptr, nullptr, nullptr, nullptr), 1);
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    float a = 0;
    EXPECT_EQ(gemm(&a, &a, &a, nullptr), 4) << "no driver: GK_ERROR_NO_CUDA";
  }
  dlclose(h);
  std::filesystem::remove_all(dir);
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not installed (CUDA toolkit): the PTX was not checked";
}

TEST(KernelLibrary, CudaKernelsRunOnAGpu) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) GTEST_SKIP() << "no CUDA driver (libcuda.so.1) on this machine: the CUDA library is built and checked, not run";
  auto kernels = cuda_kernels();
  auto files = build_kernel_library("gk", *parse_target("cuda -arch=sm_90"), kernels);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::string dir = scratch_dir();
  write_files(dir, *files);
  void* h = dlopen((dir + "/libgk.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Launch = int (*)(const float*, const float*, float*, void*);
  auto gemm = reinterpret_cast<Launch>(dlsym(h, "gk_matmul_M37_N45_K19"));
  ASSERT_NE(gemm, nullptr);
  // A GPU: run the GEMM on it through the driver API and compare with the reference.
  using CuInit = int (*)(unsigned);
  using CuAlloc = int (*)(unsigned long long*, size_t);
  using CuCopyH2D = int (*)(unsigned long long, const void*, size_t);
  using CuCopyD2H = int (*)(void*, unsigned long long, size_t);
  using CuSync = int (*)();
  auto cu_init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  ASSERT_EQ(cu_init(0), 0);
  auto bufs = make_buffers(kernels[0].workload, 5);
  float a = 0;
  int rc = gemm(&a, &a, &a, nullptr);
  if (rc == 4) GTEST_SKIP() << "a CUDA driver but no device";
  auto alloc = reinterpret_cast<CuAlloc>(dlsym(driver, "cuMemAlloc_v2"));
  auto h2d = reinterpret_cast<CuCopyH2D>(dlsym(driver, "cuMemcpyHtoD_v2"));
  auto d2h = reinterpret_cast<CuCopyD2H>(dlsym(driver, "cuMemcpyDtoH_v2"));
  auto sync = reinterpret_cast<CuSync>(dlsym(driver, "cuCtxSynchronize"));
  unsigned long long da = 0, db = 0, dc = 0;
  ASSERT_EQ(alloc(&da, bufs.inputs[0].size() * 4), 0);
  ASSERT_EQ(alloc(&db, bufs.inputs[1].size() * 4), 0);
  ASSERT_EQ(alloc(&dc, bufs.output.size() * 4), 0);
  ASSERT_EQ(h2d(da, bufs.inputs[0].data(), bufs.inputs[0].size() * 4), 0);
  ASSERT_EQ(h2d(db, bufs.inputs[1].data(), bufs.inputs[1].size() * 4), 0);
  ASSERT_EQ(gemm(reinterpret_cast<float*>(da), reinterpret_cast<float*>(db), reinterpret_cast<float*>(dc), nullptr), 0);
  ASSERT_EQ(sync(), 0);
  ASSERT_EQ(d2h(bufs.output.data(), dc, bufs.output.size() * 4), 0);
  EXPECT_EQ(compare(bufs.output, bufs.expected), "");
  dlclose(h);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tunefarm
