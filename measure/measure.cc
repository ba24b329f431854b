#include "measure/measure.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/helper_program.h"
#include "common/temp_dir.h"
#include "measure/measure_options.h"
#include "common/wire/wire.h"
#include "common/workload.h"
#include "measure/cpu_wait.h"
#include "measure/kernel.h"
#include "measure/sandbox.h"
#include "measure/scratch.h"
#include "measure/tensors.h"
#include "measure/timer.h"
#include "measure/worker_channel.h"
#include "tunefarm/v1/tracker.pb.h"
#include "tunefarm/v1/worker.pb.h"

extern char** environ;

namespace tunefarm {
namespace {

constexpr const char* kWorkerName = "tunefarm-measure-worker";
// Caps the reference outputs kept; past it the map is cleared and references run again.
constexpr size_t kMaxReferences = 64;
// What a worker's output may fill: enough for a kernel's last words, too little for a flood.
constexpr size_t kMaxWorkerOutputBytes = 64 << 10;
// A worker's own timing of a step excludes the channel's round trip (and this process's wakeup,
// milliseconds on a loaded board), which this process's window includes: it is accepted if it
// falls short of that window by at most this much plus kWakeupAllowance of the window.
constexpr double kRoundTripAllowanceS = 200e-6;
constexpr double kWakeupAllowance = 0.05;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string describe_exit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    return fmt::format("killed by signal {} ({})", sig, strsignal(sig));
  }
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  return "ended";
}

int64_t default_memory_limit() {
  int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return std::max<int64_t>(physical / 4 * 3, int64_t{2} << 30);
}

// Files the worker writes: artifacts (capped) and cached reference outputs.
uint64_t file_limit(const MeasurerOptions& options) { return std::max<uint64_t>(options.max_artifact_bytes, 1ull << 30); }

std::string mib(uint64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

}  // namespace

StatusOr<std::string> find_measure_worker() { return find_helper_program(kWorkerName); }

StatusOr<std::unique_ptr<Measurer>> Measurer::create(MeasurerOptions options) {
  if (options.worker_path.empty()) {
    TF_ASSIGN_OR_RETURN(options.worker_path, find_measure_worker());
  } else if (access(options.worker_path.c_str(), X_OK) != 0) {
    return not_found(fmt::format("measurement worker '{}' is not an executable file", options.worker_path));
  }
  if (options.memory_limit_bytes < 0) options.memory_limit_bytes = default_memory_limit();
  std::shared_ptr<CgroupManager> cgroups;
  std::string why_not = "turned off";
  if (options.cgroups) cgroups = CgroupManager::shared(options.cgroup, why_not);
  // A directory named on purpose that cannot be used is a mistake in the flags.
  if (!cgroups && options.cgroups && !options.cgroup.empty()) return failed_precondition(why_not);
  // Scratch directories of agents or tuners that were killed outright are removed here; the
  // directory is created with mode 0700: only this user's processes see the artifacts.
  if (int stale = remove_stale_temp_dirs(options.scratch_root, "tunefarm-measure"); stale > 0)
    spdlog::info("removed {} scratch directories of measurers that are gone", stale);
  TF_ASSIGN_OR_RETURN(std::string scratch, make_owned_temp_dir(options.scratch_root, "tunefarm-measure"));
  auto measurer = std::unique_ptr<Measurer>(new Measurer(std::move(options), scratch));
  measurer->cgroups_ = std::move(cgroups);
  const MeasurerOptions& o = measurer->options_;
  // A cgroup counts the memory a kernel uses, not the address space it reserves, so it applies
  // even where no address-space cap can (a GPU driver's reservations).
  measurer->cgroup_limits_.memory_bytes =
      static_cast<uint64_t>(o.memory_limit_bytes > 0 ? o.memory_limit_bytes : default_memory_limit());
  measurer->cgroup_limits_.pids =
      o.pids_per_candidate > 0 ? o.pids_per_candidate
                               : std::max<uint64_t>(kDefaultPidsPerCandidate, 4ull * std::thread::hardware_concurrency());
  if (!measurer->cgroups_) {
    measurer->cgroup_warning_ = fmt::format(
        "no cgroup limits ({}): memory a kernel holds outside its address space (memfd, tmpfs, shared memory) is "
        "bounded only by the seccomp filter and the scratch tmpfs's size, its threads by RLIMIT_NPROC; run the agent "
        "as root, under systemd with Delegate=yes, or pass --cgroup naming a delegated cgroup v2 directory\n",
        why_not);
  } else {
    const std::vector<std::string>& in_use = measurer->cgroups_->controllers();
    if (std::find(in_use.begin(), in_use.end(), "memory") == in_use.end())
      measurer->cgroup_warning_ += "no cgroup memory controller here: memory outside the address space is bounded by "
                                   "the seccomp filter and the scratch tmpfs's size alone\n";
    if (std::find(in_use.begin(), in_use.end(), "pids") == in_use.end())
      measurer->cgroup_warning_ += "no cgroup pids controller here: threads are capped by RLIMIT_NPROC alone\n";
  }
  return measurer;
}

