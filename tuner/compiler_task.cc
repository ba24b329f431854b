#include "tuner/compiler_task.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "common/wire/wire.h"
#include "compiler/build.h"
#include "compiler/codegen/codegen.h"
#include "compiler/features/features.h"
#include "search/parallel_for.h"

namespace tunefarm {

v1::Artifact to_artifact(const BuiltKernel& kernel, const Target& target) {
  v1::Artifact a;
  a.set_format(kernel.format == BuiltKernel::Format::kPtx ? v1::Artifact::PTX : v1::Artifact::SHARED_OBJECT);
  a.set_data(kernel.binary);
  a.set_entry_symbol(kernel.entry);
  for (const ops::TensorArg& arg : kernel.args) {
    v1::TensorArg* t = a.add_args();
    t->set_name(arg.name);
    for (int64_t d : arg.shape) t->add_shape(d);
    t->set_dtype(to_proto(arg.dtype));
    t->set_is_output(arg.is_output);
    t->set_constant(arg.constant);
  }
  if (kernel.format == BuiltKernel::Format::kPtx) {
    v1::LaunchDims* l = a.mutable_launch();
    l->set_grid_x(static_cast<int32_t>(kernel.grid[0]));
    l->set_grid_y(static_cast<int32_t>(kernel.grid[1]));
    l->set_grid_z(static_cast<int32_t>(kernel.grid[2]));
    l->set_block_x(static_cast<int32_t>(kernel.block[0]));
    l->set_block_y(static_cast<int32_t>(kernel.block[1]));
    l->set_block_z(static_cast<int32_t>(kernel.block[2]));
  }
  *a.mutable_target() = to_proto(target);
  return a;
}

namespace {

std::vector<std::string> knob_names(const ops::ConfigSpace& space) {
  std::vector<std::string> out;
  for (const ops::Knob& k : space.knobs()) out.push_back(k.name);
  return out;
}

std::vector<int64_t> knob_radices(const ops::ConfigSpace& space) {
  std::vector<int64_t> out;
  for (const ops::Knob& k : space.knobs()) out.push_back(static_cast<int64_t>(k.choices.size()));
  return out;
}

// How one knob turns into features: list values as log2 of each factor, integers as log2, and
// unordered choices (loop orders, annotations, named options) one-hot.
struct KnobLayout {
  enum class Kind { kList, kInt, kOneHot } kind;
  size_t width;
};

float log2p(int64_t v) { return v > 0 ? static_cast<float>(std::log2(static_cast<double>(v))) : 0.0f; }

}  // namespace

std::string_view feature_kind_name(FeatureKind kind) { return kind == FeatureKind::kLoop ? "loop" : "knob"; }

StatusOr<FeatureKind> parse_feature_kind(std::string_view name) {
  for (FeatureKind k : {FeatureKind::kLoop, FeatureKind::kKnob})
    if (name == feature_kind_name(k)) return k;
  return invalid_argument(fmt::format("unknown feature kind '{}' (known: loop, knob)", name));
}

struct CompilerTask::Impl {
  Workload workload;
  Target target;
  v1::Workload workload_proto;
  ops::ConfigSpace config_space;
  SearchSpace search_space;
  double flops = 0;
  FeatureKind feature_kind = FeatureKind::kKnob;
  std::vector<KnobLayout> layout;
  size_t knob_width = 0;

  Impl(Workload w, Target t, ops::ConfigSpace cs)
      : workload(std::move(w)),
        target(std::move(t)),
        workload_proto(to_proto(workload)),
        config_space(std::move(cs)),
        search_space(knob_names(config_space), knob_radices(config_space),
                     [this](const Point& p) { return config_space.check(config_at(p)).ok(); }) {
    for (const ops::Knob& k : config_space.knobs()) {
      KnobLayout l{KnobLayout::Kind::kOneHot, k.choices.size()};
      if (k.kind == ops::KnobKind::kSplit) {
        size_t width = 0;
        for (const KnobValue& v : k.choices)
          if (const auto* list = std::get_if<std::vector<int64_t>>(&v)) width = std::max(width, list->size());
        l = {KnobLayout::Kind::kList, width};
      } else if (std::holds_alternative<int64_t>(k.choices.front()) && k.kind == ops::KnobKind::kOther) {
        l = {KnobLayout::Kind::kInt, 1};
      }
      layout.push_back(l);
      knob_width += l.width;
    }
  }

