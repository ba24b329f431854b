#include "common/config.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tunefarm {

using json = nlohmann::ordered_json;

const KnobValue* Config::find(std::string_view name) const {
  for (const auto& [n, v] : knobs)
    if (n == name) return &v;
  return nullptr;
}

namespace {

json knob_to_json(const KnobValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return std::get<std::vector<int64_t>>(v);
}

}  // namespace

std::string Config::to_json() const {
  json knobs_json = json::object();
  for (const auto& [name, value] : knobs) knobs_json[name] = knob_to_json(value);
  json j = {{"template", template_name}, {"knobs", std::move(knobs_json)}};
  return j.dump();
}

std::string knob_value_to_string(const KnobValue& value) { return knob_to_json(value).dump(); }

StatusOr<Config> parse_config_json(std::string_view text) {
  auto fail = [](const std::string& why) { return invalid_argument("config JSON: " + why); };
  // The JSON library keeps one value of a repeated key; a repeated knob must be an error instead,
  // so the parser reports every key of every object as it reads it.
  std::vector<std::vector<std::string>> open_objects;
  std::string repeated;
  json::parser_callback_t watch_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end && !open_objects.empty()) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      auto& keys = open_objects.back();
      const std::string& key = parsed.get_ref<const std::string&>();
      if (std::find(keys.begin(), keys.end(), key) != keys.end() && repeated.empty()) repeated = key;
      keys.push_back(key);
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), watch_keys, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail("not valid JSON");
  if (!repeated.empty()) return fail(fmt::format("\"{}\" is given twice", repeated));
  if (!j.is_object()) return fail("expected an object with \"template\" and \"knobs\"");
  auto t = j.find("template");
  if (t == j.end() || !t->is_string() || t->get<std::string>().empty())
    return fail("missing or empty \"template\" (a string)");
  auto k = j.find("knobs");
  if (k == j.end() || !k->is_object()) return fail("missing \"knobs\" (an object of knob name to value)");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "template" && it.key() != "knobs")
      return fail(fmt::format("unknown field \"{}\"", it.key()));

  Config config;
  config.template_name = t->get<std::string>();
  for (auto it = k->begin(); it != k->end(); ++it) {
    const std::string& name = it.key();
    if (config.find(name)) return fail(fmt::format("knob \"{}\" is given twice", name));
    const json& v = it.value();
    if (v.is_number_integer()) {
      config.knobs.emplace_back(name, v.get<int64_t>());
    } else if (v.is_string()) {
      config.knobs.emplace_back(name, v.get<std::string>());
    } else if (v.is_array()) {
      std::vector<int64_t> ints;
      for (const json& e : v) {
        if (!e.is_number_integer())
          return fail(fmt::format("knob \"{}\" must be a list of integers", name));
        ints.push_back(e.get<int64_t>());
      }
      config.knobs.emplace_back(name, std::move(ints));
    } else {
      return fail(fmt::format("knob \"{}\" must be an integer, a string or a list of integers", name));
    }
  }
  return config;
}

}  // namespace tunefarm
