// The disassembly of an object or shared object (binutils' objdump), for tests that check which
// instructions a kernel was built with (no AVX-512 for an AVX2-only board, say).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace tunefarm::testing {

inline std::string disassemble(const std::string& object) {
  static std::atomic<int> serial{0};
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tunefarm-disassemble-" + std::to_string(getpid()) + "-" + std::to_string(serial++) + ".o"))
                         .string();
  std::ofstream(path, std::ios::binary) << object;
  std::string out;
  FILE* p = popen(("objdump -d --no-show-raw-insn '" + path + "'").c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  std::remove(path.c_str());
  return out;
}

}  // namespace tunefarm::testing
