#include "measure/cpu_runner.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "measure/timer.h"

namespace tunefarm {
namespace {

using EntryFn = int32_t (*)(void* const*);

// Timed runs rotate over copies of the arguments that together span at least this many bytes
// (and at most kMaxRotations sets): in a model a step's weights and inputs were last touched
// before other steps ran, so they come from the last-level cache, rarely from L2; timing the same
// warm buffers back to back ranked small kernels by an L2-resident speed that no model sees, and
// a model's estimate from its records came out faster than the built model. A model's job says
// how many bytes one run of its model touches (MeasureOptions.rotation_bytes): a model that fits
// in L2 finds its data there, where rotated through 8 MiB its kernels timed 5-30% slower than
// unrotated (bench/RESULTS.md). Past twice the last-level cache every byte comes from
// memory anyway, and copies would only take the worker's memory.
// Within a model only its constants (weights, biases) come from afar: a step's input was written
// by the step just before, and its output goes where the arena put an earlier step's. With the
// activations rotated too, a MobileNetV3-Small's depthwise and 1x1 steps timed as if they read
// from the last-level cache, and its estimate came out 1.38x the built model.
// A model's figure counts its constants once and its activations as the arena they share
// (model/tasks.h run_bytes): counted as every task's arguments at each occurrence, it was 25.8 MB
// for a MobileNetV3-Small that touches 11.9, and on a guest whose last-level cache kept about
// 16 MB its 4 MB classifier weights timed as if read from memory (59 us; 42 in the model).
int64_t rotation_span(int64_t requested) {
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  int64_t fallback = std::max<int64_t>(int64_t{8} << 20, 4 * static_cast<int64_t>(l2 > 0 ? l2 : 1 << 20));
  if (requested <= 0) return fallback;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::min(requested, std::max(fallback, 2 * static_cast<int64_t>(llc > 0 ? llc : 0)));
}
constexpr int kMaxRotations = 64;

using Buffer = std::unique_ptr<std::byte, void (*)(void*)>;

}  // namespace

CodeSegment code_segment_of(const void* address) {
  struct Search {
    uintptr_t at;
    CodeSegment segment;
  } search{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* object, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          const ElfW(Phdr)& h = object->dlpi_phdr[i];
          uintptr_t begin = object->dlpi_addr + h.p_vaddr;
          if (h.p_type == PT_LOAD && (h.p_flags & PF_X) && s->at >= begin && s->at < begin + h.p_memsz) {
            s->segment = {begin, begin + h.p_memsz};
            return 1;
          }
        }
        return 0;
      },
      &search);
  return search.segment;
}

namespace {

// Leaves a candidate's code in L2 and nowhere nearer: in a model the other steps' code runs between
// two calls of a step, so its code is no longer in the core's instruction caches. Timed back to
// back, a 5x5 depthwise convolution whose window was unrolled into 27 KB of code ran 8.0 us against
// its default's 10.9 (5.6 KB of code), and took 15.3 us against 10.5 in MobileNetV3-Small; timed
// this way, 15.9 against 10.5-12.0 (flushed to memory alone: 18.1 against 12.0).
void evict_code(const CodeSegment& code) {
#if defined(__x86_64__)
  uintptr_t first = code.begin & ~uintptr_t{63};
  for (uintptr_t line = first; line < code.end; line += 64) _mm_clflush(reinterpret_cast<const void*>(line));
  _mm_mfence();
  for (uintptr_t line = first; line < code.end; line += 64) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  _mm_mfence();
#else
  (void)code;
#endif
}

class CpuKernel : public BoundKernel {
 public:
  // `args` point at the tensors: run_once writes the outputs the measurer reads there. Timing
  // rotates over `args` and the sets of `copies`.
  // `cold_code`: every timed call starts with the candidate's code evicted (a model's job).
  CpuKernel(void* handle, EntryFn entry, std::vector<void*> args, std::vector<Buffer> copies, size_t sets,
            bool cold_code)
      : handle_(handle), entry_(entry), copies_(std::move(copies)) {
#if defined(__x86_64__)
    if (cold_code) code_ = code_segment_of(reinterpret_cast<const void*>(entry));
#else
    (void)cold_code;
#endif
    size_t per_set = args.size();
    sets_.push_back(std::move(args));
    for (size_t s = 1; s < sets; ++s) {
      std::vector<void*> set;
      // An argument without copies (one that does not rotate) is the same tensor in every set.
      for (size_t a = 0; a < per_set; ++a) {
        void* copy = copies_[(s - 1) * per_set + a].get();
        set.push_back(copy ? copy : sets_[0][a]);
      }
      sets_.push_back(std::move(set));
    }
  }
  ~CpuKernel() override { dlclose(handle_); }

  Status run_once() override {
    errno = 0;
    int32_t rc = entry_(sets_[0].data());
    int error = errno;
    if (rc == 0) return Status();
    std::string message = fmt::format("the kernel returned {}", rc);
    // The last failed system call is usually why; a denied one is the sandbox's doing.
    if (error != 0) message += fmt::format(" after a system call failed: {}", std::strerror(error));
    if (error == EACCES || error == EPERM)
      message += " (the sandbox denies network access and writes outside the scratch directory)";
    return internal_error(message);
  }

