// Config spaces in the style of AutoTVM: a template declares knobs (split factors, loop orders,
// annotations, plain options), each with a finite list of choices, and a config is one choice per
// knob. Index <-> config is mixed radix with the first knob as the least significant digit. Some
// points are invalid for a template (e.g. a register tile larger than the register file); the
// template's validator says which, with a reason, and nothing crashes on them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace tunefarm::ops {

enum class KnobKind { kSplit, kReorder, kAnnotate, kOther };

struct Knob {
  std::string name;
  KnobKind kind;
  std::vector<KnobValue> choices;
};

class ConfigSpace {
 public:
  ConfigSpace() = default;
  explicit ConfigSpace(std::string template_name) : template_name_(std::move(template_name)) {}

  // A split of an axis of `extent` into `levels` parts, outermost first, written [-1, f1, ...]
  // where -1 stands for "what is left". Policy "factors": the inner factors' product divides the
  // extent. Policy "candidates": level i (1-based, after the outer -1) takes any value of
  // candidates[i-1]; the product need not divide the extent (lowering handles tails).
  void define_split_factors(const std::string& name, int64_t extent, int levels);
  void define_split_candidates(const std::string& name, const std::vector<std::vector<int64_t>>& candidates);
  // A choice among loop permutations (each a list of loop positions).
  void define_reorder(const std::string& name, const std::vector<std::vector<int64_t>>& permutations);
  void define_annotate(const std::string& name, const std::vector<std::string>& choices);
  void define_knob(const std::string& name, const std::vector<int64_t>& choices);
  void define_knob(const std::string& name, const std::vector<std::string>& choices);

  // Restricts knob `name` to one of its choices, as a knob the builds set themselves (`parallel`,
  // which a model's build sets by the work's size) is measured as it will be built. False where the
  // space has no such knob or choice.
  bool pin(const std::string& name, const KnobValue& value);

  // Extra validity rules of the template, checked after the knob-by-knob checks.
  void set_validator(std::function<Status(const Config&)> validator) { validator_ = std::move(validator); }

  const std::string& template_name() const { return template_name_; }
  const std::vector<Knob>& knobs() const { return knobs_; }
  // Number of points, valid or not.
  int64_t size() const;
  // The point at `index` in [0, size()).
  StatusOr<Config> get(int64_t index) const;
  // A knob the config lacks (it was recorded before the knob existed) counts as the knob's first
  // choice, so a template that adds a knob lists its old behaviour first.
  StatusOr<int64_t> index_of(const Config& config) const;
  // The config with every knob, in declaration order (absent knobs at their first choice).
  StatusOr<Config> complete(const Config& config) const;
  // Wrong template name, unknown or repeated knob, value not among the knob's choices, or a point
  // the template's validator rejects.
  Status check(const Config& config) const;
  // Number of valid points (enumerates; meant for spaces of up to a few million points).
  int64_t count_valid() const;

 private:
  void add(std::string name, KnobKind kind, std::vector<KnobValue> choices);

  std::string template_name_;
  std::vector<Knob> knobs_;
  std::function<Status(const Config&)> validator_;
};

// Typed access to a checked config's knobs, for templates.
int64_t knob_int(const Config& c, const std::string& name);
const std::string& knob_str(const Config& c, const std::string& name);
const std::vector<int64_t>& knob_list(const Config& c, const std::string& name);

// A default config's tile: the largest candidate <= cap that divides `extent`; else the largest
// <= cap and no longer than the extent (or than the first candidate, when the extent is shorter
// than every candidate); else the first candidate. Candidates are in increasing order.
int64_t pick_tile(const std::vector<int64_t>& candidates, int64_t extent, int64_t cap);

// A register tile's columns, each `per_column` vector accumulators: pick_tile's choice for about
// `target` accumulators; where that fills half of them or less (a block of 3 vectors in a row of
// 14: 4 columns would be the target, 2 divide the row), the next candidate that divides the row
// while its accumulators stay within `most` (7 columns, 21 accumulators).
int64_t pick_register_columns(const std::vector<int64_t>& candidates, int64_t extent, int64_t per_column, int64_t target,
                              int64_t most);

// A register tile's columns where no candidate of enough columns divides a long row (Inception-v3's
// 109 and 111 at 224x224): the most columns within `target` accumulators and the row, the last
// columns then a loop of their own. A 3x3 convolution 32->64 at 109x109 ran at 94 GFLOP/s in
// tiles of one column, the only one dividing the row, and at 241 in tiles of 14.
int64_t columns_of_a_long_row(const std::vector<int64_t>& candidates, int64_t extent, int64_t per_column, int64_t target);

}  // namespace tunefarm::ops
