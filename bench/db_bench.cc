// db_bench: the history database's hot paths on a realistic history. Fills a fresh database with
// records spread over ~100 workloads x 3 targets x 2 device keys each (about one in ten failed),
// through the batched writer as tunerd does, then times best-config queries for random
// (workload, target, device) triples. The database lives in a temporary directory that is removed
// at the end, or is the empty PostgreSQL database --history names (as several tunerds share one).
// --writers fills through that many stores at once, as that many tunerds write. Bars (issue 6):
// batched insert >= 20,000 records/s, best-query p99 <= 2 ms.
// Last line: {"records":…,"best_query_p99_ms":…,"insert_per_s":…}.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/wire/wire.h"
#include "db/record_store.h"

using namespace tunefarm;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct TargetSpec {
  std::string text;
  std::vector<std::string> devices;
};

const std::vector<TargetSpec> kTargets = {
    {"llvm", {"x86-avx512-a", "x86-avx512-b"}},
    {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", {"rk3399", "rpi4"}},
    {"cuda -arch=sm_90", {"h100-a", "h100-b"}},
};

// 100 GEMM-like workloads of the shapes a transformer or a CNN classifier head has.
std::vector<Workload> default_workloads() {
  std::vector<std::string> texts;
  for (int m : {64, 128, 256, 512})
    for (int n : {64, 128, 256, 512, 768})
      for (int k : {64, 128, 256}) texts.push_back(fmt::format("matmul:M={},N={},K={}", m, n, k));
  for (int m : {1, 8, 16, 32})
    for (int n : {128, 256, 512, 768, 1000}) texts.push_back(fmt::format("dense:M={},N={},K=2048", m, n));
  for (int b : {4, 12})
    for (int m : {64, 128})
      for (int n : {64, 128, 256, 512, 1024}) texts.push_back(fmt::format("batch_matmul:B={},M={},N={},K=64", b, m, n));
  std::vector<Workload> workloads;
  for (const auto& text : texts) workloads.push_back(parse_workload(text).value());
  return workloads;
}

double flops(const Workload& w) {
  // Costs only need to be plausible; shapes other than GEMMs get a fixed amount of work.
  if (!w.has_param("M") || !w.has_param("N") || !w.has_param("K")) return 1e9;
  double f = 2.0 * w.param("M") * w.param("N") * w.param("K");
  return w.has_param("B") ? f * w.param("B") : f;
}

// Draws records as a tuning run produces them: random configs of a blocked template, costs from a
// plausible GFLOP/s, three repeats with noise, some failures.
class RecordMaker {
 public:
  RecordMaker(std::vector<Workload> workloads, uint64_t seed) : workloads_(std::move(workloads)), random_(seed) {
    for (const auto& w : workloads_) workload_protos_.push_back(to_proto(w));
    for (const auto& t : kTargets) target_protos_.push_back(to_proto(parse_target(t.text).value()));
  }

  v1::Record make(int64_t n) {
    size_t w = n % workloads_.size();
    size_t t = (n / workloads_.size()) % kTargets.size();
    v1::Record record;
    *record.mutable_workload() = workload_protos_[w];
    *record.mutable_target() = target_protos_[t];
    record.set_device_key(kTargets[t].devices[random_() % 2]);
    Config config;
    config.template_name = workloads_[w].op + ".blocked";
    auto split = [&] { return std::vector<int64_t>{-1, int64_t{1} << (random_() % 6), int64_t{1} << (random_() % 5)}; };
    config.knobs = {{"tile_m", split()}, {"tile_n", split()}, {"tile_k", split()},
                    {"unroll", std::string(random_() % 2 ? "on" : "off")}, {"vec", int64_t(random_() % 3)}};
    *record.mutable_config() = to_proto(config);
    record.mutable_config()->set_index(static_cast<int64_t>(random_() % 1000000));
    auto* result = record.mutable_result();
    if (random_() % 10 == 0) {
      result->set_error(random_() % 2 ? v1::RUN_TIMEOUT : v1::WRONG_ANSWER);
      result->set_error_msg("candidate failed");
    } else {
      double gflops = 5 + std::uniform_real_distribution<double>(0, 150)(random_);
      double cost = flops(workloads_[w]) / (gflops * 1e9);
      for (int r = 0; r < 3; ++r) result->add_costs(cost * std::uniform_real_distribution<double>(0.97, 1.03)(random_));
      double mean = (result->costs(0) + result->costs(1) + result->costs(2)) / 3;
      record.set_mean_cost_s(mean);
      record.set_gflops(flops(workloads_[w]) / mean / 1e9);
    }
    int64_t at = 1'700'000'000'000'000 + n * 1000;
    result->set_started_at_us(at);
    result->set_finished_at_us(at + 800);
    result->set_agent_id(fmt::format("agent-{}", random_() % 16));
    result->set_attempts(1);
    record.set_build_time_s(0.008 + (random_() % 100) * 1e-4);
    record.set_job_id(fmt::format("job-{:04}", n / 5000));
    return record;
  }

  const std::vector<Workload>& workloads() const { return workloads_; }

 private:
  std::vector<Workload> workloads_;
  std::vector<v1::Workload> workload_protos_;
  std::vector<v1::Target> target_protos_;
  std::mt19937_64 random_;
};

struct Latency {
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

Latency summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  return {at(0.50), at(0.99), ms.back()};
}

std::string machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      return fmt::format("{}, {} hardware threads", line.substr(line.find(':') + 2), std::thread::hardware_concurrency());
    }
  }
  return fmt::format("{} hardware threads", std::thread::hardware_concurrency());
}

