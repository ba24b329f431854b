// tune-client submit | jobs | status | watch | cancel: tuning jobs on tunerd.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "client/command.h"
#include "client/models.h"
#include "client/output.h"
#include "client/tuner_call.h"
#include "common/wire/wire.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::client {
namespace {

struct SubmitFlags {
  std::vector<std::string> workloads;
  std::string workloads_file;
  std::string model;
  std::vector<std::string> input_shapes;
  std::string target = "llvm";
  std::string device = "local-cpu";
  std::string template_name;
  int trials = 200;
  std::string time_budget;
  std::string max_wait;
  int early_stopping = 0;
  int batch_size = 0;
  std::string strategy = "xgb-sa";
  int priority = 0;
  uint64_t seed = 0;
  std::string name;
  std::string request_id;
  std::string submit_timeout = "30s";
  bool watch = false;
  bool json = false;
};

struct JobFlags {
  std::string job_id;
  bool json = false;
};

struct ListFlags {
  std::vector<std::string> states;
  int limit = 0;
  bool json = false;
};

std::unique_ptr<v1::Tuner::Stub> tuner(const GlobalFlags& global) { return v1::Tuner::NewStub(dial(global.server)); }

// One task's workload in full; a job of several (a model's) as its count of tasks per operator,
// which fits a line: the tasks themselves are listed by `status`.
std::string workloads_of(const v1::Job& job) {
  if (job.spec().tasks_size() == 1) {
    auto w = from_proto(job.spec().tasks(0).workload());
    return w.ok() ? w->to_string() : job.spec().tasks(0).workload().op();
  }
  std::map<std::string, int> per_op;
  for (const auto& t : job.spec().tasks()) ++per_op[t.workload().op()];
  std::string ops;
  for (const auto& [op, n] : per_op) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", n, op);
  return fmt::format("{} tasks ({})", job.spec().tasks_size(), ops);
}

std::string state_name(v1::JobState s) { return v1::JobState_Name(s); }

// A model job's latency so far as tunerd estimates it, with its untuned estimate once known;
// empty for a job of one task.
std::string latency_estimate(const v1::Job& job) {
  const v1::JobProgress& p = job.progress();
  if (p.latency_ms() <= 0) return "";
  return fmt::format("  model ~{:.3f} ms{}", p.latency_ms(),
                     p.untuned_latency_ms() > 0 ? fmt::format(" (untuned {:.3f} ms)", p.untuned_latency_ms()) : "");
}

std::string progress_line(const v1::Job& job) {
  const v1::JobProgress& p = job.progress();
  int budget = p.trials_budget() > 0 ? p.trials_budget() : job.spec().trials();
  int width = 24;
  int filled = budget > 0 ? std::min(width, p.trials_done() * width / budget) : 0;
  int errors = 0;
  for (const auto& [code, n] : p.errors_by_code())
    if (code != "OK") errors += n;
  // The search's trials, then the re-measurement of the best, which the estimate includes.
  std::string remeasuring = p.trials_done() >= budget && p.remeasure_budget() > 0 && p.eta_s() != 0
                                ? fmt::format("  re-measuring {}/{}", p.remeasured(), p.remeasure_budget())
                                : "";
  return fmt::format("[{}{}] {}/{} trials{}  best {:.1f} GFLOP/s  last batch {:.1f}  errors {}  elapsed {}  eta {}",
                     std::string(filled, '#'), std::string(width - filled, '.'), p.trials_done(), budget,
                     remeasuring, p.best_gflops(), p.current_gflops(), errors, format_duration(p.elapsed_s()),
                     p.eta_s() < 0 || p.trials_done() == 0 ? "?" : format_duration(p.eta_s())) +
         latency_estimate(job);
}

void print_job(const v1::Job& job) {
  fmt::print("job {}  {}\n", job.id(), state_name(job.state()));
  if (!job.spec().name().empty()) fmt::print("  name      {}\n", job.spec().name());
  fmt::print("  workloads {}\n", workloads_of(job));
  auto target = from_proto(job.spec().target());
  fmt::print("  target    {}   device {}\n", target.ok() ? target->to_string() : "?", job.spec().device_key());
  fmt::print("  progress  {}\n", progress_line(job));
  // What the time budget's clock counts before any result: building, queueing, measuring.
  if (job.progress().first_batch_s() > 0)
    fmt::print("  first     batch measured {} after the start (building, queueing and measuring it)\n",
               format_duration(job.progress().first_batch_s()));
  else if (job.state() == v1::RUNNING)
    fmt::print("  first     batch not measured yet (it is built, then queued and measured)\n");
  if (!job.activity().empty()) fmt::print("  now       {}\n", job.activity());
  for (const auto& [code, n] : job.progress().errors_by_code())
    if (code != "OK") fmt::print("            {} x {}\n", n, code);
  for (const auto& t : job.progress().tasks()) {
    auto w = from_proto(t.workload());
    fmt::print("  task      {}: {} trials, best {:.1f} GFLOP/s\n", w.ok() ? w->to_string() : "?", t.trials_done(),
               t.best_gflops());
    if (t.has_best_config()) fmt::print("            {}\n", from_proto(t.best_config()).to_json());
  }
  if (!job.error().empty()) fmt::print("  error     {}\n", job.error());
}

// Follows a job to its end: a progress bar on a terminal, a line per event otherwise, JSON lines
// with --json. Exit status: 0 when the job succeeded.
int follow(const GlobalFlags& global, const std::string& job_id, bool json) {
  bool tty = isatty(STDOUT_FILENO) && !json;
  v1::Job last;
  // A tunerd that restarts (or a connection that drops) ends the stream while the job goes on:
  // the watch dials again until the job ends, for as long as tunerd takes to come back.
  constexpr auto kReconnectFor = std::chrono::minutes(5);
  auto gone_since = std::chrono::steady_clock::now();
  bool reconnecting = false;
  for (;;) {
    auto stub = tuner(global);
    grpc::ClientContext context;
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    auto reader = stub->WatchJob(&context, request);
    v1::JobEvent event;
    bool heard = false;
    while (reader->Read(&event)) {
      heard = true;
      last = event.job();
      if (json) {
        fmt::print("{}\n", to_json(event));
      } else if (tty) {
        fmt::print("\r{}", progress_line(last));
      } else if (!event.message().empty()) {
        fmt::print("{}  {}\n", progress_line(last), event.message());
      }
      std::fflush(stdout);
    }
    grpc::Status status = reader->Finish();
    bool ended = last.state() == v1::SUCCEEDED || last.state() == v1::FAILED || last.state() == v1::CANCELLED;
    bool transient = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     status.error_code() == grpc::StatusCode::CANCELLED;
    if (ended || !transient) {
      if (tty) fmt::print("\n");
      if (!status.ok() && !ended) return rpc_failure(global.server, fmt::format("watching job {}", job_id), status);
      break;
    }
    if (heard || !reconnecting) gone_since = std::chrono::steady_clock::now();
    if (std::chrono::steady_clock::now() - gone_since > kReconnectFor) {
      if (tty) fmt::print("\n");
      return rpc_failure(global.server, fmt::format("watching job {} (gave up reconnecting)", job_id), status);
    }
    if (!reconnecting && !json)
      fmt::print(stderr, "{}tune-client: lost tunerd at {}; reconnecting\n", tty ? "\n" : "", global.server);
    reconnecting = true;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (!json) print_job(last);
  if (last.state() == v1::SUCCEEDED) return 0;
  return fail(fmt::format("job {} ended {}{}", job_id, state_name(last.state()),
                          last.error().empty() ? "" : ": " + last.error()));
}

// 128 random bits: one submit's request id, which no other submit of this client draws.
std::string random_request_id() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", random());
  return id;
}

// SubmitJob, sent again while the answer is lost on the way (UNAVAILABLE from the channel: no
// replica reached, or one that died mid-call; DEADLINE_EXCEEDED: tunerd slower than `timeout`): the
// request id makes every try the same submit, so that a job whose first answer was lost is made
// once. Each try waits twice as long as the one before, after a pause that doubles too. A tunerd
// that answers UNAVAILABLE itself (its tracker is down) is reported at once: it is up, and seconds
// of tries would only hide what to fix.
grpc::Status submit_with_retries(const GlobalFlags& global, const v1::SubmitJobRequest& request,
                                 v1::SubmitJobResponse* response, std::chrono::milliseconds timeout) {
  constexpr int kTries = 5;
  auto stub = tuner(global);
  auto pause = std::chrono::milliseconds(500);
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    grpc::Status status = stub->SubmitJob(&context, request, response);
    bool lost = channel_failure(status) || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!lost || attempt == kTries) return status;
    fmt::print(stderr,
               "tune-client: submit try {} of {}: {}; sending it again in {:.1f} s with the same request id {} (the "
               "job is made once)\n",
               attempt, kTries, rpc_failure_message(global.server, "submit", status), pause.count() / 1000.0,
               request.request_id());
    std::this_thread::sleep_for(pause);
    pause *= 2;
    timeout *= 2;
  }
}

