#include "tuner/dashboard.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "common/wire/wire.h"

namespace tunefarm {
namespace {

using nlohmann::json;

constexpr int kDefaultJobLimit = 100;
constexpr int kMaxJobLimit = 1000;
constexpr int64_t kRecordPage = 5000;

// Job ids are made by the history (hex); anything else cannot name a job.
Status check_job_id(const std::string& id) {
  if (id.empty()) return invalid_argument("the job id is empty");
  if (id.size() > 64) return invalid_argument("a job id is at most 64 characters");
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return invalid_argument("a job id holds only letters, digits, '-' and '_'");
  return Status();
}

HttpResponse error_response(const Status& s) {
  int code = 500;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: code = 400; break;
    case StatusCode::kNotFound: code = 404; break;
    case StatusCode::kUnavailable: code = 503; break;
    default: break;
  }
  return HttpResponse::error(code, s.message());
}

std::string proto_json(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  // snake_case, as /api/jobs, `devices --json` and every --json of tune-client.
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

std::string workload_text(const v1::Workload& w) {
  auto parsed = from_proto(w);
  return parsed.ok() ? parsed->to_string() : w.op();
}

std::string target_text(const v1::Target& t) {
  auto parsed = from_proto(t);
  return parsed.ok() ? parsed->to_string() : t.kind();
}

// The parameters a view takes: any other is a mistake worth saying, not ignoring.
Status check_params(const HttpRequest& request, std::initializer_list<const char*> allowed) {
  for (const auto& [name, value] : request.query) {
    bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return name == a; });
    if (!known)
      return invalid_argument(fmt::format("unknown parameter '{}' (this view takes: {})", name.substr(0, 64),
                                          allowed.size() == 0 ? "none" : fmt::format("{}", fmt::join(allowed, ", "))));
  }
  return Status();
}

json job_summary(const v1::Job& job) {
  const v1::JobProgress& p = job.progress();
  json tasks = json::array();
  for (const v1::TaskProgress& t : p.tasks())
    tasks.push_back({{"workload", workload_text(t.workload())}, {"trials", t.trials_done()}, {"best_gflops", t.best_gflops()}});
  if (tasks.empty())
    for (const v1::TuneTask& t : job.spec().tasks())
      tasks.push_back({{"workload", workload_text(t.workload())}, {"trials", 0}, {"best_gflops", 0.0}});
  auto latency = model_latency(job);
  return {{"id", job.id()},
          {"name", job.spec().name()},
          {"state", v1::JobState_Name(job.state())},
          {"device_key", job.spec().device_key()},
          {"target", target_text(job.spec().target())},
          {"trials_done", p.trials_done()},
          {"trials_budget", p.trials_budget() > 0 ? p.trials_budget() : job.spec().trials()},
          {"best_gflops", p.best_gflops()},
          {"elapsed_s", p.elapsed_s()},
          {"eta_s", p.eta_s()},
          {"created_at_us", job.created_at_us()},
          {"started_at_us", job.started_at_us()},
          {"finished_at_us", job.finished_at_us()},
          {"error", job.error()},
          {"activity", job.activity()},
          {"tasks", tasks},
          // A model's latency is what matters for a model job, not any one task's GFLOP/s.
          {"model_ms", latency ? latency->tuned_s * 1e3 : 0.0},
          {"untuned_model_ms", latency ? latency->untuned_s * 1e3 : 0.0}};
}

bool ended(v1::JobState state) { return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED; }

HttpResponse list_jobs(JobManager& jobs, const HttpRequest& request) {
  if (Status s = check_params(request, {"state", "limit"}); !s.ok()) return error_response(s);
  std::vector<v1::JobState> states;
  for (auto [it, end] = request.query.equal_range("state"); it != end; ++it) {
    // Every piece between commas names a state: an empty one is a mistake too.
    for (size_t start = 0;;) {
      size_t comma = it->second.find(',', start);
      std::string name = it->second.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
      v1::JobState state;
      if (!v1::JobState_Parse(name, &state) || state == v1::JOB_STATE_UNSPECIFIED)
        return HttpResponse::error(400, fmt::format("state '{}' is not one of QUEUED, RUNNING, SUCCEEDED, FAILED, "
                                                    "CANCELLED",
                                                    name.substr(0, 64)));
      states.push_back(state);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  int limit = kDefaultJobLimit;
  if (request.has_param("limit")) {
    std::string text = request.param("limit");
    if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(text) < 1 || std::stoi(text) > kMaxJobLimit)
      return HttpResponse::error(400, fmt::format("limit must be a whole number from 1 to {}", kMaxJobLimit));
    limit = std::stoi(text);
  }
  auto listed = jobs.list(states, limit);
  if (!listed.ok()) return error_response(listed.status());
  json out = {{"jobs", json::array()}};
  for (const v1::Job& job : *listed) out["jobs"].push_back(job_summary(job));
  return HttpResponse::json(out.dump());
}

HttpResponse curve(JobManager& jobs, db::RecordStore& store, const std::string& id) {
  auto job = jobs.get(id);
  if (!job.ok()) return error_response(job.status());
  auto curves = job_curves(store, *job);
  if (!curves.ok()) return error_response(curves.status());
  json tasks = json::array();
  int trials = 0;
  for (const TaskCurve& c : *curves) {
    json points = json::array();
    for (const CurvePoint& p : c.points)
      points.push_back({{"trial", p.trial},
                        {"job_trial", p.job_trial},
                        {"time_s", p.time_s},
                        {"gflops", p.gflops},
                        {"best_gflops", p.best_gflops},
                        {"error", p.error}});
    trials += static_cast<int>(c.points.size());
    tasks.push_back({{"workload", c.workload},
                     {"best_trial_gflops", c.best_trial_gflops},
                     {"best_gflops", c.best_gflops},
                     {"points", std::move(points)}});
  }
  json out = job_summary(*job);
  out["ended"] = ended(job->state());
  out["trials"] = trials;
  out["curves"] = std::move(tasks);
  return HttpResponse::json(out.dump());
}

HttpResponse job_view(JobManager& jobs, db::RecordStore& store, const HttpRequest& request) {
  if (Status s = check_params(request, {}); !s.ok()) return error_response(s);
  std::string rest = request.path.substr(std::string("/api/jobs/").size());
  std::string id = rest, view;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    id = rest.substr(0, slash);
    view = rest.substr(slash + 1);
  }
  if (Status s = check_job_id(id); !s.ok()) return error_response(s);
  if (view == "curve") return curve(jobs, store, id);
  if (!view.empty()) return HttpResponse::error(404, "a job has these views: /api/jobs/<id> and /api/jobs/<id>/curve");
  auto job = jobs.get(id);
  if (!job.ok()) return error_response(job.status());
  return HttpResponse::json(proto_json(*job));
}

