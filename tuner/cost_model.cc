#include "tuner/cost_model.h"

#include <xgboost/c_api.h>

#include <fmt/format.h>

namespace tunefarm {

Status FeatureMatrix::add_row(std::span<const float> values) {
  if (values.empty()) return invalid_argument("feature row is empty");
  if (cols == 0) cols = static_cast<int64_t>(values.size());
  if (static_cast<int64_t>(values.size()) != cols)
    return invalid_argument(fmt::format("feature row has {} values, expected {}", values.size(), cols));
  data.insert(data.end(), values.begin(), values.end());
  return Status();
}

Status FeatureMatrix::append(const FeatureMatrix& other) {
  if (other.rows() == 0) return Status();
  if (cols != 0 && other.cols != cols)
    return invalid_argument(fmt::format("feature width {} does not match {}", other.cols, cols));
  cols = other.cols;
  data.insert(data.end(), other.data.begin(), other.data.end());
  return Status();
}

std::string_view objective_name(ModelOptions::Objective objective) {
  return objective == ModelOptions::Objective::kRank ? "rank" : "regression";
}

StatusOr<ModelOptions::Objective> parse_objective(std::string_view name) {
  for (auto o : {ModelOptions::Objective::kRank, ModelOptions::Objective::kRegression})
    if (name == objective_name(o)) return o;
  return invalid_argument(fmt::format("unknown cost model objective '{}' (known: rank, regression)", name));
}

namespace {

Status xgb_error(const char* what) { return internal_error(fmt::format("xgboost {}: {}", what, XGBGetLastError())); }

// Owns a DMatrix handle.
struct DMatrix {
  DMatrixHandle handle = nullptr;
  ~DMatrix() {
    if (handle) XGDMatrixFree(handle);
  }
};

Status make_dmatrix(const FeatureMatrix& x, DMatrix& out) {
  if (x.rows() == 0) return invalid_argument("no feature rows");
  if (XGDMatrixCreateFromMat(x.data.data(), x.rows(), x.cols, std::numeric_limits<float>::quiet_NaN(),
                             &out.handle) != 0)
    return xgb_error("creating a matrix");
  return Status();
}

}  // namespace

class CostModel::Booster {
 public:
  ~Booster() {
    if (handle_) XGBoosterFree(handle_);
  }
  BoosterHandle handle_ = nullptr;
  const Booster* base_ = nullptr;
  std::shared_ptr<Booster> base_owner_;  // Keeps the base alive as long as this model uses it.

  // Margins (output before the objective's transform), base included.
  StatusOr<std::vector<float>> margins(const DMatrix& m, bst_ulong rows) const {
    bst_ulong const* shape = nullptr;
    bst_ulong dim = 0;
    float const* result = nullptr;
    static const char* kConfig =
        R"({"type":1,"training":false,"iteration_begin":0,"iteration_end":0,"strict_shape":false})";
    if (XGBoosterPredictFromDMatrix(handle_, m.handle, kConfig, &shape, &dim, &result) != 0)
      return xgb_error("predicting");
    // The result buffer belongs to XGBoost and is overwritten by the next call: copy it now.
    std::vector<float> out(result, result + rows);
    if (base_) {
      // The base margin was part of training; prediction adds it back the same way.
      TF_ASSIGN_OR_RETURN(std::vector<float> b, base_->margins(m, rows));
      for (bst_ulong i = 0; i < rows; ++i) out[i] += b[i];
    }
    return out;
  }
};

CostModel::CostModel(ModelOptions options) : options_(options) {}
CostModel::~CostModel() = default;
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;

StatusOr<std::shared_ptr<CostModel::Booster>> CostModel::train(const FeatureMatrix& x, std::span<const float> y,
                                                                const Booster* base) const {
  if (static_cast<int64_t>(y.size()) != x.rows())
    return invalid_argument(fmt::format("{} labels for {} feature rows", y.size(), x.rows()));
  DMatrix m;
  TF_RETURN_IF_ERROR(make_dmatrix(x, m));
  if (XGDMatrixSetFloatInfo(m.handle, "label", y.data(), y.size()) != 0) return xgb_error("setting labels");
  if (options_.objective == ModelOptions::Objective::kRank) {
    unsigned group = static_cast<unsigned>(y.size());
    if (XGDMatrixSetUIntInfo(m.handle, "group", &group, 1) != 0) return xgb_error("setting the ranking group");
  }
  if (base) {
    TF_ASSIGN_OR_RETURN(std::vector<float> margin, base->margins(m, x.rows()));
    if (XGDMatrixSetFloatInfo(m.handle, "base_margin", margin.data(), margin.size()) != 0)
      return xgb_error("setting the base margin");
  }

  auto booster = std::make_shared<Booster>();
  if (XGBoosterCreate(&m.handle, 1, &booster->handle_) != 0) return xgb_error("creating a booster");
  const std::pair<const char*, std::string> params[] = {
      {"objective", options_.objective == ModelOptions::Objective::kRank ? "rank:pairwise" : "reg:squarederror"},
      {"max_depth", std::to_string(options_.max_depth)},
      {"eta", fmt::format("{}", options_.eta)},
      {"min_child_weight", fmt::format("{}", options_.min_child_weight)},
      {"subsample", fmt::format("{}", options_.subsample)},
      {"gamma", "0.0001"},
      {"lambda", "1"},
      {"nthread", std::to_string(options_.nthread)},
      {"seed", std::to_string(options_.seed % 2147483647)},
      {"verbosity", "0"},
      {"tree_method", "hist"},
  };
  for (const auto& [key, value] : params)
    if (XGBoosterSetParam(booster->handle_, key, value.c_str()) != 0) return xgb_error(key);
  for (int i = 0; i < options_.rounds; ++i)
    if (XGBoosterUpdateOneIter(booster->handle_, i, m.handle) != 0) return xgb_error("training");
  booster->base_ = base;
  return booster;
}

Status CostModel::fit(const FeatureMatrix& x, std::span<const float> y) {
  TF_ASSIGN_OR_RETURN(auto booster, train(x, y, base_.get()));
  booster->base_owner_ = base_;
  booster_ = std::move(booster);
  return Status();
}

Status CostModel::fit_base(const FeatureMatrix& x, std::span<const float> y) {
  TF_ASSIGN_OR_RETURN(base_, train(x, y, nullptr));
  return Status();
}

StatusOr<std::vector<float>> CostModel::predict(const FeatureMatrix& x) const {
  const Booster* b = booster_ ? booster_.get() : base_.get();
  if (!b) return std::vector<float>(static_cast<size_t>(x.rows()), 0.0f);
  DMatrix m;
  TF_RETURN_IF_ERROR(make_dmatrix(x, m));
  return b->margins(m, x.rows());
}

}  // namespace tunefarm
