// tunefarm-build-library: records as JSON lines on stdin (a history's export, or tunerd's best
// records), a kernel library of the best per workload, or a model's library (--model), written
// into --out (common/library_request.h).
// Warnings, one a line, on stdout; a failure is one line on stderr and exit status 2 (3: a workload
// has no record and --require-tuned).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/input_shape.h"
#include "common/temp_dir.h"
#include "tuner/library_builder.h"

namespace {

tunefarm::Status run(const tunefarm::LibraryRequest& request, const std::string& records_name, const std::string& out_dir) {
  using namespace tunefarm;
  TF_RETURN_IF_ERROR(check_library_request(request));
  ScopedTempDir scratch("", "tunefarm-build-library");
  TF_RETURN_IF_ERROR(scratch.status());
  TF_ASSIGN_OR_RETURN(auto store, db::RecordStore::open(scratch.path() + "/history.db"));
  std::istringstream records(std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()));
  TF_RETURN_IF_ERROR(store->import_jsonl(records, records_name).status());
  TF_ASSIGN_OR_RETURN(BuiltLibrary library, build_library(request, *store));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return unavailable(fmt::format("cannot create the output directory {}: {}", out_dir, ec.message()));
  for (const auto& file : library.files) {
    std::ofstream out(out_dir + "/" + file.name, std::ios::binary);
    out.write(file.content.data(), static_cast<std::streamsize>(file.content.size()));
    out.close();
    if (!out) return unavailable(fmt::format("cannot write {}/{}", out_dir, file.name));
  }
  for (const auto& w : library.warnings) std::printf("%s\n", w.c_str());
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("tunefarm-build-library: a kernel library of the best records (run by tunerd and tune-client)");
  tunefarm::LibraryRequest request;
  std::vector<std::string> workloads;
  std::string target = "llvm", out_dir, records_name = "the records";
  std::vector<std::string> shapes;
  app.add_option("--workload", workloads, "A workload string (repeat)");
  app.add_option("--model", request.model_path, "An ONNX model to build instead of workloads");
  app.add_option("--input-shape", shapes, "NAME=d0,d1,... for the model's symbolic inputs");
  app.add_option("--target", target, "Target string")->capture_default_str();
  app.add_option("--device", request.device_key, "Only records of this device key");
  app.add_option("--name", request.name, "Library name (a C identifier)")->capture_default_str();
  app.add_flag("--require-tuned", request.require_tuned, "A workload without records is an error");
  app.add_option("--out", out_dir, "Directory for the files (made if missing)")->required();
  app.add_option("--records-name", records_name, "What to call the records on stdin in messages");
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const tunefarm::Status& s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return s.code() == tunefarm::StatusCode::kNotFound ? 3 : 2;
  };
  auto parsed_target = tunefarm::parse_target(target);
  if (!parsed_target.ok()) return fail(parsed_target.status());
  request.target = *parsed_target;
  for (const auto& text : shapes) {
    auto shape = tunefarm::parse_input_shape(text);
    if (!shape.ok()) return fail(shape.status());
    request.input_shapes[shape->first] = shape->second;
  }
  for (const auto& text : workloads) {
    auto w = tunefarm::parse_workload(text);
    if (!w.ok()) return fail(w.status());
    request.workloads.push_back(*w);
  }
  if (auto s = run(request, records_name, out_dir); !s.ok()) return fail(s);
  return 0;
}
