// The planners' engine runs (runner/planning.cpp): counted, never repeated for identical plans,
// the winner's run reported as it is (not executed again), and the reported strategy names the
// plan that ran when a narrower fallback wins.
#include "fast/step_cache.hpp"
#include "runner/planning.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace lynx;
using namespace lynx::runner;

namespace {

model::ResolvedScenario paper(const std::string& name, const std::string& strategy) {
  return model::load_scenario_file(std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/" + name + ".yaml",
                            {"recompute.strategy=" + strategy});
}

/// Engine runs are distinct plans (identical plans give identical fingerprints), the reported
/// result is one of them, and running the reported plan alone reproduces it.
void check_runs(const model::ResolvedScenario& sc, const SimRun& run) {
  const SimResult& r = run.result;
  REQUIRE(static_cast<int>(run.engine_runs.size()) == r.engine_runs);
  std::set<std::uint64_t> fingerprints;
  for (const EngineRunSummary& e : run.engine_runs) fingerprints.insert(e.fingerprint);
  CHECK(fingerprints.size() == run.engine_runs.size());  // no plan ran twice
  REQUIRE(run.reported_run < run.engine_runs.size());
  CHECK(run.engine_runs[run.reported_run].fingerprint == r.event_fingerprint);
  CHECK(ps_to_s(run.engine_runs[run.reported_run].makespan_ps) == r.iteration_time_s);
  SimOptions alone;
  alone.plan = &run.plan;
  const SimResult again = simulate(sc, alone).result;
  CHECK(again.engine_runs == 1);
  CHECK(again.event_fingerprint == r.event_fingerprint);
  CHECK(again.iteration_time_s == r.iteration_time_s);
}

}  // namespace

TEST_CASE("lynx-heu: baseline + confirmations + distinct alternatives, the winner not run again") {
  const auto sc = paper("pcie-gpt-13b", "lynx-heu");
  const SimRun run = simulate(sc);
  check_runs(sc, run);
  // Baseline, one run per confirmation round, and at most the four alternatives (no-forward-
  // windows, no-overlap, selective, full); on PCIe the searched plan uses no forward window, so
  // "no-forward-windows" is the same plan and is not run.
  CHECK(run.engine_runs.front().plan == "none");
  CHECK(run.result.engine_runs == 1 + run.planner.confirm_rounds + 3 - run.result.fast_screened_runs);
  CHECK(run.result.strategy == "lynx-heu");
  CHECK(run.result.strategy_requested == "lynx-heu");
  CHECK(run.reported_run == static_cast<std::size_t>(run.planner.confirm_rounds));  // its confirmation
  CHECK(run.result.confirm_seconds >= run.result.simulate_seconds);
  CHECK(run.result.baseline_seconds > 0);
}

TEST_CASE("checkmate: baseline, confirmations, selective and full") {
  const auto sc = paper("pcie-gpt-13b", "checkmate");
  const SimRun run = simulate(sc);
  check_runs(sc, run);
  CHECK(run.result.engine_runs == 1 + run.planner.confirm_rounds + 2 - run.result.fast_screened_runs);
}

TEST_CASE("a plan identical to the baseline reuses the baseline's run") {
  // GPT 1.3B fits without recomputation: the searched plan and its restricted forms keep
  // everything, so only the baseline, selective and full run.
  const auto sc = paper("nvlink-gpt-1.3b", "lynx-heu");
  const SimRun run = simulate(sc);
  check_runs(sc, run);
  CHECK(run.result.engine_runs == 3 - run.result.fast_screened_runs);
  CHECK(run.reported_run == 0);
  CHECK(run.result.strategy == "lynx-heu");  // the searched plan won, though it ran as the baseline
  CHECK(run.result.simulate_seconds <= run.result.baseline_seconds);
}

