// Several tunerds over one history in a real PostgreSQL (tests/db/pg_server.h), with a real tracker
// and agents: jobs of tunerds killed with SIGKILL are taken over by the others once their lease
// expires, and a tunerd cut off from the database stops its jobs, which another takes over. Every
// job ends SUCCEEDED with exactly its budget of distinct configs, none recorded twice.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "common/wire/wire.h"
#include "pg_server.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// A TCP relay from a free 127.0.0.1 port to `target_port`, which can be partitioned: bytes stop
// flowing both ways and new connections hang, as when a network drops packets (nothing is closed,
// so the tunerd behind it learns nothing but silence).
class Relay {
 public:
  explicit Relay(int target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener_, 64);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  void partition(bool on) { partitioned_ = on; }

 private:
  // One thread polls everything: the listener and both ends of every connection.
  void serve() {
    std::vector<std::pair<int, int>> pairs;
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      if (!partitioned_)
        for (auto [a, b] : pairs) fds.insert(fds.end(), {{a, POLLIN, 0}, {b, POLLIN, 0}});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN && !partitioned_) {
        int client = ::accept(listener_, nullptr, nullptr);
        int server = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(target_port_);
        if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          pairs.emplace_back(client, server);
        } else {
          ::close(client);
          ::close(server);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto& [a, b] = pairs[(i - 1) / 2];
        int from = i % 2 ? a : b;
        int to = i % 2 ? b : a;
        char buf[65536];
        ssize_t n = ::read(from, buf, sizeof buf);
        if (n <= 0 || ::write(to, buf, n) != n) {
          ::close(a);
          ::close(b);
          a = b = -1;
        }
      }
      std::erase_if(pairs, [](const auto& p) { return p.first < 0; });
    }
    for (auto [a, b] : pairs) {
      ::close(a);
      ::close(b);
    }
  }

  int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> partitioned_{false};
  std::thread thread_;
};

// The single value `sql` answers on `url`, or empty.
std::string sql_value(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* result = PQexec(conn, sql.c_str());
  std::string value = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
  PQclear(result);
  PQfinish(conn);
  return value;
}

class SharedHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
    url_ = PgServer::shared().new_database();
    farm_.start_agent("cpu-0");
    farm_.start_agent("cpu-1");
    ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, seconds(20))) << farm_.logs();
  }

  // The history's URL with the relay's port in place of the server's.
  std::string through(const Relay& relay) const {
    std::string url = url_;
    std::string port = std::to_string(PgServer::shared().port());
    return url.replace(url.find(port), port.size(), std::to_string(relay.port()));
  }
  std::unique_ptr<Tunerd> tunerd(const std::string& name, const std::string& history) {
    return std::make_unique<Tunerd>(farm_, farm_.log_dir() + "/" + name,
                                    std::vector<std::string>{"--history", history, "--lease-s",
                                                             fmt::format("{}", kLeaseS), "--max-jobs",
                                                             fmt::format("{}", kJobs)});
  }
  static v1::JobSpec spec(int n) {
    v1::JobSpec spec;
    *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload(fmt::format("matmul:M={},N={},K={}", n, n, n)));
    *spec.mutable_target() = to_proto(*parse_target("llvm"));
    spec.set_device_key("local-cpu");
    spec.set_trials(kTrials);
    spec.set_batch_size(4);
    spec.set_strategy(v1::RANDOM);  // No cost model: short jobs on a 2-core CI machine.
    return spec;
  }
  static v1::Job submit(const Tunerd& tunerd, const v1::JobSpec& spec) {
    auto job = tunerd.submit(spec);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : v1::Job();
  }
  // Which tunerd process holds the job's lease (its owner name holds the process id); 0: none.
  pid_t holder(const std::string& job_id) const {
    std::string owner = sql_value(url_, fmt::format("SELECT owner FROM jobs WHERE id = '{}' AND lease_expires_at > "
                                                    "clock_timestamp()",
                                                    job_id));
    auto first = owner.find(':');
    auto second = owner.find(':', first + 1);
    return first == std::string::npos || second == std::string::npos
               ? 0
               : std::stoi(owner.substr(first + 1, second - first - 1));
  }
  int64_t records_of(const std::string& job_id) const {
    std::string n = sql_value(url_, fmt::format("SELECT count(*) FROM records WHERE job_id = '{}'", job_id));
    return n.empty() ? 0 : std::stoll(n);
  }
  // Every job SUCCEEDED with exactly its budget of distinct configs, none recorded twice.
  void expect_exact(const Tunerd& asked, const std::vector<v1::Job>& jobs) {
    for (const v1::Job& job : jobs) {
      v1::Job done = asked.watch(job.id());
      ASSERT_EQ(done.state(), v1::SUCCEEDED) << job.id() << ": " << done.error() << "\n" << asked.log();
      std::set<std::string> configs;
      size_t trials = 0;
      for (const v1::Record& r : asked.records(job.id())) {
        if (r.remeasure_round() > 0) continue;
        ++trials;
        configs.insert(from_proto(r.config()).to_json());
      }
      EXPECT_EQ(configs.size(), static_cast<size_t>(kTrials)) << job.id();
      EXPECT_EQ(trials, static_cast<size_t>(kTrials)) << job.id() << ": a config recorded twice";
    }
  }

  static constexpr double kLeaseS = 2;
  static constexpr int kTrials = 12;
  static constexpr int kJobs = 12;  // The twelve; each tunerd has room for all of them.
  std::string url_;
  Farm farm_;
};

