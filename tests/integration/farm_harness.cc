#include "tests/integration/farm_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/wire/credentials.h"
#include "tests/measure/test_kernels.h"

extern char** environ;

namespace tunefarm::testing {

std::string bin_path(const std::string& name) {
  if (const char* dir = std::getenv("TUNEFARM_BIN_DIR"); dir && *dir) return std::string(dir) + "/" + name;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "bin" / name).string();
}

std::string secret_file(const std::string& token) {
  std::string path = scratch_dir() + "/secret-" + std::to_string(std::hash<std::string>{}(token));
  std::ofstream(path) << token << "\n";
  return path;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

Process::Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
                 const std::vector<std::string>& extra_env)
    : log_path_(log_path) {
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = extra_env;
  // Daemons serve metrics on fixed loopback ports by default, which tests running side by side
  // would fight over: a test that scrapes gives --metrics-listen, which wins over this.
  env_storage.emplace_back("TUNEFARM_METRICS_LISTEN=off");
  for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec: the test process runs gRPC threads.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
}

Process::~Process() {
  if (pid_ <= 0 || reaped_) return;
  // A polite stop first, so that agents remove their scratch directories; then no more waiting.
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (running()) kill(pid_, SIGKILL);
  wait();
}

bool Process::running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    wait_status_ = status;
    return false;
  }
  return true;
}

void Process::signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

int Process::wait() {
  if (pid_ <= 0) return -1;
  if (!reaped_) {
    waitpid(pid_, &wait_status_, 0);
    reaped_ = true;
  }
  return wait_status_;
}

std::string Process::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Farm::Farm(std::vector<std::string> tracker_args) : tracker_args_(std::move(tracker_args)) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tunefarm-farm-XXXXXX").string();
  dir_ = mkdtemp(pattern.data()) ? pattern : std::filesystem::temp_directory_path().string();
  port_ = free_port();
  address_ = "127.0.0.1:" + std::to_string(port_);
  channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  // With tokens on, the tracker lists its farm only to the tuner token (or a reader token).
  for (size_t i = 0; i + 1 < tracker_args_.size(); ++i)
    if (tracker_args_[i] == "--tuner-token-file") std::getline(std::ifstream(tracker_args_[i + 1]), listing_token_);
  start_tracker();
}

Farm::~Farm() {
  agents_.clear();
  tracker_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Farm::start_tracker() {
  std::vector<std::string> args = {"--listen", address_, "--log-level", "debug"};
  args.insert(args.end(), tracker_args_.begin(), tracker_args_.end());
  tracker_ = std::make_unique<Process>(bin_path("trackerd"), args,
                                       dir_ + "/trackerd-" + std::to_string(++tracker_starts_) + ".log");
  // Ready when it answers.
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    context.set_wait_for_ready(true);
    authorize(context);
    v1::QueueStatusResponse response;
    if (stub()->QueueStatus(&context, v1::QueueStatusRequest(), &response).ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Farm::kill_tracker(int sig) {
  tracker_->signal(sig);
  tracker_->wait();
}

Process& Farm::start_agent(const std::string& id, const std::string& key, const std::vector<std::string>& extra_args) {
  return start_emulated_agent(id, key, {}, bin_path("device-agent"), extra_args, {});
}

Process& Farm::start_emulated_agent(const std::string& id, const std::string& key,
                                    const std::vector<std::string>& emulator, const std::string& agent_binary,
                                    const std::vector<std::string>& extra_args, const std::vector<std::string>& env) {
  std::vector<std::string> command = emulator;
  command.insert(command.end(), {agent_binary, "--tracker", address_, "--key", key, "--id", id, "--log-level", "debug"});
  command.insert(command.end(), extra_args.begin(), extra_args.end());
  std::string program = command.front();
  command.erase(command.begin());
  std::vector<std::string> environment = {"TUNEFARM_NUM_THREADS=1"};
  environment.insert(environment.end(), env.begin(), env.end());
  auto process = std::make_unique<Process>(program, command, dir_ + "/agent-" + id + ".log", environment);
  Process& ref = *process;
  agents_[id] = std::move(process);
  return ref;
}

std::unique_ptr<v1::Tracker::Stub> Farm::stub() const { return v1::Tracker::NewStub(channel_); }

void Farm::authorize(grpc::ClientContext& context) const {
  add_bearer(context, listing_token_);
}

v1::QueueStatusResponse Farm::queue_status() const {
  grpc::ClientContext context;
  authorize(context);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::QueueStatusResponse response;
  stub()->QueueStatus(&context, v1::QueueStatusRequest(), &response);
  return response;
}

bool Farm::wait_for_agents(const std::string& key, int n, std::chrono::milliseconds timeout) const {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    v1::QueueStatusResponse status = queue_status();
    for (const auto& k : status.keys())
      if (k.device_key() == key && k.agents_total() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

MeasureOutcome Farm::measure(const v1::MeasureRequest& request,
                             const std::function<void(const v1::MeasureResponse&, int)>& on_result) const {
  MeasureOutcome outcome;
  auto start = std::chrono::steady_clock::now();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  // As tunerd does: the request's token in the call's metadata too, where trackerd checks it first.
  add_bearer(context, request.token());
  auto reader = stub()->Measure(&context, request);
  v1::MeasureResponse response;
  while (reader->Read(&response)) {
    outcome.results.push_back(response);
    if (on_result) on_result(response, static_cast<int>(outcome.results.size()));
  }
  outcome.status = reader->Finish();
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

std::string Farm::logs() const {
  std::string all;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    std::ifstream in(entry.path());
    std::stringstream s;
    s << in.rdbuf();
    all += "==== " + entry.path().filename().string() + "\n" + s.str();
  }
  return all;
}

v1::MeasureRequest kernel_request(const std::string& kernel, int n, const std::string& key, double timeout_s) {
  v1::MeasureRequest request;
  request.set_device_key(key);
  request.set_job_id("test-job");
  *request.mutable_workload() = test_workload();
  *request.mutable_options() = quick_options(timeout_s);
  *request.mutable_reference() = reference_artifact();
  v1::Artifact artifact = kernel_artifact(kernel);
  for (int i = 0; i < n; ++i) {
    auto* c = request.add_candidates();
    c->set_id(static_cast<uint64_t>(i));
    c->mutable_config()->set_template_name("test." + kernel);
    *c->mutable_artifact() = artifact;
  }
  return request;
}

MeasureOutcome Farm::measure_killing(const v1::MeasureRequest& request, const std::string& victim, bool& killed) {
  killed = false;
  return measure(request, [&](const v1::MeasureResponse& r, int) {
    if (!killed && r.result().agent_id() == victim) {
      killed = true;
      agent(victim).signal(SIGKILL);
    }
  });
}

int expect_each_candidate_once(const MeasureOutcome& outcome, size_t n) {
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  std::map<uint64_t, int> seen;
  int retried = 0;
  for (const auto& r : outcome.results) {
    seen[r.candidate_id()]++;
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
    retried += r.result().attempts() > 1;
  }
  EXPECT_EQ(seen.size(), n);
  for (auto [id, count] : seen) {
    EXPECT_LT(id, n);
    EXPECT_EQ(count, 1) << "candidate " << id;
  }
  return retried;
}

}  // namespace tunefarm::testing
