#include "tuner/service.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <openssl/sha.h>

#include "common/wire/credentials.h"
#include "common/temp_dir.h"
#include "common/wire/wire.h"
#include "db/record_codec.h"
#include "tuner/compiler_task.h"
#include "tuner/library_builder.h"
#include "tuner/model_tasks.h"

namespace tunefarm {
namespace {

constexpr int kMaxTopK = 100;
constexpr int kMaxListLimit = 10000;
constexpr size_t kExportChunkBytes = 1 << 20;
constexpr size_t kMaxImportBytes = size_t{1} << 30;

grpc::Status invalid(std::string message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message)); }

// Job ids are made by the history (hex); anything else cannot name a job.
grpc::Status check_job_id(const std::string& id) {
  if (id.empty()) return invalid("job id is empty");
  if (id.size() > 64) return invalid("job id is longer than 64 characters");
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return invalid(fmt::format("job id '{}' holds characters no job id has", id));
  return grpc::Status::OK;
}

StatusOr<db::RecordFilter> filter_of(const v1::Workload* workload, const std::string& job_id) {
  db::RecordFilter f;
  if (workload) {
    TF_ASSIGN_OR_RETURN(Workload w, from_proto(*workload));
    f.workload = std::move(w);
  }
  f.job_id = job_id;
  return f;
}

}  // namespace

const std::map<std::string, Access, std::less<>>& tuner_access() {
  static const std::map<std::string, Access, std::less<>> table = {
      {"SubmitJob", Access::kChange},     {"CancelJob", Access::kChange},   {"ResumeJob", Access::kChange},   {"ImportRecords", Access::kChange},
      // Reading a model of up to a gigabyte is work on tunerd's behalf, done to submit it; so is
      // compiling a library (seconds per workload, under tunerd's one build lock).
      {"ExtractTasks", Access::kChange},  {"BuildLibrary", Access::kChange}, {"BuildModel", Access::kChange},
      {"GetJob", Access::kQuery},         {"WatchJob", Access::kQuery},     {"ListJobs", Access::kQuery},
      {"QueryBest", Access::kQuery},      {"ListRecords", Access::kQuery},  {"ExportRecords", Access::kQuery},
  };
  return table;
}

namespace {

std::string_view presented_token(const grpc::ServerContext* context) {
  auto it = context->client_metadata().find("authorization");
  if (it == context->client_metadata().end()) return {};
  return bearer_token({it->second.data(), it->second.size()});
}

// A job as tunerd answers with it: with its model latency estimate, which clients show as it is.
v1::Job shown(v1::Job job) {
  fill_model_latency(job);
  return job;
}

}  // namespace

namespace {
constexpr const char* kNoToken = "this tunerd requires a token: give tune-client --token-file FILE, or set TUNEFARM_TOKEN";
constexpr const char* kUnknownToken = "the token is not one this tunerd knows";
}  // namespace

CallGate AccessTokens::gate() const {
  CallGate gate{client, kNoToken, kUnknownToken};
  gate.tokens.insert(gate.tokens.end(), read_only.begin(), read_only.end());
  return gate;
}

grpc::Status TunerService::authorize(const grpc::ServerContext* context, std::string_view rpc) const {
  auto access = tuner_access().find(rpc);
  if (access == tuner_access().end())
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, fmt::format("{} has no access rule in tunerd", rpc));
  if (tokens_.open()) return grpc::Status::OK;
  std::string_view token = presented_token(context);
  if (token.empty())
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kNoToken);
  if (any_secret(tokens_.client, token)) return grpc::Status::OK;
  if (any_secret(tokens_.read_only, token)) {
    if (access->second == Access::kQuery) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        fmt::format("the token is read-only; {} needs a client token", rpc));
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kUnknownToken);
}

std::string TunerService::client_of(const grpc::ServerContext* context) const {
  std::string_view token = presented_token(context);
  for (size_t i = 0; i < tokens_.client.size(); ++i)
    if (same_secret(token, tokens_.client[i])) return fmt::format("client token {}", i + 1);
  return {};
}

