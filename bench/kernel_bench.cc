// kernel_bench: our kernels (the template's heuristic config, or the config a --config-file
// gives) against OpenBLAS and oneDNN on the same workloads, single thread, timed interleaved
// (ours, OpenBLAS, oneDNN, ours, ...) in one run; prints medians, GFLOP/s and ratios.
// Last line: {"workloads":[{"workload":…,"ours_gflops":…,"openblas_gflops":…,"onednn_gflops":…}]}
// (null where a library has no counterpart).
//
// Baselines: GEMMs are cblas_sgemm / dnnl_sgemm (dense: B transposed; the bias/ReLU epilogue is
// ours only). Convolutions: OpenBLAS runs im2col + sgemm (im2col timed); oneDNN runs its
// convolution primitive with the layouts it prefers ("any"), reorders done before timing.
// Depthwise has no OpenBLAS counterpart. A Winograd workload (conv2d_nchwc with winograd=m) races
// the libraries' direct convolution of one OIHW weight, which ours gets transformed; the direct
// template's default races beside it ("direct"), and our output is checked against the direct
// convolution's.
//
// Debian's OpenBLAS misdetects this CPU, so the program sets OPENBLAS_CORETYPE=SkylakeX (and one
// thread everywhere) and re-executes itself before the libraries load.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>
#include <cblas.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "common/operators/operator.h"
#include "common/operators/winograd.h"
#include "common/stats.h"
#include "common/wire/wire.h"
#include "common/workload.h"
#include "compiler/build.h"
#include "compiler/runtime/kernel_runtime.h"
#include "measure/tolerance.h"

using namespace tunefarm;

namespace {

using Fn = std::function<void()>;

// Tensors start on 64-byte boundaries, as the device agent allocates them and as frameworks do:
// with malloc's 16-byte alignment, kernels that read unpacked rows with 512-bit loads pay for
// split cache lines that the agent never sees, and the comparison with the measured tuning
// results would be off.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const { return true; }
};
using Buffer = std::vector<float, Aligned64<float>>;