  Config config_at(const Point& p) const {
    Config c;
    c.template_name = config_space.template_name();
    const auto& knobs = config_space.knobs();
    for (size_t k = 0; k < knobs.size(); ++k) c.knobs.emplace_back(knobs[k].name, knobs[k].choices[p[k]]);
    return c;
  }

  // Knob values this space does not offer (a config of another workload) leave their features zero.
  std::vector<float> knob_row(const Config& c) const {
    std::vector<float> row(knob_width, 0.0f);
    const auto& knobs = config_space.knobs();
    size_t at = 0;
    for (size_t k = 0; k < knobs.size(); ++k) {
      const KnobLayout& l = layout[k];
      if (const KnobValue* v = c.find(knobs[k].name)) {
        switch (l.kind) {
          case KnobLayout::Kind::kList:
            if (const auto* list = std::get_if<std::vector<int64_t>>(v))
              for (size_t j = 0; j < list->size() && j < l.width; ++j) row[at + j] = log2p((*list)[j]);
            break;
          case KnobLayout::Kind::kInt:
            if (const auto* i = std::get_if<int64_t>(v)) row[at] = log2p(*i + 1);
            break;
          case KnobLayout::Kind::kOneHot: {
            auto it = std::find(knobs[k].choices.begin(), knobs[k].choices.end(), *v);
            if (it != knobs[k].choices.end()) row[at + (it - knobs[k].choices.begin())] = 1.0f;
            break;
          }
        }
      }
      at += l.width;
    }
    return row;
  }

  size_t feature_width() const {
    return feature_kind == FeatureKind::kKnob ? knob_width : features::kFeatureLength;
  }

