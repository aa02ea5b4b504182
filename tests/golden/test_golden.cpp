// Golden fingerprints (OMNeT++'s fingerprint tests): each scenario in tests/golden/scenarios/
// is simulated and its summary — the headline metrics, the per-stage breakdown and memory, and
// a hash of the engine's (time, sequence) event stream and of every task's start and end — is
// compared with tests/golden/expected/NAME.txt. A change that alters a summary must be
// deliberate: regenerate with `LYNXSIM_UPDATE_GOLDEN=1 build/tests/golden/test_golden` and give
// the reason in the commit message.
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace lynx;
using namespace lynx::runner;

namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(LYNXSIM_SOURCE_DIR) / "tests" / "golden";

/// The summary compared line by line; 12 significant digits keep it readable and are far
/// below any change a model edit makes.
std::string summary(const SimResult& r) {
  std::string s;
  auto line = [&](std::string_view key, const auto& value) { s += fmt::format("{} {}\n", key, value); };
  auto real = [&](std::string_view key, double value) { s += fmt::format("{} {:.12g}\n", key, value); };
  line("strategy", r.strategy);
  real("iteration_time_s", r.iteration_time_s);
  real("tokens_per_s", r.tokens_per_s);
  real("mfu", r.mfu);
  real("hfu", r.hfu);
  line("oom", r.oom);
  line("oom_stage", r.oom_stage);
  line("gpus", r.gpus);
  line("micro_batches", r.micro_batches);
  line("symmetric", r.symmetric);
  line("layers_per_stage", fmt::format("{}", fmt::join(r.layers_per_stage, " ")));
  line("events", r.events);
  line("tasks", r.tasks);
  line("event_fingerprint", fmt::format("{:016x}", r.event_fingerprint));
  for (const StageBreakdown& b : r.stages) {
    s += fmt::format(
        "stage {} peak_bytes {} static_bytes {} oom {} compute_s {:.12g} recompute_s {:.12g} "
        "recompute_overlapped_s {:.12g} tp_exposed_s {:.12g} pp_exposed_s {:.12g} "
        "dp_exposed_s {:.12g} bubble_s {:.12g} contention_s {:.12g}\n",
        b.stage, b.peak_memory_bytes, b.static_memory_bytes, b.oom, b.compute_s, b.recompute_s,
        b.recompute_overlapped_s, b.tp_exposed_s, b.pp_exposed_s, b.dp_exposed_s, b.bubble_s,
        b.contention_s);
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
  const std::string actual = summary(simulate(model::load_scenario_file(scenario_path.string())).result);
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
  const SimResult a = simulate(model::load_scenario_file(path)).result;
  const SimResult b = simulate(model::load_scenario_file(path)).result;
  CHECK(a.event_fingerprint == b.event_fingerprint);
  // Same model and layout, another order of the same work: a different event stream.
  const SimResult gpipe = simulate(model::load_scenario_file(path, {"parallel.schedule=gpipe"})).result;
  CHECK(gpipe.event_fingerprint != a.event_fingerprint);
}
