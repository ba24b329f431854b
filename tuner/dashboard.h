// tunerd's dashboard: a web page (tuner/dashboard/, embedded in tunerd) with the jobs, their state
// and progress, each job's tuning curves (every trial's GFLOP/s and the best so far, against trials
// and against time, per task) and the farm's devices and queues, and the JSON endpoints behind
// every view. The charts are Debian's Chart.js, served by tunerd from where the package installs it.
//
//   GET /                        the page (jobs and farm)
//   GET /jobs/<id>               the page of one job
//   GET /api/jobs[?state=S,...&limit=N]
//   GET /api/jobs/<id>           the job as tuner.proto's Job, in protobuf's JSON
//   GET /api/jobs/<id>/curve     the job's trials per task, with the best so far
//   GET /api/devices             the tracker's queue status of every device key
//
// A bad job id or parameter is 400, a job that does not exist 404, the tracker out of reach 502.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/http/http_server.h"
#include "common/status.h"
#include "db/record_store.h"
#include "tuner/job_manager.h"
#include "tunefarm/v1/tracker.pb.h"

namespace tunefarm {

using FarmStatusFn = std::function<StatusOr<v1::QueueStatusResponse>()>;

// One trial on a tuning curve.
struct CurvePoint {
  int trial = 0;        // Within its task, from 1.
  int job_trial = 0;    // Within the job, from 1.
  double time_s = 0;    // Since the job started, when the result came.
  double gflops = 0;    // 0 unless the trial succeeded.
  double best_gflops = 0;  // The task's best trial so far.
  std::string error;    // ErrorCode name.
};

struct TaskCurve {
  std::string workload;
  std::vector<CurvePoint> points;
  double best_trial_gflops = 0;  // The best trial (what the curve ends at).
  double best_gflops = 0;        // The task's figure as the job reports it (after re-measurement, once ended).
};

// The curves of `job` from its records: trials in the order they were recorded (re-measurements
// left out), per task of the job's spec.
StatusOr<std::vector<TaskCurve>> job_curves(db::RecordStore& store, const v1::Job& job);

// The route table of the dashboard, for an HttpServer.
std::map<std::string, HttpHandler> dashboard_routes(JobManager& jobs, db::RecordStore& store, FarmStatusFn farm,
                                                    std::string chart_js);

// The page's files, embedded at build time: name ("index.html", "dashboard.js") -> content.
const std::map<std::string, std::string>& dashboard_assets();

}  // namespace tunefarm
