// tune-client best | records | export | import: the tuning history on tunerd.
#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/command.h"
#include "client/output.h"
#include "client/tuner_call.h"
#include "common/wire/wire.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::client {
namespace {

struct BestFlags {
  std::string workload;
  std::string target = "llvm";
  std::string device;
  int top = 1;
  bool json = false;
};

struct RecordsFlags {
  std::string workload;
  std::string job;
  int limit = 50;
  int64_t offset = 0;
  bool json = false;
};

struct FileFlags {
  std::string path;
  std::string workload;
  bool json = false;
};

int run_best(const GlobalFlags& global, const BestFlags& flags) {
  auto w = parse_workload(flags.workload);
  if (!w.ok()) return fail(w.status().message());
  auto t = parse_target(flags.target);
  if (!t.ok()) return fail(t.status().message());
  v1::QueryBestRequest request;
  *request.mutable_workload() = to_proto(*w);
  *request.mutable_target() = to_proto(*t);
  request.set_device_key(flags.device);
  request.set_top_k(flags.top);
  v1::QueryBestResponse response;
  grpc::Status status = call_tuner(global, &v1::Tuner::Stub::QueryBest, request, &response);
  if (!status.ok()) return rpc_failure(global.server, "best", status);
  if (response.records().empty())
    return fail(fmt::format("no successful measurement of {} on {}{} yet", w->to_string(), t->to_string(),
                            flags.device.empty() ? "" : " (device " + flags.device + ")"));
  for (const auto& r : response.records()) {
    if (flags.json) {
      // The export form: `import` takes these lines back, and kernel_bench --config-file reads them.
      fmt::print("{}\n", record_to_json_line(r));
    } else {
      fmt::print("{:.1f} GFLOP/s  {:.3f} ms  device {}  job {}\n  {}\n", r.gflops(), r.mean_cost_s() * 1e3,
                 r.device_key(), r.job_id(), from_proto(r.config()).to_json());
    }
  }
  return 0;
}

int run_records(const GlobalFlags& global, const RecordsFlags& flags) {
  v1::ListRecordsRequest request;
  if (!flags.workload.empty()) {
    auto w = parse_workload(flags.workload);
    if (!w.ok()) return fail(w.status().message());
    *request.mutable_workload() = to_proto(*w);
  }
  request.set_job_id(flags.job);
  request.set_limit(flags.limit);
  request.set_offset(flags.offset);
  // tunerd bounds each answer in bytes: the records asked for come in as many pages as they take,
  // gathered here into one answer.
  v1::ListRecordsResponse response;
  for (;;) {
    v1::ListRecordsResponse page;
    grpc::Status status =
        call_tuner(global, &v1::Tuner::Stub::ListRecords, request, &page, std::chrono::seconds(30));
    if (!status.ok()) return rpc_failure(global.server, "records", status);
    response.set_total(page.total());
    for (auto& r : *page.mutable_records()) *response.add_records() = std::move(r);
    if (page.next_offset() == 0 || page.records().empty() || page.records_size() >= request.limit()) break;
    request.set_offset(page.next_offset());
    request.set_limit(request.limit() - page.records_size());
  }
  if (flags.json) {
    fmt::print("{}\n", to_json(response));
    return 0;
  }
  fmt::print("{} of {} records{}\n", response.records_size(), response.total(),
             flags.offset + response.records_size() < response.total()
                 ? fmt::format(" (the next with --offset {}; --limit N for more at once)",
                               flags.offset + response.records_size())
                 : "");
  if (response.records().empty()) return 0;
  fmt::print("{:<14} {:>17}  {:<12} {:<16} {:<32} {}\n", "RESULT", "SPEED", "MEASURED AS", "BUILT FOR CPU", "WORKLOAD",
             "CONFIG");
  for (const auto& r : response.records()) {
    auto w = from_proto(r.workload());
    std::string round = r.remeasure_round() > 0 ? fmt::format("re-measure {}", r.remeasure_round()) : "trial";
    // The CPU it was compiled for: the target's own, or the one tunerd resolved for the board.
    std::string cpu = r.built_for().mcpu().empty() ? r.target().mcpu() : r.built_for().mcpu();
    fmt::print("{:<14} {:>9.1f} GFLOP/s  {:<12} {:<16} {:<32} {}\n", v1::ErrorCode_Name(r.result().error()), r.gflops(),
               round, cpu.empty() ? "-" : cpu, w.ok() ? w->to_string() : "?", from_proto(r.config()).to_json());
  }
  return 0;
}

int run_export(const GlobalFlags& global, const FileFlags& flags) {
  v1::ExportRecordsRequest request;
  if (!flags.workload.empty()) {
    auto w = parse_workload(flags.workload);
    if (!w.ok()) return fail(w.status().message());
    *request.mutable_workload() = to_proto(*w);
  }
  std::string tmp = flags.path + ".partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return fail(fmt::format("cannot write {}", tmp));
  auto stub = v1::Tuner::NewStub(dial(global.server));
  grpc::ClientContext context;
  auto reader = stub->ExportRecords(&context, request);
  v1::RecordChunk chunk;
  int64_t lines = 0;
  while (reader->Read(&chunk)) {
    out << chunk.jsonl();
    lines += std::count(chunk.jsonl().begin(), chunk.jsonl().end(), '\n');
  }
  grpc::Status status = reader->Finish();
  out.close();
  // Only a complete export takes the file's name: a half-written one never looks finished.
  if (!status.ok() || !out) {
    std::remove(tmp.c_str());
    return status.ok() ? fail(fmt::format("writing {} failed", tmp)) : rpc_failure(global.server, "export", status);
  }
  if (std::rename(tmp.c_str(), flags.path.c_str()) != 0) return fail(fmt::format("cannot rename {} to {}", tmp, flags.path));
  if (flags.json)
    fmt::print("{}\n", nlohmann::ordered_json{{"exported", lines}, {"file", flags.path}}.dump());
  else
    fmt::print("exported {} records to {}\n", lines, flags.path);
  return 0;
}

int run_import(const GlobalFlags& global, const FileFlags& flags) {
  std::ifstream in(flags.path, std::ios::binary);
  if (!in) return fail(fmt::format("cannot open {}", flags.path));
  auto stub = v1::Tuner::NewStub(dial(global.server));
  grpc::ClientContext context;
  v1::ImportRecordsResponse response;
  auto writer = stub->ImportRecords(&context, &response);
  // Chunks end on line boundaries so that each holds whole records.
  std::string chunk, line;
  bool sent_ok = true;
  while (sent_ok && std::getline(in, line)) {
    chunk += line;
    chunk += '\n';
    if (chunk.size() >= (1 << 20)) {
      v1::RecordChunk c;
      c.set_jsonl(std::move(chunk));
      chunk.clear();
      sent_ok = writer->Write(c);
    }
  }
  if (sent_ok && !chunk.empty()) {
    v1::RecordChunk c;
    c.set_jsonl(std::move(chunk));
    writer->Write(c);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return rpc_failure(global.server, "import", status);
  if (flags.json)
    fmt::print("{}\n", nlohmann::ordered_json{
                            {"imported", response.imported()}, {"skipped", response.skipped()}, {"file", flags.path}}
                            .dump());
  else
    fmt::print("imported {} records from {} ({} already present)\n", response.imported(), flags.path,
               response.skipped());
  return 0;
}

}  // namespace

void add_records_commands(CLI::App& app, const GlobalFlags& global, Commands& commands) {
  auto best = std::make_shared<BestFlags>();
  CLI::App* b = app.add_subcommand("best", "The best recorded configs for a workload, by the median of each config's measurements");
  b->add_option("--workload", best->workload, "Workload string")->required();
  b->add_option("--target", best->target, "Target string")->capture_default_str();
  b->add_option("--device", best->device, "Only this device key (default: any)");
  b->add_option("--top", best->top, "How many, fastest first")->capture_default_str()->check(CLI::Range(1, 100));
  b->add_flag("--json", best->json, "One JSON line per config, the record of its figure (import and kernel_bench --config-file read it)");
  commands.push_back({b, [&global, best] { return run_best(global, *best); }});

  auto records = std::make_shared<RecordsFlags>();
  CLI::App* r = app.add_subcommand("records", "List measurements, oldest first");
  r->add_option("--workload", records->workload, "Only this workload");
  r->add_option("--job", records->job, "Only this job");
  // At least one: 0 would leave the count to tunerd's default, which paging could not follow.
  r->add_option("--limit", records->limit, "At most this many (tunerd sends them in pages)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  r->add_option("--offset", records->offset, "Skip this many");
  r->add_flag("--json", records->json, "Print JSON");
  commands.push_back({r, [&global, records] { return run_records(global, *records); }});

  auto exp = std::make_shared<FileFlags>();
  CLI::App* e = app.add_subcommand("export", "Write records as JSON lines to FILE");
  e->add_option("FILE", exp->path, "Output file")->required();
  e->add_option("--workload", exp->workload, "Only this workload");
  e->add_flag("--json", exp->json, "Print the summary as JSON");
  commands.push_back({e, [&global, exp] { return run_export(global, *exp); }});

  auto imp = std::make_shared<FileFlags>();
  CLI::App* i = app.add_subcommand("import", "Add the records of a JSON-lines FILE (present ones are skipped)");
  i->add_option("FILE", imp->path, "Input file")->check(CLI::ExistingFile)->required();
  i->add_flag("--json", imp->json, "Print the summary as JSON");
  commands.push_back({i, [&global, imp] { return run_import(global, *imp); }});
}

}  // namespace tunefarm::client