std::string Measurer::with_cgroup_layer(const std::string& worker_description) const {
  size_t end = worker_description.find('\n');
  std::string layers = worker_description.substr(0, end);
  std::string missing = end == std::string::npos ? "" : worker_description.substr(end + 1);
  if (cgroups_) layers += ", " + cgroups_->describe(cgroup_limits_);
  return layers + "\n" + cgroup_warning_ + missing;
}

StatusOr<ProbeKernel> load_probe_kernel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("the probe kernel {} is missing; install it beside the worker", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  constexpr int64_t kN = 32;
  ProbeKernel probe;
  v1::Artifact& candidate = probe.candidate;
  candidate.set_format(v1::Artifact::SHARED_OBJECT);
  candidate.set_data(bytes.str());
  candidate.set_entry_symbol("entry");
  for (const char* name : {"A", "B", "C"}) {
    auto* arg = candidate.add_args();
    arg->set_name(name);
    arg->add_shape(kN);
    arg->add_shape(kN);
    arg->set_dtype(v1::FLOAT32);
    arg->set_is_output(std::string_view(name) == "C");
  }
  candidate.mutable_target()->set_kind("llvm");
  probe.reference = candidate;
  probe.reference.set_entry_symbol("reference_entry");
  probe.workload.set_op("matmul");
  for (const char* p : {"M", "N", "K"}) {
    auto* param = probe.workload.add_params();
    param->set_name(p);
    param->set_value(kN);
  }
  probe.workload.set_dtype(v1::FLOAT32);
  return probe;
}

Status Measurer::self_test() {
  // The worker may have gone since this measurer found it (an upgrade, a cleaned build directory):
  // said as such, not as a limit that is too tight.
  if (access(options_.worker_path.c_str(), X_OK) != 0)
    return failed_precondition(fmt::format(
        "this agent cannot run kernels: its measurement worker {} is {} ({}); install tunefarm-measure-worker beside "
        "this program (make install, or the package, puts it there) or set TUNEFARM_BIN_DIR to its directory",
        options_.worker_path, errno == ENOENT ? "missing" : "not an executable file", std::strerror(errno)));
  std::string path = (std::filesystem::path(options_.worker_path).parent_path() / "tunefarm-probe-kernel.so").string();
  TF_ASSIGN_OR_RETURN(ProbeKernel probe, load_probe_kernel(path));
  v1::MeasureOptions options;
  options.set_number(1);
  options.set_repeat(1);
  options.set_check_correctness(true);
  v1::MeasureResult result = measure(probe.workload, options, &probe.reference, probe.candidate);
  if (result.error() == v1::OK) return Status();
  // A worker that did not start, or could not set up its sandbox, says why in its message; only a
  // probe that ran and failed points at the limits.
  std::string check;
  if (failed_starts_ == 0 && !options_.worker_launcher.empty())
    check = fmt::format(" (check --worker-launcher '{}', then --memory-limit-mb and --cpu-seconds-per-candidate)",
                        fmt::join(options_.worker_launcher, " "));
  else if (failed_starts_ == 0)
    check = " (check --memory-limit-mb and --cpu-seconds-per-candidate)";
  return failed_precondition(fmt::format("this agent cannot run kernels: its probe kernel failed with {}: {}{}",
                                         v1::ErrorCode_Name(result.error()), result.error_msg(), check));
}