Buffer random_vector(int64_t n, unsigned seed) {
  Buffer v(n);
  uint64_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>((x >> 40) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

// The value of --threads, read before the command line is parsed: the thread counts of OpenBLAS
// and OpenMP (oneDNN) are fixed when they initialise.
int threads_argument(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--threads") return std::max(1, std::atoi(argv[i + 1]));
  return 1;
}

// Environment that must be in place before OpenBLAS, OpenMP and oneDNN initialise.
void ensure_environment(int argc, char** argv) {
  if (std::getenv("TUNEFARM_KERNEL_BENCH_CHILD")) return;
  std::string threads = std::to_string(threads_argument(argc, argv));
  setenv("TUNEFARM_KERNEL_BENCH_CHILD", "1", 1);
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
  // OpenBLAS's idle threads spin for 2^28 cycles by default: with more threads than one, they held
  // a core through the next contender's runs (oneDNN ran slower on two threads than on one).
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  setenv("OMP_NUM_THREADS", threads.c_str(), 1);
  if (threads == "1") {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  } else {
    // Passive OpenMP threads sleep between parallel regions, and oneDNN's small layers (depthwise
    // at 7x7: 10 us of work) then cost more on two threads than on one; active ones never stop
    // spinning and take a core from whichever contender runs next. A bounded spin (under a
    // millisecond; the samples are apart by more, see kContenderGap) is what a program running
    // layer after layer sees.
    setenv("GOMP_SPINCOUNT", "20000", 0);
  }
  setenv("TUNEFARM_NUM_THREADS", threads.c_str(), 1);
  execv("/proc/self/exe", argv);
  // Without re-exec the numbers may be off; say so and go on.
  fmt::print(stderr, "kernel_bench: cannot re-execute; OpenBLAS may use a generic kernel\n");
}

struct Loaded {
  void* handle = nullptr;
  codegen::KernelFn fn = nullptr;
  ~Loaded() {
    if (handle) dlclose(handle);
  }
};

Status load_shared_object(const std::string& bytes, Loaded& out) {
  std::string path = fmt::format("/tmp/kernel_bench_{}_{}.so", getpid(), reinterpret_cast<uintptr_t>(&out));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::remove(path.c_str());
  if (!out.handle) return internal_error(std::string("dlopen: ") + dlerror());
  out.fn = reinterpret_cast<codegen::KernelFn>(dlsym(out.handle, kKernelEntry));
  if (!out.fn) return internal_error("entry symbol missing");
  return Status();
}

// ---- baselines ----

struct Baselines {
  Fn openblas, onednn;
  // oneDNN objects must outlive the timing.
  std::shared_ptr<void> keep;
};

Baselines gemm_baselines(const Workload& w, std::vector<Buffer>& in, Buffer& out) {
  operators::GemmShape g = operators::gemm_shape(w);
  bool dense = g.transpose_b;
  int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  float *a = in[0].data(), *b = in[1].data(), *c = out.data();
  Baselines bl;
  bl.openblas = [=] {
    for (int64_t i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, dense ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a + i * M * K, K,
                  b + i * K * N, dense ? K : N, 0.0f, c + i * M * N, N);
  };
  bl.onednn = [=] {
    for (int64_t i = 0; i < batch; ++i)
      dnnl_sgemm('N', dense ? 'T' : 'N', M, N, K, 1.0f, a + i * M * K, K, b + i * K * N, dense ? K : N, 0.0f,
                 c + i * M * N, N);
  };
  return bl;
}

struct DnnlConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward prim;
  dnnl::memory src, wei, dst;
};

Baselines conv_baselines(const Workload& w, std::vector<Buffer>& in, Buffer& out) {
  operators::ConvShape s = operators::conv_shape(w);
  Baselines bl;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto conv = std::make_shared<DnnlConv>();
  dnnl::memory::dims src_dims = {s.N, s.C, s.H, s.W}, dst_dims = {s.N, s.K, s.P, s.Q};
  dnnl::memory::dims wei_dims = s.depthwise ? dnnl::memory::dims{s.C, 1, 1, s.R, s.S} : dnnl::memory::dims{s.K, s.C, s.R, s.S};
  auto any = [&](const dnnl::memory::dims& d) { return dnnl::memory::desc(d, dt::f32, tag::any); };
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                       any(src_dims), any(wei_dims), any(dst_dims), {s.stride, s.stride},
                                       {s.dil - 1, s.dil - 1}, {s.pad, s.pad}, {s.pad, s.pad});
  dnnl::convolution_forward::primitive_desc pd(desc, conv->eng);
  conv->prim = dnnl::convolution_forward(pd);
  conv->src = dnnl::memory(pd.src_desc(), conv->eng);
  conv->wei = dnnl::memory(pd.weights_desc(), conv->eng);
  conv->dst = dnnl::memory(pd.dst_desc(), conv->eng);
  // Fill oneDNN's layouts from ours (outside the timing).
  dnnl::memory user_src({src_dims, dt::f32, s.nhwc ? tag::nhwc : tag::nchw}, conv->eng, in[0].data());
  dnnl::memory user_wei({wei_dims, dt::f32, s.depthwise ? tag::goihw : s.nhwc ? tag::hwio : tag::oihw}, conv->eng, in[1].data());
  dnnl::reorder(user_src, conv->src).execute(conv->strm, user_src, conv->src);
  dnnl::reorder(user_wei, conv->wei).execute(conv->strm, user_wei, conv->wei);
  conv->strm.wait();
  bl.keep = conv;
  DnnlConv* c = conv.get();
  bl.onednn = [c] {
    c->prim.execute(c->strm, {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei}, {DNNL_ARG_DST, c->dst}});
    c->strm.wait();
  };
  if (s.depthwise) return bl;
  // im2col + sgemm, the classic library formulation.
  int64_t rows = s.C * s.R * s.S, cols = s.P * s.Q;
  auto col = std::make_shared<std::vector<float>>(rows * cols);
  float *x = in[0].data(), *wt = in[1].data(), *y = out.data();
  bl.openblas = [=] {
    float* cm = col->data();
    for (int64_t n = 0; n < s.N; ++n) {
      const float* xn = x + n * s.C * s.H * s.W;
      if (!s.nhwc) {
        for (int64_t c = 0; c < s.C; ++c)
          for (int64_t r = 0; r < s.R; ++r)
            for (int64_t q = 0; q < s.S; ++q) {
              float* row = cm + ((c * s.R + r) * s.S + q) * cols;
              for (int64_t p = 0; p < s.P; ++p) {
                int64_t h = p * s.stride + r * s.dil - s.pad;
                for (int64_t o = 0; o < s.Q; ++o) {
                  int64_t ww = o * s.stride + q * s.dil - s.pad;
                  row[p * s.Q + o] = (h >= 0 && h < s.H && ww >= 0 && ww < s.W) ? xn[(c * s.H + h) * s.W + ww] : 0.0f;
                }
              }
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.K, cols, rows, 1.0f, wt, rows, cm, cols, 0.0f,
                    y + n * s.K * cols, cols);
      } else {
        for (int64_t p = 0; p < s.P; ++p)
          for (int64_t o = 0; o < s.Q; ++o) {
            float* row = cm + (p * s.Q + o) * rows;
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t q = 0; q < s.S; ++q) {
                int64_t h = p * s.stride + r * s.dil - s.pad, ww = o * s.stride + q * s.dil - s.pad;
                bool inside = h >= 0 && h < s.H && ww >= 0 && ww < s.W;
                for (int64_t c = 0; c < s.C; ++c) row[(r * s.S + q) * s.C + c] = inside ? xn[(h * s.W + ww) * s.C + c] : 0.0f;
              }
          }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cols, s.K, rows, 1.0f, cm, rows, wt, s.K, 0.0f,
                    y + n * cols * s.K, s.K);
      }
    }
  };
  return bl;
}