HttpResponse asset(const std::string& name, const std::string& content_type) {
  auto it = dashboard_assets().find(name);
  if (it == dashboard_assets().end()) return HttpResponse::error(404, "no such file");
  HttpResponse r;
  r.content_type = content_type;
  r.body = it->second;
  return r;
}

}  // namespace

StatusOr<std::vector<TaskCurve>> job_curves(db::RecordStore& store, const v1::Job& job) {
  std::vector<TaskCurve> curves;
  std::map<std::string, size_t> task_of;  // Workload text -> its first task.
  for (int i = 0; i < job.spec().tasks_size(); ++i) {
    TaskCurve c;
    c.workload = workload_text(job.spec().tasks(i).workload());
    if (i < job.progress().tasks_size()) c.best_gflops = job.progress().tasks(i).best_gflops();
    task_of.emplace(c.workload, curves.size());
    curves.push_back(std::move(c));
  }
  db::RecordFilter filter;
  filter.job_id = job.id();
  int job_trial = 0;
  for (int64_t offset = 0;;) {
    TF_ASSIGN_OR_RETURN(db::RecordPage page, store.list_records(filter, kRecordPage, offset));
    for (const v1::Record& r : page.records) {
      if (r.remeasure_round() > 0 || r.result().error() == v1::DEVICE_LOST) continue;
      auto task = task_of.find(workload_text(r.workload()));
      if (task == task_of.end()) continue;  // Imported from a job of the same id elsewhere.
      TaskCurve& c = curves[task->second];
      CurvePoint p;
      p.trial = static_cast<int>(c.points.size()) + 1;
      p.job_trial = ++job_trial;
      int64_t at = r.result().finished_at_us() ? r.result().finished_at_us() : r.result().started_at_us();
      p.time_s = job.started_at_us() > 0 && at > job.started_at_us() ? (at - job.started_at_us()) / 1e6 : 0;
      p.gflops = r.gflops();
      c.best_trial_gflops = std::max(c.best_trial_gflops, p.gflops);
      p.best_gflops = c.best_trial_gflops;
      p.error = v1::ErrorCode_Name(r.result().error());
      c.points.push_back(std::move(p));
    }
    offset += static_cast<int64_t>(page.records.size());
    if (page.records.empty() || offset >= page.total) break;
  }
  return curves;
}

std::map<std::string, HttpHandler> dashboard_routes(JobManager& jobs, db::RecordStore& store, FarmStatusFn farm,
                                                    std::string chart_js) {
  auto page = [](const HttpRequest& request) {
    if (request.path.starts_with("/jobs/")) {
      if (Status s = check_job_id(request.path.substr(6)); !s.ok()) return error_response(s);
    }
    return asset("index.html", "text/html; charset=utf-8");
  };
  std::map<std::string, HttpHandler> routes;
  routes["/"] = page;
  routes["/jobs/"] = page;
  routes["/static/dashboard.js"] = [](const HttpRequest&) {
    return asset("dashboard.js", "text/javascript; charset=utf-8");
  };
  routes["/static/chart.min.js"] = [chart = std::move(chart_js)](const HttpRequest&) {
    if (chart.empty())
      return HttpResponse::error(404, "Chart.js is not installed where tunerd looked (apt-get install libjs-chart.js, "
                                      "or tunerd --chart-js FILE)");
    HttpResponse r;
    r.content_type = "text/javascript; charset=utf-8";
    r.body = chart;
    return r;
  };
  routes["/api/jobs"] = [&jobs](const HttpRequest& request) { return list_jobs(jobs, request); };
  routes["/api/jobs/"] = [&jobs, &store](const HttpRequest& request) { return job_view(jobs, store, request); };
  routes["/api/devices"] = [farm = std::move(farm)](const HttpRequest& request) {
    if (Status s = check_params(request, {}); !s.ok()) return error_response(s);
    auto status = farm();
    if (!status.ok()) return HttpResponse::error(502, status.status().message());
    return HttpResponse::json(proto_json(*status));
  };
  return routes;
}

}  // namespace tunefarm