Measurer::~Measurer() {
  if (cgroups_)
    if (Status s = cgroups_->drain(); !s.ok())
      spdlog::warn("a worker's cgroup stays behind (the next start of this program sweeps it): {}", s.message());
  if (Status s = remove_tree(scratch_dir_); !s.ok()) spdlog::warn("{}", s.message());
}

struct Measurer::Worker {
  pid_t pid = -1;
  int channel = -1;
  int output = -1;  // The read end of the worker's stdout and stderr.
  std::string scratch;
  WorkerCgroup cgroup;
  // Whether its cgroup's OOM killer acted: read after the worker ended, before the cgroup goes.
  bool memory_limit_hit = false;
};

namespace {

// This process's environment without what looks like a secret (the agent may take its token from
// $TUNEFARM_AGENT_TOKEN): the worker runs foreign code, which can read its own environment.
std::vector<char*> worker_environment() {
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry = *e;
    std::string name(entry.substr(0, entry.find('=')));
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    bool secret = false;
    for (const char* word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY"})
      secret |= name.find(word) != std::string::npos;
    if (!secret) env.push_back(*e);
  }
  env.push_back(nullptr);
  return env;
}

// The children of process `pid` (Linux lists them in /proc since 3.5).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream list(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<pid_t> children;
  pid_t child;
  while (list >> child) children.push_back(child);
  return children;
}

// Waits for those of `pids` that became this process's children (their parent died and this
// process is the reaper), for at most a second: they were killed and end at once.
void reap_if_ours(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    for (int i = 0; i < 500; ++i) {
      pid_t done = waitpid(pid, nullptr, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      usleep(2000);
    }
  }
}

}  // namespace

