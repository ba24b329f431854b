#include "common/wire/wire.h"

#include <algorithm>
#include <map>

#include <google/protobuf/util/json_util.h>

#include <fmt/format.h>

#include "common/operators/winograd.h"

namespace tunefarm {

v1::DType to_proto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return v1::FLOAT32;
    case DType::kFloat16: return v1::FLOAT16;
    case DType::kFloat64: return v1::FLOAT64;
    case DType::kInt8: return v1::INT8;
    case DType::kInt32: return v1::INT32;
    case DType::kUInt8: return v1::UINT8;
  }
  return v1::DTYPE_UNSPECIFIED;
}

StatusOr<DType> from_proto(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return DType::kFloat32;
    case v1::FLOAT16: return DType::kFloat16;
    case v1::FLOAT64: return DType::kFloat64;
    case v1::INT8: return DType::kInt8;
    case v1::INT32: return DType::kInt32;
    case v1::UINT8: return DType::kUInt8;
    default: return invalid_argument(fmt::format("dtype {} is not a known dtype", static_cast<int>(dtype)));
  }
}

v1::Workload to_proto(const Workload& workload) {
  v1::Workload out;
  out.set_op(workload.op);
  for (const auto& [name, value] : workload.params) {
    auto* p = out.add_params();
    p->set_name(name);
    p->set_value(value);
  }
  out.set_dtype(to_proto(workload.dtype));
  return out;
}

StatusOr<Workload> from_proto(const v1::Workload& workload) {
  // Rebuild the text form and parse it: one set of rules for every entry point.
  std::string text = workload.op() + ":";
  for (int i = 0; i < workload.params_size(); ++i)
    text += fmt::format("{}{}={}", i ? "," : "", workload.params(i).name(), workload.params(i).value());
  if (workload.dtype() != v1::DTYPE_UNSPECIFIED) {
    TF_ASSIGN_OR_RETURN(DType dtype, from_proto(workload.dtype()));
    if (dtype != DType::kFloat32) text += fmt::format("{}dtype={}", workload.params_size() ? "," : "", dtype_name(dtype));
  }
  return parse_workload(text);
}

v1::Target to_proto(const Target& target) {
  v1::Target out;
  out.set_kind(target.kind == Target::Kind::kCUDA ? "cuda" : "llvm");
  out.set_mtriple(target.mtriple);
  out.set_mcpu(target.mcpu);
  out.set_mattr(target.mattr);
  out.set_arch(target.arch);
  return out;
}

StatusOr<Target> from_proto(const v1::Target& target) {
  std::string text = target.kind();
  if (!target.mtriple().empty()) text += " -mtriple=" + target.mtriple();
  if (!target.mcpu().empty()) text += " -mcpu=" + target.mcpu();
  if (!target.mattr().empty()) text += " -mattr=" + target.mattr();
  if (!target.arch().empty()) text += " -arch=" + target.arch();
  return parse_target(text);
}

v1::Config to_proto(const Config& config) {
  v1::Config out;
  out.set_template_name(config.template_name);
  out.set_index(-1);
  for (const auto& [name, value] : config.knobs) {
    auto* knob = out.add_knobs();
    knob->set_name(name);
    auto* v = knob->mutable_value();
    if (const auto* i = std::get_if<int64_t>(&value)) v->set_int_value(*i);
    else if (const auto* s = std::get_if<std::string>(&value)) v->set_str_value(*s);
    // The list case is set even for an empty list, which would otherwise come back as the integer 0.
    else v->mutable_ints()->mutable_values()->Add(std::get<std::vector<int64_t>>(value).begin(),
                                                  std::get<std::vector<int64_t>>(value).end());
  }
  return out;
}

Config from_proto(const v1::Config& config) {
  Config out;
  out.template_name = config.template_name();
  for (const auto& knob : config.knobs()) {
    const auto& v = knob.value();
    switch (v.value_case()) {
      case v1::KnobValue::kStrValue: out.knobs.emplace_back(knob.name(), v.str_value()); break;
      case v1::KnobValue::kInts:
        out.knobs.emplace_back(knob.name(), std::vector<int64_t>(v.ints().values().begin(), v.ints().values().end()));
        break;
      default: out.knobs.emplace_back(knob.name(), v.int_value()); break;
    }
  }
  return out;
}

grpc::Status to_grpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

Status from_grpc(const grpc::Status& status) {
  if (status.ok()) return Status();
  return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
}

std::string record_to_json_line(const v1::Record& record) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = false;
  std::string line;
  // Printing a valid message into a string cannot fail.
  (void)google::protobuf::util::MessageToJsonString(record, &line, options);
  return line;
}

