// tune-client build: the history's best configs as a kernel library (common/library_request.h),
// built by tunerd or, with --from-records, by the same builder on this machine. The files appear in
// the output directory together or not at all: they are written into a scratch directory inside it
// and moved into place only when every one is complete.
#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/command.h"
#include "client/models.h"
#include "client/output.h"
#include "common/input_shape.h"
#include "common/library_request.h"
#include "common/wire/wire.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::client {
namespace {

namespace fs = std::filesystem;

// A records file larger than this is not an export of one history's tuning.
constexpr uintmax_t kMaxRecordsFileBytes = uintmax_t{1} << 30;
constexpr std::chrono::minutes kBuildDeadline{20};

struct BuildFlags {
  std::vector<std::string> workloads;
  std::string model;
  std::vector<std::string> input_shapes;
  std::string workloads_file;
  std::string target = "llvm";
  std::string device;
  std::string out;
  std::string name = kDefaultLibraryName;
  std::string from_records;
  bool require_tuned = false;
  bool json = false;
};

// The scratch directory inside the output directory, removed unless commit() moved its files out.
class Staging {
 public:
  explicit Staging(const std::string& out) : out_(out) {}
  ~Staging() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }

  Status create() {
    std::error_code ec;
    fs::create_directories(out_, ec);
    if (ec) return unavailable(fmt::format("cannot create the output directory {}: {}", out_, ec.message()));
    std::string pattern = (fs::path(out_) / ".tune-client-build-XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      return unavailable(fmt::format("cannot write into the output directory {}: {}", out_, std::strerror(errno)));
    path_ = pattern;
    return Status();
  }

  const std::string& path() const { return path_; }

  // Moves every staged file into the output directory; answers their names.
  StatusOr<std::vector<std::string>> commit() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(path_, ec)) names.push_back(entry.path().filename().string());
    if (ec) return unavailable(fmt::format("cannot read {}: {}", path_, ec.message()));
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      fs::rename(fs::path(path_) / name, fs::path(out_) / name, ec);
      if (ec) return unavailable(fmt::format("cannot move {} into {}: {}", name, out_, ec.message()));
    }
    return names;
  }

 private:
  std::string out_;
  std::string path_;
};

StatusOr<std::string> read_records_file(const std::string& path) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return not_found(fmt::format("cannot read the records file {}: {}", path, ec.message()));
  if (size > kMaxRecordsFileBytes) return invalid_argument(fmt::format("{} is larger than 1 GiB", path));
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return unavailable(fmt::format("cannot read the records file {}", path));
  return text;
}

// Receives the library's chunks (from `read`) into the staging directory; answers the warnings.
StatusOr<std::vector<std::string>> receive_library(const std::function<bool(v1::LibraryChunk*)>& read, const std::string& dir) {
  std::vector<std::string> warnings;
  std::map<std::string, std::ofstream> files;
  std::map<std::string, int64_t> sizes;
  v1::LibraryChunk chunk;
  while (read(&chunk)) {
    for (const auto& w : chunk.warnings()) warnings.push_back(w);
    const std::string& name = chunk.file();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || name.size() > 255)
      return internal_error(fmt::format("tunerd sent a file named '{}'", name));
    if (chunk.offset() != sizes[name]) return internal_error(fmt::format("tunerd sent {} out of order", name));
    auto [it, fresh] = files.try_emplace(name);
    if (fresh) it->second.open(fs::path(dir) / name, std::ios::binary);
    it->second.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    if (!it->second) return unavailable(fmt::format("cannot write {} into {}", name, dir));
    sizes[name] += static_cast<int64_t>(chunk.data().size());
  }
  for (auto& [name, out] : files) {
    out.close();
    if (!out) return unavailable(fmt::format("cannot write {} into {}", name, dir));
  }
  return warnings;
}

v1::BuildLibraryRequest to_request(const LibraryRequest& library) {
  v1::BuildLibraryRequest request;
  for (const auto& w : library.workloads) *request.add_workloads() = to_proto(w);
  *request.mutable_target() = to_proto(library.target);
  request.set_device_key(library.device_key);
  request.set_name(library.name);
  request.set_require_tuned(library.require_tuned);
  return request;
}

// The library built by tunerd: the workloads' kernels, or the uploaded model.
StatusOr<std::vector<std::string>> build_on_tunerd(const GlobalFlags& global, const LibraryRequest& library,
                                                   const BuildFlags& flags, const std::string& dir, grpc::Status* rpc_status) {
  auto stub = v1::Tuner::NewStub(dial(global.server));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kBuildDeadline);
  StatusOr<std::vector<std::string>> warnings = std::vector<std::string>();
  if (flags.model.empty()) {
    auto reader = stub->BuildLibrary(&context, to_request(library));
    warnings = receive_library([&](v1::LibraryChunk* c) { return reader->Read(c); }, dir);
    if (!warnings.ok()) context.TryCancel();
    *rpc_status = reader->Finish();
  } else {
    TF_ASSIGN_OR_RETURN(v1::ModelChunk first, first_model_chunk(flags.model, flags.input_shapes));
    *first.mutable_library() = to_request(library);
    auto stream = stub->BuildModel(&context);
    Status sent = stream_model(flags.model, std::move(first), [&](const v1::ModelChunk& c) { return stream->Write(c); });
    stream->WritesDone();
    warnings = sent.ok() ? receive_library([&](v1::LibraryChunk* c) { return stream->Read(c); }, dir) : StatusOr<std::vector<std::string>>(sent);
    if (!warnings.ok()) context.TryCancel();
    *rpc_status = stream->Finish();
  }
  if (!warnings.ok()) return warnings.status();
  if (!rpc_status->ok()) return from_grpc(*rpc_status);
  if (fs::is_empty(dir)) return internal_error("tunerd answered with no files");
  return warnings;
}