// What a sample is timed by: wall time (default), or with --clock thread, the calling thread's CPU
// time, which leaves out the time other processes held the core (on one thread every library
// runs on the calling thread). On a machine loaded by other work, wall-time samples of one
// contender swing by 2-3x with whoever else runs; the thread's CPU time still includes what
// they did to the caches.
bool g_thread_clock = false;

double now_ms() {
  if (!g_thread_clock)
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Repetitions per sample so that one sample takes about `min_ms`.
int calibrate(const Fn& fn, double min_ms) {
  fn();
  double t0 = now_ms();
  fn();
  double ms = now_ms() - t0;
  return std::max(1, static_cast<int>(min_ms / std::max(ms, 1e-3)));
}

// With more threads than one, each library's idle threads spin a while before they sleep: the
// samples are this far apart, so that no contender's spinning threads hold a core through the
// next one's sample.
constexpr std::chrono::milliseconds kContenderGap{10};

// One untimed run first: it wakes the contender's threads, which slept through the gap.
double sample_ms(const Fn& fn, int reps) {
  fn();
  double t0 = now_ms();
  for (int i = 0; i < reps; ++i) fn();
  return (now_ms() - t0) / reps;
}

StatusOr<std::map<std::string, Config>> read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open config file " + path);
  std::map<std::string, Config> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    auto where = fmt::format("{}:{}", path, lineno);
    // Ordered, so that the knobs keep their declaration order when the config is read back.
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
    // A record (`tune-client best --json`, `export`): its workload is a message, not a string.
    if (j.is_object() && j.contains("workload") && j["workload"].is_object()) {
      auto record = record_from_json_line(line);
      if (!record.ok()) return record.status().with_context(where);
      auto w = from_proto(record->workload());
      if (!w.ok()) return w.status().with_context(where);
      out[w->to_string()] = from_proto(record->config());
      continue;
    }
    if (j.is_discarded() || !j.is_object() || !j.contains("workload") || !j["workload"].is_string())
      return invalid_argument(where + ": expected a record line of `tune-client best --json`, or a JSON object with "
                                      "\"workload\" and \"config\"");
    auto w = parse_workload(j["workload"].get<std::string>());
    if (!w.ok()) return w.status().with_context(where);
    // Either {"workload":…, "config":{"template":…,"knobs":…}} or the config's fields inline.
    const nlohmann::ordered_json& cj = j.contains("config") ? j["config"] : j;
    auto c = parse_config_json(cj.dump());
    if (!c.ok()) return c.status().with_context(where);
    out[w->to_string()] = *c;
  }
  return out;
}