StatusOr<Measurer::Worker> Measurer::start_worker() {
  Worker worker;
  if (cgroups_) {
    TF_ASSIGN_OR_RETURN(worker.cgroup, cgroups_->make(cgroup_limits_));
  }
  // What a worker that never started leaves goes with its error; no worker ran in it, so whether
  // removing it failed changes nothing for the caller.
  auto abandon = [&worker](Status why) {
    if (!worker.scratch.empty()) (void)remove_tree(worker.scratch);
    (void)worker.cgroup.remove();
    return why;
  };
  auto scratch = make_worker_scratch(scratch_dir_, static_cast<uint64_t>(worker_starts_));
  if (!scratch.ok()) return abandon(scratch.status());
  worker.scratch = *scratch;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return abandon(unavailable(fmt::format("cannot create the worker channel: {}", std::strerror(errno))));
  // The worker's stdout and stderr: a pipe whose writing end does not block, so that a kernel that
  // floods it loses its words once the pipe is full instead of filling the agent's log.
  int output[2];
  if (pipe2(output, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(fds[0]);
    close(fds[1]);
    return abandon(unavailable(fmt::format("cannot create the worker's output pipe: {}", std::strerror(errno))));
  }
  // Keep the child's end off fd 3 itself: dup2 onto the same number would leave close-on-exec set.
  int child_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  close(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output[1], 1);
  posix_spawn_file_actions_adddup2(&actions, output[1], 2);
  posix_spawn_file_actions_adddup2(&actions, child_end, kWorkerChannelFd);
  // A session of its own: no controlling terminal, and no process group shared with this one.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  std::string parent = std::to_string(getpid());
  std::vector<std::string> args = options_.worker_launcher;
  args.insert(args.end(), {
      options_.worker_path,
      worker.scratch,
      parent,
      format_limit_flag("memory-bytes", static_cast<uint64_t>(options_.memory_limit_bytes)),
      format_limit_flag("file-bytes", file_limit(options_)),
      format_limit_flag("cpu-seconds", options_.cpu_seconds_per_candidate),
      format_limit_flag("namespaces", options_.namespaces ? 1 : 0),
      format_limit_flag("without", options_.sandbox_without),
      format_limit_flag("gpu", options_.gpu ? 1 : 0),
  });
  // The worker joins its cgroup before it does anything else (sandbox.h).
  for (const std::string& dir : worker.cgroup.dirs()) args.push_back("--cgroup=" + dir);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> env = worker_environment();
  // A launcher is looked up in PATH, as a shell would.
  int rc = options_.worker_launcher.empty()
               ? posix_spawn(&worker.pid, options_.worker_path.c_str(), &actions, &attributes, argv.data(), env.data())
               : posix_spawnp(&worker.pid, args[0].c_str(), &actions, &attributes, argv.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(child_end);
  close(output[1]);
  if (rc != 0) {
    close(fds[0]);
    close(output[0]);
    return abandon(unavailable(fmt::format("cannot start '{}': {}", args[0], std::strerror(rc))));
  }
  move_into_cgroups(worker.pid, worker.cgroup.dirs());
  worker.channel = fds[0];
  worker.output = output[0];
  ++worker_starts_;
  return worker;
}

std::string Measurer::stop_worker(Worker& worker, bool* died, ::rusage* usage) {
  if (worker.channel >= 0) close(worker.channel);
  worker.channel = -1;
  std::string how = "killed";
  if (worker.pid > 0) {
    int wait_status = 0;
    ::rusage used{};
    // With its channel closed a worker ends on its own, each level of its namespace reaping the
    // next (killing it at once would leave them to this process's reaper); a worker that died is
    // given the same moment, so that a message can name its signal.
    bool ended = false;
    for (int i = 0; i < 100 && !ended; ++i) {
      ended = wait4(worker.pid, &wait_status, WNOHANG, &used) == worker.pid;
      if (!ended) usleep(i < 20 ? 100 : 2000);
    }
    bool on_its_own = ended;
    // A worker that does not end (its kernel left something that never returns) is told to end its
    // namespace: SIGTERM, which the worker's process outside the namespace handles by killing the
    // namespace's init and reaping it. Then SIGKILL of the process itself, which no kernel can
    // block or escape; its namespace (and every process in it) ends with it, and its children are
    // reaped here where they come to this process (a subreaper, or PID 1 of a container), instead
    // of staying zombies.
    if (!ended) {
      kill(worker.pid, SIGTERM);
      for (int i = 0; i < 100 && !ended; ++i) {
        ended = wait4(worker.pid, &wait_status, WNOHANG, &used) == worker.pid;
        if (!ended) usleep(2000);
      }
    }
    if (!ended) {
      std::vector<pid_t> orphans = children_of(worker.pid);
      kill(worker.pid, SIGKILL);
      while (wait4(worker.pid, &wait_status, 0, &used) < 0 && errno == EINTR) {
      }
      reap_if_ours(orphans);
    }
    // Without namespaces, whatever a kernel started in the worker's session goes too.
    kill(-worker.pid, SIGKILL);
    if (died) *died = on_its_own;
    if (usage) *usage = used;
    if (on_its_own) how = describe_exit(wait_status);
    if (on_its_own && died) how = describe_death(wait_status, used);
    worker.pid = -1;
  }
  if (Status s = remove_tree(worker.scratch); !s.ok())
    spdlog::warn("a worker's scratch directory stays behind (the next worker has a fresh one): {}", s.message());
  worker.memory_limit_hit = worker.cgroup.memory_limit_hit();
  if (cgroups_) cgroups_->release(worker.cgroup);
  return how;
}

std::string Measurer::describe_death(int wait_status, const ::rusage& usage) const {
  std::string how = describe_exit(wait_status);
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGXCPU) how += ": it used up its CPU time limit";
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGSYS) how += ": it made a system call the sandbox forbids";
  // ru_maxrss is in KiB. Touching most of the address-space cap is how an allocation runs out.
  auto used = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  auto cap = static_cast<uint64_t>(options_.memory_limit_bytes);
  if (cap > 0 && used >= cap / 2)
    how += fmt::format(" after using {} of its memory limit of {}: the kernel most likely ran out of memory", mib(used),
                       mib(cap));
  return how;
}

