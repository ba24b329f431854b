// tracker_bench: how many candidate results trackerd brokers per second, and how long each takes,
// with many simulated agents (in this process, answering at once) and several concurrent tuners.
// trackerd runs as its own process so that its peak RSS is its own.
//   tracker_bench [--agents 200] [--tuners 4] [--batch 32] [--seconds 10]
// Last line: {"agents":…,"results_per_s":…,"p50_ms":…,"p99_ms":…,"peak_rss_mb":…}
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/flags.h"
#include "common/logging.h"
#include "device_agent/agent.h"
#include "tunefarm/v1/tracker.grpc.pb.h"

extern char** environ;

namespace tunefarm {
namespace {

using Clock = std::chrono::steady_clock;

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string read_status_field(pid_t pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field + ":")) return line.substr(field.size() + 1);
  return "";
}

v1::MeasureRequest make_request(int tuner, int batch, uint64_t& next_id) {
  v1::MeasureRequest request;
  request.set_device_key("bench");
  request.set_job_id(fmt::format("tuner-{}", tuner));
  auto* w = request.mutable_workload();
  w->set_op("matmul");
  for (const char* p : {"M", "N", "K"}) {
    auto* param = w->add_params();
    param->set_name(p);
    param->set_value(512);
  }
  request.mutable_options()->set_timeout_s(5);
  v1::Artifact artifact;
  artifact.set_format(v1::Artifact::SHARED_OBJECT);
  artifact.set_data(std::string(2048, '\x7f'));  // Stands in for a small object; never loaded here.
  artifact.set_entry_symbol("entry");
  artifact.add_args()->set_name("A");
  for (int i = 0; i < batch; ++i) {
    auto* c = request.add_candidates();
    c->set_id(next_id++);
    *c->mutable_artifact() = artifact;
  }
  return request;
}

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  size_t k = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<long>(k), values.end());
  return values[k];
}