int run_submit(const GlobalFlags& global, const SubmitFlags& flags) {
  v1::SubmitJobRequest request;
  request.set_request_id(flags.request_id.empty() ? random_request_id() : flags.request_id);
  auto submit_timeout = parse_duration(flags.submit_timeout);
  if (!submit_timeout.ok()) return fail(submit_timeout.status().with_context("--submit-timeout").message());
  if (*submit_timeout <= 0) return fail("--submit-timeout must be longer than 0");
  v1::JobSpec* spec = request.mutable_spec();
  std::vector<Workload> workloads;
  for (const auto& text : flags.workloads) {
    auto w = parse_workload(text);
    if (!w.ok()) return fail(w.status().message());
    workloads.push_back(*w);
  }
  if (!flags.workloads_file.empty()) {
    auto ws = read_workload_file(flags.workloads_file);
    if (!ws.ok()) return fail(ws.status().message());
    workloads.insert(workloads.end(), ws->begin(), ws->end());
  }
  for (const Workload& w : workloads) {
    v1::TuneTask* task = spec->add_tasks();
    *task->mutable_workload() = to_proto(w);
    task->set_template_name(flags.template_name);
  }
  if (!flags.model.empty()) {
    if (!workloads.empty()) return fail("give either a model or workloads, not both");
    auto tasks = extract_tasks(global, flags.model, flags.input_shapes);
    if (!tasks.ok()) return fail(tasks.status().message());
    // Each task weighs as often as it occurs: the scheduler then spends trials where the model's
    // latency (the sum of count x latency) falls most.
    for (const v1::ModelTask& t : tasks->tasks()) {
      v1::TuneTask* task = spec->add_tasks();
      *task->mutable_workload() = t.workload();
      task->set_weight(t.count());
      task->set_alternative_of(t.alternative_of());
    }
    spec->set_other_steps(tasks->other_steps());
    spec->set_other_bytes(tasks->other_bytes());
    spec->set_other_streaming_bytes(tasks->other_streaming_bytes());
    spec->set_run_bytes(tasks->run_bytes());
    if (!flags.json) fmt::print("{}: {} tasks\n", flags.model, tasks->tasks_size());
  }
  if (spec->tasks().empty())
    return fail("give a workload with --workload, a file of them with --workloads, or an ONNX model with --model");
  auto target = parse_target(flags.target);
  if (!target.ok()) return fail(target.status().message());
  *spec->mutable_target() = to_proto(*target);
  spec->set_device_key(flags.device);
  spec->set_trials(flags.trials);
  if (!flags.time_budget.empty()) {
    auto seconds = parse_duration(flags.time_budget);
    if (!seconds.ok()) return fail(seconds.status().with_context("--time-budget").message());
    spec->set_time_budget_s(*seconds);
  }
  if (!flags.max_wait.empty()) {
    auto seconds = parse_duration(flags.max_wait);
    if (!seconds.ok()) return fail(seconds.status().with_context("--max-wait").message());
    spec->set_max_wait_s(*seconds);
  }
  spec->set_early_stopping(flags.early_stopping);
  spec->set_batch_size(flags.batch_size);
  v1::SearchStrategy strategy;
  if (flags.strategy == "xgb-sa") strategy = v1::XGB_SA;
  else if (flags.strategy == "random") strategy = v1::RANDOM;
  else if (flags.strategy == "grid") strategy = v1::GRID;
  else if (flags.strategy == "genetic") strategy = v1::GENETIC;
  else return fail(fmt::format("unknown search strategy '{}' (known: xgb-sa, random, grid, genetic)", flags.strategy));
  spec->set_strategy(strategy);
  spec->set_priority(flags.priority);
  spec->set_seed(flags.seed);
  spec->set_name(flags.name.empty() && !flags.model.empty() ? std::filesystem::path(flags.model).filename().string()
                                                            : flags.name);

  v1::SubmitJobResponse response;
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(*submit_timeout));
  grpc::Status status = submit_with_retries(global, request, &response, std::max(timeout, std::chrono::milliseconds(1)));
  if (!status.ok()) return rpc_failure(global.server, "submit", status);
  if (flags.json && !flags.watch) {
    fmt::print("{}\n", to_json(response.job()));
    return 0;
  }
  if (!flags.json) fmt::print("submitted job {}\n", response.job().id());
  if (!flags.watch) return 0;
  return follow(global, response.job().id(), flags.json);
}