std::string TunerService::submitter_of(const grpc::ServerContext* context) const {
  if (tokens_.open()) return {};
  std::string_view token = presented_token(context);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  std::string hex = "sha256:";
  for (unsigned char byte : digest) hex += fmt::format("{:02x}", byte);
  return hex;
}

grpc::Status TunerService::SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                                     v1::SubmitJobResponse* response) {
  if (auto s = authorize(context, "SubmitJob"); !s.ok()) return s;
  if (!request->has_spec()) return invalid("the request has no job spec");
  auto job = jobs_.submit(request->spec(), client_of(context), {submitter_of(context), request->request_id()});
  if (!job.ok()) return to_grpc(job.status());
  *response->mutable_job() = shown(std::move(*job));
  return grpc::Status::OK;
}

grpc::Status TunerService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request, v1::Job* response) {
  if (auto s = authorize(context, "GetJob"); !s.ok()) return s;
  if (auto s = check_job_id(request->job_id()); !s.ok()) return s;
  auto job = jobs_.get(request->job_id());
  if (!job.ok()) return to_grpc(job.status());
  *response = shown(std::move(*job));
  return grpc::Status::OK;
}

grpc::Status TunerService::WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                    grpc::ServerWriter<v1::JobEvent>* writer) {
  if (auto s = authorize(context, "WatchJob"); !s.ok()) return s;
  if (auto s = check_job_id(request->job_id()); !s.ok()) return s;
  // The first event is the job as it stands; NOT_FOUND ends the call before anything is sent.
  auto job = jobs_.get(request->job_id());
  if (!job.ok()) return to_grpc(job.status());
  // Each stream holds a thread of tunerd's for as long as the job runs: a token has a few.
  std::string watcher(presented_token(context));
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    int& open = watches_[watcher];
    if (open >= kMaxWatchesPerToken)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("this token watches {} jobs already, the most tunerd allows; end one first", open));
    ++open;
  }
  struct Unwatch {
    TunerService* service;
    const std::string& watcher;
    ~Unwatch() {
      std::lock_guard<std::mutex> lock(service->watch_mu_);
      if (--service->watches_[watcher] == 0) service->watches_.erase(watcher);
    }
  } unwatch{this, watcher};
  uint64_t version = 0;
  for (;;) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    if (stopping_.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "tunerd is shutting down; watch again");
    auto update = jobs_.wait_for_update(request->job_id(), version, std::chrono::milliseconds(500));
    if (!update.ok()) return to_grpc(update.status());
    if (update->version == version) continue;
    version = update->version;
    v1::JobEvent event;
    *event.mutable_job() = shown(update->job);
    event.set_message(update->message);
    if (!writer->Write(event)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    if (update->ended) return grpc::Status::OK;
  }
}

grpc::Status TunerService::CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                                     v1::Job* response) {
  if (auto s = authorize(context, "CancelJob"); !s.ok()) return s;
  if (auto s = check_job_id(request->job_id()); !s.ok()) return s;
  auto job = jobs_.cancel(request->job_id());
  if (!job.ok()) return to_grpc(job.status());
  *response = shown(std::move(*job));
  return grpc::Status::OK;
}

grpc::Status TunerService::ResumeJob(grpc::ServerContext* context, const v1::ResumeJobRequest* request,
                                     v1::Job* response) {
  if (auto s = authorize(context, "ResumeJob"); !s.ok()) return s;
  if (auto s = check_job_id(request->job_id()); !s.ok()) return s;
  auto job = jobs_.resume(request->job_id(), client_of(context), submitter_of(context));
  if (!job.ok()) return to_grpc(job.status());
  *response = shown(std::move(*job));
  return grpc::Status::OK;
}

grpc::Status TunerService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                    v1::ListJobsResponse* response) {
  if (auto s = authorize(context, "ListJobs"); !s.ok()) return s;
  std::vector<v1::JobState> states;
  for (int s : request->states()) {
    if (!v1::JobState_IsValid(s) || s == v1::JOB_STATE_UNSPECIFIED) return invalid(fmt::format("job state {} is not a state", s));
    states.push_back(static_cast<v1::JobState>(s));
  }
  if (request->limit() < 0 || request->limit() > kMaxListLimit)
    return invalid(fmt::format("limit {} must be between 0 (default) and {}", request->limit(), kMaxListLimit));
  auto jobs = jobs_.list(states, request->limit());
  if (!jobs.ok()) return to_grpc(jobs.status());
  for (auto& j : *jobs) *response->add_jobs() = shown(std::move(j));
  return grpc::Status::OK;
}

