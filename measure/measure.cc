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
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/helper_program.h"
#include "common/temp_dir.h"
#include "measure/measure_options.h"
#include "measure/sandbox.h"
#include "measure/scratch.h"
#include "measure/worker_channel.h"
#include "tunefarm/v1/tracker.pb.h"

extern char** environ;

namespace tunefarm {
namespace {

constexpr const char* kWorkerName = "tunefarm-measure-worker";
// Caps the per-reference outcomes kept; past it the map is cleared and references run again.
constexpr size_t kMaxReferences = 256;

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
  // Scratch directories of agents or tuners that were killed outright are removed here; the
  // directory is created with mode 0700: only this user's processes see the artifacts.
  if (int stale = remove_stale_temp_dirs(options.scratch_root, "tunefarm-measure"); stale > 0)
    spdlog::info("removed {} scratch directories of measurers that are gone", stale);
  TF_ASSIGN_OR_RETURN(std::string scratch, make_owned_temp_dir(options.scratch_root, "tunefarm-measure"));
  return std::unique_ptr<Measurer>(new Measurer(std::move(options), scratch));
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
  std::string path = (std::filesystem::path(options_.worker_path).parent_path() / "tunefarm-probe-kernel.so").string();
  TF_ASSIGN_OR_RETURN(ProbeKernel probe, load_probe_kernel(path));
  v1::MeasureOptions options;
  options.set_number(1);
  options.set_repeat(1);
  options.set_check_correctness(true);
  v1::MeasureResult result = measure(probe.workload, options, &probe.reference, probe.candidate);
  if (result.error() == v1::OK) return Status();
  return failed_precondition(fmt::format("this agent cannot run kernels: its probe kernel failed with {}: {} (check "
                                         "--memory-limit-mb and --cpu-seconds-per-candidate)",
                                         v1::ErrorCode_Name(result.error()), result.error_msg()));
}

Measurer::~Measurer() {
  stop_worker();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir_, ec);
}

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

}  // namespace

Status Measurer::start_worker() {
  // A worker that was killed mid-candidate could not remove what that candidate left.
  if (Status s = clear_scratch(scratch_dir_); !s.ok())
    return s.with_context(
        fmt::format("cannot give the next worker an empty scratch directory {} (check its permissions)", scratch_dir_));
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return unavailable(fmt::format("cannot create the worker channel: {}", std::strerror(errno)));
  // Keep the child's end off fd 3 itself: dup2 onto the same number would leave close-on-exec set.
  int child_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  close(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // A kernel that prints must not write into the agent's stdout; stderr is shared for diagnostics.
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  posix_spawn_file_actions_adddup2(&actions, child_end, kWorkerChannelFd);
  // Its own process group, so that stopping it also stops whatever a kernel started.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::string parent = std::to_string(getpid());
  std::vector<std::string> args = options_.worker_launcher;
  args.insert(args.end(), {
      options_.worker_path,
      scratch_dir_,
      parent,
      format_limit_flag("memory-bytes", static_cast<uint64_t>(options_.memory_limit_bytes)),
      format_limit_flag("file-bytes", file_limit(options_)),
      format_limit_flag("cpu-seconds", options_.cpu_seconds_per_candidate),
  });
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  std::vector<char*> env = worker_environment();
  // A launcher is looked up in PATH, as a shell would.
  int rc = options_.worker_launcher.empty()
               ? posix_spawn(&pid, options_.worker_path.c_str(), &actions, &attributes, argv.data(), env.data())
               : posix_spawnp(&pid, args[0].c_str(), &actions, &attributes, argv.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(child_end);
  if (rc != 0) {
    close(fds[0]);
    return unavailable(fmt::format("cannot start '{}': {}", args[0], std::strerror(rc)));
  }
  worker_pid_ = pid;
  channel_fd_ = fds[0];
  ++worker_starts_;
  return Status();
}

std::string Measurer::stop_worker() {
  if (channel_fd_ >= 0) close(channel_fd_);
  channel_fd_ = -1;
  if (worker_pid_ <= 0) return "not running";
  int wait_status = 0;
  bool ended = waitpid(worker_pid_, &wait_status, WNOHANG) == worker_pid_;
  // The whole group: whatever a kernel forked is in it and may outlive a worker that already died.
  kill(-worker_pid_, SIGKILL);
  if (!ended) waitpid(worker_pid_, &wait_status, 0);
  worker_pid_ = -1;
  return ended ? describe_exit(wait_status) : "killed";
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

v1::MeasureResult Measurer::exchange(const v1::LeasedBatch& request, double timeout_s) {
  if (worker_pid_ <= 0) {
    if (Status s = start_worker(); !s.ok()) return failure(v1::UNKNOWN, s.message());
  }
  int64_t deadline = monotonic_ms() + static_cast<int64_t>(timeout_s * 1000);
  Status sent = write_frame(channel_fd_, request);
  v1::MeasureResult result;
  Status got = sent.ok() ? read_frame(channel_fd_, result, deadline) : sent;
  if (got.ok()) {
    // A kernel that failed may have leaked memory or damaged the process: the next one starts afresh.
    if (result.error() == v1::RUNTIME_ERROR) stop_worker();
    return result;
  }
  if (got.code() == StatusCode::kDeadlineExceeded) {
    stop_worker();
    return failure(v1::RUN_TIMEOUT, fmt::format("did not finish within its timeout of {} s", timeout_s));
  }
  // Give a dying worker a moment to be reaped, so that the message can name the signal.
  for (int i = 0; i < 50; ++i) {
    int wait_status = 0;
    ::rusage usage{};
    if (wait4(worker_pid_, &wait_status, WNOHANG, &usage) == worker_pid_) {
      kill(-worker_pid_, SIGKILL);
      worker_pid_ = -1;
      stop_worker();
      return failure(v1::RUNTIME_ERROR,
                     fmt::format("the measurement worker {} while running it", describe_death(wait_status, usage)));
    }
    usleep(2000);
  }
  stop_worker();
  return failure(v1::RUNTIME_ERROR, fmt::format("lost the measurement worker: {}", got.message()));
}

const v1::MeasureResult& Measurer::prepare_reference(const v1::LeasedBatch& request) {
  const v1::MeasureOptions& options = request.options();
  std::string key = reference_cache_key(request.workload(), request.reference(), options.input_seed());
  auto it = references_.find(key);
  if (it != references_.end()) return it->second;
  if (references_.size() >= kMaxReferences) references_.clear();
  // The reference gets its own timeout, so that the candidate's budget is its own. A failure is
  // kept too: a reference that crashes would otherwise crash again for every candidate.
  v1::MeasureResult prepared = exchange(request, options.timeout_s());
  if (prepared.error() != v1::OK) {
    if (prepared.error() != v1::UNKNOWN) prepared.set_error_msg("the reference kernel: " + prepared.error_msg());
    prepared.set_error(v1::UNKNOWN);
  }
  return references_.emplace(key, std::move(prepared)).first->second;
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
  if (options.check_correctness()) {
    if (!reference || reference->data().empty())
      return failure(v1::UNKNOWN, "check_correctness is set but no reference kernel was given");
    *request.mutable_reference() = *reference;
    const v1::MeasureResult& prepared = prepare_reference(request);
    if (prepared.error() != v1::OK) return prepared;
  }
  *request.add_candidates()->mutable_artifact() = candidate;
  return exchange(request, options.timeout_s());
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