TEST_CASE("a fixed strategy and a --plan run execute once") {
  const auto sc = paper("pcie-gpt-13b", "selective");
  const SimRun run = simulate(sc);
  CHECK(run.result.engine_runs == 1);
  CHECK(run.result.strategy == "selective");
  CHECK(run.result.baseline_seconds == 0);
  CHECK(run.result.confirm_seconds == 0);
}

TEST_CASE("strategy names the fallback that ran when a narrower plan wins") {
  // PCIe GPT 2.7B: the engine finds the searched plan without forward windows faster.
  for (const char* planner : {"lynx-heu", "lynx-opt"}) {
    CAPTURE(planner);
    const auto sc = paper("pcie-gpt-2.7b", planner);
    const SimRun run = simulate(sc);
    check_runs(sc, run);
    CHECK(run.result.strategy == "no-forward-windows");
    CHECK(run.result.strategy_requested == planner);
    CHECK(run.planner.fallback == "no-forward-windows");
    CHECK(run.plan.strategy == "no-forward-windows");
    CHECK(run.engine_runs[run.reported_run].plan == "no-forward-windows");
  }
}

TEST_CASE("fast screening skips exactly the alternatives that cannot win within fast mode's bound") {
  const TimePs best = 1'000'000;
  const auto bound = static_cast<TimePs>(static_cast<double>(best) * (1 + kFastModeErrorBound));
  CHECK(cannot_win(bound, false, true, best, false));       // exact time >= best even at the bound
  CHECK_FALSE(cannot_win(bound - 1, false, true, best, false));
  CHECK_FALSE(cannot_win(best / 2, false, true, best, false));  // faster: run it
  CHECK(cannot_win(best / 2, true, true, best, false));     // out of memory, and fast memory is exact
  CHECK_FALSE(cannot_win(best / 2, true, false, best, false));  // overlapped: fast memory approximate
  CHECK_FALSE(cannot_win(10 * best, false, true, best, true));  // the best does not fit: this may
  CHECK(cannot_win(10 * best, true, true, best, true));
}

TEST_CASE("fast screening changes nothing but the engine runs (planners on paper scenarios)") {
  // The same winner, time, memory and event stream with and without screening; screening
  // never adds a run. Scenarios where Lynx wins big (PCIe), where a fallback wins (pcie 2.7b)
  // and where nothing needs recomputing (nvlink 1.3b).
  int screened = 0;
  for (const char* name : {"nvlink-gpt-1.3b", "nvlink-gpt-13b", "pcie-gpt-2.7b", "pcie-gpt-13b", "pcie-gpt-23b"})
    for (const char* planner : {"lynx-heu", "checkmate"}) {
      CAPTURE(name);
      CAPTURE(planner);
      const auto on = paper(name, planner);
      const SimRun screened_run = simulate(on);
      const SimRun full_run = simulate(model::load_scenario_file(
          std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/" + name + ".yaml",
          {std::string("recompute.strategy=") + planner, "sim.fast_screening=false"}));
      check_runs(on, screened_run);
      const SimResult& a = screened_run.result;
      const SimResult& b = full_run.result;
      CHECK(b.fast_screened_runs == 0);
      CHECK(a.strategy == b.strategy);
      CHECK(a.iteration_time_s == b.iteration_time_s);
      REQUIRE(a.stages.size() == b.stages.size());
      for (std::size_t k = 0; k < a.stages.size(); ++k)
        CHECK(a.stages[k].peak_memory_bytes == b.stages[k].peak_memory_bytes);
      CHECK(a.event_fingerprint == b.event_fingerprint);
      CHECK(a.engine_runs + a.fast_screened_runs == b.engine_runs);
      screened += a.fast_screened_runs;
    }
  CHECK(screened > 0);  // it does skip work on this set
}

