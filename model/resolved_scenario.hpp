#pragma once
/// A scenario ready to simulate: its model preset is filled in and its whole layout checked.
/// The type says so: only resolve_scenario makes one, so a function that takes a
/// ResolvedScenario never resolves or checks again. Errors point at the file:line:col of the
/// key to blame, or name the --set override that caused them.
#include "scenarios/key_origins.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/scenario_loader.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lynx::model {

class ResolvedScenario;

/// Resolves a scenario read by the loader: fills the model from its preset (resolve_model),
/// runs the loader's layout checks (check_scenario_layout) and the model's (check_layout). A
/// problem is reported at the key that caused it: an override first, else the key in the file
/// (a model field the preset filled in is blamed on model.preset).
ResolvedScenario resolve_scenario(const UnresolvedScenario& read);
/// Same, for a scenario built in code; messages start with `label` instead of a position.
ResolvedScenario resolve_scenario(const Scenario& scenario, const std::string& label);

/// A resolved, checked scenario, read-only: `resolved->parallel.tp` or `resolved.scenario()`.
/// To change one, copy its scenario() and resolve the copy again.
class ResolvedScenario {
 public:
  /// The scenario, resolved and checked.
  const Scenario& scenario() const { return scenario_; }
  /// Its fields: `resolved->model.layers`.
  const Scenario* operator->() const { return &scenario_; }
  /// Where each key was given (the file's positions, the --set overrides), for checks made
  /// after resolving (a plan made for another scenario) that point at a key.
  const KeyOrigins& origins() const { return origins_; }

 private:
  ResolvedScenario(Scenario scenario, KeyOrigins origins)
      : scenario_(std::move(scenario)), origins_(std::move(origins)) {}
  friend ResolvedScenario resolve_scenario(const UnresolvedScenario& read);

  Scenario scenario_;
  KeyOrigins origins_;
};

/// Where the value of `key` in a scenario read with `origins` came from, for messages:
/// "FILE:LINE:COL" or "FILE: --set key=value" when given; "model.preset at ORIGIN" (or the key
/// it is derived from: ffn_hidden from hidden, kv_heads from heads; a hardware field from
/// hardware.profile or hardware.profile_file) when that key was given; else "default".
std::string value_origin(const KeyOrigins& origins, const std::string& preset, const std::string& key);

/// read_scenario_file + resolve_scenario: the scenario a command simulates.
ResolvedScenario load_scenario_file(const std::string& path,
                                    const std::vector<std::string>& overrides = {});
/// read_scenario_text + resolve_scenario; `file_label` is used in messages.
ResolvedScenario load_scenario_text(std::string_view yaml_text, const std::string& file_label,
                                    const std::vector<std::string>& overrides = {});
/// The built-in default scenario (what `lynxsim run` simulates with no file), resolved.
ResolvedScenario default_scenario(const std::vector<std::string>& overrides = {});

}  // namespace lynx::model
