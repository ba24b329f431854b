// A candidate's object linked into the shared object an agent loads, with LLD inside this process.
// The tuner links every candidate it measures; a linker run as a child process cost ~3 ms of a
// ~10-25 ms build (starting `ld` and its libraries), LLD here ~0.5 ms. LLD handles every ELF
// target LLVM generates for (the object says which), so cross targets need no cross `ld` either.
#include <fstream>
#include <mutex>
#include <sstream>

#include <lld/Common/CommonLinkerContext.h>
#include <lld/Common/Driver.h>
#include <llvm/Support/raw_ostream.h>

#include "common/temp_dir.h"
#include "compiler/codegen/codegen.h"

namespace tunefarm::codegen {

StatusOr<std::string> link_shared_object(const std::string& object, const Target& target) {
  if (target.kind != Target::Kind::kLLVM) return invalid_argument("link_shared_object needs an llvm target, got " + target.to_string());
  ScopedTempDir dir("", "tunefarm-link");
  TF_RETURN_IF_ERROR(dir.status());
  std::string obj = dir.path() + "/kernel.o", so = dir.path() + "/kernel.so";
  {
    std::ofstream out(obj, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) return internal_error("cannot write " + obj);
  }
  std::string messages;
  bool linked;
  {
    // LLD keeps its state in globals: one link at a time in a process. Its own threads are not
    // worth starting for one small object.
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    llvm::raw_string_ostream out(messages), err(messages);
    const char* args[] = {"ld.lld", "-shared", "--hash-style=gnu", "--threads=1", "-o", so.c_str(), obj.c_str()};
    // exitEarly=false: errors are returned, not exit()ed on.
    linked = lld::elf::link(args, out, err, /*exitEarly=*/false, /*disableOutput=*/false);
    lld::CommonLinkerContext::destroy();
  }
  while (!messages.empty() && messages.back() == '\n') messages.pop_back();
  if (!linked) return internal_error("linking the kernel failed: " + messages);
  std::ifstream in(so, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) return internal_error("cannot read the linked shared object");
  return bytes.str();
}

}  // namespace tunefarm::codegen
