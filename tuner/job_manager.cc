#include "tuner/job_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <future>
#include <map>
#include <random>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/operators/operator.h"
#include "common/wire/wire.h"
#include "tuner/build_guard.h"
#include "tuner/metrics.h"

namespace tunefarm {
namespace {

constexpr int kMaxTasks = 64;
constexpr int kMaxTrials = 1'000'000;
constexpr int kMaxBatch = 1024;
constexpr double kMaxTimeBudgetS = 30.0 * 24 * 3600;

bool valid_name_chars(const std::string& s, bool allow_upper) {
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
              (allow_upper && c >= 'A' && c <= 'Z');
    if (!ok) return false;
  }
  return true;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ended(v1::JobState s) { return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED; }

// Unique among the tunerds sharing a history, and telling people which one holds a job.
std::string default_lease_owner() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}:{:06x}", host, ::getpid(), std::random_device{}() & 0xffffff);
}

// The slowest stream figure the agents of a key gave (a model runs on any of them), 0 when none.
// A figure no cache has (below 100 MB/s or above 100 TB/s, infinite, NaN: a broken or a lying
// board) is left out, so that one agent cannot make every estimate on its key nonsense.
double slowest_stream(const std::vector<AgentPlatform>& agents) {
  constexpr double kLeast = 1e8, kMost = 1e14;
  double slowest = 0;
  for (const AgentPlatform& a : agents) {
    double s = a.stream_bytes_per_s;
    if (s >= kLeast && s <= kMost && (slowest == 0 || s < slowest)) slowest = s;
  }
  return slowest;
}

}  // namespace

int farm_batch_size(int agents, int cap) {
  // A few candidates per agent keep every board busy while the loop checks its budgets, early
  // stopping and cancels between batches; at least 8, so that the cost model is not retrained
  // after every other trial on a one-board farm.
  return std::clamp(4 * std::max(agents, 1), std::min(8, cap), cap);
}

double max_wait_s(const v1::JobSpec& spec, const JobManagerOptions& defaults) {
  return spec.max_wait_s() > 0 ? spec.max_wait_s() : defaults.max_wait_s;
}

// The bytes one run of a model job's model touches: what its task table says (its constants, its
// arena, its inputs and outputs), or, from a client that does not say, each task's arguments as
// often as the task occurs and the other steps' bytes (more than the model touches: its
// activations share the arena). 0 for a job of workloads (which has no other steps).
double model_run_bytes(const v1::JobSpec& spec) {
  if (spec.run_bytes() > 0) return spec.run_bytes();
  if (spec.other_steps() <= 0 && spec.other_bytes() <= 0) return 0;
  double bytes = std::max(0.0, spec.other_bytes());
  for (const v1::TuneTask& task : spec.tasks()) {
    auto workload = from_proto(task.workload());
    if (!workload.ok()) continue;
    double task_bytes = 0;
    for (const operators::TensorArg& arg : operators::tensor_args(*workload)) {
      double elements = 1;
      for (int64_t d : arg.shape) elements *= static_cast<double>(d);
      task_bytes += elements * dtype_bytes(arg.dtype);
    }
    bytes += std::max(1.0, task.weight()) * task_bytes;
  }
  return bytes;
}

TuningOptions tuning_options(const v1::Job& job, const JobManagerOptions& defaults, int agents) {
  const v1::JobSpec& spec = job.spec();
  TuningOptions options;
  options.max_wait_s = max_wait_s(spec, defaults);
  options.trials = spec.trials();
  options.time_budget_s = spec.time_budget_s();
  // A resumed job's clock goes on from its last saved progress rather than restarting.
  options.elapsed_before_s = job.progress().elapsed_s();
  options.early_stopping = spec.early_stopping();
  options.batch_size = spec.batch_size() > 0 ? spec.batch_size() : farm_batch_size(agents, defaults.default_batch_size);
  // A job of many tasks (a model's) measures in rounds small enough that every task gets one,
  // as Ansor sizes its rounds: the scheduler can only weigh tasks that have been measured.
  if (spec.batch_size() <= 0 && spec.tasks_size() > 1)
    options.batch_size = std::max(1, std::min(options.batch_size, options.trials / spec.tasks_size()));
  options.build_threads = defaults.build_threads;
  options.metrics = defaults.metrics;
  switch (spec.strategy()) {
    case v1::RANDOM: options.strategy = Strategy::kRandom; break;
    case v1::GRID: options.strategy = Strategy::kGrid; break;
    case v1::GENETIC: options.strategy = Strategy::kGenetic; break;
    default: options.strategy = Strategy::kXgbSa; break;
  }
  options.search.seed = spec.seed() ? spec.seed() : std::hash<std::string>{}(job.id());
  options.search.model = defaults.model;
  options.search.model.seed = options.search.seed;
  options.measure = spec.has_measure() ? fill_unset(spec.measure(), defaults.default_measure) : defaults.default_measure;
  if (spec.target().kind() == "cuda" && spec.measure().min_repeat_ms() <= 0)
    options.measure.set_min_repeat_ms(kDefaultGpuTuningMinRepeatMs);
  // A model's candidates are timed with their arguments rotated through what one run of the
  // model touches, which is what a step finds in the caches inside the model (cpu_runner.cc).
  if (options.measure.rotation_bytes() <= 0)
    options.measure.set_rotation_bytes(static_cast<int64_t>(std::min(model_run_bytes(spec), 1e15)));
  return options;
}

struct JobManager::Running {
  std::thread thread;
  TuningLoop* loop = nullptr;  // Set while the loop runs; guarded by mu_.
  bool user_cancelled = false;
  bool shutting_down = false;
};

