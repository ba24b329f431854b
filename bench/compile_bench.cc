// compile_bench: how long the compiler takes from a config to a loadable shared object for one
// candidate (lowering, LLVM optimization and code generation, linking), over random valid configs
// of the workload's CPU template, or over one config given with --config. Each artifact for this
// host's architecture is also dlopen'ed to prove it loads. Last line: {"median_ms":…,"p90_ms":…}.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compiler/build.h"

using namespace tunefarm;

namespace {

// CPU time of this process and its finished children (the linker), in ms: on a shared machine
// it shows what a compilation costs independently of how busy the other cores are.
double cpu_ms() {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(self.ru_utime) + ms(self.ru_stime) + ms(children.ru_utime) + ms(children.ru_stime);
}

bool loads(const std::string& so, const std::string& path) {
  std::ofstream(path, std::ios::binary).write(so.data(), static_cast<std::streamsize>(so.size()));
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  bool ok = h && dlsym(h, kKernelEntry);
  if (h) dlclose(h);
  std::remove(path.c_str());
  return ok;
}

std::string load_average() {
  double avg[1] = {0};
  return getloadavg(avg, 1) == 1 ? fmt::format("{:.2f}", avg[0]) : "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("compile_bench: config -> loadable shared object time for a workload's candidates");
  std::string workload_text = "matmul:M=1024,N=1024,K=1024";
  std::string workloads_file;
  int samples = 40;
  bool verbose = false;
  std::string config_json, emit_llvm, target_text;
  app.add_option("--workload", workload_text, "workload to compile candidates of");
  app.add_option("--workloads", workloads_file, "workload file; its first workload is used");
  app.add_option("--samples", samples, "number of random valid configs")->check(CLI::Range(1, 100000));
  app.add_flag("--verbose", verbose, "print each config with its time");
  app.add_option("--target", target_text, "target to compile for, as jobs name it (default: this host)");
  app.add_option("--config", config_json, "compile this config (JSON, as records hold it) --samples times instead of random ones");
  app.add_option("--emit-llvm", emit_llvm, "write the optimized LLVM IR of --config to this file, for inspection")
      ->needs("--config");
  CLI11_PARSE(app, argc, argv);

  if (!workloads_file.empty()) {
    auto ws = read_workload_file(workloads_file);
    if (!ws.ok()) {
      fmt::print(stderr, "compile_bench: {}\n", ws.status().to_string());
      return 1;
    }
    workload_text = ws->front().to_string();
  }
  auto w = parse_workload(workload_text);
  if (!w.ok()) {
    fmt::print(stderr, "compile_bench: {}\n", w.status().to_string());
    return 1;
  }
  Target host;
  if (!target_text.empty()) {
    auto t = parse_target(target_text);
    Status usable = t.ok() ? codegen::check_target(*t) : t.status();
    if (!usable.ok()) {
      fmt::print(stderr, "compile_bench: {}\n", usable.to_string());
      return 1;
    }
    host = *t;
  }
  auto space = config_space(*w, host);
  if (!space.ok()) {
    fmt::print(stderr, "compile_bench: {}\n", space.status().to_string());
    return 1;
  }
  std::optional<Config> fixed;
  if (!config_json.empty()) {
    auto c = parse_config_json(config_json);
    Status valid = c.ok() ? space->check(*c) : c.status();
    if (!valid.ok()) {
      fmt::print(stderr, "compile_bench: --config: {}\n", valid.to_string());
      return 1;
    }
    fixed = *c;
  }
  if (!emit_llvm.empty()) {
    auto f = lower_candidate(*w, host, *fixed);
    auto ir = f.ok() ? codegen::emit_llvm_ir(*f, host, kKernelEntry) : StatusOr<std::string>(f.status());
    if (!ir.ok()) {
      fmt::print(stderr, "compile_bench: {}\n", ir.status().to_string());
      return 1;
    }
    std::ofstream(emit_llvm) << *ir;
  }
  std::mt19937_64 rng(1);
  std::vector<double> ms, cpu;
  std::string path = fmt::format("/tmp/compile_bench_{}.so", getpid());
  int failures = 0;
  while (static_cast<int>(ms.size()) < samples) {
    auto c = fixed ? StatusOr<Config>(*fixed) : space->get(static_cast<int64_t>(rng() % space->size()));
    if (!c.ok() || !space->check(*c).ok()) continue;
    double c0 = cpu_ms();
    auto t0 = std::chrono::steady_clock::now();
    auto k = build_kernel(*w, host, *c);
    auto t1 = std::chrono::steady_clock::now();
    double c1 = cpu_ms();
    // Code for another architecture is built and linked but cannot be loaded here.
    if (!k.ok() || (host.mtriple.empty() && !loads(k->binary, path))) {
      fmt::print(stderr, "compile_bench: {} failed: {}\n", c->to_json(), k.ok() ? "does not load" : k.status().to_string());
      if (++failures > 3) return 1;
      continue;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (verbose) fmt::print("{:8.2f} ms  {}\n", ms.back(), c->to_json());
    cpu.push_back(c1 - c0);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  double p90 = sorted[std::min(sorted.size() - 1, sorted.size() * 9 / 10)];
  std::sort(cpu.begin(), cpu.end());
  char host_name[256] = {};
  gethostname(host_name, sizeof(host_name) - 1);
  fmt::print("workload {} template {}: {} random valid configs, config -> loadable .so\n", w->to_string(),
             space->template_name(), ms.size());
  fmt::print("min {:.2f} ms, median {:.2f} ms, p90 {:.2f} ms, max {:.2f} ms (machine {}, {} CPUs)\n", sorted.front(), median,
             p90, sorted.back(), host_name, sysconf(_SC_NPROCESSORS_ONLN));
  fmt::print("CPU time (process + linker): median {:.2f} ms, p90 {:.2f} ms; load average {}\n", cpu[cpu.size() / 2],
             cpu[std::min(cpu.size() - 1, cpu.size() * 9 / 10)], load_average());
  fmt::print("{{\"median_ms\":{:.3f},\"p90_ms\":{:.3f}}}\n", median, p90);
  return 0;
}