int fail(const Status& status) {
  fmt::print(stderr, "db_bench: {}\n", status.to_string());
  return 1;
}

// The temporary directory that holds the database, removed however the program ends.
struct ScratchDir {
  std::filesystem::path path;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("db_bench: history insert throughput and best-config query latency");
  int64_t records = 1'000'000;
  int batch = 1000;
  int queries = 20000;
  std::string workloads_file;
  std::string scratch_parent = std::filesystem::temp_directory_path().string();
  std::string history;
  int writers = 1;
  bool queries_only = false;
  app.add_option("--records", records, "records to fill the history with")->check(CLI::Range(int64_t{1000}, int64_t{100'000'000}));
  app.add_option("--batch", batch, "records per add() call")->check(CLI::Range(1, 100000));
  app.add_option("--queries", queries, "best-config queries to time")->check(CLI::Range(100, 10'000'000));
  app.add_option("--workloads", workloads_file, "workload file to spread the records over (default: 100 built-in GEMM shapes)");
  app.add_option("--tmp", scratch_parent, "directory for the temporary database");
  app.add_option("--history", history, "an empty PostgreSQL database to fill instead (postgresql://...)");
  app.add_option("--writers", writers, "stores writing at once, each its share of the records")
      ->check(CLI::Range(1, 64));
  app.add_flag("--queries-only", queries_only,
               "time the best queries on the --history an earlier run filled, inserting nothing: builds of the store "
               "compared on one history, one after the other");
  CLI11_PARSE(app, argc, argv);
  if (queries_only && history.empty()) return fail(invalid_argument("--queries-only needs --history"));

  std::vector<Workload> workloads = default_workloads();
  if (!workloads_file.empty()) {
    auto read = read_workload_file(workloads_file);
    if (!read.ok()) return fail(read.status());
    if (read->empty()) return fail(invalid_argument(workloads_file + " holds no workloads"));
    workloads = std::move(read).value();
  }