StatusOr<v1::Record> record_from_json_line(std::string_view line) {
  // A record is a few hundred bytes; a huge line is refused before the JSON parser sees it.
  if (line.size() > kMaxRecordLineBytes)
    return invalid_argument(fmt::format("the line is {} bytes; a record may be at most {}", line.size(),
                                        kMaxRecordLineBytes));
  v1::Record record;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &record, options);
  if (!status.ok()) return invalid_argument(fmt::format("not a JSON Record: {}", std::string(status.message())));
  return record;
}

double other_steps_seconds(const v1::JobSpec& spec) {
  double bytes = std::max(0.0, spec.other_bytes());
  // A figure past the other bytes counts as all of them; a negative one or NaN (a client's) as none.
  double streaming = spec.other_streaming_bytes() > 0 ? std::min(spec.other_streaming_bytes(), bytes) : 0.0;
  double stream = spec.stream_bytes_per_s();
  if (stream <= 0) return bytes / kOtherStepBytesPerS;
  return streaming / (stream * kStreamingStepShareOfStream) + (bytes - streaming) / (stream * kOtherStepShareOfStream);
}

std::optional<ModelLatency> model_latency(const v1::Job& job) {
  const v1::JobProgress& progress = job.progress();
  if (progress.tasks_size() < 2) return std::nullopt;
  ModelLatency out;
  bool all_defaults = true;
  double steps = std::max(0, job.spec().other_steps());
  // A task that is another way to compute another (a convolution's Winograd form) is not a step
  // of its own: the model runs whichever of the two is faster. Progress lists the spec's tasks in
  // its order.
  // An untuned build computes some of them in their other form (winograd_by_default): the
  // untuned estimate takes that form's default.
  std::map<std::string, double> alternative_gflops, untuned_alternative_gflops;
  std::vector<bool> alternative(static_cast<size_t>(progress.tasks_size()), false);
  for (int i = 0; i < progress.tasks_size() && i < job.spec().tasks_size(); ++i) {
    const std::string& of = job.spec().tasks(i).alternative_of();
    if (of.empty()) continue;
    alternative[static_cast<size_t>(i)] = true;
    double& best = alternative_gflops[of];
    best = std::max(best, progress.tasks(i).best_gflops());
    if (auto w = from_proto(job.spec().tasks(i).workload());
        w.ok() && operators::winograd_by_default(*w))
      untuned_alternative_gflops[of] = progress.tasks(i).default_gflops();
  }
  for (int i = 0; i < progress.tasks_size(); ++i) {
    if (alternative[static_cast<size_t>(i)]) continue;
    const v1::TaskProgress& t = progress.tasks(i);
    if (t.best_gflops() <= 0 || t.flops() <= 0) return std::nullopt;
    double weight = t.weight() > 0 ? t.weight() : 1;
    steps += weight;
    double best = t.best_gflops(), untuned = t.default_gflops();
    if (auto w = from_proto(t.workload()); w.ok()) {
      if (auto it = alternative_gflops.find(w->to_string()); it != alternative_gflops.end()) best = std::max(best, it->second);
      if (auto it = untuned_alternative_gflops.find(w->to_string()); it != untuned_alternative_gflops.end()) untuned = it->second;
    }
    out.tuned_s += weight * t.flops() / (best * 1e9);
    if (untuned > 0) out.untuned_s += weight * t.flops() / (untuned * 1e9);
    else all_defaults = false;
  }
  // The same for tuned and untuned: neither the other steps nor the calls are tuned.
  double rest = other_steps_seconds(job.spec()) + steps * kStepCallS;
  out.tuned_s += rest;
  out.untuned_s = all_defaults ? out.untuned_s + rest : 0;
  return out;
}

void fill_model_latency(v1::Job& job) {
  auto latency = model_latency(job);
  job.mutable_progress()->set_latency_ms(latency ? latency->tuned_s * 1e3 : 0);
  job.mutable_progress()->set_untuned_latency_ms(latency ? latency->untuned_s * 1e3 : 0);
}

AgentPlatform agent_platform(const v1::AgentInfo& agent) {
  const v1::Capabilities& capabilities = agent.capabilities();
  AgentPlatform platform;
  platform.arch = capabilities.arch();
  for (const std::string& target : capabilities.targets()) {
    auto parsed = parse_target(target);
    if (parsed.ok() && parsed->kind == Target::Kind::kCUDA) platform.cuda = true;
  }
  platform.agent_id = agent.agent_id();
  platform.cpu_name = capabilities.cpu_name();
  platform.cpu_features = capabilities.cpu_features();
  platform.stream_bytes_per_s = capabilities.stream_bytes_per_s();
  return platform;
}

}  // namespace tunefarm