grpc::Status TunerService::QueryBest(grpc::ServerContext* context, const v1::QueryBestRequest* request,
                                     v1::QueryBestResponse* response) {
  if (auto s = authorize(context, "QueryBest"); !s.ok()) return s;
  if (!request->has_workload()) return invalid("the query has no workload");
  auto workload = from_proto(request->workload());
  if (!workload.ok()) return to_grpc(workload.status());
  auto target = from_proto(request->target());
  if (!target.ok()) return to_grpc(target.status());
  if (request->top_k() < 0 || request->top_k() > kMaxTopK)
    return invalid(fmt::format("top_k {} must be between 0 (one) and {}", request->top_k(), kMaxTopK));
  auto best = store_.query_best(*workload, *target, request->device_key(), std::max(1, request->top_k()));
  if (!best.ok()) return to_grpc(best.status());
  for (auto& r : *best) *response->add_records() = std::move(r);
  return grpc::Status::OK;
}

grpc::Status TunerService::ListRecords(grpc::ServerContext* context, const v1::ListRecordsRequest* request,
                                       v1::ListRecordsResponse* response) {
  if (auto s = authorize(context, "ListRecords"); !s.ok()) return s;
  if (!request->job_id().empty()) {
    if (auto s = check_job_id(request->job_id()); !s.ok()) return s;
  }
  if (request->limit() < 0 || request->limit() > kMaxListLimit)
    return invalid(fmt::format("limit {} must be between 0 (default) and {}", request->limit(), kMaxListLimit));
  if (request->offset() < 0) return invalid(fmt::format("offset {} must not be negative", request->offset()));
  auto filter = filter_of(request->has_workload() ? &request->workload() : nullptr, request->job_id());
  if (!filter.ok()) return to_grpc(filter.status());
  auto page = store_.list_records(*filter, request->limit(), request->offset(), kMaxListRecordsBytes);
  if (!page.ok()) return to_grpc(page.status());
  for (auto& r : page->records) *response->add_records() = std::move(r);
  response->set_total(page->total);
  response->set_next_offset(page->next_offset);
  // "No records" must not hide a job id that does not exist (imported records keep the job ids
  // of the installation they came from, so a job with records is listed either way).
  if (response->total() == 0 && !request->job_id().empty()) {
    if (auto job = store_.get_job(request->job_id()); !job.ok()) return to_grpc(job.status());
  }
  return grpc::Status::OK;
}

grpc::Status TunerService::ExportRecords(grpc::ServerContext* context, const v1::ExportRecordsRequest* request,
                                         grpc::ServerWriter<v1::RecordChunk>* writer) {
  if (auto s = authorize(context, "ExportRecords"); !s.ok()) return s;
  auto filter = filter_of(request->has_workload() ? &request->workload() : nullptr, "");
  if (!filter.ok()) return to_grpc(filter.status());
  std::string chunk;
  auto send = [&]() -> Status {
    v1::RecordChunk c;
    c.set_jsonl(std::move(chunk));
    chunk.clear();
    if (!writer->Write(c)) return Status(StatusCode::kCancelled, "the client went away");
    return Status();
  };
  Status st = store_.export_records(*filter, [&](const v1::Record& r) -> Status {
    if (context->IsCancelled()) return Status(StatusCode::kCancelled, "the client went away");
    chunk += record_to_json_line(r);
    chunk += '\n';
    return chunk.size() >= kExportChunkBytes ? send() : Status();
  });
  if (st.ok() && !chunk.empty()) st = send();
  return to_grpc(st);
}