JobManager::JobManager(db::RecordStore& store, TaskFactory& tasks, BackendFactory backends, DeviceKeyCheck device_check,
                       JobManagerOptions options)
    : store_(store),
      build_marks_(store.shared() ? history_build_marks(store) : file_build_marks(options.build_mark_dir)),
      tasks_(tasks),
      backends_(std::move(backends)),
      device_check_(std::move(device_check)),
      options_(std::move(options)),
      owner_(options_.lease_owner.empty() ? default_lease_owner() : options_.lease_owner) {}

JobManager::~JobManager() { shutdown(); }

Status JobManager::validate(const v1::JobSpec& spec) const {
  auto bad = [](std::string why) { return invalid_argument(std::move(why)); };
  if (spec.name().size() > 256) return bad("job name is longer than 256 characters");
  if (spec.tasks_size() == 0) return bad("the job has no tasks: give at least one workload");
  if (spec.tasks_size() > kMaxTasks) return bad(fmt::format("the job has {} tasks, at most {}", spec.tasks_size(), kMaxTasks));
  for (int i = 0; i < spec.tasks_size(); ++i) {
    const v1::TuneTask& t = spec.tasks(i);
    auto w = from_proto(t.workload());
    if (!w.ok()) return w.status().with_context(fmt::format("task {}", i));
    if (t.template_name().size() > 64 || !valid_name_chars(t.template_name(), false))
      return bad(fmt::format("task {}: template name '{}' is not a template name", i, t.template_name()));
    if (!std::isfinite(t.weight()) || t.weight() < 0)
      return bad(fmt::format("task {}: weight {} must be a non-negative number", i, t.weight()));
  }
  auto target = from_proto(spec.target());
  if (!target.ok()) return target.status();
  if (spec.device_key().empty()) return bad("device key is empty: say which boards measure (e.g. local-cpu)");
  if (spec.device_key().size() > 64 || !valid_name_chars(spec.device_key(), true))
    return bad(fmt::format("device key '{}' may hold only letters, digits, '-', '_' and '.' (at most 64)",
                           spec.device_key()));
  if (spec.trials() <= 0 || spec.trials() > kMaxTrials)
    return bad(fmt::format("trials {} must be between 1 and {}", spec.trials(), kMaxTrials));
  if (!std::isfinite(spec.time_budget_s()) || spec.time_budget_s() < 0 || spec.time_budget_s() > kMaxTimeBudgetS)
    return bad(fmt::format("time budget {} s must be between 0 (none) and 30 days", spec.time_budget_s()));
  if (!std::isfinite(spec.max_wait_s()) || spec.max_wait_s() < 0 || spec.max_wait_s() > kMaxTimeBudgetS)
    return bad(fmt::format("max wait {} s must be between 0 (the service's default) and 30 days", spec.max_wait_s()));
  if (spec.early_stopping() < 0) return bad(fmt::format("early stopping {} must not be negative", spec.early_stopping()));
  if (spec.batch_size() < 0 || spec.batch_size() > kMaxBatch)
    return bad(fmt::format("batch size {} must be between 0 (default) and {}", spec.batch_size(), kMaxBatch));
  if (!v1::SearchStrategy_IsValid(spec.strategy()))
    return bad(fmt::format("search strategy {} is not known", static_cast<int>(spec.strategy())));
  if (spec.priority() < -1000 || spec.priority() > 1000)
    return bad(fmt::format("priority {} must be between -1000 and 1000", spec.priority()));
  const v1::MeasureOptions& m = spec.measure();
  if (m.number() < 0 || m.number() > 1'000'000) return bad(fmt::format("measure.number {} is out of range [0, 1000000]", m.number()));
  if (m.repeat() < 0 || m.repeat() > 1000) return bad(fmt::format("measure.repeat {} is out of range [0, 1000]", m.repeat()));
  if (m.min_repeat_ms() < 0 || m.min_repeat_ms() > 60'000)
    return bad(fmt::format("measure.min_repeat_ms {} is out of range [0, 60000]", m.min_repeat_ms()));
  if (!std::isfinite(m.timeout_s()) || m.timeout_s() < 0 || m.timeout_s() > 3600)
    return bad(fmt::format("measure.timeout_s {} is out of range [0, 3600]", m.timeout_s()));
  if (!std::isfinite(m.rtol()) || m.rtol() < 0 || !std::isfinite(m.atol()) || m.atol() < 0)
    return bad("measure.rtol and measure.atol must be non-negative numbers");
  return Status();
}

Status JobManager::start() {
  if (store_.shared()) {
    // Other tunerds may be running the queued and running jobs: the heartbeat takes those whose
    // lease is free or expired.
    spdlog::info("jobs run under leases of {:.1f} s as {}", options_.lease.count() / 1000.0, owner_);
    lease_thread_ = std::thread([this] { keep_leases(); });
    return Status();
  }
  TF_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_.list_jobs({v1::QUEUED, v1::RUNNING}, 100000));
  std::lock_guard<std::mutex> lock(mu_);
  // Oldest first, as they were submitted.
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    TF_ASSIGN_OR_RETURN(std::optional<v1::Job> failed, fail_if_builds_kept_crashing(*it));
    if (failed) {
      updates_[it->id()] = JobUpdate{*failed, "failed: " + failed->error(), 1, true};
      continue;
    }
    spdlog::info("job {}: resuming ({})", it->id(), v1::JobState_Name(it->state()));
    queue_.push_back({it->id(), ""});
    updates_[it->id()] = JobUpdate{*it, "resumed after a restart", 1, false};
  }
  launch_queued_locked();
  return Status();
}

