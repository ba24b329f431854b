#include "measure/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tunefarm {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status write_text(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return internal_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  close(fd);
  if (!ok) return internal_error(fmt::format("cannot write '{}' to {}: {}", text, path, std::strerror(err)));
  return Status();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string> words(const std::string& text, char separator = ' ') {
  std::vector<std::string> out;
  std::string word;
  std::istringstream in(text);
  while (std::getline(in, word, separator)) {
    while (!word.empty() && (word.back() == '\n' || word.back() == ' ')) word.pop_back();
    if (!word.empty()) out.push_back(word);
  }
  return out;
}

// The value of `key` in a flat-keyed cgroup file ("oom_kill 3"); 0 when absent.
uint64_t keyed_value(const std::string& path, const std::string& key) {
  std::istringstream in(read_text(path));
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

std::vector<pid_t> procs_of(const std::string& dir) {
  std::istringstream in(read_text(dir + "/cgroup.procs"));
  std::vector<pid_t> pids;
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// Kills everything in the cgroup `dir` (which has no children) and removes it. Processes leave a
// cgroup only when they have exited, so the removal is tried `tries` times, for up to about a
// second; UNAVAILABLE when they have not ended by then.
constexpr int kPatiently = 500;
Status kill_and_remove(const std::string& dir, int tries = kPatiently) {
  for (int i = 0; i < tries; ++i) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return Status();
    if (errno != EBUSY)
      return internal_error(fmt::format("cannot remove the cgroup {}: {}", dir, std::strerror(errno)));
    // cgroup.kill (Linux 5.14, v2) kills atomically, even a process that is forking.
    if (i == 0 && exists(dir + "/cgroup.kill")) (void)write_text(dir + "/cgroup.kill", "1");
    // Never this process, which may sit in a cgroup it is undoing (cgroup v2's <base>/agent).
    for (pid_t pid : procs_of(dir))
      if (pid != getpid()) kill(pid, SIGKILL);
    if (i + 1 < tries) usleep(i < 20 ? 200 : 2000);
  }
  return unavailable(fmt::format("cannot remove the cgroup {}: processes in it are still ending", dir));
}

// Removes the base directories under `parent` of processes that are gone, with their workers'
// cgroups and whatever still runs in them; how many.
int sweep_stale(const std::string& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(kCgroupPrefix) || !entry.is_directory(ec)) continue;
    std::string_view rest = std::string_view(name).substr(std::strlen(kCgroupPrefix));
    pid_t pid = 0;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (error != std::errc() || end != rest.data() + rest.size() || pid <= 0) continue;
    // A base named for this process is one its pid's former holder left.
    if (pid != getpid() && (kill(pid, 0) == 0 || errno != ESRCH)) continue;
    bool clean = true;
    for (const auto& child : std::filesystem::directory_iterator(entry.path(), ec))
      if (child.is_directory(ec)) clean &= kill_and_remove(child.path().string()).ok();
    if (clean && kill_and_remove(entry.path().string()).ok()) ++removed;
  }
  return removed;
}

struct Mount {
  std::string point;  // Where it is mounted.
  std::string root;   // Which of the hierarchy's directories is seen there.
  std::string type;
  std::vector<std::string> options;
};

