// Golden fingerprints (OMNeT++'s fingerprint tests): each scenario in tests/golden/scenarios/
// is simulated and its summary — every result field (the headline metrics, the per-stage
// breakdown and memory, and a hash of the engine's (time, sequence) event stream and of every
// task's start and end) but wall-clock times — is
// compared with tests/golden/expected/NAME.txt. A change that alters a summary must be
// deliberate: regenerate with `LYNXSIM_UPDATE_GOLDEN=1 build/tests/golden/test_golden` and give
// the reason in the commit message.
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace lynx;
using namespace lynx::runner;

namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(LYNXSIM_SOURCE_DIR) / "tests" / "golden";

/// Fields that measure the machine or name the release, not the simulation.
const std::set<std::string> kNotSimulated = {"lynxsim_version", "search_seconds", "baseline_seconds",
                                             "confirm_seconds", "simulate_seconds"};

/// A value as the summary prints it: reals to 12 significant digits (readable, and far below
/// any change a model edit makes), everything else as its CSV cell.
std::string summary_cell(const FieldValue& value) {
  return value.kind == FieldValue::Kind::kReal ? fmt::format("{:.12g}", value.real) : csv_cell(value);
}

/// The summary compared line by line: every result field of the one field table
/// (runner/result_fields.hpp) except wall-clock times and the version — one line per run field,
/// one line per stage.
std::string summary(const SimResult& r) {
  std::string s;
  const StageBreakdown no_stage;
  for (const ResultField* f : fields_of(FieldLevel::kRun, /*csv_only=*/true))
    if (kNotSimulated.count(f->name) == 0)
      s += fmt::format("{} {}\n", f->name, summary_cell(f->value(r, no_stage)));
  for (const StageBreakdown& b : r.stages) {
    std::string line;
    for (const ResultField* f : fields_of(FieldLevel::kStage, /*csv_only=*/true))
      line += fmt::format("{}{} {}", line.empty() ? "" : " ", f->name, summary_cell(f->value(r, b)));
    s += line + "\n";
  }
  return s;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void check_golden(const std::string& name) {
  const auto scenario_path = kGoldenDir / "scenarios" / (name + ".yaml");
  const auto expected_path = kGoldenDir / "expected" / (name + ".txt");
  // The slow path: the fast-forward changes `events` and the fingerprint (tests/runner's
  // test_fast_forward compares everything else both ways).
  const std::string actual =
      summary(simulate(model::load_scenario_file(scenario_path.string(), {"sim.fast_forward=false"})).result);
  if (std::getenv("LYNXSIM_UPDATE_GOLDEN")) {
    std::ofstream(expected_path) << actual;
    MESSAGE("updated " << expected_path.string());
  }
  REQUIRE_MESSAGE(std::filesystem::exists(expected_path), "missing " << expected_path.string());
  // Line by line, so a failure names the first metric that moved.
  std::istringstream want(read_file(expected_path)), got(actual);
  std::string want_line, got_line;
  int line_number = 0;
  while (true) {
    const bool more_want = static_cast<bool>(std::getline(want, want_line));
    const bool more_got = static_cast<bool>(std::getline(got, got_line));
    if (!more_want && !more_got) break;
    ++line_number;
    INFO(name << " line " << line_number);
    CHECK(got_line == want_line);
    if (!more_want || !more_got) break;
  }
}

}  // namespace

TEST_CASE("golden: every scenario in tests/golden/scenarios has an expected summary") {
  int scenarios = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir / "scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    ++scenarios;
    CHECK_MESSAGE(std::filesystem::exists(kGoldenDir / "expected" / (entry.path().stem().string() + ".txt")),
                  entry.path().stem().string());
  }
  CHECK(scenarios == 9);
}

TEST_CASE("golden: none, 1f1b, dp 2 (NVSwitch node)") { check_golden("none-1f1b"); }
TEST_CASE("golden: none, gpipe") { check_golden("none-gpipe"); }
TEST_CASE("golden: full, 1f1b") { check_golden("full-1f1b"); }
TEST_CASE("golden: selective, 1f1b") { check_golden("selective-1f1b"); }
TEST_CASE("golden: selective, interleaved, sequence parallel") { check_golden("selective-interleaved"); }
TEST_CASE("golden: checkmate, PCIe cluster") { check_golden("checkmate-pcie"); }
TEST_CASE("golden: lynx-heu, PCIe cluster") { check_golden("lynx-heu-pcie"); }
TEST_CASE("golden: lynx-opt, 1f1b") { check_golden("lynx-opt-1f1b"); }
TEST_CASE("golden: lynx-heu, 4 nodes, dp 4 over InfiniBand") { check_golden("lynx-heu-multinode-dp"); }

TEST_CASE("golden: a run's fingerprint is reproducible and sensitive to the schedule") {
  const auto path = (kGoldenDir / "scenarios" / "none-1f1b.yaml").string();
  const SimResult a = simulate(model::load_scenario_file(path, {"sim.fast_forward=false"})).result;
  const SimResult b = simulate(model::load_scenario_file(path, {"sim.fast_forward=false"})).result;
  CHECK(a.event_fingerprint == b.event_fingerprint);
  // Same model and layout, another order of the same work: a different event stream.
  const SimResult gpipe = simulate(model::load_scenario_file(path, {"parallel.schedule=gpipe", "sim.fast_forward=false"})).result;
  CHECK(gpipe.event_fingerprint != a.event_fingerprint);
}