// Three tunerds, one PostgreSQL, two agents; twelve jobs submitted round-robin; two tunerds killed
// with SIGKILL one after the other while they run jobs: the others, which have room (--max-jobs 12),
// take their jobs over within the lease (plus a heartbeat), and any tunerd answers for any job.
TEST_F(SharedHistoryTest, JobsOfKilledTunerdsAreTakenOverAndEndWithTheirExactBudget) {
  std::vector<std::unique_ptr<Tunerd>> tunerds;
  for (int i = 0; i < 3; ++i) tunerds.push_back(tunerd(fmt::format("tunerd-{}", i), url_));
  std::vector<v1::Job> jobs;
  for (int i = 0; i < kJobs; ++i) jobs.push_back(submit(*tunerds[i % 3], spec(40 + 8 * i)));
  // Any tunerd answers for any job.
  EXPECT_EQ(tunerds[2]->get(jobs[0].id()).id(), jobs[0].id());

  std::vector<std::unique_ptr<Process>> watchers;
  for (int victim = 0; victim < 2; ++victim) {
    pid_t pid = tunerds[victim]->pid();
    // Kill it mid-job: once a job it holds has recorded something and is not done.
    std::vector<std::string> held;
    auto deadline = Clock::now() + seconds(60);
    while (held.empty() && Clock::now() < deadline) {
      for (const v1::Job& job : jobs) {
        int64_t n = records_of(job.id());
        if (holder(job.id()) == pid && n > 0 && n < kTrials) held.push_back(job.id());
      }
      if (held.empty()) std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(held.empty()) << "tunerd " << victim << " never ran a job";
    // A client of the replicas watches a job of the victim through it (the first address given),
    // and goes on through the other when it dies.
    std::string replicas = tunerds[victim]->address() + "," + tunerds[2]->address();
    watchers.push_back(std::make_unique<Process>(bin_path("tune-client"),
                                                 std::vector<std::string>{"--server", replicas, "watch", held[0]},
                                                 farm_.log_dir() + fmt::format("/watch-{}.log", victim)));
    std::this_thread::sleep_for(milliseconds(500));
    tunerds[victim]->kill9();
    auto killed = Clock::now();
    for (const std::string& id : held) {
      pid_t now = 0;
      while ((now = holder(id)) == 0 || now == pid) {
        ASSERT_LT(Clock::now() - killed, seconds(30)) << id << " was not taken over";
        std::this_thread::sleep_for(milliseconds(20));
      }
      double took = std::chrono::duration<double>(Clock::now() - killed).count();
      std::printf("job %s of killed tunerd %d taken over after %.2f s (lease %.1f s)\n", id.c_str(), victim, took,
                  kLeaseS);
      // The lease, a heartbeat of the taker (a quarter lease) and the test's polling.
      EXPECT_LT(took, kLeaseS * 1.25 + 1.5) << id;
    }
    // Any replica answers; a dead one first in the list is passed over.
    auto [rc, out] = tune_client_output(farm_, {"--server", replicas, "status", held[0]}, fmt::format("status-{}", victim));
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find(held[0]), std::string::npos) << out;
  }
  expect_exact(*tunerds[2], jobs);
  for (auto& watcher : watchers) {
    int status = watcher->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << watcher->log();
  }
}