int run_status(const GlobalFlags& global, const JobFlags& flags) {
  v1::GetJobRequest request;
  request.set_job_id(flags.job_id);
  v1::Job job;
  grpc::Status status = call_tuner(global, &v1::Tuner::Stub::GetJob, request, &job);
  if (!status.ok()) return rpc_failure(global.server, fmt::format("job {}", flags.job_id), status);
  if (flags.json) fmt::print("{}\n", to_json(job));
  else print_job(job);
  return 0;
}

int run_cancel(const GlobalFlags& global, const JobFlags& flags) {
  v1::CancelJobRequest request;
  request.set_job_id(flags.job_id);
  v1::Job job;
  grpc::Status status = call_tuner(global, &v1::Tuner::Stub::CancelJob, request, &job);
  if (!status.ok()) return rpc_failure(global.server, fmt::format("cancel {}", flags.job_id), status);
  if (flags.json) fmt::print("{}\n", to_json(job));
  else fmt::print("job {}: cancel requested (the batch in flight is withdrawn; what it measured is kept)\n", job.id());
  return 0;
}

int run_resume(const GlobalFlags& global, const JobFlags& flags) {
  v1::ResumeJobRequest request;
  request.set_job_id(flags.job_id);
  v1::Job job;
  grpc::Status status = call_tuner(global, &v1::Tuner::Stub::ResumeJob, request, &job);
  if (!status.ok()) return rpc_failure(global.server, fmt::format("resume {}", flags.job_id), status);
  if (flags.json) fmt::print("{}\n", to_json(job));
  else fmt::print("job {}: queued again; it goes on from the {} trials it has measured\n", job.id(),
                  job.progress().trials_done());
  return 0;
}

