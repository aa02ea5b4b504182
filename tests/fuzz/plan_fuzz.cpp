// Fuzz target: plan YAML text -> read and validate against its embedded scenario
// (strategies::read_plan_text), then the plan written back (plan_to_yaml) must read back to the
// same text.
#include "strategies/plan_yaml.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lynx::fuzz::check_reader(data, size, [](std::string_view text) {
    const lynx::strategies::PlanFile plan =
        lynx::strategies::read_plan_text(std::string(text), "fuzz-plan.yaml");
    const std::string yaml = lynx::strategies::plan_to_yaml(plan);
    const lynx::strategies::PlanFile again =
        lynx::strategies::read_plan_text(yaml, "fuzz-plan-again.yaml");
    lynx::fuzz::require(lynx::strategies::plan_to_yaml(again) == yaml,
                        "plan_to_yaml does not read back to the same plan");
  });
}