StatusOr<std::optional<v1::Job>> JobManager::fail_if_builds_kept_crashing(const v1::Job& job) {
  int crashes = build_marks_->crashes(job.id());
  if (crashes < kBuildCrashesBeforeFailing) return std::optional<v1::Job>();
  std::string why = fmt::format(
      "tunerd died {} times in a row while compiling this job's candidates (target '{}'); the job is not "
      "resumed, so that it cannot stop the service again",
      crashes, from_proto(job.spec().target()).ok() ? from_proto(job.spec().target())->to_string() : "?");
  spdlog::error("job {}: {}", job.id(), why);
  TF_ASSIGN_OR_RETURN(v1::Job failed, store_.update_job_state(job.id(), v1::FAILED, why));
  build_marks_->set(job.id(), 0);
  return std::optional<v1::Job>(std::move(failed));
}

Status JobManager::check_queue_room(const std::string& client, const std::string& submitter) {
  int64_t waiting = 0, of_client = 0;
  if (store_.shared()) {
    // The queue is the history's: every tunerd sharing it takes from it.
    TF_ASSIGN_OR_RETURN(db::RecordStore::QueuedJobs queued, store_.count_queued_jobs(submitter));
    waiting = queued.total;
    of_client = submitter.empty() ? 0 : queued.of_submitter;
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    waiting = static_cast<int64_t>(queue_.size());
    if (!client.empty())
      of_client = std::count_if(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.client == client; });
  }
  if (waiting >= options_.max_queued_jobs)
    return resource_exhausted(fmt::format("{} jobs are already waiting to run (at most {}, --max-queued-jobs); "
                                          "submit again when some have finished, or cancel some",
                                          waiting, options_.max_queued_jobs));
  if (client.empty()) return Status();
  if (of_client >= options_.max_queued_jobs_per_client)
    return resource_exhausted(fmt::format("{} already has {} jobs waiting to run (at most {} per client, "
                                          "--max-queued-jobs-per-client); submit again when some have finished, "
                                          "or cancel some",
                                          client, of_client, options_.max_queued_jobs_per_client));
  return Status();
}

StatusOr<v1::Job> JobManager::submit(const v1::JobSpec& submitted, const std::string& client,
                                     const db::JobRequest& request) {
  TF_ASSIGN_OR_RETURN(std::optional<v1::Job> earlier, store_.find_requested_job(request, submitted));
  if (earlier) {
    spdlog::info("job {}: submitted again (request id '{}'): the same job", earlier->id(), request.request_id);
    return get(earlier->id());
  }
  TF_RETURN_IF_ERROR(validate(submitted));
  v1::JobSpec spec = submitted;
  spec.clear_build_target();
  spec.clear_stream_bytes_per_s();
  TF_ASSIGN_OR_RETURN(Target target, from_proto(spec.target()));
  Target build_target = target;
  if (device_check_) {
    TF_ASSIGN_OR_RETURN(std::vector<AgentPlatform> agents, device_check_(spec.device_key()));
    TF_RETURN_IF_ERROR(check_agents_can_run(spec.device_key(), target, agents, host_arch()));
    // Code for the boards that measure it, never for this host's CPU (PTX runs whatever the CPU).
    if (target.kind == Target::Kind::kLLVM) TF_RETURN_IF_ERROR(check_agents_agree_on_cpu(spec.device_key(), agents));
    build_target = resolve_target(target, agents);
    spec.set_stream_bytes_per_s(slowest_stream(agents));
    if (!(build_target == target)) {
      // The agents' CPU must be one LLVM builds for, and the whole fit in a target string.
      auto checked = parse_target(build_target.to_string());
      if (!checked.ok())
        return checked.status().with_context(fmt::format("the CPU of device key '{}'", spec.device_key()));
      *spec.mutable_build_target() = to_proto(build_target);
    }
  }
  for (int i = 0; i < spec.tasks_size(); ++i) {
    TF_ASSIGN_OR_RETURN(Workload w, from_proto(spec.tasks(i).workload()));
    auto task = tasks_.make_task(w, build_target, spec.tasks(i).template_name());
    if (!task.ok()) {
      Status s = task.status().with_context(fmt::format("task {} ({})", i, w.to_string()));
      if (build_target == target) return s;
      return s.with_context(fmt::format("built for the CPU of device key '{}' ({})", spec.device_key(),
                                        build_target.to_string()));
    }
  }
  TF_RETURN_IF_ERROR(check_queue_room(client, request.submitter));
  TF_ASSIGN_OR_RETURN(db::CreatedJob created, store_.create_job(spec, request));
  // A submit of the same request that was being set up meanwhile, here or on another tunerd, made
  // the job: it is queued already.
  if (!created.created) return get(created.job.id());
  v1::Job job = std::move(created.job);
  if (store_.shared()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates_[job.id()] = JobUpdate{job, "queued", 1, false};
    }
    // Run here when there is room; otherwise the first tunerd with room takes it.
    take_job(job.id(), client);
    return job;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return unavailable("the tuning service is shutting down");
  updates_[job.id()] = JobUpdate{job, "queued", 1, false};
  queue_.push_back({job.id(), client});
  launch_queued_locked();
  changed_.notify_all();
  return job;
}

StatusOr<v1::Job> JobManager::get(const std::string& job_id) {
  {
    // A job running here is best described by its last update: it carries what the job waits for,
    // and stays current while the history cannot be written.
    std::lock_guard<std::mutex> lock(mu_);
    auto update = updates_.find(job_id);
    if (running_.count(job_id) && update != updates_.end() && !update->second.job.id().empty())
      return update->second.job;
  }
  return store_.get_job(job_id);
}