int run_jobs(const GlobalFlags& global, const ListFlags& flags) {
  v1::ListJobsRequest request;
  for (const auto& s : flags.states) {
    v1::JobState state;
    std::string upper;
    for (char c : s) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!v1::JobState_Parse(upper, &state) || state == v1::JOB_STATE_UNSPECIFIED)
      return fail(fmt::format("unknown job state '{}' (queued, running, succeeded, failed, cancelled)", s));
    request.add_states(state);
  }
  request.set_limit(flags.limit);
  v1::ListJobsResponse response;
  grpc::Status status = call_tuner(global, &v1::Tuner::Stub::ListJobs, request, &response);
  if (!status.ok()) return rpc_failure(global.server, "jobs", status);
  if (flags.json) {
    fmt::print("{}\n", to_json(response));
    return 0;
  }
  if (response.jobs().empty()) {
    fmt::print("no jobs\n");
    return 0;
  }
  fmt::print("{:<18} {:<10} {:>13} {:>12}  {:<20} {}\n", "JOB", "STATE", "TRIALS", "BEST GFLOP/s", "NAME", "WORKLOADS");
  for (const auto& job : response.jobs()) {
    std::string name = job.spec().name().empty() ? "-" : job.spec().name();
    if (name.size() > 20) name = name.substr(0, 19) + "~";
    fmt::print("{:<18} {:<10} {:>13} {:>12.1f}  {:<20} {}\n", job.id(), state_name(job.state()),
               fmt::format("{}/{}", job.progress().trials_done(), job.spec().trials()), job.progress().best_gflops(),
               name, workloads_of(job));
  }
  return 0;
}

}  // namespace