int run(int num_agents, int num_tuners, int batch, double seconds) {
  std::string trackerd = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "trackerd").string();
  std::string address = fmt::format("127.0.0.1:{}", free_port());
  // Metrics on, as a farm runs: the broker counts every lease and result. On a free port, so that
  // the bench never meets a trackerd of this machine on the default one.
  std::vector<std::string> args = {trackerd, "--listen", address, "--log-level", "warn", "--metrics-listen",
                                   fmt::format("127.0.0.1:{}", free_port())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t tracker = -1;
  if (int rc = posix_spawn(&tracker, trackerd.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0) {
    fmt::print(stderr, "tracker_bench: cannot start {}: {}\n", trackerd, std::strerror(rc));
    return 1;
  }
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    fmt::print(stderr, "tracker_bench: trackerd did not come up on {}\n", address);
    kill(tracker, SIGKILL);
    return 1;
  }

  // Simulated agents: the real session code, with a measurement that answers at once.
  auto instant = [](const v1::LeasedBatch&, const v1::Candidate&) {
    v1::MeasureResult result;
    result.add_costs(1e-3);
    return result;
  };
  v1::Capabilities caps;
  caps.add_targets("llvm");
  std::vector<std::unique_ptr<DeviceAgent>> agents;
  std::vector<std::thread> agent_threads;
  for (int i = 0; i < num_agents; ++i) {
    AgentOptions options;
    options.tracker = address;
    options.device_key = "bench";
    options.agent_id = fmt::format("sim-{:03}", i);
    agents.push_back(std::make_unique<DeviceAgent>(options, caps, instant));
    agent_threads.emplace_back([agent = agents.back().get()] { (void)agent->run(); });
  }
  auto stub = v1::Tracker::NewStub(channel);
  for (int tries = 0;; ++tries) {
    grpc::ClientContext context;
    v1::QueueStatusResponse status;
    stub->QueueStatus(&context, v1::QueueStatusRequest(), &status);
    if (status.keys_size() == 1 && status.keys(0).agents_total() == num_agents) break;
    if (tries > 600) {
      fmt::print(stderr, "tracker_bench: only some agents registered within 60 s\n");
      kill(tracker, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  // Tuners: each keeps one batch in flight, as a tuner measuring batch after batch does.
  std::atomic<bool> measuring{false}, stopping{false};
  std::atomic<int64_t> results{0}, failures{0};
  std::mutex latencies_mu;
  std::vector<double> latencies_ms;
  std::vector<std::thread> tuners;
  for (int t = 0; t < num_tuners; ++t) {
    tuners.emplace_back([&, t] {
      uint64_t next_id = 0;
      std::vector<double> mine;
      while (!stopping) {
        v1::MeasureRequest request = make_request(t, batch, next_id);
        grpc::ClientContext context;
        auto start = Clock::now();
        auto reader = stub->Measure(&context, request);
        v1::MeasureResponse response;
        int got = 0;
        while (reader->Read(&response)) {
          ++got;
          if (measuring) mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
        if (!reader->Finish().ok() || got != batch) failures++;
        if (measuring) results += got;
      }
      std::lock_guard<std::mutex> lock(latencies_mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // Warm-up, not counted.
  auto start = Clock::now();
  measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t brokered = results.load();
  stopping = true;
  for (auto& t : tuners) t.join();

  std::string hwm = read_status_field(tracker, "VmHWM");
  double peak_rss_mb = std::atof(hwm.c_str()) / 1024.0;
  for (auto& agent : agents) agent->stop();
  for (auto& t : agent_threads) t.join();
  kill(tracker, SIGTERM);
  int wait_status = 0;
  waitpid(tracker, &wait_status, 0);

  double per_s = static_cast<double>(brokered) / elapsed;
  double p50 = percentile(latencies_ms, 0.50);
  double p99 = percentile(latencies_ms, 0.99);
  fmt::print("machine: {}, {} CPUs (shared); trackerd, {} simulated agents and {} tuners on this host\n",
             local_capabilities().cpu_model(),
             std::thread::hardware_concurrency(), num_agents, num_tuners);
  fmt::print("tuners kept one batch of {} candidates each in flight for {:.1f} s\n", batch, elapsed);
  fmt::print("results brokered: {} ({:.0f}/s; bar >= 5000/s)\n", brokered, per_s);
  fmt::print("latency, Measure call to each candidate's result: p50 {:.2f} ms, p99 {:.2f} ms (bar p99 <= 20 ms)\n", p50,
             p99);
  fmt::print("trackerd peak RSS: {:.1f} MB; failed batches: {}\n", peak_rss_mb, failures.load());
  fmt::print("{{\"agents\":{},\"tuners\":{},\"batch\":{},\"results_per_s\":{:.0f},\"p50_ms\":{:.3f},\"p99_ms\":{:.3f},"
             "\"peak_rss_mb\":{:.1f},\"failed_batches\":{}}}\n",
             num_agents, num_tuners, batch, per_s, p50, p99, peak_rss_mb, failures.load());
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  CLI::App app{"tracker_bench: brokered results per second and latency of trackerd under many agents"};
  tunefarm::CommonFlags common;
  tunefarm::add_common_flags(app, common, false);
  int agents = 200, tuners = 4, batch = 32;
  double seconds = 10;
  app.add_option("--agents", agents, "Simulated agents")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--tuners", tuners, "Concurrent tuners")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "Candidates per Measure request")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "Measured duration")->capture_default_str()->check(CLI::PositiveNumber);
  int exit_code = 0;
  if (!tunefarm::parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (auto s = tunefarm::setup_logging("tracker_bench", common.log_level.empty() ? "warn" : common.log_level,
                                          common.log_format); !s.ok()) {
    fmt::print(stderr, "tracker_bench: {}\n", s.message());
    return 2;
  }
  return tunefarm::run(agents, tuners, batch, seconds);
}