// A tunerd whose connection to PostgreSQL goes silent stops its job within two thirds of the
// lease; the other takes the job over after the lease; when the connection comes back, what the
// cut-off tunerd still held is refused by the fence, and the job ends with exactly its budget.
TEST_F(SharedHistoryTest, ATunerdCutOffFromTheHistoryStopsItsJobAndAnotherTakesItOver) {
  Relay relay(PgServer::shared().port());
  auto cut = tunerd("cut", through(relay));
  v1::Job job = submit(*cut, spec(64));
  auto other = tunerd("other", url_);
  auto deadline = Clock::now() + seconds(60);
  while (records_of(job.id()) == 0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(holder(job.id()), cut->pid());
  relay.partition(true);
  auto partitioned = Clock::now();
  pid_t now = 0;
  while ((now = holder(job.id())) != other->pid()) {
    ASSERT_LT(Clock::now() - partitioned, seconds(30)) << cut->log();
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::printf("job taken over %.2f s after the partition (lease %.1f s)\n",
              std::chrono::duration<double>(Clock::now() - partitioned).count(), kLeaseS);
  EXPECT_NE(cut->log().find("stops its jobs before another tunerd takes them over"), std::string::npos) << cut->log();
  relay.partition(false);
  expect_exact(*other, {job});
}

// A tunerd asked to stop while its connection to PostgreSQL is silent (the relay still takes every
// byte, so TCP and its keepalives see nothing wrong) stops within a few leases: it waits for no
// answer longer than its lease (its renewal in flight included), and not for the history to return.
TEST_F(SharedHistoryTest, ATunerdCutOffFromTheHistoryStopsWithoutWaitingForIt) {
  Relay relay(PgServer::shared().port());
  auto cut = tunerd("cut", through(relay));
  v1::Job job = submit(*cut, spec(64));
  auto deadline = Clock::now() + seconds(60);
  while (records_of(job.id()) == 0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  relay.partition(true);
  // A heartbeat (every quarter lease) is on its way into the silence.
  std::this_thread::sleep_for(milliseconds(static_cast<int>(kLeaseS * 1000 / 2)));
  pid_t pid = cut->pid();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  auto asked = Clock::now();
  bool exited = false;
  while (!exited && Clock::now() - asked < seconds(30)) {
    int status = 0;
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(milliseconds(20));
  }
  double took = std::chrono::duration<double>(Clock::now() - asked).count();
  if (!exited) ::kill(pid, SIGKILL);
  relay.partition(false);
  ASSERT_TRUE(exited) << "tunerd still waits 30 s after SIGTERM\n" << cut->log();
  std::printf("tunerd cut off from the history stopped %.2f s after SIGTERM (lease %.1f s)\n", took, kLeaseS);
  // The renewal in flight gives up after a lease of silence, the job's last writes each after a
  // connect timeout (libpq's least, 2 s); nothing waits for the history to come back.
  EXPECT_LT(took, kLeaseS * 4 + 2) << cut->log();
}

}  // namespace
}  // namespace tunefarm::testing