void add_jobs_commands(CLI::App& app, const GlobalFlags& global, Commands& commands) {
  auto submit = std::make_shared<SubmitFlags>();
  CLI::App* s = app.add_subcommand("submit", "Submit a tuning job");
  s->add_option("--workload", submit->workloads, "Workload string, e.g. 'matmul:M=512,N=512,K=512' (repeatable)");
  s->add_option("--workloads", submit->workloads_file, "File of workload strings: several tasks in one job");
  s->add_option("--model", submit->model, "ONNX model: one job over its tasks, weighted by how often each occurs")
      ->check(CLI::ExistingFile);
  s->add_option("--input-shape", submit->input_shapes, "NAME=d0,d1,... for a model input with symbolic dimensions");
  s->add_option("--target", submit->target, "Target string (llvm, 'llvm -mtriple=...', 'cuda -arch=sm_90')")
      ->capture_default_str();
  s->add_option("--device", submit->device, "Device key of the boards that measure")->capture_default_str();
  s->add_option("--template", submit->template_name, "Template name (default: the operator's default)");
  s->add_option("--trials", submit->trials, "Measurement budget over all tasks")->capture_default_str();
  s->add_option("--time-budget", submit->time_budget,
                "Wall-clock budget with its unit, e.g. 90s, 10m or 1h30m (the first batch's building and "
                "queueing count)");
  s->add_option("--max-wait", submit->max_wait,
                "How long the job waits for the tracker and an agent of its key before it fails (then "
                "`resume` goes on), e.g. 30m (default: tunerd's, 1h)");
  s->add_option("--early-stopping", submit->early_stopping, "Stop a task after N trials without improvement");
  s->add_option("--batch-size", submit->batch_size, "Candidates per measurement batch (default: four per agent of the device key, 8 to 64; smaller for a model, so that each of its tasks gets one)");
  s->add_option("--strategy", submit->strategy, "xgb-sa, random, grid or genetic")->capture_default_str();
  s->add_option("--priority", submit->priority, "Queue priority on the farm");
  s->add_option("--seed", submit->seed, "Search seed (default: derived from the job id)");
  s->add_option("--name", submit->name, "A name for people");
  s->add_option("--request-id", submit->request_id,
                "Names this submit: sent again with the same spec it answers the job it made, not a second one "
                "(default: a random id; a submit whose answer is lost is sent again with it)");
  s->add_option("--submit-timeout", submit->submit_timeout,
                "How long the first try of the submit waits for tunerd (30s, 2m); each try after waits twice as long")
      ->capture_default_str();
  s->add_flag("--watch", submit->watch, "Follow the job with a progress bar until it ends");
  s->add_flag("--json", submit->json, "Print JSON");
  commands.push_back({s, [&global, submit] { return run_submit(global, *submit); }});

  auto list = std::make_shared<ListFlags>();
  CLI::App* j = app.add_subcommand("jobs", "List jobs, newest first");
  j->add_option("--state", list->states, "Only jobs in this state (repeatable)");
  j->add_option("--limit", list->limit, "At most this many (default 100)");
  j->add_flag("--json", list->json, "Print JSON");
  commands.push_back({j, [&global, list] { return run_jobs(global, *list); }});

  auto add_job_command = [&](const char* name, const char* help, int (*run)(const GlobalFlags&, const JobFlags&)) {
    auto flags = std::make_shared<JobFlags>();
    CLI::App* c = app.add_subcommand(name, help);
    c->add_option("JOB", flags->job_id, "Job id")->required();
    c->add_flag("--json", flags->json, "Print JSON");
    commands.push_back({c, [&global, flags, run] { return run(global, *flags); }});
  };
  add_job_command("status", "Show a job", run_status);
  add_job_command("watch", "Follow a job until it ends",
                  [](const GlobalFlags& g, const JobFlags& f) { return follow(g, f.job_id, f.json); });
  add_job_command("cancel", "Cancel a queued or running job", run_cancel);
  add_job_command("resume", "Run a FAILED or CANCELLED job again from where it stopped", run_resume);
}

}  // namespace tunefarm::client
