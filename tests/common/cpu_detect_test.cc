#include "common/cpu_detect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/platform.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

// The first processor of /proc/cpuinfo as an x86-64 Linux writes it (trimmed).
std::string cpuinfo(const std::string& vendor, int family, int model, const std::string& flags) {
  return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: " + std::to_string(family) +
         "\nmodel\t\t: " + std::to_string(model) + "\nmodel name\t: some CPU\nflags\t\t: " + flags +
         "\n\nprocessor\t: 1\nvendor_id\t: " + vendor + "\ncpu family\t: 1\nmodel\t\t: 1\nflags\t\t: fpu\n";
}

const std::string kHaswellFlags =
    "fpu sse2 ssse3 cx16 sse4_1 sse4_2 popcnt lahf_lm avx avx2 fma f16c bmi1 bmi2 abm movbe xsave";
const std::string kAvx512Flags = kHaswellFlags + " avx512f avx512cd avx512bw avx512dq avx512vl avx512_vnni";

TEST(CpuDetectTest, X86ModelsGetLlvmsNamesAndTheirVectorFeatures) {
  CpuDescription haswell = x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0x3f, kHaswellFlags));
  EXPECT_EQ(haswell.name, "haswell");
  EXPECT_THAT(haswell.features, HasSubstr("+avx2"));
  EXPECT_THAT(haswell.features, HasSubstr("+fma"));
  EXPECT_THAT(haswell.features, HasSubstr("-avx512f"));

  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0x55, kAvx512Flags)).name, "cascadelake");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0x55, kAvx512Flags + " avx512_bf16")).name, "cooperlake");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0x8f, kAvx512Flags)).name, "sapphirerapids");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("AuthenticAMD", 25, 17, kAvx512Flags)).name, "znver4");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("AuthenticAMD", 25, 1, kHaswellFlags)).name, "znver3");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("AuthenticAMD", 23, 0x31, kHaswellFlags)).name, "znver2");
}

TEST(CpuDetectTest, AVmThatHidesAvx512SaysSoInItsFeatures) {
  // The model is an AVX-512 one; the hypervisor does not pass the feature on.
  CpuDescription cpu = x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0x55, kHaswellFlags));
  EXPECT_EQ(cpu.name, "skylake-avx512");
  EXPECT_THAT(cpu.features, HasSubstr("-avx512f"));
  EXPECT_THAT(cpu.features, HasSubstr("-avx512bw"));
}

TEST(CpuDetectTest, UnknownX86ModelsFallBackToTheLevelTheirFlagsReach) {
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 6, 0xfe, kAvx512Flags)).name, "x86-64-v4");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("HygonGenuine", 24, 1, kHaswellFlags)).name, "x86-64-v3");
  EXPECT_EQ(x86_cpu_from_cpuinfo(cpuinfo("GenuineIntel", 15, 1, "fpu sse2")).name, "x86-64");
  EXPECT_EQ(x86_cpu_from_cpuinfo("").name, "x86-64");
}

TEST(CpuDetectTest, Aarch64CpusComeFromTheirMidrAndHwcaps) {
  // What qemu-aarch64 -cpu cortex-a72 shows: MIDR 0x410fd083, AT_HWCAP 0x8fb.
  CpuDescription a72 = aarch64_cpu(0x410fd083, 0x8fb, 0);
  EXPECT_EQ(a72.name, "cortex-a72");
  EXPECT_EQ(a72.features, "+fp-armv8,+neon,+aes,+sha2,+crc,-lse,-fullfp16,-rdm,-dotprod,-sve,-sve2,-i8mm,-bf16");
  EXPECT_EQ(aarch64_cpu(0x413fd0c1, 0, 0).name, "neoverse-n1");
  EXPECT_EQ(aarch64_cpu(0, 0x3, 0).name, "generic");
  EXPECT_THAT(aarch64_cpu(0, (1u << 22), 2).features, HasSubstr("+sve,+sve2"));
}

TEST(CpuDetectTest, BigLittleBoardsAreNamedForTheirBigCores) {
  // An RK3399: four Cortex-A53, then two Cortex-A72.
  std::string rk3399;
  for (int i = 0; i < 6; ++i)
    rk3399 += "processor\t: " + std::to_string(i) + "\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: " +
              (i < 4 ? "0xd03" : "0xd08") + "\n\n";
  EXPECT_EQ(aarch64_cpu(aarch64_midr_from_cpuinfo(rk3399), 0x3, 0).name, "cortex-a72");
  // What a user-mode emulator shows an aarch64 program: the x86 host's file.
  EXPECT_EQ(aarch64_midr_from_cpuinfo(cpuinfo("AuthenticAMD", 25, 17, kAvx512Flags)), 0u);
}

TEST(CpuDetectTest, ThisMachinesCpuIsNamedAndWellFormed) {
  CpuDescription cpu = host_cpu();
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_TRUE(check_cpu_description(cpu).ok()) << check_cpu_description(cpu).to_string();
  if (host_arch() == "x86_64") EXPECT_THAT(cpu.features, HasSubstr("sse4.2"));
}

TEST(CpuDetectTest, CpusGivenByHandAreCheckedForForm) {
  EXPECT_TRUE(check_cpu_description({"haswell", ""}).ok());
  EXPECT_TRUE(check_cpu_description({"cortex-a72", "+neon,-sve"}).ok());
  EXPECT_THAT(check_cpu_description({"", ""}).message(), HasSubstr("CPU name ''"));
  EXPECT_THAT(check_cpu_description({"has well", ""}).message(), HasSubstr("CPU name 'has well'"));
  EXPECT_THAT(check_cpu_description({"haswell", "avx2"}).message(), HasSubstr("CPU feature 'avx2' must be +name"));
  EXPECT_THAT(check_cpu_description({"haswell", "+avx2,,-fma"}).message(), HasSubstr("CPU feature ''"));
  EXPECT_THAT(check_cpu_description({"haswell", "+avx2,-$(x)"}).message(), HasSubstr("'-$(x)'"));
}

}  // namespace
}  // namespace tunefarm