bool JobManager::wait_for_history(const std::string& job_id, v1::Job& job, Running& running) {
  Status outage = store_.write_outage();
  if (outage.ok()) return true;
  auto start = std::chrono::steady_clock::now();
  double elapsed_before = job.progress().elapsed_s();
  spdlog::warn("job {}: paused: {}", job_id, outage.message());
  while (!outage.ok()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (running.shutting_down) return false;
    }
    job.set_activity(fmt::format("paused: {}; the job resumes when a write succeeds", outage.message()));
    job.mutable_progress()->set_elapsed_s(
        elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    publish(job_id, job, job.activity());
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, std::chrono::seconds(1), [&] { return running.shutting_down; });
    }
    outage = store_.write_outage();
  }
  spdlog::info("job {}: the history can be written again; resuming", job_id);
  job.clear_activity();
  publish(job_id, job, "resumed: the history can be written again");
  return true;
}

StatusOr<std::vector<v1::Job>> JobManager::list(const std::vector<v1::JobState>& states, int limit) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_.list_jobs(states, limit));
  // A job running here is listed as get() shows it: its progress is current even while the
  // history cannot be written, and it says what it waits for.
  std::lock_guard<std::mutex> lock(mu_);
  for (v1::Job& job : jobs) {
    auto update = updates_.find(job.id());
    if (running_.count(job.id()) && update != updates_.end() && !update->second.job.id().empty() &&
        update->second.job.state() == job.state())
      job = update->second.job;
  }
  return jobs;
}

StatusOr<v1::Job> JobManager::cancel(const std::string& job_id) {
  TF_ASSIGN_OR_RETURN(v1::Job job, store_.get_job(job_id));
  if (ended(job.state()))
    return failed_precondition(fmt::format("job {} has already ended ({})", job_id, v1::JobState_Name(job.state())));
  bool queued_here;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(job_id);
    if (it != running_.end()) {
      it->second->user_cancelled = true;
      if (it->second->loop) it->second->loop->cancel();
      return job;  // The job's thread records CANCELLED when its batch in flight ends.
    }
    queued_here = std::erase_if(queue_, [&](const Queued& q) { return q.job_id == job_id; }) > 0;
  }
  if (store_.shared() && !queued_here) {
    // Queued or run by another tunerd, or by none: the history tells the one that holds it.
    TF_ASSIGN_OR_RETURN(v1::Job asked, store_.request_cancel(job_id));
    publish(job_id, asked, ended(asked.state()) ? "cancelled before it started"
                                                : "cancel requested: the tunerd that runs the job stops it at its "
                                                  "next heartbeat");
    return asked;
  }
  TF_ASSIGN_OR_RETURN(v1::Job cancelled, store_.update_job_state(job_id, v1::CANCELLED));
  if (store_.shared()) (void)store_.release_lease(job_id);
  publish(job_id, cancelled, "cancelled before it started");
  return cancelled;
}

StatusOr<v1::Job> JobManager::resume(const std::string& job_id, const std::string& client,
                                     const std::string& submitter) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return unavailable("the tuning service is shutting down");
  }
  TF_RETURN_IF_ERROR(check_queue_room(client, submitter));
  TF_ASSIGN_OR_RETURN(v1::Job job, store_.reopen_job(job_id));
  spdlog::info("job {}: resumed on request", job_id);
  if (store_.shared()) {
    publish(job_id, job, "queued again: resumes from its records");
    take_job(job_id, client);
    return job;
  }
  std::lock_guard<std::mutex> lock(mu_);
  updates_[job_id] = JobUpdate{job, "queued again: resumes from its records", updates_[job_id].version + 1, false};
  queue_.push_back({job_id, client});
  launch_queued_locked();
  changed_.notify_all();
  return job;
}

StatusOr<JobUpdate> JobManager::wait_for_update(const std::string& job_id, uint64_t after_version,
                                                std::chrono::milliseconds timeout) {
  if (store_.shared()) {
    bool here;
    {
      std::lock_guard<std::mutex> lock(mu_);
      here = running_.count(job_id) > 0;
    }
    if (!here) return poll_remote(job_id, after_version, timeout);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, timeout, [&] {
      auto it = updates_.find(job_id);
      return stopping_ || (it != updates_.end() && it->second.version > after_version);
    });
    auto it = updates_.find(job_id);
    if (it != updates_.end()) return it->second;
  }
  // A job this process has not touched (e.g. one that ended before a restart).
  TF_ASSIGN_OR_RETURN(v1::Job job, store_.get_job(job_id));
  return JobUpdate{job, "", after_version + 1, ended(job.state())};
}

void JobManager::publish(const std::string& job_id, const v1::Job& job, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  JobUpdate& u = updates_[job_id];
  u.job = job;
  u.message = std::move(message);
  u.version++;
  u.ended = ended(job.state());
  changed_.notify_all();
}

void JobManager::launch_queued_locked() {
  // Threads that ended have left their handles here; they no longer need the lock, so joining
  // them while holding it is safe. A job thread never calls this: it cannot join itself.
  for (auto& t : finished_threads_) t.join();
  finished_threads_.clear();
  start_queued_locked();
}

void JobManager::start_queued_locked() {
  while (!stopping_ && !queue_.empty() && static_cast<int>(running_.size()) < options_.max_running_jobs) {
    std::string id = queue_.front().job_id;
    queue_.erase(queue_.begin());
    auto running = std::make_unique<Running>();
    Running* r = running.get();
    running_[id] = std::move(running);
    r->thread = std::thread([this, id] { run_job(id); });
  }
}

