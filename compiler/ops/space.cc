#include "compiler/ops/space.h"

#include <algorithm>

#include <fmt/format.h>

namespace tunefarm::ops {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void factor_tuples(int64_t remaining, int levels, std::vector<int64_t>& cur, std::vector<KnobValue>& out) {
  if (levels == 0) {
    out.emplace_back(cur);
    return;
  }
  for (int64_t d : divisors(remaining)) {
    cur.push_back(d);
    factor_tuples(remaining / d, levels - 1, cur, out);
    cur.pop_back();
  }
}

void candidate_tuples(const std::vector<std::vector<int64_t>>& cands, size_t level, std::vector<int64_t>& cur,
                      std::vector<KnobValue>& out) {
  if (level == cands.size()) {
    out.emplace_back(cur);
    return;
  }
  for (int64_t c : cands[level]) {
    cur.push_back(c);
    candidate_tuples(cands, level + 1, cur, out);
    cur.pop_back();
  }
}

}  // namespace

void ConfigSpace::add(std::string name, KnobKind kind, std::vector<KnobValue> choices) {
  knobs_.push_back({std::move(name), kind, std::move(choices)});
}

void ConfigSpace::define_split_factors(const std::string& name, int64_t extent, int levels) {
  std::vector<KnobValue> choices;
  std::vector<int64_t> cur = {-1};
  factor_tuples(extent, levels - 1, cur, choices);
  add(name, KnobKind::kSplit, std::move(choices));
}

void ConfigSpace::define_split_candidates(const std::string& name, const std::vector<std::vector<int64_t>>& candidates) {
  std::vector<KnobValue> choices;
  std::vector<int64_t> cur = {-1};
  candidate_tuples(candidates, 0, cur, choices);
  add(name, KnobKind::kSplit, std::move(choices));
}

void ConfigSpace::define_reorder(const std::string& name, const std::vector<std::vector<int64_t>>& permutations) {
  add(name, KnobKind::kReorder, std::vector<KnobValue>(permutations.begin(), permutations.end()));
}

bool ConfigSpace::pin(const std::string& name, const KnobValue& value) {
  for (Knob& k : knobs_) {
    if (k.name != name) continue;
    if (std::find(k.choices.begin(), k.choices.end(), value) == k.choices.end()) return false;
    k.choices = {value};
    return true;
  }
  return false;
}

void ConfigSpace::define_annotate(const std::string& name, const std::vector<std::string>& choices) {
  add(name, KnobKind::kAnnotate, std::vector<KnobValue>(choices.begin(), choices.end()));
}

void ConfigSpace::define_knob(const std::string& name, const std::vector<int64_t>& choices) {
  add(name, KnobKind::kOther, std::vector<KnobValue>(choices.begin(), choices.end()));
}

void ConfigSpace::define_knob(const std::string& name, const std::vector<std::string>& choices) {
  add(name, KnobKind::kOther, std::vector<KnobValue>(choices.begin(), choices.end()));
}

int64_t ConfigSpace::size() const {
  int64_t n = 1;
  for (const auto& k : knobs_) n *= static_cast<int64_t>(k.choices.size());
  return n;
}

StatusOr<Config> ConfigSpace::get(int64_t index) const {
  if (index < 0 || index >= size())
    return invalid_argument(fmt::format("config index {} is outside the space of {} (size {})", index, template_name_, size()));
  Config c;
  c.template_name = template_name_;
  for (const auto& k : knobs_) {
    int64_t n = static_cast<int64_t>(k.choices.size());
    c.knobs.emplace_back(k.name, k.choices[index % n]);
    index /= n;
  }
  return c;
}

StatusOr<int64_t> ConfigSpace::index_of(const Config& config) const {
  if (config.template_name != template_name_)
    return invalid_argument(fmt::format("config is for template '{}', this space is '{}'", config.template_name, template_name_));
  for (size_t i = 0; i < config.knobs.size(); ++i) {
    const std::string& name = config.knobs[i].first;
    if (std::none_of(knobs_.begin(), knobs_.end(), [&name](const Knob& k) { return k.name == name; }))
      return invalid_argument(fmt::format("config has unknown knob '{}' for template {}", name, template_name_));
    for (size_t j = 0; j < i; ++j)
      if (config.knobs[j].first == name) return invalid_argument(fmt::format("config repeats knob '{}'", name));
  }
  int64_t index = 0, radix = 1;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const Knob& k = knobs_[i];
    // A knob the config predates reads as its first choice: templates list the behaviour they had
    // before the knob existed first, so configs recorded by earlier versions keep their meaning.
    const KnobValue* v = config.find(k.name);
    auto it = v ? std::find(k.choices.begin(), k.choices.end(), *v) : k.choices.begin();
    if (it == k.choices.end())
      return invalid_argument(fmt::format("knob '{}' = {} is not one of its {} choices", k.name, knob_value_to_string(*v), k.choices.size()));
    index += radix * (it - k.choices.begin());
    radix *= static_cast<int64_t>(k.choices.size());
  }
  return index;
}

StatusOr<Config> ConfigSpace::complete(const Config& config) const {
  TF_ASSIGN_OR_RETURN(int64_t index, index_of(config));
  return get(index);
}

Status ConfigSpace::check(const Config& config) const {
  TF_ASSIGN_OR_RETURN(Config full, complete(config));
  if (validator_) return validator_(full);
  return Status();
}

int64_t ConfigSpace::count_valid() const {
  int64_t n = 0, total = size();
  for (int64_t i = 0; i < total; ++i)
    if (auto c = get(i); c.ok() && (!validator_ || validator_(*c).ok())) ++n;
  return n;
}

int64_t knob_int(const Config& c, const std::string& name) { return std::get<int64_t>(*c.find(name)); }
const std::string& knob_str(const Config& c, const std::string& name) { return std::get<std::string>(*c.find(name)); }
const std::vector<int64_t>& knob_list(const Config& c, const std::string& name) {
  return std::get<std::vector<int64_t>>(*c.find(name));
}

int64_t pick_tile(const std::vector<int64_t>& candidates, int64_t extent, int64_t cap) {
  int64_t best = 0;
  for (int64_t x : candidates)
    if (x <= cap && x <= extent && extent % x == 0) best = std::max(best, x);
  if (best) return best;
  for (int64_t x : candidates)
    if (x <= cap && x <= std::max<int64_t>(extent, candidates.front())) best = std::max(best, x);
  return best ? best : candidates.front();
}

int64_t pick_register_columns(const std::vector<int64_t>& candidates, int64_t extent, int64_t per_column, int64_t target,
                              int64_t most) {
  int64_t columns = pick_tile(candidates, extent, std::max<int64_t>(1, target / per_column));
  if (columns * per_column * 2 > target) return columns;
  for (int64_t c : candidates)
    if (c > columns && extent % c == 0 && c * per_column <= most) return c;
  return columns;
}

int64_t columns_of_a_long_row(const std::vector<int64_t>& candidates, int64_t extent, int64_t per_column, int64_t target) {
  int64_t columns = candidates.front();
  for (int64_t c : candidates)
    if (c <= extent && c * per_column <= target) columns = c;
  return columns;
}

}  // namespace tunefarm::ops