grpc::Status TunerService::ImportRecords(grpc::ServerContext* context, grpc::ServerReader<v1::RecordChunk>* reader,
                                         v1::ImportRecordsResponse* response) {
  if (auto s = authorize(context, "ImportRecords"); !s.ok()) return s;
  std::string all;
  v1::RecordChunk chunk;
  while (reader->Read(&chunk)) {
    if (all.size() + chunk.jsonl().size() > kMaxImportBytes)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("import is larger than {} bytes; split the file", kMaxImportBytes));
    all += chunk.jsonl();
  }
  std::istringstream in(std::move(all));
  RecordConfigCheck check;
  auto stats = store_.import_jsonl(in, "the uploaded records", std::ref(check));
  if (!stats.ok()) return to_grpc(stats.status().with_context("nothing was imported"));
  response->set_imported(stats->imported);
  response->set_skipped(stats->skipped);
  return grpc::Status::OK;
}

grpc::Status TunerService::ExtractTasks(grpc::ServerContext* context, grpc::ServerReader<v1::ModelChunk>* reader,
                                        v1::ExtractTasksResponse* response) {
  if (auto s = authorize(context, "ExtractTasks"); !s.ok()) return s;
  std::string onnx, file_name;
  std::map<std::string, std::vector<int64_t>> shapes;
  v1::ModelChunk chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (onnx.size() + chunk.onnx().size() > kMaxModelBytes)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("the model is larger than {} MiB", kMaxModelBytes >> 20));
    if (first) {
      file_name = chunk.file_name().substr(0, 256);
      for (const auto& s : chunk.input_shapes()) shapes[s.name()].assign(s.dims().begin(), s.dims().end());
      first = false;
    }
    onnx += chunk.onnx();
  }
  // In a process of its own: a model that crashes the ONNX library must not take tunerd with it.
  auto tasks = extract_model_tasks_isolated(onnx, file_name, shapes);
  if (!tasks.ok()) return to_grpc(tasks.status());
  *response = std::move(*tasks);
  return grpc::Status::OK;
}