void JobManager::run_job(const std::string& job_id) {
  Running* running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running = running_.at(job_id).get();
  }
  Status status = run_job_inner(job_id, *running);
  bool shutting_down;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down = running->shutting_down;
  }
  if (!shutting_down) build_marks_->set(job_id, 0);
  if (!status.ok() && !shutting_down) {
    spdlog::error("job {}: {}", job_id, status.to_string());
    auto failed = store_.update_job_state(job_id, v1::FAILED, status.message());
    if (failed.ok()) publish(job_id, *failed, "failed: " + status.message());
  }
  // Ended, stopped or lost: another tunerd may take a job that has not ended at once.
  if (store_.shared()) {
    if (Status s = store_.release_lease(job_id); !s.ok()) spdlog::warn("job {}: lease not released: {}", job_id, s.message());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(job_id);
  finished_threads_.push_back(std::move(it->second->thread));
  running_.erase(it);
  start_queued_locked();
  changed_.notify_all();
}

namespace {

// What a job already measured, before a restart: it counts and is not measured again. Answers
// how many results were preloaded.
StatusOr<int> resume_from_history(db::RecordStore& store, const std::string& job_id, const v1::JobSpec& spec,
                                  const std::vector<std::unique_ptr<TuningTask>>& tasks, TuningLoop& loop) {
  int resumed = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    db::RecordFilter filter;
    filter.job_id = job_id;
    TF_ASSIGN_OR_RETURN(filter.workload, from_proto(spec.tasks(i).workload()));
    std::vector<TrialResult> earlier;
    for (int64_t offset = 0;;) {
      TF_ASSIGN_OR_RETURN(db::RecordPage page, store.list_records(filter, 1000, offset));
      for (const v1::Record& r : page.records) {
        auto point = tasks[i]->point_of(from_proto(r.config()));
        if (!point.ok()) {
          spdlog::warn("job {}: ignoring a recorded config that no longer fits its space: {}", job_id,
                       point.status().message());
          continue;
        }
        if (r.result().error() == v1::DEVICE_LOST) continue;  // Recorded by older versions; never measured.
        TrialResult t;
        t.task = static_cast<int>(i);
        t.point = std::move(*point);
        t.result = r.result();
        t.gflops = r.gflops();
        // A re-measurement counts no trial; the loop measures only the rounds still missing.
        t.remeasure_round = r.remeasure_round();
        resumed += t.remeasure_round == 0;
        earlier.push_back(std::move(t));
      }
      offset += static_cast<int64_t>(page.records.size());
      if (page.records.empty() || offset >= page.total) break;
    }
    TF_RETURN_IF_ERROR(loop.preload(static_cast<int>(i), earlier));
  }
  return resumed;
}

// Transfer learning: the recent history of this target and device key, from other jobs, trains
// each task's cost model before its first batch.
Status warm_start_from_other_jobs(db::RecordStore& store, const std::string& job_id, const Target& target,
                                  const std::string& device_key, int warm_start_records,
                                  const std::vector<std::unique_ptr<TuningTask>>& tasks, TuningLoop& loop) {
  db::RecordFilter filter;
  filter.target = target;
  filter.device_key = device_key;
  TF_ASSIGN_OR_RETURN(db::RecordPage head, store.list_records(filter, 1, 0));
  int64_t offset = std::max<int64_t>(0, head.total - warm_start_records);
  TF_ASSIGN_OR_RETURN(db::RecordPage recent, store.list_records(filter, warm_start_records, offset));
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::string template_name = tasks[i]->config_at(tasks[i]->space().point_at(0)).template_name;
    std::vector<HistoryRecord> history;
    for (const v1::Record& r : recent.records) {
      if (r.job_id() == job_id || r.config().template_name() != template_name) continue;
      auto w = from_proto(r.workload());
      if (!w.ok()) continue;
      history.push_back({w->to_string(), from_proto(r.config()), r.gflops()});
    }
    if (history.empty()) continue;
    TF_RETURN_IF_ERROR(loop.warm_start(static_cast<int>(i), history));
    spdlog::info("job {}: task {} warm-started from {} earlier records", job_id, i, history.size());
  }
  return Status();
}

// Where a job's results go: each into the history as a record, counted by outcome so that a job
// whose every candidate failed can say what failed most often. Called from the loop's threads.
class RecordSink {
 public:
  RecordSink(db::RecordStore& store, const std::string& job_id, const v1::JobSpec& spec,
             const std::vector<const TuningTask*>& tasks)
      : store_(store), job_id_(job_id), spec_(spec), tasks_(tasks) {}

  void operator()(const TrialResult& t) {
    // Nothing was measured: the history keeps measurements, and the candidate is proposed again.
    if (t.result.error() == v1::DEVICE_LOST) return;
    if (t.remeasure_round == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (t.result.error() == v1::OK) {
        ++successes_;
      } else {
        auto& [count, message] = failures_[t.result.error()];
        if (count++ == 0) message = t.result.error_msg();
      }
    }
    Status st = store_.add({record_of(t)});
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok() && error_.ok()) error_ = st;
  }

  // The first failed write, if any.
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // FAILED_PRECONDITION naming the most frequent error when results came and none succeeded.
  Status every_candidate_failed() {
    std::lock_guard<std::mutex> lock(mu_);
    if (successes_ > 0 || failures_.empty()) return Status();
    auto dominant = std::max_element(failures_.begin(), failures_.end(),
                                     [](const auto& a, const auto& b) { return a.second.first < b.second.first; });
    int total = 0;
    for (const auto& [code, f] : failures_) total += f.first;
    return failed_precondition(fmt::format("every candidate failed; most often {} ({} of {}): {}",
                                           v1::ErrorCode_Name(static_cast<v1::ErrorCode>(dominant->first)),
                                           dominant->second.first, total, dominant->second.second));
  }

 private:
  v1::Record record_of(const TrialResult& t) const {
    v1::Record rec;
    *rec.mutable_workload() = tasks_[t.task]->workload();
    *rec.mutable_target() = spec_.target();
    *rec.mutable_built_for() = spec_.has_build_target() ? spec_.build_target() : spec_.target();
    rec.set_device_key(spec_.device_key());
    *rec.mutable_config() = to_proto(t.config);
    *rec.mutable_result() = t.result;
    // mean_cost_s is left to the history, which derives it from the costs of an OK record.
    rec.set_gflops(t.gflops);
    rec.set_build_time_s(t.build_time_s);
    rec.set_job_id(job_id_);
    rec.set_remeasure_round(t.remeasure_round);
    if (rec.result().started_at_us() == 0) rec.mutable_result()->set_started_at_us(now_us());
    return rec;
  }

  db::RecordStore& store_;
  const std::string& job_id_;
  const v1::JobSpec& spec_;
  const std::vector<const TuningTask*>& tasks_;
  std::mutex mu_;
  Status error_;
  // Per error code: how often, and the first message.
  std::map<int, std::pair<int, std::string>> failures_;
  int successes_ = 0;
};

