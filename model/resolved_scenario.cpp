#include "model/resolved_scenario.hpp"

#include "common/error.hpp"
#include "model/gpt.hpp"

namespace lynx::model {
namespace {

/// The key whose value `key` holds: itself when given, else the key its default came from
/// (ffn_hidden is 4 · hidden; layers, hidden and heads come from model.preset when one is named).
std::string source_key(const KeyOrigins& origins, const std::string& key) {
  if (origins.given(key)) return key;
  if (key == "model.ffn_hidden") return source_key(origins, "model.hidden");
  const bool from_preset = key == "model.layers" || key == "model.hidden" || key == "model.heads";
  if (from_preset && origins.given("model.preset")) return "model.preset";
  return key;
}

}  // namespace

ResolvedScenario resolve_scenario(const UnresolvedScenario& read) {
  const KeyOrigins& origins = read.origins;
  Scenario scenario = read.scenario;
  check_scenario_layout(scenario, origins);
  try {
    scenario.model = resolve_model(scenario.model);
    check_layout(scenario.model, scenario.parallel);
  } catch (const LayoutError& e) {
    std::vector<std::string> keys;
    for (const std::string& key : e.keys()) keys.push_back(source_key(origins, key));
    const std::string key = origins.blame(keys);
    fail(e.code(), "{}: key '{}': {}", origins.origin_of(key), key, e.what());
  }
  return ResolvedScenario(std::move(scenario));
}

ResolvedScenario resolve_scenario(const Scenario& scenario, const std::string& label) {
  check_scenario_ranges(scenario, label);  // built in code: no file's fields were range-checked
  return resolve_scenario(UnresolvedScenario{scenario, KeyOrigins(label)});
}

ResolvedScenario load_scenario_file(const std::string& path,
                                    const std::vector<std::string>& overrides) {
  return resolve_scenario(read_scenario_file(path, overrides));
}

ResolvedScenario load_scenario_text(std::string_view yaml_text, const std::string& file_label,
                                    const std::vector<std::string>& overrides) {
  return resolve_scenario(read_scenario_text(yaml_text, file_label, overrides));
}

ResolvedScenario default_scenario(const std::vector<std::string>& overrides) {
  return resolve_scenario(read_default_scenario(overrides));
}

}  // namespace lynx::model
