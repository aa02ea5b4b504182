#include "model/resolved_scenario.hpp"

#include "common/error.hpp"
#include "model/gpt.hpp"
#include "model/sharding.hpp"
#include "scenarios/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lynx::model {
namespace {

/// The key whose value `key` holds: itself when given, else the key its default came from
/// (model.preset for what a named preset fills, model.hf_config for what a config.json fills; else ffn_hidden is 4 · hidden, kv_heads is heads).
std::string source_key(const KeyOrigins& origins, const std::string& preset, const std::string& key) {
  if (origins.given(key)) return key;
  const std::vector<std::string> filled = preset_keys(preset);
  if (origins.given("model.preset") && std::find(filled.begin(), filled.end(), key) != filled.end())
    return "model.preset";
  const std::vector<std::string>& from_config = hf_config_keys();
  if (origins.given("model.hf_config") && std::find(from_config.begin(), from_config.end(), key) != from_config.end())
    return "model.hf_config";
  if (key == "model.ffn_hidden") return source_key(origins, preset, "model.hidden");
  if (key == "model.kv_heads") return source_key(origins, preset, "model.heads");
  return key;
}

}  // namespace

std::string value_origin(const KeyOrigins& origins, const std::string& preset, const std::string& key) {
  std::string source = source_key(origins, preset, key);
  if (!origins.given(source) && key.starts_with("hardware.")) {
    // A hardware field the profile gave (a built-in profile, or a profile file).
    for (const char* profile : {"hardware.profile", "hardware.profile_file"})
      if (origins.given(profile)) source = profile;
  }
  if (!origins.given(source)) return "default";
  if (source == key) return origins.origin_of(key);
  return fmt::format("{} at {}", source, origins.origin_of(source));
}

ResolvedScenario resolve_scenario(const UnresolvedScenario& read) {
  const KeyOrigins& origins = read.origins;
  Scenario scenario = read.scenario;
  check_scenario_layout(scenario, origins);
  check_sharding(scenario, origins);
  try {
    scenario.model = resolve_model(scenario.model);
    check_layout(scenario.model, scenario.parallel);
  } catch (const LayoutError& e) {
    std::vector<std::string> keys;
    for (const std::string& key : e.keys())
      keys.push_back(source_key(origins, scenario.model.preset, key));
    const std::string key = origins.blame(keys);
    fail(e.code(), "{}: key '{}': {}", origins.origin_of(key), key, e.what());
  }
  return ResolvedScenario(std::move(scenario), origins);
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