// The loop's progress as the job shows it; the ETA counts only trials of this run.
// Each task's standing: what `watch` shows per task, and what a model's latency estimate (the sum
// over tasks of weight x FLOPs / speed) is computed from.
void set_task_progress(v1::TaskProgress& tp, const TuningTask& task, double weight, const TaskProgress& p) {
  *tp.mutable_workload() = task.workload();
  tp.set_trials_done(p.trials);
  tp.set_best_gflops(p.best_gflops);
  tp.set_default_gflops(p.default_gflops);
  tp.set_weight(weight);
  tp.set_flops(task.flops());
}

v1::JobProgress job_progress(const TuningProgress& p, int trials_at_start, double elapsed_before_s,
                             const std::vector<const TuningTask*>& tasks, const std::vector<double>& weights) {
  v1::JobProgress progress;
  for (size_t i = 0; i < p.tasks.size() && i < tasks.size(); ++i)
    set_task_progress(*progress.add_tasks(), *tasks[i], weights[i], p.tasks[i]);
  progress.set_trials_done(p.trials_done);
  progress.set_trials_budget(p.trials_budget);
  progress.set_best_gflops(p.best_gflops);
  progress.set_current_gflops(p.last_batch_gflops);
  for (size_t code = 0; code < p.errors_by_code.size(); ++code)
    if (p.errors_by_code[code] > 0)
      (*progress.mutable_errors_by_code())[v1::ErrorCode_Name(static_cast<v1::ErrorCode>(code))] = p.errors_by_code[code];
  progress.set_elapsed_s(p.elapsed_s);
  progress.set_first_batch_s(p.first_batch_s);
  progress.set_remeasured(p.remeasured);
  progress.set_remeasure_budget(p.remeasure_budget);
  // A re-measurement costs about what a trial does: both are one candidate measured.
  int new_work = p.trials_done - trials_at_start + p.remeasured;
  int left = std::max(0, p.trials_budget - p.trials_done) + std::max(0, p.remeasure_budget - p.remeasured);
  double this_run_s = p.elapsed_s - elapsed_before_s;
  progress.set_eta_s(new_work > 0 ? this_run_s / new_work * left : -1);
  return progress;
}

// A finished job's progress: each task's winner, and the job's best as its best task's winner, by
// the same figure as `best` (common/figure.h).
v1::JobProgress final_progress(v1::JobProgress progress, const TuningOutcome& outcome,
                               const std::vector<const TuningTask*>& tasks, const std::vector<double>& weights) {
  // The default's figure comes from the last report; the winners from the outcome.
  std::vector<double> defaults(outcome.tasks.size(), 0.0);
  for (int i = 0; i < progress.tasks_size() && i < static_cast<int>(defaults.size()); ++i)
    defaults[i] = progress.tasks(i).default_gflops();
  progress.clear_tasks();
  progress.set_best_gflops(0);
  for (size_t i = 0; i < outcome.tasks.size(); ++i) {
    const TaskOutcome& t = outcome.tasks[i];
    progress.set_best_gflops(std::max(progress.best_gflops(), t.best_gflops));
    auto* tp = progress.add_tasks();
    set_task_progress(*tp, *tasks[i], weights[i], {t.trials, t.best_gflops, defaults[i]});
    if (t.has_best) *tp->mutable_best_config() = to_proto(t.best_config);
  }
  progress.set_trials_done(outcome.trials);
  progress.set_eta_s(0);
  return progress;
}

}  // namespace