// A kernel library from `tune-client build` (--library): its functions by workload, and the config
// each was built from, so that the library's kernel races the same config built as the agents build
// it.
struct Library {
  void* handle = nullptr;
  std::map<std::string, void*> functions;
  std::map<std::string, Config> configs;
};

StatusOr<Library> load_library(const std::string& dir) {
  std::ifstream in(dir + "/manifest.json");
  if (!in) return not_found(fmt::format("no manifest.json in {}", dir));
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.contains("name") || !m["name"].is_string() || !m.contains("kernels") ||
      !m["kernels"].is_array()) return invalid_argument(dir + "/manifest.json does not parse");
  std::string name = m["name"].get<std::string>();
  Library lib;
  lib.handle = dlopen(fmt::format("{}/lib{}.so", dir, name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) return internal_error(std::string("dlopen: ") + dlerror());
  auto set_threads = reinterpret_cast<int (*)(int)>(dlsym(lib.handle, (name + "_set_num_threads").c_str()));
  if (!set_threads || set_threads(1) != 0) return internal_error(name + "_set_num_threads is missing or failed");
  for (const auto& k : m["kernels"]) {
    auto bad = [&] { return invalid_argument(fmt::format("{}/manifest.json: bad kernel entry {}", dir, k.dump())); };
    if (!k.is_object() || !k.contains("workload") || !k["workload"].is_string() || !k.contains("config")) return bad();
    auto w = parse_workload(k["workload"].get<std::string>());
    auto c = parse_config_json(k["config"].dump());
    if (!w.ok() || !c.ok()) return bad();
    lib.configs[w->to_string()] = *c;
    // A built model's kernels are steps of its run function, not functions of their own: its
    // configs race, built here, without the library's code.
    if (!k.contains("function")) continue;
    if (!k["function"].is_string()) return bad();
    void* fn = dlsym(lib.handle, k["function"].get<std::string>().c_str());
    if (!fn) return internal_error(fmt::format("{} is not in lib{}.so", k["function"].dump(), name));
    lib.functions[w->to_string()] = fn;
  }
  return lib;
}

// A Winograd workload (conv2d_nchwc with winograd=m) takes its weight transformed, U, as a model
// build gives it: the race is on one OIHW weight g, which the libraries and the direct reference
// convolve with and which ours gets as winograd_weight(g). `direct` is the same convolution with
// winograd=0 (its template races beside ours), `packed` g in its layout, OIHW[ic]i[oc]o.
struct WinogradRace {
  Workload direct;
  Buffer oihw, packed;
};

WinogradRace winograd_race(const Workload& w, Buffer& weight) {
  operators::ConvShape c = operators::conv_shape(w);
  WinogradRace race;
  race.direct = w;
  for (auto& [name, value] : race.direct.params)
    if (name == "winograd") value = 0;
  race.oihw = random_vector(c.K * c.C * 9, 12);
  operators::winograd_weight(c, race.oihw.data(), weight.data());
  race.packed.resize(race.oihw.size());
  for (int64_t k = 0; k < c.K; ++k)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t rs = 0; rs < 9; ++rs)
        race.packed[static_cast<size_t>((((k / c.oc * c.cb() + ch / c.ic) * 9 + rs) * c.ic + ch % c.ic) * c.oc + k % c.oc)] =
            race.oihw[static_cast<size_t>((k * c.C + ch) * 9 + rs)];
  return race;
}

