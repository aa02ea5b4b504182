// Fuzz target: validate measurements CSV text -> parse_measured_runs, then every row (up to
// kRows) as the scenario `lynxsim validate` would simulate, resolved (not simulated: that is
// the engine's work, not the reader's).
#include "model/resolved_scenario.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "validate/measured_runs.hpp"
#include "validate/validation.hpp"

#include <algorithm>
#include <string>

namespace {
constexpr std::size_t kRows = 16;  // rows resolved per input: enough, and bounded per exec
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const lynx::Scenario base =
      lynx::validate::validation_base_scenario(lynx::validate::BaseOptions{});
  return lynx::fuzz::check_reader(data, size, [](std::string_view text) {
    const std::string label = "fuzz.csv";
    const auto runs = lynx::validate::parse_measured_runs(text, label);
    for (std::size_t i = 0; i < std::min(runs.size(), kRows); ++i) {
      try {
        const lynx::Scenario sc = lynx::validate::scenario_for_run(base, runs[i], label);
        (void)lynx::model::resolve_scenario(sc, label + ":" + std::to_string(runs[i].line));
      } catch (const lynx::Error& e) {
        // a row `lynxsim validate` refuses; still checked for internal errors, then the next
        if (e.code() == lynx::ErrorCode::kInternal) throw;
      }
    }
  });
}