Status JobManager::run_job_inner(const std::string& job_id, Running& running) {
  TF_ASSIGN_OR_RETURN(v1::Job job, store_.get_job(job_id));
  const v1::JobSpec& spec = job.spec();
  TF_ASSIGN_OR_RETURN(Target target, from_proto(spec.target()));
  TF_ASSIGN_OR_RETURN(Target build_target, spec.has_build_target() ? from_proto(spec.build_target()) : target);

  BuildGuard build_guard(*build_marks_, job_id);
  std::vector<std::unique_ptr<TuningTask>> tasks;
  std::vector<const TuningTask*> task_ptrs;
  std::vector<double> weights;
  for (const v1::TuneTask& t : spec.tasks()) {
    TF_ASSIGN_OR_RETURN(Workload w, from_proto(t.workload()));
    TF_ASSIGN_OR_RETURN(auto unguarded, tasks_.make_task(w, build_target, t.template_name()));
    auto task = guard_builds(std::move(unguarded), build_guard);
    task_ptrs.push_back(task.get());
    weights.push_back(t.weight() > 0 ? t.weight() : 1.0);
    tasks.push_back(std::move(task));
  }
  TF_ASSIGN_OR_RETURN(std::unique_ptr<MeasureBackend> backend, backends_(job));

  int agents = 0;
  if (device_check_) {
    auto serving = device_check_(spec.device_key());
    if (serving.ok()) agents = static_cast<int>(serving->size());
  }
  TuningOptions options = tuning_options(job, options_, agents);
  TuningLoop loop(task_ptrs, weights, *backend, options);
  TF_ASSIGN_OR_RETURN(int resumed, resume_from_history(store_, job_id, spec, tasks, loop));
  if (options.strategy == Strategy::kXgbSa)
    TF_RETURN_IF_ERROR(warm_start_from_other_jobs(store_, job_id, target, spec.device_key(),
                                                  options_.warm_start_records, tasks, loop));

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running.shutting_down) return Status();
    if (running.user_cancelled) loop.cancel();
    running.loop = &loop;
  }
  TF_ASSIGN_OR_RETURN(job, store_.update_job_state(job_id, v1::RUNNING));
  publish(job_id, job, resumed ? fmt::format("running; {} earlier results resumed", resumed) : "running");

  RecordSink records(store_, job_id, spec, task_ptrs);
  // The job as this run shows it; the loop's thread reports progress and the measuring thread
  // what it waits for, so both go through job_mu.
  std::mutex job_mu;
  std::string waiting_for_agents, waiting_for_farm;
  auto show = [&](const std::string& message) {
    job.set_activity(!waiting_for_farm.empty() ? waiting_for_farm : waiting_for_agents);
    publish(job_id, job, job.activity().empty() ? message : job.activity());
  };
  auto since_now = [] { return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(std::time(nullptr))); };
  backend->on_wait([&](const std::string& why) {
    std::lock_guard<std::mutex> lock(job_mu);
    waiting_for_farm = why.empty() ? "" : fmt::format("{} since {} (fails after {:.0f} s, --max-wait)", why,
                                                      since_now(), options.max_wait_s);
    show(why.empty() ? "results come again" : why);
  });
  auto on_progress = [&](const TuningProgress& p) {
    v1::JobProgress progress = job_progress(p, resumed, options.elapsed_before_s, task_ptrs, weights);
    std::lock_guard<std::mutex> lock(job_mu);
    *job.mutable_progress() = progress;
    // No new batch while the history cannot keep what it measures.
    if (!wait_for_history(job_id, job, running)) return;
    Status st = store_.update_job_progress(job_id, progress);
    if (!st.ok()) spdlog::warn("job {}: progress not saved: {}", job_id, st.message());
    if (!p.waiting_for_devices) {
      waiting_for_agents.clear();
    } else if (waiting_for_agents.empty()) {
      waiting_for_agents = fmt::format("waiting for an agent of key '{}' since {}", spec.device_key(), since_now());
      spdlog::warn("job {}: no agent of key '{}' measured its last batch; waiting", job_id, spec.device_key());
    }
    show(p.message);
  };

  auto outcome = loop.run(std::ref(records), on_progress);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running.loop = nullptr;
  }
  backend->on_wait(nullptr);
  // Stopping: the job resumes at the next start, and re-measures what the history did not keep.
  if (!wait_for_history(job_id, job, running)) return Status();
  TF_RETURN_IF_ERROR(store_.flush());
  if (!outcome.ok()) {
    if (outcome.status().code() == StatusCode::kUnavailable)
      return outcome.status().with_context(
          fmt::format("device key '{}'; `tune-client resume {}` goes on from where it stopped", spec.device_key(), job_id));
    return outcome.status();
  }
  if (Status st = records.error(); !st.ok()) return st.with_context("recording results");

  bool shutting_down, user_cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down = running.shutting_down;
    user_cancelled = running.user_cancelled;
  }
  if (shutting_down) return Status();  // Stays RUNNING in the database: resumed at the next start.
  if (!user_cancelled && resumed == 0) TF_RETURN_IF_ERROR(records.every_candidate_failed());
  v1::JobProgress done = final_progress(job.progress(), *outcome, task_ptrs, weights);
  TF_RETURN_IF_ERROR(store_.update_job_progress(job_id, done));
  // A job that measured nothing did not succeed, whatever ended it first.
  if (!user_cancelled && outcome->trials == 0) {
    if (outcome->stop_reason == StopReason::kTimeBudget)
      return deadline_exceeded(fmt::format(
          "the time budget of {:.0f} s ended before any candidate was measured: the first batch (building it, "
          "queueing and measuring it) took longer; give a longer --time-budget, or resume this job",
          spec.time_budget_s()));
    return failed_precondition(fmt::format("the job ended ({}) without measuring any candidate",
                                           stop_reason_name(outcome->stop_reason)));
  }
  TF_ASSIGN_OR_RETURN(job, store_.update_job_state(job_id, user_cancelled ? v1::CANCELLED : v1::SUCCEEDED));
  publish(job_id, job, fmt::format("{} ({}): {} trials", user_cancelled ? "cancelled" : "done",
                                   stop_reason_name(outcome->stop_reason), outcome->trials));
  return Status();
}

void JobManager::shutdown() {
  std::vector<std::thread> threads;
  std::vector<Queued> leased;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && running_.empty() && finished_threads_.empty() && !lease_thread_.joinable()) return;
    stopping_ = true;
    if (store_.shared()) leased.swap(queue_);
    for (auto& [id, r] : running_) {
      r->shutting_down = true;
      if (r->loop) r->loop->cancel();
    }
    changed_.notify_all();
  }
  // Wait for the job threads to wind down; each moves its handle to finished_threads_.
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    if (running_.empty()) {
      threads.swap(finished_threads_);
      break;
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  for (auto& t : threads) t.join();
  if (lease_thread_.joinable()) lease_thread_.join();
  for (const Queued& q : leased) (void)store_.release_lease(q.job_id);
}