  ScratchDir scratch;
  std::string pattern = (std::filesystem::path(scratch_parent) / "db_bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return fail(unavailable("cannot create a directory under " + scratch_parent));
  scratch.path = pattern;
  std::string path = history.empty() ? (scratch.path / "history.db").string() : history;
  std::vector<std::unique_ptr<db::RecordStore>> stores;
  for (int i = 0; i < writers; ++i) {
    auto opened = db::RecordStore::open(path);
    if (!opened.ok()) return fail(opened.status());
    stores.push_back(std::move(opened).value());
  }
  db::RecordStore& store = *stores[0];

  fmt::print("db_bench on {}\n", machine());
  fmt::print("history: {} records over {} workloads x {} targets x 2 device keys, batches of {}, {} writer(s), {}\n\n",
             records, workloads.size(), kTargets.size(), batch, writers, history.empty() ? "SQLite" : "PostgreSQL");

  double insert_per_s = 0, sync_per_s = 0;
  constexpr int kTunerRecords = 6400;
  if (!queries_only) {
    // Fill. Drawing a million random records costs as much CPU as storing them, so a pool of
    // batches is drawn first and reused, each record given a new measurement time and job so that
    // every record stored is a distinct measurement. The time covers add() (validation, encoding,
    // queueing) and the writer, up to the last record committed. Writer w stores the records n with
    // n % writers == w.
    RecordMaker maker(workloads, 1);
    std::vector<std::vector<v1::Record>> pool(std::max<int64_t>(1, std::min<int64_t>(records, 50000) / batch));
    for (size_t p = 0; p < pool.size(); ++p)
      for (int i = 0; i < batch; ++i) pool[p].push_back(maker.make(static_cast<int64_t>(p) * batch + i));
    std::vector<Status> fill_status(writers);
    auto fill = [&](int w) {
      std::vector<std::vector<v1::Record>> mine = pool;
      int64_t share = records / writers + (w < records % writers);
      for (int64_t done = 0, b = 0; done < share; ++b) {
        std::vector<v1::Record>& pending = mine[b % mine.size()];
        int64_t count = std::min<int64_t>(batch, share - done);
        pending.resize(count);
        for (v1::Record& record : pending) {
          int64_t n = done++ * writers + w;
          int64_t at = 1'700'000'000'000'000 + n * 1000;
          record.mutable_result()->set_started_at_us(at);
          record.mutable_result()->set_finished_at_us(at + 800);
          record.set_job_id(fmt::format("job-{:04}", n / 5000));
        }
        if (Status s = stores[w]->add(pending); !s.ok()) {
          fill_status[w] = s;
          return;
        }
      }
      fill_status[w] = stores[w]->flush();
    };
    auto fill_start = Clock::now();
    std::vector<std::thread> fillers;
    for (int w = 0; w < writers; ++w) fillers.emplace_back(fill, w);
    for (auto& t : fillers) t.join();
    for (const Status& s : fill_status)
      if (!s.ok()) return fail(s);
    insert_per_s = records / seconds_since(fill_start);

    // tunerd's own pattern: one measurement batch of 64 at a time, waiting for each commit.
    RecordMaker tuner_maker(workloads, 2);
    auto sync_start = Clock::now();
    for (int64_t n = 0; n < kTunerRecords; n += 64) {
      std::vector<v1::Record> measured;
      for (int64_t i = n; i < n + 64; ++i) measured.push_back(tuner_maker.make(records + i));
      auto inserted = store.insert(measured);
      if (!inserted.ok()) return fail(inserted.status());
    }
    sync_per_s = kTunerRecords / seconds_since(sync_start);
  }

  // Queries: random triples, half on one device key and half on any; every answer must exist.
  std::mt19937_64 random(3);
  std::vector<double> by_device_ms, any_device_ms, top10_ms;
  std::vector<Target> targets;
  for (const auto& t : kTargets) targets.push_back(parse_target(t.text).value());
  for (int q = 0; q < queries; ++q) {
    const Workload& w = workloads[random() % workloads.size()];
    size_t t = random() % kTargets.size();
    int kind = q % 4;  // 0, 1: one device key; 2: any; 3: top 10 on one device key.
    std::string device = kind == 2 ? "" : kTargets[t].devices[random() % 2];
    int top_k = kind == 3 ? 10 : 1;
    auto start = Clock::now();
    auto best = store.query_best(w, targets[t], device, top_k);
    double ms = seconds_since(start) * 1e3;
    if (!best.ok()) return fail(best.status());
    if (best->empty()) return fail(internal_error("no best record for " + w.to_string()));
    (kind == 2 ? any_device_ms : kind == 3 ? top10_ms : by_device_ms).push_back(ms);
  }
  std::vector<double> all_ms = by_device_ms;
  all_ms.insert(all_ms.end(), any_device_ms.begin(), any_device_ms.end());
  Latency by_device = summarize(by_device_ms), any_device = summarize(any_device_ms), top10 = summarize(top10_ms);
  Latency best = summarize(all_ms);

  std::error_code no_file;
  auto db_bytes = history.empty() ? std::filesystem::file_size(path, no_file) : 0;
  fmt::print("{:<44} {:>14} {:>10}\n", "measure", "value", "bar");
  fmt::print("{:<44} {:>14.0f} {:>10}\n", "batched insert (add + flush), records/s", insert_per_s, ">= 20000");
  fmt::print("{:<44} {:>14.0f} {:>10}\n", "tunerd-style insert (64, wait), records/s", sync_per_s, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "best query p50 (top 1), ms", best.p50_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "best query p99 (top 1), ms", best.p99_ms, "<= 2");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "  on one device key: p50, ms", by_device.p50_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "  on one device key: p99, ms", by_device.p99_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "  on any device key: p50, ms", any_device.p50_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "  on any device key: p99, ms", any_device.p99_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "best query top 10, one device: p50, ms", top10.p50_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "best query top 10, one device: p99, ms", top10.p99_ms, "");
  fmt::print("{:<44} {:>14.3f} {:>10}\n", "best query max (top 1), ms", best.max_ms, "");
  if (history.empty()) fmt::print("{:<44} {:>14.1f} {:>10}\n", "database file, MiB", db_bytes / 1048576.0, "");
  fmt::print("{:<44} {:>14} {:>10}\n", "queries timed", queries, "");
  fmt::print("{{\"records\":{},\"best_query_p99_ms\":{:.4f},\"insert_per_s\":{:.0f}}}\n", records + kTunerRecords,
             best.p99_ms, insert_per_s);
  return 0;
}
