#include "common/cpu_detect.h"

#include <sys/auxv.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/platform.h"

namespace tunefarm {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "key : value" lines of /proc/cpuinfo; `first_only` stops at the first processor's blank line.
template <typename Fn>
void for_each_field(std::string_view cpuinfo, bool first_only, Fn&& fn) {
  size_t pos = 0;
  bool seen_any = false;
  while (pos < cpuinfo.size()) {
    size_t end = cpuinfo.find('\n', pos);
    if (end == std::string_view::npos) end = cpuinfo.size();
    std::string_view line = cpuinfo.substr(pos, end - pos);
    pos = end + 1;
    if (trim(line).empty()) {
      if (first_only && seen_any) return;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    seen_any = true;
    fn(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
}

int64_t parse_number(std::string_view text) {
  try {
    return std::stoll(std::string(text), nullptr, 0);
  } catch (...) {
    return -1;
  }
}

struct Feature {
  const char* source;  // cpuinfo flag (x86)
  const char* llvm;
};

// The vector features that decide the kernels' code, as /proc/cpuinfo and LLVM spell them.
constexpr Feature kX86Features[] = {
    {"sse4_1", "sse4.1"},         {"sse4_2", "sse4.2"},         {"avx", "avx"},
    {"avx2", "avx2"},             {"fma", "fma"},               {"f16c", "f16c"},
    {"avx512f", "avx512f"},       {"avx512cd", "avx512cd"},     {"avx512bw", "avx512bw"},
    {"avx512dq", "avx512dq"},     {"avx512vl", "avx512vl"},     {"avx512_vnni", "avx512vnni"},
    {"avx512_bf16", "avx512bf16"}, {"avx512_fp16", "avx512fp16"},
};

std::string join_features(const std::vector<std::pair<std::string, bool>>& features) {
  std::string out;
  for (const auto& [name, on] : features) out += fmt::format("{}{}{}", out.empty() ? "" : ",", on ? '+' : '-', name);
  return out;
}

// LLVM's name for an Intel or AMD model (LLVM 16's host detection, for the models a lab has),
// empty when the table does not know it.
std::string x86_model_name(const std::string& vendor, int64_t family, int64_t model,
                           const std::set<std::string>& flags) {
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  if (vendor == "GenuineIntel" && family == 6) {
    switch (model) {
      case 0x1a: case 0x1e: case 0x1f: case 0x2e: return "nehalem";
      case 0x25: case 0x2c: case 0x2f: return "westmere";
      case 0x2a: case 0x2d: return "sandybridge";
      case 0x3a: case 0x3e: return "ivybridge";
      case 0x3c: case 0x3f: case 0x45: case 0x46: return "haswell";
      case 0x3d: case 0x47: case 0x4f: case 0x56: return "broadwell";
      case 0x4e: case 0x5e: case 0x8e: case 0x9e: case 0xa5: case 0xa6: return "skylake";
      case 0x55:
        if (has("avx512_bf16")) return "cooperlake";
        return has("avx512_vnni") ? "cascadelake" : "skylake-avx512";
      case 0x66: return "cannonlake";
      case 0x7d: case 0x7e: return "icelake-client";
      case 0x6a: case 0x6c: return "icelake-server";
      case 0x8c: case 0x8d: return "tigerlake";
      case 0x97: case 0x9a: return "alderlake";
      case 0xb7: case 0xba: case 0xbf: return "raptorlake";
      case 0x8f: case 0xcf: return "sapphirerapids";
      default: return "";
    }
  }
  if (vendor == "AuthenticAMD" && family == 0x17) {
    bool zen2 = (model >= 0x30 && model <= 0x3f) || model == 0x47 || (model >= 0x60 && model <= 0x7f) ||
                (model >= 0x84 && model <= 0x87) || (model >= 0x90 && model <= 0xaf);
    return zen2 ? "znver2" : "znver1";
  }
  if (vendor == "AuthenticAMD" && family == 0x19) {
    bool zen4 = (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) || (model >= 0xa0 && model <= 0xaf);
    return zen4 ? "znver4" : "znver3";
  }
  return "";
}

// The x86-64 microarchitecture level the flags reach, for models the table does not know.
std::string x86_level(const std::set<std::string>& flags) {
  auto all = [&](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n) > 0; });
  };
  bool v2 = all({"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"});
  bool v3 = v2 && all({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"});
  bool v4 = v3 && all({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"});
  return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
}

struct ArmPart {
  uint32_t implementer, part;
  const char* llvm;
};

constexpr ArmPart kArmParts[] = {
    {0x41, 0xd03, "cortex-a53"},  {0x41, 0xd04, "cortex-a35"},   {0x41, 0xd05, "cortex-a55"},
    {0x41, 0xd07, "cortex-a57"},  {0x41, 0xd08, "cortex-a72"},   {0x41, 0xd09, "cortex-a73"},
    {0x41, 0xd0a, "cortex-a75"},  {0x41, 0xd0b, "cortex-a76"},   {0x41, 0xd0c, "neoverse-n1"},
    {0x41, 0xd0d, "cortex-a77"},  {0x41, 0xd0e, "cortex-a76ae"}, {0x41, 0xd40, "neoverse-v1"},
    {0x41, 0xd41, "cortex-a78"},  {0x41, 0xd44, "cortex-x1"},    {0x41, 0xd46, "cortex-a510"},
    {0x41, 0xd47, "cortex-a710"}, {0x41, 0xd48, "cortex-x2"},    {0x41, 0xd49, "neoverse-n2"},
    {0x41, 0xd4a, "neoverse-e1"}, {0x41, 0xd4b, "cortex-a78c"},  {0x41, 0xd4f, "neoverse-v2"},
    {0x43, 0x0af, "thunderx2t99"}, {0x46, 0x001, "a64fx"},       {0x48, 0xd01, "tsv110"},
    {0x51, 0xc00, "falkor"},      {0xc0, 0xac3, "ampere1"},
};

// Linux's arm64 AT_HWCAP / AT_HWCAP2 bits (asm/hwcap.h), spelled out so that this file also
// builds and is tested on x86-64.
struct HwcapFeature {
  int word;  // 1: AT_HWCAP, 2: AT_HWCAP2
  int bit;
  const char* llvm;
};

constexpr HwcapFeature kArmFeatures[] = {
    {1, 0, "fp-armv8"}, {1, 1, "neon"},     {1, 3, "aes"},  {1, 6, "sha2"}, {1, 7, "crc"},
    {1, 8, "lse"},      {1, 9, "fullfp16"}, {1, 12, "rdm"}, {1, 20, "dotprod"}, {1, 22, "sve"},
    {2, 1, "sve2"},     {2, 13, "i8mm"},    {2, 14, "bf16"},
};

constexpr uint64_t kHwcapCpuid = 1ull << 11;  // HWCAP_CPUID: the kernel emulates reads of MIDR_EL1.

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

}  // namespace

CpuDescription x86_cpu_from_cpuinfo(std::string_view cpuinfo) {
  std::string vendor;
  int64_t family = -1, model = -1;
  std::set<std::string> flags;
  for_each_field(cpuinfo, true, [&](std::string_view key, std::string_view value) {
    if (key == "vendor_id") vendor = value;
    else if (key == "cpu family") family = parse_number(value);
    else if (key == "model") model = parse_number(value);
    else if (key == "flags") {
      std::istringstream words{std::string(value)};
      for (std::string w; words >> w;) flags.insert(w);
    }
  });
  CpuDescription cpu;
  cpu.name = x86_model_name(vendor, family, model, flags);
  if (cpu.name.empty()) cpu.name = x86_level(flags);
  std::vector<std::pair<std::string, bool>> features;
  for (const Feature& f : kX86Features) features.emplace_back(f.llvm, flags.count(f.source) > 0);
  cpu.features = join_features(features);
  return cpu;
}

CpuDescription aarch64_cpu(uint64_t midr, uint64_t hwcap, uint64_t hwcap2) {
  CpuDescription cpu{"generic", ""};
  auto implementer = static_cast<uint32_t>((midr >> 24) & 0xff);
  auto part = static_cast<uint32_t>((midr >> 4) & 0xfff);
  for (const ArmPart& p : kArmParts)
    if (p.implementer == implementer && p.part == part) cpu.name = p.llvm;
  std::vector<std::pair<std::string, bool>> features;
  for (const HwcapFeature& f : kArmFeatures)
    features.emplace_back(f.llvm, ((f.word == 1 ? hwcap : hwcap2) >> f.bit) & 1);
  cpu.features = join_features(features);
  return cpu;
}

uint64_t aarch64_midr_from_cpuinfo(std::string_view cpuinfo) {
  int64_t implementer = -1, part = -1;
  uint64_t last = 0;
  for_each_field(cpuinfo, false, [&](std::string_view key, std::string_view value) {
    if (key == "CPU implementer") implementer = parse_number(value);
    else if (key == "CPU part") part = parse_number(value);
    if (implementer >= 0 && part >= 0) {
      last = (static_cast<uint64_t>(implementer) << 24) | (static_cast<uint64_t>(part) << 4);
      implementer = part = -1;
    }
  });
  return last;
}

CpuDescription host_cpu() {
  std::string arch = host_arch();
  std::string cpuinfo = read_file("/proc/cpuinfo");
  if (arch == "x86_64") return x86_cpu_from_cpuinfo(cpuinfo);
  if (arch != "aarch64") return {"generic", ""};
  uint64_t hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  uint64_t midr = aarch64_midr_from_cpuinfo(cpuinfo);
#if defined(__aarch64__)
  // Under a user-mode emulator /proc/cpuinfo is the host's; the register says what is emulated.
  if (midr == 0 && (hwcap & kHwcapCpuid)) __asm__("mrs %0, midr_el1" : "=r"(midr));
#else
  (void)kHwcapCpuid;
#endif
  return aarch64_cpu(midr, hwcap, hwcap2);
}

Status check_cpu_description(const CpuDescription& cpu) {
  if (!valid_name(cpu.name))
    return invalid_argument(fmt::format("CPU name '{}' must be a name of letters, digits, '-', '_' and '.' as LLVM "
                                        "spells it (e.g. haswell, znver4, cortex-a72)",
                                        cpu.name));
  if (cpu.features.empty()) return Status();
  // It becomes part of a target string (at most kMaxTargetLength) when tunerd compiles for it.
  if (cpu.features.size() > kMaxCpuFeaturesLength)
    return invalid_argument(fmt::format("CPU features of {} characters; at most {} (name the vector features only)",
                                        cpu.features.size(), kMaxCpuFeaturesLength));
  std::string_view rest = cpu.features;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.size() < 2 || (item[0] != '+' && item[0] != '-') || !valid_name(item.substr(1)))
      return invalid_argument(fmt::format("CPU feature '{}' must be +name or -name as LLVM spells it (e.g. "
                                          "+avx2,-avx512f)",
                                          item));
    if (comma == std::string_view::npos) return Status();
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace tunefarm