void JobManager::keep_leases() {
  const auto lease = options_.lease;
  const auto heartbeat = std::max(lease / 4, std::chrono::milliseconds(50));
  // Leaves a third of the lease for the jobs' threads to stop (a batch in flight is abandoned).
  const auto cutoff = lease * 2 / 3;
  auto last_renewed = std::chrono::steady_clock::now();
  bool cut_off = false;
  auto stop_everything = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> ids;
    for (const auto& [id, r] : running_) ids.push_back(id);
    for (const Queued& q : queue_) ids.push_back(q.job_id);
    for (const std::string& id : ids) drop_job_locked(id, why);
  };
  for (;;) {
    auto sent = std::chrono::steady_clock::now();
    // Renewing may hang on a dead connection: the cut-off is watched meanwhile.
    auto renewal = std::async(std::launch::async, [this, lease] { return store_.renew_leases(owner_, lease); });
    auto check_cutoff = [&] {
      if (cut_off || std::chrono::steady_clock::now() - last_renewed <= cutoff) return;
      cut_off = true;
      std::string why = fmt::format("this tunerd could not renew its leases for {:.1f} s (the history is out of "
                                    "reach); it stops its jobs before another tunerd takes them over",
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - last_renewed).count());
      spdlog::error("{}", why);
      stop_everything(why);
    };
    while (renewal.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) check_cutoff();
    auto renewed = renewal.get();
    if (renewed.ok()) {
      last_renewed = sent;
      if (cut_off) spdlog::info("the history answers again: this tunerd takes jobs again");
      cut_off = false;
      std::vector<std::string> to_cancel;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const db::LeaseRenewal& r : *renewed) {
          if (!r.held) drop_job_locked(r.job_id, "another tunerd holds its lease now");
          else if (r.cancel_requested) to_cancel.push_back(r.job_id);
        }
      }
      for (const std::string& id : to_cancel) {
        auto cancelled = cancel(id);
        if (!cancelled.ok()) spdlog::warn("job {}: cancel asked through the history: {}", id, cancelled.status().message());
      }
      take_free_jobs();
    } else {
      spdlog::warn("renewing leases: {}", renewed.status().message());
      check_cutoff();
    }
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, heartbeat, [&] { return stopping_; });
    if (stopping_) return;
  }
}

void JobManager::drop_job_locked(const std::string& job_id, const std::string& why) {
  if (auto it = running_.find(job_id); it != running_.end()) {
    if (it->second->shutting_down) return;
    spdlog::warn("job {}: stopped here: {}", job_id, why);
    // Like a shutdown: the job's state is left to the tunerd that holds it. Its lease stays fenced
    // until its thread has ended, so nothing it still writes can land.
    it->second->shutting_down = true;
    if (it->second->loop) it->second->loop->cancel();
    return;
  }
  if (std::erase_if(queue_, [&](const Queued& q) { return q.job_id == job_id; }) > 0) {
    spdlog::warn("job {}: no longer queued here: {}", job_id, why);
    store_.forget_lease(job_id);
  }
}

void JobManager::take_free_jobs() {
  int room;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    room = options_.max_running_jobs - static_cast<int>(running_.size() + queue_.size());
  }
  if (room <= 0) return;
  // A few more than there is room for: another tunerd may take some first.
  auto free = store_.unleased_jobs(room + 4);
  if (!free.ok()) return;
  for (const std::string& id : *free) {
    if (take_job(id, "") && --room == 0) return;
  }
}

bool JobManager::take_job(const std::string& job_id, const std::string& client) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || static_cast<int>(running_.size() + queue_.size()) >= options_.max_running_jobs) return false;
    if (running_.count(job_id)) return false;
  }
  auto generation = store_.acquire_lease(job_id, owner_, options_.lease);
  if (!generation.ok() || !*generation) return false;
  auto job = store_.get_job(job_id);
  // A job taken over after its tunerd died is guarded as one resumed after a restart: a tunerd
  // that died compiling it twice (its marks are in this tunerd's data directory when this is that
  // tunerd, restarted) fails it rather than die a third time.
  if (job.ok()) {
    auto failed = fail_if_builds_kept_crashing(*job);
    if (!failed.ok() || *failed) {
      (void)store_.release_lease(job_id);
      if (failed.ok()) publish(job_id, **failed, "failed: " + (*failed)->error());
      return false;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || !job.ok()) {
    lock.unlock();
    (void)store_.release_lease(job_id);
    return false;
  }
  bool taken_over = **generation > 1 && job->state() == v1::RUNNING;
  spdlog::info("job {}: {} (lease generation {})", job_id, taken_over ? "taken over" : "taken", **generation);
  JobUpdate& u = updates_[job_id];
  u = JobUpdate{*job, taken_over ? "taken over from a tunerd that stopped: resumes from its records" : "queued",
                u.version + 1, false};
  queue_.push_back({job_id, client});
  launch_queued_locked();
  changed_.notify_all();
  return true;
}

StatusOr<JobUpdate> JobManager::poll_remote(const std::string& job_id, uint64_t after_version,
                                            std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    TF_ASSIGN_OR_RETURN(v1::Job job, store_.get_job(job_id));
    std::unique_lock<std::mutex> lock(mu_);
    JobUpdate& u = updates_[job_id];
    if (u.version == 0 || u.job.SerializeAsString() != job.SerializeAsString()) {
      u.job = std::move(job);
      u.message.clear();
      u.version = std::max(u.version, after_version) + 1;
      u.ended = ended(u.job.state());
    }
    auto now = std::chrono::steady_clock::now();
    if (u.version > after_version || now >= deadline || stopping_) return u;
    // The history is asked a few times a second, not more, however many watch.
    changed_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(250)),
                      [&] { return stopping_; });
  }
}

}  // namespace tunefarm