  Status copy_outputs(std::vector<HostTensor>&) override { return Status(); }

  StatusOr<double> time_runs(int number) override {
    if (code_.end > code_.begin) {
      // Each call timed on its own, its code evicted before it.
      std::chrono::steady_clock::duration total{};
      for (int i = 0; i < number; ++i) {
        void* const* args = sets_[next_++ % sets_.size()].data();
        evict_code(code_);
        auto start = std::chrono::steady_clock::now();
        int32_t rc = entry_(args);
        total += std::chrono::steady_clock::now() - start;
        if (rc != 0) return internal_error(fmt::format("the kernel returned {} during timing", rc));
      }
      return std::chrono::duration<double>(total).count();
    }
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < number; ++i) {
      int32_t rc = entry_(sets_[next_++ % sets_.size()].data());
      if (rc != 0) return internal_error(fmt::format("the kernel returned {} during timing", rc));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void flush_cache() override { flush_cpu_cache(); }

 private:
  void* handle_;
  EntryFn entry_;
  std::vector<Buffer> copies_;
  std::vector<std::vector<void*>> sets_;
  size_t next_ = 0;
  CodeSegment code_;
};

}  // namespace

namespace {

const char* machine_name(uint16_t machine) {
  switch (machine) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_RISCV: return "riscv";
    default: return "another architecture";
  }
}

// dlopen reports an object for another architecture as "cannot open shared object file", which
// sends people looking for a missing file: say what the artifact was built for instead.
Status check_machine(const std::string& path) {
  Elf64_Ehdr header{};
  std::ifstream in(path, std::ios::binary);
  // Whatever is not a whole ELF header is left to dlopen, whose message is right for it.
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return Status();
#if defined(__x86_64__)
  constexpr uint16_t kHost = EM_X86_64;
#elif defined(__aarch64__)
  constexpr uint16_t kHost = EM_AARCH64;
#endif
  if (header.e_machine != kHost)
    return invalid_argument(fmt::format("the artifact is built for {}, but this agent runs {}: the job's target does "
                                        "not match this device key's boards",
                                        machine_name(header.e_machine), machine_name(kHost)));
  return Status();
}

}  // namespace

StatusOr<std::unique_ptr<BoundKernel>> bind_cpu_kernel(const std::string& path, const v1::Artifact& artifact,
                                                       std::vector<HostTensor>& tensors, int64_t rotation_bytes) {
  if (artifact.entry_symbol().empty()) return invalid_argument("the artifact names no entry symbol");
  TF_RETURN_IF_ERROR(check_machine(path));
  // RTLD_LOCAL keeps one candidate's symbols from satisfying the next one's references.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return invalid_argument(fmt::format("cannot load the shared object: {}", why ? why : "unknown reason"));
  }
  dlerror();
  void* symbol = dlsym(handle, artifact.entry_symbol().c_str());
  if (!symbol) {
    dlclose(handle);
    return not_found(fmt::format("the shared object has no symbol '{}'", artifact.entry_symbol()));
  }
  std::vector<void*> args;
  int64_t bytes = 0;
  for (auto& t : tensors) {
    args.push_back(t.data.get());
    bytes += t.bytes;
  }
  // A model's job rotates its constants alone; a kernel timed on its own rotates everything.
  bool constants_only = rotation_bytes > 0 && std::any_of(tensors.begin(), tensors.end(), [](const HostTensor& t) {
    return t.arg.constant();
  });
  auto rotated = [&](const HostTensor& t) { return !constants_only || t.arg.constant(); };
  int64_t rotated_bytes = 0;
  for (const auto& t : tensors)
    if (rotated(t)) rotated_bytes += t.bytes;
  // Copies of the inputs' values (and the outputs'): every set computes on the same numbers.
  // The sets span what a model run touches less what stays in place, at least the rotated bytes.
  int64_t span = rotation_span(rotation_bytes);
  if (constants_only) span = std::max<int64_t>(span - (bytes - rotated_bytes), rotated_bytes);
  int64_t sets = std::clamp<int64_t>((span + rotated_bytes - 1) / std::max<int64_t>(rotated_bytes, 1), 1, kMaxRotations);
  std::vector<Buffer> copies;
  for (int64_t s = 1; s < sets; ++s)
    for (const auto& t : tensors) {
      if (!rotated(t)) {
        copies.push_back(Buffer(nullptr, &std::free));
        continue;
      }
      Buffer copy(static_cast<std::byte*>(std::aligned_alloc(64, static_cast<size_t>((t.bytes + 63) / 64 * 64))), &std::free);
      if (!copy) {
        dlclose(handle);
        return resource_exhausted("cannot allocate the rotated copies of the kernel's arguments");
      }
      std::memcpy(copy.get(), t.data.get(), static_cast<size_t>(t.bytes));
      copies.push_back(std::move(copy));
    }
  return std::unique_ptr<BoundKernel>(new CpuKernel(handle, reinterpret_cast<EntryFn>(symbol), std::move(args),
                                                    std::move(copies), static_cast<size_t>(sets), constants_only));
}

}  // namespace tunefarm