TEST_CASE("with screening a lynx-heu plan costs the baseline, the final run and the candidates within the bound") {
  // Every candidate either runs in the engine or is screened out, and the winner's run is the
  // reported one: beyond the baseline and the final run, the engine runs only candidates fast
  // mode cannot rule out (and rounds whose memory it cannot vouch for).
  for (const char* name : {"pcie-gpt-13b", "pcie-gpt-23b", "nvlink-gpt-13b"}) {
    CAPTURE(name);
    const auto sc = paper(name, "lynx-heu");
    const SimRun on = simulate(sc);
    check_runs(sc, on);
    const SimRun off = simulate(model::load_scenario_file(std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/" + name +
                                                              ".yaml",
                                                          {"recompute.strategy=lynx-heu", "sim.fast_screening=false"}));
    CHECK(on.result.engine_runs + on.result.fast_screened_runs == off.result.engine_runs);
    CHECK(on.result.engine_runs < off.result.engine_runs);
    CHECK(on.result.event_fingerprint == off.result.event_fingerprint);
  }
}

TEST_CASE("fast-mode planning makes no exact engine run: its windows come from a fast-mode baseline") {
  for (const char* planner : {"lynx-heu", "lynx-opt", "checkmate"}) {
    CAPTURE(planner);
    const model::ResolvedScenario resolved = model::load_scenario_file(
        std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/pcie-gpt-13b.yaml",
        {std::string("recompute.strategy=") + planner, "sim.mode=fast"});
    const Scenario& sc = resolved.scenario();
    const model::Workload workload = model::gpt_workload(sc.model, sc.parallel);
    const std::shared_ptr<const hw_models::Topology> topology = fast::StepCache::shared().context(sc)->topology;
    const hw_models::Topology& topo = *topology;
    EngineRuns runs(sc, topo, workload, {}, false);
    const PlanningResult planned = plan_and_confirm(sc, topo, workload, runs, false);
    CHECK(runs.exact_executions() == 0);
    CHECK(runs.executions() >= 2);  // the baseline and the plan, both fast-mode runs
    CHECK(runs[planned.baseline].fast.steps > 0);
    CHECK(runs[planned.winner].fast.steps > 0);
    REQUIRE_FALSE(planned.planner.windows.empty());
    for (const strategies::StageWindows& w : planned.planner.windows) CHECK_FALSE(w.profiled);  // no engine timeline
    CHECK(planned.fast_screened == 0);  // screening is exact mode's
  }
}

TEST_CASE("fast mode vouches that a plan fits only within its memory bound") {
  const std::uint64_t capacity = 1'000'000'000;
  const auto result = [](std::int64_t peak) {
    fast::FastResult f;
    f.stages.resize(2);
    f.stages[0].peak_memory_bytes = peak;
    f.stages[1].peak_memory_bytes = peak / 2;
    return f;
  };
  const auto sc = paper("pcie-gpt-13b", "lynx-heu");
  const strategies::RecomputePlan keep =
      strategies::plan_fixed_strategy(RecomputeSpec{}, strategies::stage_partition(sc.scenario().model.layers,
                                                                                  sc.scenario().parallel));
  REQUIRE_FALSE(strategies::overlaps_recompute(keep));
  CHECK(surely_fits(result(static_cast<std::int64_t>(capacity)), keep, capacity));  // exact: equal fits
  CHECK_FALSE(surely_fits(result(static_cast<std::int64_t>(capacity) + 1), keep, capacity));
  CHECK(surely_fits(result(std::int64_t{1} << 62), keep, 0));  // no capacity: everything fits
  const strategies::RecomputePlan lynx = simulate(sc).plan;
  REQUIRE(strategies::overlaps_recompute(lynx));
  // Exact mode's peak may be fast's / (1 - bound): fits only when that does.
  const auto at_bound = static_cast<std::int64_t>(static_cast<double>(capacity) * (1 - kFastModeMemoryBound));
  CHECK(surely_fits(result(at_bound), lynx, capacity));
  CHECK_FALSE(surely_fits(result(at_bound + 1000), lynx, capacity));
  CHECK_FALSE(surely_fits(result(static_cast<std::int64_t>(capacity)), lynx, capacity));
}