// Calls a library function, whose parameters are the tensors in argument order.
int call_library_function(void* fn, const std::vector<void*>& t) {
  using F3 = int (*)(void*, void*, void*);
  using F4 = int (*)(void*, void*, void*, void*);
  if (t.size() == 3) return reinterpret_cast<F3>(fn)(t[0], t[1], t[2]);
  if (t.size() == 4) return reinterpret_cast<F4>(fn)(t[0], t[1], t[2], t[3]);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_environment(argc, argv);
  CLI::App app("kernel_bench: our kernels vs OpenBLAS and oneDNN, single thread, interleaved");
  std::string workloads_file, config_file, library_dir;
  int repeats = 7;
  double min_ms = 40;
  int threads = 1;
  app.add_option("--workloads", workloads_file, "workload file (one workload string a line)")->required();
  app.add_option("--threads", threads,
                 "threads for every contender; with more than one, our configs split their outer loop (parallel=outer)")
      ->check(CLI::Range(1, 256));
  app.add_option("--config-file", config_file, "JSON lines: {\"workload\":…, \"config\":{…}}; default: heuristic configs");
  app.add_option("--library", library_dir,
                 "directory of `tune-client build`: its kernels race the configs they were built from (a built "
                 "model's configs race without its code)");
  app.add_option("--repeats", repeats, "interleaved rounds")->check(CLI::Range(1, 1000));
  app.add_option("--min-ms", min_ms, "length of one timed sample");
  std::string clock = "wall";
  app.add_option("--clock", clock,
                 "what samples are timed by: wall, or thread (the calling thread's CPU time; one thread only)")
      ->check(CLI::IsMember({"wall", "thread"}));
  CLI11_PARSE(app, argc, argv);
  if (clock == "thread" && threads != 1) {
    fmt::print(stderr, "kernel_bench: --clock thread times the calling thread only; use it with --threads 1\n");
    return 1;
  }
  g_thread_clock = clock == "thread";

  auto workloads = read_workload_file(workloads_file);
  if (!workloads.ok()) {
    fmt::print(stderr, "kernel_bench: {}\n", workloads.status().to_string());
    return 1;
  }
  std::map<std::string, Config> configs;
  if (!config_file.empty()) {
    auto c = read_config_file(config_file);
    if (!c.ok()) {
      fmt::print(stderr, "kernel_bench: {}\n", c.status().to_string());
      return 1;
    }
    configs = std::move(*c);
  }
  Library library;
  if (!library_dir.empty()) {
    auto l = load_library(library_dir);
    if (!l.ok()) {
      fmt::print(stderr, "kernel_bench: {}\n", l.status().to_string());
      return 1;
    }
    library = std::move(*l);
    if (config_file.empty()) configs = library.configs;
  }
  tunefarm_runtime_set_num_threads(threads);
  openblas_set_num_threads(threads);
  char host_name[256] = {};
  gethostname(host_name, sizeof(host_name) - 1);
  double load[1] = {0};
  getloadavg(load, 1);
  fmt::print("kernel_bench on {} ({} CPUs online, load average {:.2f}), {} thread(s), {} interleaved rounds of ~{} ms "
             "{} samples; OPENBLAS_CORETYPE={}\n", host_name, sysconf(_SC_NPROCESSORS_ONLN), load[0], threads, repeats, min_ms,
             clock,
             std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  Target host;
  int exit_code = 0;
  for (const Workload& w : *workloads) {
    std::string ws = w.to_string();
    auto cfg_it = configs.find(ws);
    // With --config-file, a workload the file lacks is measured with the heuristic default: say so,
    // or its figure would read as a tuned one.
    if (!config_file.empty() && cfg_it == configs.end())
      fmt::print(stderr, "kernel_bench: {} has no config in {}; measuring the template's default\n", ws, config_file);
    StatusOr<Config> config = cfg_it != configs.end() ? StatusOr<Config>(cfg_it->second) : default_config(w, host);
    if (config.ok() && threads > 1) config = with_outer_parallelism(*config);
    auto flops = workload_flops(w);
    auto args = kernel_args(w);
    StatusOr<BuiltKernel> kernel = config.ok() ? build_kernel(w, host, *config) : StatusOr<BuiltKernel>(config.status());
    Loaded loaded;
    Status st = kernel.ok() ? load_shared_object(kernel->binary, loaded) : kernel.status();
    if (!st.ok() || !flops.ok() || !args.ok()) {
      fmt::print("{}: FAILED: {}\n", ws, st.ok() ? "bad workload" : st.to_string());
      exit_code = 1;
      continue;
    }
    std::vector<Buffer> in;
    for (size_t i = 0; i + 1 < args->size(); ++i) in.push_back(random_vector((*args)[i].num_elements(), 11 + i));
    bool winograd = operators::is_conv(w) && operators::conv_shape(w).winograd > 0;
    WinogradRace race;
    if (winograd) race = winograd_race(w, in[1]);
    // What the libraries and the reference read: the direct convolution's inputs.
    std::vector<Buffer> direct_in = in;
    if (winograd) direct_in[1] = race.oihw;
    Buffer ours_out(args->back().num_elements()), lib_out(args->back().num_elements());
    std::vector<void*> ptrs;
    for (auto& v : in) ptrs.push_back(v.data());
    ptrs.push_back(ours_out.data());
    Fn ours = [&] { loaded.fn(ptrs.data()); };

    // Check our answer before timing it.
    std::string check = "skipped (large)";
    if (*flops <= 4e9) {
      std::vector<const float*> cin;
      for (auto& v : in) cin.push_back(v.data());
      if (winograd) cin[1] = race.packed.data();
      std::vector<float> want(ours_out.size());
      (void)run_reference(winograd ? race.direct : w, cin, want.data());
      ours();
      // The agents' check (measure/tolerance.h) decides; the worst relative error is printed beside it.
      Tolerance tolerance = scaled_tolerance(kDefaultRtol, kDefaultAtol, reduction_length(winograd ? race.direct : w));
      double worst = 0;
      int64_t differing = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(double(ours_out[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i]))));
        differing += !within_tolerance(ours_out[i], want[i], tolerance);
      }
      check = differing == 0 ? fmt::format("ok (rel err {:.2e})", worst)
                             : fmt::format("MISMATCH ({} of {} elements outside rtol {:.1e}, atol {:.1e}; rel err {:.2e})",
                                           differing, want.size(), tolerance.rtol, tolerance.atol, worst);
      if (differing) exit_code = 1;
    }

    // An operator of another family races no library.
    Baselines bl = operators::is_gemm(w)   ? gemm_baselines(w, direct_in, lib_out)
                   : operators::is_conv(w) ? conv_baselines(winograd ? race.direct : w, direct_in, lib_out)
                                           : Baselines{};
    std::vector<std::pair<std::string, Fn>> contenders = {{"ours", ours}};
    // Beside a Winograd kernel, the direct template's default on the same weight.
    Loaded direct_loaded;
    Buffer direct_out(args->back().num_elements());
    std::vector<void*> direct_ptrs;
    if (winograd) {
      auto dc = default_config(race.direct, host);
      if (dc.ok() && threads > 1) dc = with_outer_parallelism(*dc);
      auto dk = dc.ok() ? build_kernel(race.direct, host, *dc) : StatusOr<BuiltKernel>(dc.status());
      Status ds = dk.ok() ? load_shared_object(dk->binary, direct_loaded) : dk.status();
      if (ds.ok()) {
        for (size_t i = 0; i < in.size(); ++i) direct_ptrs.push_back(i == 1 ? race.packed.data() : in[i].data());
        direct_ptrs.push_back(direct_out.data());
        contenders.push_back({"direct", [&] { direct_loaded.fn(direct_ptrs.data()); }});
      } else {
        fmt::print("{}: the direct template's default did not build: {}\n", ws, ds.to_string());
      }
    }
    // A config from --config-file (a tuned one) races the template's untuned default too.
    Loaded default_loaded;
    Buffer default_out(args->back().num_elements());
    std::vector<void*> default_ptrs;
    if (cfg_it != configs.end()) {
      auto dc = default_config(w, host);
      if (dc.ok() && threads > 1) dc = with_outer_parallelism(*dc);
      auto dk = dc.ok() ? build_kernel(w, host, *dc) : StatusOr<BuiltKernel>(dc.status());
      Status ds = dk.ok() ? load_shared_object(dk->binary, default_loaded) : dk.status();
      if (ds.ok()) {
        for (auto& v : in) default_ptrs.push_back(v.data());
        default_ptrs.push_back(default_out.data());
        contenders.push_back({"default", [&] { default_loaded.fn(default_ptrs.data()); }});
      } else {
        fmt::print("{}: the default config did not build: {}\n", ws, ds.to_string());
      }
    }
    Buffer library_out(args->back().num_elements());
    std::vector<void*> library_ptrs;
    if (auto fn = library.functions.find(ws); fn != library.functions.end()) {
      for (auto& v : in) library_ptrs.push_back(v.data());
      library_ptrs.push_back(library_out.data());
      contenders.push_back({"library", [&, f = fn->second] { call_library_function(f, library_ptrs); }});
    }
    if (bl.openblas) contenders.push_back({"openblas", bl.openblas});
    if (bl.onednn) contenders.push_back({"onednn", bl.onednn});
    std::vector<int> reps;
    for (auto& [name, fn] : contenders) reps.push_back(calibrate(fn, min_ms));
    std::vector<std::vector<double>> samples(contenders.size());
    for (int r = 0; r < repeats; ++r)
      for (size_t i = 0; i < contenders.size(); ++i) {
        if (threads > 1) std::this_thread::sleep_for(kContenderGap);
        samples[i].push_back(sample_ms(contenders[i].second, reps[i]));
      }

    std::map<std::string, double> gflops;
    std::string line = fmt::format("{} [{}] check {}:", ws, config->template_name, check);
    for (size_t i = 0; i < contenders.size(); ++i) {
      double med = median(samples[i]);
      gflops[contenders[i].first] = *flops / (med * 1e6);
      line += fmt::format("  {} {:.3f} ms {:.1f} GFLOP/s", contenders[i].first, med, gflops[contenders[i].first]);
    }
    for (const char* lib : {"library", "default", "direct", "openblas", "onednn"})
      if (gflops.count(lib)) line += fmt::format("  ours/{} {:.2f}x", lib, gflops["ours"] / gflops[lib]);
    fmt::print("{}\n  config {}\n", line, config->to_json());
    std::fflush(stdout);
    nlohmann::ordered_json entry = {{"workload", ws},
                                    {"config_from", cfg_it == configs.end() ? "default" : config_file.empty() ? "library" : "config-file"},
                                    {"ours_gflops", gflops["ours"]}};
    entry["openblas_gflops"] = gflops.count("openblas") ? nlohmann::ordered_json(gflops["openblas"]) : nlohmann::ordered_json();
    entry["onednn_gflops"] = gflops.count("onednn") ? nlohmann::ordered_json(gflops["onednn"]) : nlohmann::ordered_json();
    if (gflops.count("default")) entry["default_gflops"] = gflops["default"];
    if (gflops.count("library")) entry["library_gflops"] = gflops["library"];
    if (gflops.count("direct")) entry["direct_gflops"] = gflops["direct"];
    results.push_back(entry);
  }
  // The geometric mean of our speed over each library's, and the layer where we fall furthest.
  nlohmann::ordered_json summary = nlohmann::ordered_json::object();
  for (const char* lib : {"onednn", "openblas"}) {
    double log_sum = 0, worst = 0;
    int count = 0;
    std::string worst_workload;
    for (const auto& r : results) {
      if (!r[std::string(lib) + "_gflops"].is_number()) continue;
      double ratio = r["ours_gflops"].get<double>() / r[std::string(lib) + "_gflops"].get<double>();
      log_sum += std::log(ratio);
      ++count;
      if (worst == 0 || ratio < worst) worst = ratio, worst_workload = r["workload"].get<std::string>();
    }
    if (count == 0) continue;
    double geomean = std::exp(log_sum / count);
    fmt::print("ours/{}: geometric mean {:.3f}x over {} workloads; lowest {:.3f}x ({})\n", lib, geomean, count, worst,
               worst_workload);
    summary[lib] = {{"geomean", geomean}, {"count", count}, {"lowest", worst}, {"lowest_workload", worst_workload}};
  }
  fmt::print("{}\n", nlohmann::ordered_json{{"threads", threads}, {"summary", summary}, {"workloads", results}}.dump());
  return exit_code;
}