  StatusOr<std::vector<float>> row(const Workload& w, const Config& c) const {
    if (feature_kind == FeatureKind::kKnob) return knob_row(c);
    return candidate_features(w, target, c);
  }
};

CompilerTask::CompilerTask(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompilerTask::~CompilerTask() = default;

StatusOr<std::unique_ptr<CompilerTask>> CompilerTask::create(const Workload& workload, const Target& target,
                                                             const std::string& template_name, FeatureKind features) {
  TF_ASSIGN_OR_RETURN(ops::ConfigSpace space, config_space(workload, target, template_name));
  // Candidates are measured as the builds make them: a model's and a kernel library's builds set
  // `parallel` by the work's size (as_built), and a config tuned as "none" but built "outer" is
  // another loop nest (LLaMA's down projection ran 2.9x slower in the model than measured).
  space.pin("parallel", parallel_as_built(workload));
  if (space.knobs().empty())
    return invalid_argument(fmt::format("template {} has no knobs to tune", space.template_name()));
  TF_ASSIGN_OR_RETURN(double flops, workload_flops(workload));
  auto impl = std::make_unique<Impl>(workload, target, std::move(space));
  impl->flops = flops;
  impl->feature_kind = features;
  return std::unique_ptr<CompilerTask>(new CompilerTask(std::move(impl)));
}

const v1::Workload& CompilerTask::workload() const { return impl_->workload_proto; }
double CompilerTask::flops() const { return impl_->flops; }
const SearchSpace& CompilerTask::space() const { return impl_->search_space; }
const std::string& CompilerTask::template_name() const { return impl_->config_space.template_name(); }
Config CompilerTask::config_at(const Point& point) const { return impl_->config_at(point); }

StatusOr<Point> CompilerTask::point_of(const Config& config) const {
  TF_RETURN_IF_ERROR(impl_->config_space.check(config));
  TF_ASSIGN_OR_RETURN(int64_t index, impl_->config_space.index_of(config));
  // Both spaces are mixed radix with the first knob least significant.
  return impl_->search_space.point_at(index);
}

Status CompilerTask::features(std::span<const Point> points, FeatureMatrix& out) const {
  const int n = static_cast<int>(points.size());
  std::vector<std::vector<float>> rows(points.size());
  // Loop features lower every candidate (about 0.2 ms each) and simulated annealing asks for
  // thousands per batch: spread them over the cores. Knob features are too cheap to share out.
  int threads = impl_->feature_kind == FeatureKind::kLoop
                    ? std::min(static_cast<int>(std::thread::hardware_concurrency()), n / 16)
                    : 1;
  parallel_for(n, threads, [&](int i) {
    auto row = impl_->row(impl_->workload, config_at(points[i]));
    // A valid point the template cannot lower still needs a row: it will fail to build and be
    // learnt as a zero, so an all-zero row is enough.
    rows[i] = row.ok() ? std::move(*row) : std::vector<float>(impl_->feature_width());
  });
  for (const std::vector<float>& row : rows) TF_RETURN_IF_ERROR(out.add_row(row));
  return Status();
}

StatusOr<std::vector<float>> CompilerTask::history_features(const HistoryRecord& record) const {
  if (record.config.template_name != template_name())
    return invalid_argument(fmt::format("a config of template {} does not describe a candidate of {}",
                                        record.config.template_name, template_name()));
  TF_ASSIGN_OR_RETURN(Workload w, parse_workload(record.workload));
  return impl_->row(w, record.config);
}

StatusOr<v1::Artifact> CompilerTask::build(const Point& point) const {
  TF_ASSIGN_OR_RETURN(BuiltKernel kernel, build_kernel(impl_->workload, impl_->target, config_at(point)));
  return to_artifact(kernel, impl_->target);
}

StatusOr<v1::Artifact> CompilerTask::build_reference() const {
  TF_ASSIGN_OR_RETURN(BuiltKernel kernel, build_reference_kernel(impl_->workload, impl_->target));
  return to_artifact(kernel, impl_->target);
}

std::optional<Point> CompilerTask::default_point() const {
  auto config = default_config(impl_->workload, impl_->target);
  if (!config.ok() || config->template_name != template_name()) return std::nullopt;
  auto point = point_of(as_built(impl_->workload, *config));
  if (!point.ok()) return std::nullopt;
  return *point;
}

Status RecordConfigCheck::operator()(const v1::Record& record) {
  TF_ASSIGN_OR_RETURN(Workload workload, from_proto(record.workload()));
  TF_ASSIGN_OR_RETURN(Target target, from_proto(record.target()));
  const std::string& name = record.config().template_name();
  std::string key = workload.to_string() + "|" + target.to_string() + "|" + name;
  auto it = spaces_.find(key);
  if (it == spaces_.end()) {
    if (spaces_.size() >= 1024) spaces_.clear();
    Status target_ok = codegen::check_target(target);
    it = spaces_.emplace(key, target_ok.ok() ? config_space(workload, target, name) : target_ok).first;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->check(from_proto(record.config()))
      .with_context(fmt::format("config of template '{}' for {}", name, workload.to_string()));
}

StatusOr<std::unique_ptr<TuningTask>> CompilerTaskFactory::make_task(const Workload& workload, const Target& target,
                                                                     const std::string& template_name) {
  TF_RETURN_IF_ERROR(codegen::check_target(target));
  TF_ASSIGN_OR_RETURN(std::unique_ptr<CompilerTask> task, CompilerTask::create(workload, target, template_name, features_));
  return std::unique_ptr<TuningTask>(std::move(task));
}

}  // namespace tunefarm