int run_build(const GlobalFlags& global, const BuildFlags& flags) {
  LibraryRequest library;
  library.name = flags.name;
  library.device_key = flags.device;
  library.require_tuned = flags.require_tuned;
  for (const auto& text : flags.workloads) {
    auto w = parse_workload(text);
    if (!w.ok()) return fail(w.status().message());
    library.workloads.push_back(*w);
  }
  if (!flags.workloads_file.empty()) {
    auto ws = read_workload_file(flags.workloads_file);
    if (!ws.ok()) return fail(ws.status().message());
    library.workloads.insert(library.workloads.end(), ws->begin(), ws->end());
  }
  if (library.workloads.empty() && flags.model.empty()) return fail("nothing to build: give --workload, --workloads or --model");
  if (!library.workloads.empty() && !flags.model.empty()) return fail("give workloads or --model, not both");
  if (!flags.model.empty() && !fs::is_regular_file(flags.model)) return fail(fmt::format("cannot open model file {}", flags.model));
  library.model_path = flags.model;
  for (const auto& text : flags.input_shapes) {
    auto shape = parse_input_shape(text);
    if (!shape.ok()) return fail(shape.status().message());
    library.input_shapes[shape->first] = shape->second;
  }
  auto target = parse_target(flags.target);
  if (!target.ok()) return fail(target.status().message());
  library.target = *target;

  std::string records;
  if (!flags.from_records.empty()) {
    auto text = read_records_file(flags.from_records);
    if (!text.ok()) return fail(text.status().message());
    records = std::move(*text);
  }
  Staging staging(flags.out);
  if (Status s = staging.create(); !s.ok()) return fail(s.message());
  StatusOr<std::vector<std::string>> warnings = std::vector<std::string>();
  if (!flags.from_records.empty()) {
    warnings = run_library_builder(library, records, flags.from_records, staging.path());
  } else {
    grpc::Status rpc;
    warnings = build_on_tunerd(global, library, flags, staging.path(), &rpc);
    if (!rpc.ok())
      return rpc_failure(global.server,
                         rpc.error_code() == grpc::StatusCode::UNAVAILABLE
                             ? "build needs tunerd for the records (or --from-records FILE)"
                             : "build",
                         rpc);
  }
  if (!warnings.ok()) return fail(warnings.status().message());
  auto files = staging.commit();
  if (!files.ok()) return fail(files.status().message());
  for (const auto& w : *warnings) fmt::print(stderr, "tune-client: warning: {}\n", w);
  if (flags.json) {
    nlohmann::ordered_json out = {{"dir", flags.out}, {"files", *files}, {"warnings", *warnings}};
    if (flags.model.empty()) out["kernels"] = library.workloads.size();
    fmt::print("{}\n", out.dump());
  } else if (!flags.model.empty()) {
    fmt::print("built {} ({} task kernel{} from template defaults) into {}: {}\n", flags.model, warnings->size(),
               warnings->size() == 1 ? "" : "s", flags.out, fmt::join(*files, " "));
  } else {
    size_t tuned = library.workloads.size() - warnings->size();
    fmt::print("built {} kernel{} ({} tuned, {} from template defaults) into {}: {}\n", library.workloads.size(),
               library.workloads.size() == 1 ? "" : "s", tuned, warnings->size(), flags.out, fmt::join(*files, " "));
  }
  return 0;
}

}  // namespace

void add_build_commands(CLI::App& app, const GlobalFlags& global, Commands& commands) {
  auto flags = std::make_shared<BuildFlags>();
  CLI::App* b = app.add_subcommand("build", "Build a kernel library, or a model's library, of the best configs");
  b->add_option("--workload", flags->workloads, "Workload string (repeat for several)");
  b->add_option("--workloads", flags->workloads_file, "File of workload strings");
  b->add_option("--model", flags->model, "An ONNX model: the whole model as a library, its tasks' best kernels inside");
  b->add_option("--input-shape", flags->input_shapes, "NAME=d0,d1,... for a model input with symbolic dimensions (repeatable)");
  b->add_option("--target", flags->target, "Target the kernels are built for")->capture_default_str();
  b->add_option("--device", flags->device, "Only configs measured on this device key");
  b->add_option("-o,--out", flags->out, "Output directory (created if missing)")->required();
  b->add_option("--name", flags->name, "Library name: lib<name>.so, <name>.h, symbol prefix")->capture_default_str();
  b->add_flag("--require-tuned", flags->require_tuned, "Fail when a workload has no record instead of using its default config");
  b->add_option("--from-records", flags->from_records,
                "Build here from exported records (JSON lines) instead of asking tunerd");
  b->add_flag("--json", flags->json, "Print a JSON summary");
  commands.push_back({b, [&global, flags] { return run_build(global, *flags); }});
}

}  // namespace tunefarm::client