std::vector<Mount> cgroup_mounts() {
  std::vector<Mount> mounts;
  std::istringstream in(read_text("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root point options [optional...] - type source super-options
    std::vector<std::string> f = words(line);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    Mount m{f[4], f[3], dash[1], words(dash[3], ',')};
    if (m.type == "cgroup" || m.type == "cgroup2") mounts.push_back(std::move(m));
  }
  return mounts;
}

// This process's cgroup in each hierarchy: "" for v2, else the hierarchy's controllers.
std::map<std::string, std::string> own_cgroups() {
  std::map<std::string, std::string> own;
  std::istringstream in(read_text("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    own[line.substr(first + 1, second - first - 1)] = line.substr(second + 1);
  }
  return own;
}

// The directory of cgroup `path` as seen through mount `m`; empty when the mount does not show it.
std::string directory_of(const Mount& m, const std::string& path) {
  std::string root = m.root == "/" ? "" : m.root;
  if (!path.starts_with(root)) return "";
  std::string rest = path.substr(root.size());
  return rest.empty() || rest == "/" ? m.point : m.point + rest;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

bool WorkerCgroup::memory_limit_hit() const {
  for (const std::string& dir : dirs_) {
    if (version_ == 2 && keyed_value(dir + "/memory.events", "oom_kill") > 0) return true;
    if (version_ == 1 && exists(dir + "/memory.oom_control")) {
      // oom_kill is counted since Linux 4.13; before it, reaching the limit is the best sign.
      std::string control = read_text(dir + "/memory.oom_control");
      if (control.find("oom_kill ") != std::string::npos) return keyed_value(dir + "/memory.oom_control", "oom_kill") > 0;
      return std::atoll(read_text(dir + "/memory.failcnt").c_str()) > 0;
    }
  }
  return false;
}

Status WorkerCgroup::remove() {
  Status first;
  for (const std::string& dir : dirs_)
    if (Status s = kill_and_remove(dir); !s.ok() && first.ok()) first = s;
  dirs_.clear();
  return first;
}

StatusOr<std::unique_ptr<CgroupManager>> CgroupManager::find(const std::string& delegated) {
  std::vector<Mount> mounts = cgroup_mounts();
  std::map<std::string, std::string> own = own_cgroups();
  std::string base_name = kCgroupPrefix + std::to_string(getpid());
  std::vector<std::string> reasons;

  // cgroup v2: the delegated directory, else this process's own cgroup.
  auto v2 = std::find_if(mounts.begin(), mounts.end(), [](const Mount& m) { return m.type == "cgroup2"; });
  std::string parent = delegated;
  if (parent.empty() && v2 != mounts.end() && own.count("")) parent = directory_of(*v2, own[""]);
  if (!parent.empty()) {
    std::vector<std::string> offered = words(read_text(parent + "/cgroup.controllers"));
    std::vector<std::string> use;
    for (const char* c : {"memory", "pids"})
      if (has(offered, c)) use.push_back(c);
    if (!exists(parent + "/cgroup.controllers")) {
      reasons.push_back(fmt::format("{} is not a cgroup v2 directory", parent));
    } else if (use.empty()) {
      reasons.push_back(fmt::format("cgroup v2 {} offers neither the memory nor the pids controller (it has '{}')",
                                    parent, fmt::join(offered, " ")));
    } else {
      sweep_stale(parent);
      std::string base = parent + "/" + base_name;
      std::string enable;
      for (const std::string& c : use) enable += (enable.empty() ? "+" : " +") + c;
      auto set_up = [&]() -> Status {
        if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST)
          return internal_error(fmt::format("cannot make {}: {}", base, std::strerror(errno)));
        std::vector<std::string> enabled = words(read_text(parent + "/cgroup.subtree_control"));
        bool all = std::all_of(use.begin(), use.end(), [&](const std::string& c) { return has(enabled, c); });
        if (!all) {
          Status s = write_text(parent + "/cgroup.subtree_control", enable);
          // Controllers pass down only from a cgroup without processes: this one leaves its
          // cgroup for a leaf of its own when it is the only process there.
          std::vector<pid_t> there = procs_of(parent);
          if (!s.ok() && there == std::vector<pid_t>{getpid()}) {
            std::string agent = base + "/agent";
            if (mkdir(agent.c_str(), 0755) != 0 && errno != EEXIST)
              return internal_error(fmt::format("cannot make {}: {}", agent, std::strerror(errno)));
            TF_RETURN_IF_ERROR(write_text(agent + "/cgroup.procs", std::to_string(getpid())));
            s = write_text(parent + "/cgroup.subtree_control", enable);
          } else if (!s.ok()) {
            return internal_error(fmt::format(
                "{} (it holds {} processes; cgroup v2 passes controllers down only from a cgroup without any)",
                s.message(), there.size()));
          }
          TF_RETURN_IF_ERROR(s);
        }
        return write_text(base + "/cgroup.subtree_control", enable);
      };
      Status s = set_up();
      if (s.ok()) return std::unique_ptr<CgroupManager>(new CgroupManager(2, {base}, use));
      // Back where it came from, if it moved (a parent that took the controllers refuses it; then
      // it stays in <base>/agent, and the next start sweeps that).
      if (has(words(read_text(base + "/agent/cgroup.procs"), '\n'), std::to_string(getpid())))
        (void)write_text(parent + "/cgroup.procs", std::to_string(getpid()));
      (void)kill_and_remove(base + "/agent", 1);
      (void)kill_and_remove(base, 1);
      reasons.push_back("cgroup v2: " + s.message());
    }
  } else {
    reasons.push_back("no cgroup v2 hierarchy");
  }
  if (!delegated.empty()) return failed_precondition(fmt::format("--cgroup {}: {}", delegated, reasons.back()));

  // cgroup v1: a directory under this process's own cgroup in the memory and pids hierarchies.
  std::vector<std::string> bases, use;
  for (const char* controller : {"memory", "pids"}) {
    auto m = std::find_if(mounts.begin(), mounts.end(),
                          [&](const Mount& m) { return m.type == "cgroup" && has(m.options, controller); });
    auto path = std::find_if(own.begin(), own.end(), [&](const auto& entry) {
      return !entry.first.empty() && has(words(entry.first, ','), controller);
    });
    if (m == mounts.end() || path == own.end()) continue;
    std::string dir = directory_of(*m, path->second);
    if (dir.empty()) continue;
    sweep_stale(dir);
    std::string base = dir + "/" + base_name;
    if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) {
      reasons.push_back(fmt::format("cgroup v1 {}: cannot make {}: {}", controller, base, std::strerror(errno)));
      continue;
    }
    bases.push_back(base);
    use.push_back(controller);
  }
  if (!bases.empty()) return std::unique_ptr<CgroupManager>(new CgroupManager(1, bases, use));
  if (reasons.size() == 1) reasons.push_back("no cgroup v1 memory or pids hierarchy");
  return failed_precondition(fmt::format("{}", fmt::join(reasons, "; ")));
}

std::shared_ptr<CgroupManager> CgroupManager::shared(const std::string& delegated, std::string& why_not) {
  static std::mutex mutex;
  static std::weak_ptr<CgroupManager> current;
  // On cgroup v2 this process may live in its base directory, which therefore stays with it.
  static std::shared_ptr<CgroupManager> kept;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto manager = current.lock()) {
    if (manager->delegated_ == delegated) return manager;
    why_not = fmt::format("this process makes its cgroups in {} already", manager->bases_.front());
    return nullptr;
  }
  auto found = find(delegated);
  if (!found.ok()) {
    why_not = found.status().message();
    return nullptr;
  }
  std::shared_ptr<CgroupManager> manager = std::move(*found);
  manager->delegated_ = delegated;
  current = manager;
  if (manager->version_ == 2) kept = manager;
  return manager;
}

