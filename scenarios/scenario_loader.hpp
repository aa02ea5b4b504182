#pragma once
/// The one place that reads scenario and hardware-profile YAML, parses quantities with units,
/// applies `--set key.path=value` overrides and writes the resolved scenario back as YAML.
/// Every error is a lynx::Error of one line: "FILE:LINE:COL: key 'a.b': what is wrong".
#include "scenarios/key_origins.hpp"
#include "scenarios/scenario.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lynx {

/// A scenario as read from a file and its --set overrides, with where each key was given. Not
/// yet resolved: model::resolve_scenario fills the model preset and checks the whole layout
/// (model::load_scenario_file does both steps).
struct UnresolvedScenario {
  Scenario scenario;
  KeyOrigins origins;
};

/// Reads a scenario file, applies overrides ("model.layers=48", "hardware.node.nic.bw=25GB/s"),
/// resolves the hardware profile (built-in by name, or hardware.profile_file), and checks every
/// value and the hardware.
UnresolvedScenario read_scenario_file(const std::string& path,
                                      const std::vector<std::string>& overrides = {});
/// Same, from YAML text; `file_label` is used in messages.
UnresolvedScenario read_scenario_text(std::string_view yaml_text, const std::string& file_label,
                                      const std::vector<std::string>& overrides = {});
/// A scenario's YAML text parsed once (syntax and keys checked), to read with many sets of
/// overrides: read(o) gives what read_scenario_text(text, label, o) gives, without parsing the
/// text again (lynxsim best reads every candidate from one base). read() is thread-safe.
class ParsedScenario {
 public:
  ParsedScenario(std::string_view yaml_text, const std::string& file_label);
  UnresolvedScenario read(const std::vector<std::string>& overrides = {}) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};
/// The built-in default scenario (what `lynxsim run` simulates with no file).
UnresolvedScenario read_default_scenario(const std::vector<std::string>& overrides = {});
/// The layout checks that need only the scenario (global batch, GPU count, schedule); errors
/// point at `origins`. Called by model::resolve_scenario, with the model's own checks.
void check_scenario_layout(const Scenario& scenario, const KeyOrigins& origins);
/// Checks every integer field of a scenario built in code (not read from a file) against its
/// documented range; lynx::Error "LABEL: key 'K': must be between ..." otherwise.
void check_scenario_ranges(const Scenario& scenario, const std::string& label);

/// The scenario as YAML (all fields, units written out); reading it back gives the same
/// Scenario.
std::string scenario_to_yaml(const Scenario& scenario);
/// A hardware profile as YAML in the profile-file format (used by the fitter).
std::string hardware_profile_to_yaml(const HardwareSpec& hardware);
/// Names of the built-in hardware profiles (hw_models/profiles/*.yaml, embedded at build time).
std::vector<std::string> builtin_profile_names();
/// Reads a hardware profile file (the same format as the built-in ones).
HardwareSpec load_hardware_profile_file(const std::string& path);
/// A built-in profile by name (see builtin_profile_names()); throws lynx::Error listing the
/// known names for an unknown one.
HardwareSpec builtin_hardware_profile(const std::string& name);
/// Same as load_hardware_profile_file, from YAML text; `file_label` is used in messages.
HardwareSpec load_hardware_profile_text(std::string_view yaml_text, const std::string& file_label);

/// Markdown table of every scenario and profile field: name, unit, default, meaning; then the
/// list of built-in profiles (docs/scenario.md embeds this text).
std::string scenario_fields_markdown();
/// The table's rows whose scenario key or profile key is `prefix` or lies under it
/// ("hardware.node", "gpu"); every field for an empty prefix. Throws lynx::Error suggesting a
/// close key when no field matches.
std::string scenario_fields_markdown(std::string_view prefix);

}  // namespace lynx
