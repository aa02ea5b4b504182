// Fuzz target: scenario YAML text -> read and resolve (model::load_scenario_text), then the
// resolved scenario written back (scenario_to_yaml) must read back to the same text.
#include "model/resolved_scenario.hpp"
#include "scenarios/scenario_loader.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lynx::fuzz::check_reader(data, size, [](std::string_view text) {
    const lynx::model::ResolvedScenario resolved = lynx::model::load_scenario_text(text, "fuzz.yaml");
    const std::string yaml = lynx::scenario_to_yaml(resolved.scenario());
    const lynx::model::ResolvedScenario again = lynx::model::load_scenario_text(yaml, "fuzz-again.yaml");
    lynx::fuzz::require(lynx::scenario_to_yaml(again.scenario()) == yaml,
                        "scenario_to_yaml does not read back to the same scenario");
  });
}