CgroupManager::~CgroupManager() {
  (void)drain();
  for (const std::string& base : bases_) (void)kill_and_remove(base);
}

void CgroupManager::release(WorkerCgroup& cgroup) {
  std::vector<std::string> left;
  // One try each: its processes have been killed, and they end while the next candidate runs.
  for (const std::string& dir : cgroup.dirs_)
    if (!kill_and_remove(dir, 1).ok()) left.push_back(dir);
  cgroup.dirs_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.insert(pending_.end(), left.begin(), left.end());
}

Status CgroupManager::drain() {
  std::vector<std::string> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(pending_);
  }
  Status first;
  for (const std::string& dir : left)
    if (Status s = kill_and_remove(dir); !s.ok() && first.ok()) first = s;
  return first;
}

StatusOr<WorkerCgroup> CgroupManager::make(const CgroupLimits& limits) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n = made_++;
    // Those released earlier whose processes have ended by now.
    std::erase_if(pending_, [](const std::string& dir) { return kill_and_remove(dir, 1).ok(); });
  }
  std::vector<std::string> dirs;
  Status s;
  for (size_t i = 0; i < bases_.size() && s.ok(); ++i) {
    std::string dir = fmt::format("{}/worker-{}", bases_[i], n);
    if (mkdir(dir.c_str(), 0755) != 0) {
      s = internal_error(fmt::format("cannot make the worker's cgroup {}: {}", dir, std::strerror(errno)));
      break;
    }
    dirs.push_back(dir);
    bool memory = version_ == 2 ? has(controllers_, "memory") : controllers_[i] == "memory";
    bool pids = version_ == 2 ? has(controllers_, "pids") : controllers_[i] == "pids";
    std::string bytes = std::to_string(limits.memory_bytes);
    if (memory && limits.memory_bytes > 0) {
      if (version_ == 2) {
        s = write_text(dir + "/memory.max", bytes);
        // No swap: memory a kernel holds must count where the limit sees it. Swap accounting and
        // group OOM kills may be missing on older kernels.
        if (s.ok() && exists(dir + "/memory.swap.max")) s = write_text(dir + "/memory.swap.max", "0");
        if (s.ok() && exists(dir + "/memory.oom.group")) s = write_text(dir + "/memory.oom.group", "1");
      } else {
        s = write_text(dir + "/memory.limit_in_bytes", bytes);
        if (s.ok() && exists(dir + "/memory.memsw.limit_in_bytes"))
          s = write_text(dir + "/memory.memsw.limit_in_bytes", bytes);
      }
    }
    if (s.ok() && pids && limits.pids > 0) s = write_text(dir + "/pids.max", std::to_string(limits.pids));
  }
  WorkerCgroup cgroup(version_, std::move(dirs));
  if (!s.ok()) {
    (void)cgroup.remove();
    return s;
  }
  return cgroup;
}

bool CgroupManager::swap_counted() const {
  auto memory = std::find(controllers_.begin(), controllers_.end(), "memory");
  if (memory == controllers_.end()) return false;
  const std::string& base = bases_[version_ == 2 ? 0 : static_cast<size_t>(memory - controllers_.begin())];
  return exists(base + (version_ == 2 ? "/memory.swap.max" : "/memory.memsw.limit_in_bytes"));
}

std::string CgroupManager::describe(const CgroupLimits& limits) const {
  std::vector<std::string> what;
  if (has(controllers_, "memory"))
    what.push_back(limits.memory_bytes > 0 ? fmt::format("{} MiB of memory {}", limits.memory_bytes >> 20,
                                                         swap_counted() ? "without swap" : "(swap not counted)")
                                           : "memory counted, unlimited");
  if (has(controllers_, "pids")) what.push_back(fmt::format("{} tasks", limits.pids));
  return fmt::format("cgroup v{} {} per candidate ({})", version_, fmt::join(controllers_, " and "),
                     fmt::join(what, ", "));
}

Status join_cgroups(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs)
    if (Status s = write_text(dir + "/cgroup.procs", "0"); !s.ok())
      return internal_error("cannot join the candidate's cgroup: " + s.message());
  return Status();
}

void move_into_cgroups(pid_t pid, const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) (void)write_text(dir + "/cgroup.procs", std::to_string(pid));
}

}  // namespace tunefarm