namespace {

// The last of what a worker wrote to its stdout and stderr (at most what the pipe held), in
// printable characters, for the message of a kernel that failed.
std::string output_tail(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  while (text.size() < kMaxWorkerOutputBytes && (n = read(fd, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  if (text.size() > 512) text = text.substr(text.size() - 512);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The candidate as this process sees it: every run happens in the worker, and every time it
// reports is held against the time that passed here between asking and hearing back, less the
// time this thread and the kernel's waited for a CPU (cpu_wait.h).
class RemoteKernel : public BoundKernel {
 public:
  RemoteKernel(int fd, int64_t deadline_ms, pid_t worker_pid)
      : fd_(fd), deadline_ms_(deadline_ms), waits_(worker_pid) {}

  Status run_once() override { return internal_error("a remote kernel only runs timed steps"); }
  Status copy_outputs(std::vector<HostTensor>&) override { return Status(); }

  StatusOr<double> time_runs(int number) override {
    v1::WorkerStep step;
    step.set_runs(number);
    // The waits are read inside the clock's readings, so that a wait between the two is counted
    // in the window, never subtracted from a window that did not include it.
    auto begin = std::chrono::steady_clock::now();
    double waited = waits_.waits(), cpu = waits_.cpu_seconds();
    TF_ASSIGN_OR_RETURN(v1::WorkerReport report, exchange(step));
    waited = waits_.waits() - waited;
    cpu = waits_.cpu_seconds() - cpu;
    double seen = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    double window = seen - waited > 0 ? seen - waited : seen;
    // The kernel's threads cannot have done their CPU time's work in less than it divided among
    // the CPUs they can run on at once: a kernel whose main thread waits for a CPU while its other
    // threads compute gets no shorter window than that, and a one-thread kernel none shorter than
    // its CPU time (the waits alone left some samples of a one-thread dense kernel at half its CPU
    // time under load, 205 GFLOP/s where one core's peak is 116).
    window = std::max(window, cpu / std::min(waits_.cpus(), waits_.threads()));
    double reported = report.seconds();
    if (!std::isfinite(reported) || reported <= 0) {
      failure_ = failure(v1::RUNTIME_ERROR, fmt::format("the worker reported {} s for {} runs, which is not a time",
                                                        reported, number));
      return internal_error(failure_->error_msg());
    }
    // The worker's figure is the more precise one, but it comes from the candidate's process, whose
    // code and clock the candidate may have changed: past the window seen here, or short of it by
    // more than a round trip (and at most half of it), the window is what counts.
    double lowest = std::max(window - kRoundTripAllowanceS - window * kWakeupAllowance, window / 2);
    return std::clamp(reported, lowest, window);
  }

  void flush_cache() override {
    v1::WorkerStep step;
    step.set_flush_cache(true);
    // A failure here is kept and ends the timing at its next step.
    (void)exchange(step);
  }

  // Why the timing stopped: the worker's own failure or a result made from what went wrong.
  const std::optional<v1::MeasureResult>& failure_result() const { return failure_; }
  const Status& channel_status() const { return channel_; }

 private:
  StatusOr<v1::WorkerReport> exchange(const v1::WorkerStep& step) {
    if (!channel_.ok()) return channel_;
    if (failure_) return internal_error(failure_->error_msg());
    v1::WorkerReport report;
    channel_ = write_frame(fd_, step);
    if (channel_.ok()) channel_ = read_frame(fd_, report, deadline_ms_);
    if (!channel_.ok()) return channel_;
    if (report.has_failure()) {
      failure_ = report.failure();
      if (failure_->error() == v1::OK) failure_->set_error(v1::RUNTIME_ERROR);
      return internal_error(failure_->error_msg());
    }
    return report;
  }
  int fd_;
  int64_t deadline_ms_;
  CpuWait waits_;
  Status channel_;
  std::optional<v1::MeasureResult> failure_;
};

}  // namespace

v1::MeasureResult Measurer::run(const v1::LeasedBatch& request, const v1::MeasureOptions& options,
                                const std::vector<std::string>* expected, std::vector<std::string>* outputs) {
  int64_t deadline = monotonic_ms() + static_cast<int64_t>(options.timeout_s() * 1000);
  auto worker = start_worker();
  if (!worker.ok()) {
    ++failed_starts_;
    return failure(v1::UNKNOWN, worker.status().message());
  }
  std::optional<v1::MeasureResult> result = converse(*worker, request, options, deadline, expected, outputs);
  bool died = false;
  // A worker that ran out of time is in the middle of a kernel: it is told to end its namespace
  // (SIGTERM, which the process outside the namespace handles; without one, the kernel's own
  // process, which may ignore it and is killed after the wait below).
  if (result && result->error() == v1::RUN_TIMEOUT) kill(worker->pid, SIGTERM);
  std::string how = stop_worker(*worker, result ? nullptr : &died);
  if (!result) {
    result = failure(v1::RUNTIME_ERROR, died ? fmt::format("the measurement worker {} while running it", how)
                                             : "the measurement worker broke off the conversation");
  }
  // The cgroup's OOM killer ends a kernel that holds more than the memory limit, in whichever of
  // the worker's processes held most; what the worker said or did not say after that is moot.
  if (worker->memory_limit_hit && result->error() != v1::OK)
    result = failure(v1::RUNTIME_ERROR,
                     fmt::format("the candidate went past its memory limit of {} (counted by its cgroup, memfd and "
                                 "shared memory included) and the kernel's OOM killer ended it ({})",
                                 mib(cgroup_limits_.memory_bytes), result->error_msg()));
  std::string words = output_tail(worker->output);
  close(worker->output);
  if (result->error() == v1::RUNTIME_ERROR && !words.empty())
    result->set_error_msg(result->error_msg() + "; its output ended with: " + words);
  return *result;
}

namespace {

// What a reply that is not one makes of its candidate: the kernel wrote on the worker's channel.
v1::MeasureResult forged(const Status& why) {
  return failure(v1::RUNTIME_ERROR, fmt::format("the worker's reply was not one ({}): the kernel wrote on its channel",
                                                why.message()));
}

}  // namespace

// The conversation with one worker; nullopt when the worker was lost (it died, or its replies made
// no sense).
std::optional<v1::MeasureResult> Measurer::converse(Worker& worker, const v1::LeasedBatch& request, const v1::MeasureOptions& options,
                                     int64_t deadline_ms, const std::vector<std::string>* expected,
                                     std::vector<std::string>* outputs) {
  auto timed_out = [&] {
    return failure(v1::RUN_TIMEOUT, fmt::format("did not finish within its timeout of {} s", options.timeout_s()));
  };
  v1::WorkerReport first;
  Status got = write_frame(worker.channel, request);
  if (got.ok()) got = read_frame(worker.channel, first, deadline_ms);
  if (got.code() == StatusCode::kDeadlineExceeded) return timed_out();
  if (got.code() == StatusCode::kInvalidArgument) return forged(got);
  if (!got.ok()) return std::nullopt;
  // The first report comes before any foreign code ran: its description of the sandbox is the worker's own.
  std::string_view sandbox = first.sandbox();
  // Only a worker that could not set up its sandbox answers without describing it.
  failed_starts_ = sandbox.empty() && first.has_failure() ? failed_starts_ + 1 : 0;
  if (!sandbox.empty()) sandbox_ = with_cgroup_layer(first.sandbox());
  if (first.has_failure()) {
    v1::MeasureResult result = first.failure();
    if (result.error() == v1::OK) result.set_error(v1::RUNTIME_ERROR);
    return result;
  }
  if (outputs) {
    outputs->assign(first.outputs().begin(), first.outputs().end());
    return v1::MeasureResult();
  }
  if (expected) {
    const v1::Artifact& candidate = request.candidates(0).artifact();
    auto workload = from_proto(request.workload());
    Tolerance tolerance = scaled_tolerance(options.rtol(), options.atol(), workload.ok() ? reduction_length(*workload) : 1);
    std::vector<std::string> actual(first.outputs().begin(), first.outputs().end());
    if (Status s = compare_output_bytes(candidate.args(), actual, *expected, tolerance); !s.ok())
      return failure(v1::WRONG_ANSWER, s.message());
  }
  RemoteKernel kernel(worker.channel, deadline_ms, worker.pid);
  auto costs = time_kernel(kernel, options);
  if (costs.ok()) {
    v1::MeasureResult result;
    for (double c : *costs) result.add_costs(c);
    return result;
  }
  if (kernel.failure_result()) return *kernel.failure_result();
  if (kernel.channel_status().code() == StatusCode::kDeadlineExceeded) return timed_out();
  if (kernel.channel_status().code() == StatusCode::kInvalidArgument) return forged(kernel.channel_status());
  return std::nullopt;
}

const Measurer::Reference& Measurer::prepare_reference(const v1::LeasedBatch& request,
                                                       const v1::MeasureOptions& options) {
  std::string key = reference_cache_key(request.workload(), request.reference(), options.input_seed());
  std::string identity = request.workload().SerializeAsString() + request.reference().SerializeAsString() +
                         std::to_string(options.input_seed());
  auto it = references_.find(key);
  if (it != references_.end() && it->second.identity == identity && !it->second.worker_failed) return it->second;
  if (references_.size() >= kMaxReferences) references_.clear();
  // The reference runs in a worker of its own, with its own timeout, so that the candidate's
  // budget is its own and the outputs every later check relies on come from a process no
  // candidate ever ran in.
  Reference reference;
  reference.identity = std::move(identity);
  v1::LeasedBatch alone;
  *alone.mutable_workload() = request.workload();
  *alone.mutable_options() = options;
  *alone.mutable_reference() = request.reference();
  reference.outcome = run(alone, options, nullptr, &reference.outputs);
  reference.worker_failed = failed_starts_ > 0;
  if (reference.outcome.error() != v1::OK) {
    if (reference.outcome.error() != v1::UNKNOWN)
      reference.outcome.set_error_msg("the reference kernel: " + reference.outcome.error_msg());
    reference.outcome.set_error(v1::UNKNOWN);
  }
  return references_[key] = std::move(reference);
}

v1::MeasureResult Measurer::measure_checked(const v1::Workload& workload, const v1::MeasureOptions& options,
                                            const v1::Artifact* reference, const v1::Artifact& candidate) {
  for (const v1::Artifact* artifact : {reference, &candidate}) {
    if (artifact && artifact->data().size() > options_.max_artifact_bytes)
      return failure(v1::LOAD_ERROR, fmt::format("the {} artifact is {} bytes, over this agent's cap of {} bytes",
                                                 artifact == reference ? "reference" : "candidate",
                                                 artifact->data().size(), options_.max_artifact_bytes));
  }
  v1::LeasedBatch request;
  *request.mutable_workload() = workload;
  *request.mutable_options() = options;
  const std::vector<std::string>* expected = nullptr;
  if (options.check_correctness()) {
    if (!reference || reference->data().empty())
      return failure(v1::UNKNOWN, "check_correctness is set but no reference kernel was given");
    *request.mutable_reference() = *reference;
    const Reference& prepared = prepare_reference(request, options);
    if (prepared.outcome.error() != v1::OK) return prepared.outcome;
    expected = &prepared.outputs;
    // The candidate's worker has no use for the reference.
    request.clear_reference();
  }
  *request.add_candidates()->mutable_artifact() = candidate;
  return run(request, options, expected, nullptr);
}

v1::MeasureResult Measurer::measure(const v1::Workload& workload, const v1::MeasureOptions& options,
                                    const v1::Artifact* reference, const v1::Artifact& candidate) {
  int64_t started = now_us();
  v1::MeasureResult result = measure_checked(workload, with_defaults(options), reference, candidate);
  result.set_started_at_us(started);
  result.set_finished_at_us(now_us());
  return result;
}

}  // namespace tunefarm