namespace {

// The library request of a BuildLibrary call, or of BuildModel's first chunk (without workloads).
StatusOr<LibraryRequest> library_request_of(const v1::BuildLibraryRequest& request) {
  LibraryRequest library;
  if (request.workloads_size() > static_cast<int>(kMaxLibraryWorkloads))
    return invalid_argument(fmt::format("{} workloads; a library holds at most {}", request.workloads_size(), kMaxLibraryWorkloads));
  for (const auto& w : request.workloads()) {
    TF_ASSIGN_OR_RETURN(Workload workload, from_proto(w));
    library.workloads.push_back(workload);
  }
  TF_ASSIGN_OR_RETURN(library.target, from_proto(request.target()));
  library.device_key = request.device_key();
  if (!request.name().empty()) library.name = request.name();
  library.require_tuned = request.require_tuned();
  return library;
}

// Streams the files the builder wrote into `dir`, in chunks; the first carries the warnings.
grpc::Status send_library(const std::string& dir, const std::vector<std::string>& warnings,
                          const std::function<bool(const v1::LibraryChunk&)>& write) {
  bool sent_first = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t offset = 0; offset == 0 || offset < data.size(); offset += kExportChunkBytes) {
      v1::LibraryChunk chunk;
      if (!sent_first)
        for (const auto& w : warnings) chunk.add_warnings(w);
      chunk.set_file(entry.path().filename().string());
      chunk.set_offset(static_cast<int64_t>(offset));
      chunk.set_data(data.substr(offset, kExportChunkBytes));
      if (!write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      sent_first = true;
    }
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status TunerService::build_and_send(const LibraryRequest& library, const std::string& records,
                                          const grpc::ServerContext* context,
                                          const std::function<bool(const v1::LibraryChunk&)>& write) {
  // One library at a time: a build compiles every kernel and runs the system's linker.
  std::lock_guard<std::mutex> one_build(library_mu_);
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  ScopedTempDir out("", "tunefarm-library-out");
  if (!out.status().ok()) return to_grpc(out.status());
  auto warnings = run_library_builder(library, records, "the history's best records", out.path());
  if (!warnings.ok()) return to_grpc(warnings.status());
  return send_library(out.path(), *warnings, write);
}

StatusOr<std::string> TunerService::best_records(const LibraryRequest& library, const std::vector<Workload>& workloads) {
  // The history's one rule picks each workload's record here; the builder sees only those: the
  // best, and the default config's own record, which the best must clearly beat (without it, a
  // build here kept a best 0.6% faster than the default where a build from the exported records
  // fell back to the default), with every measurement of the two (their figures as the history's,
  // and their side-by-side re-measurements).
  std::string records;
  for (const auto& w : workloads) {
    TF_ASSIGN_OR_RETURN(auto best, store_.query_best(w, library.target, library.device_key, 1));
    for (const auto& r : best) records += record_to_json_line(r) + "\n";
    if (best.empty()) continue;
    std::optional<v1::Record> d = default_record(store_, w, library, best.front().device_key());
    if (!d || from_proto(d->config()).to_json() == from_proto(best.front().config()).to_json()) continue;
    records += record_to_json_line(*d) + "\n";
    for (const auto& r : best_and_default_records(store_, w, library, best.front(), *d))
      records += record_to_json_line(r) + "\n";
  }
  return records;
}

grpc::Status TunerService::BuildLibrary(grpc::ServerContext* context, const v1::BuildLibraryRequest* request,
                                        grpc::ServerWriter<v1::LibraryChunk>* writer) {
  if (auto s = authorize(context, "BuildLibrary"); !s.ok()) return s;
  auto library = library_request_of(*request);
  if (!library.ok()) return to_grpc(library.status());
  if (auto s = check_library_request(*library); !s.ok()) return to_grpc(s);
  auto records = best_records(*library, library->workloads);
  if (!records.ok()) return to_grpc(records.status());
  return build_and_send(*library, *records, context, [&](const v1::LibraryChunk& c) { return writer->Write(c); });
}

grpc::Status TunerService::BuildModel(grpc::ServerContext* context,
                                      grpc::ServerReaderWriter<v1::LibraryChunk, v1::ModelChunk>* stream) {
  if (auto s = authorize(context, "BuildModel"); !s.ok()) return s;
  std::string onnx, file_name;
  std::map<std::string, std::vector<int64_t>> shapes;
  v1::ModelChunk chunk;
  v1::BuildLibraryRequest what;
  bool first = true;
  while (stream->Read(&chunk)) {
    if (onnx.size() + chunk.onnx().size() > kMaxModelBytes)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("the model is larger than {} MiB", kMaxModelBytes >> 20));
    if (first) {
      file_name = chunk.file_name().substr(0, 256);
      for (const auto& s : chunk.input_shapes()) shapes[s.name()].assign(s.dims().begin(), s.dims().end());
      what = chunk.library();
      first = false;
    }
    onnx += chunk.onnx();
  }
  if (what.workloads_size() > 0) return invalid("a model's library takes no workloads: its tasks are its workloads");
  auto library = library_request_of(what);
  if (!library.ok()) return to_grpc(library.status());
  ScopedTempDir in("", "tunefarm-model-in");
  if (!in.status().ok()) return to_grpc(in.status());
  library->model_path = in.path() + "/model.onnx";
  library->input_shapes = shapes;
  if (auto s = check_library_request(*library); !s.ok()) return to_grpc(s);
  {
    std::ofstream out(library->model_path, std::ios::binary);
    out.write(onnx.data(), static_cast<std::streamsize>(onnx.size()));
    if (!out) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "tunerd cannot write the model to its scratch space");
  }
  // The tasks tell which records the model needs; the importer runs in its own process.
  auto tasks = extract_model_tasks_isolated(onnx, file_name, shapes);
  if (!tasks.ok()) return to_grpc(tasks.status());
  std::vector<Workload> workloads;
  for (const auto& t : tasks->tasks()) {
    auto w = from_proto(t.workload());
    if (!w.ok()) return to_grpc(w.status());
    workloads.push_back(*w);
  }
  auto records = best_records(*library, workloads);
  if (!records.ok()) return to_grpc(records.status());
  return build_and_send(*library, *records, context, [&](const v1::LibraryChunk& c) { return stream->Write(c); });
}

}  // namespace tunefarm
