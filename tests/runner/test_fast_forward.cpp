// The steady-state fast-forward (sim/executor.cpp) against the slow path: every golden scenario
// and targeted cases run both ways. Every task start and end, flow end, memory peak and OOM
// time of the executed program, and every result field and per-stage breakdown but `events`
// and the event fingerprint, must be bit-identical.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

const std::filesystem::path kScenarios = std::filesystem::path(LYNXSIM_SOURCE_DIR) / "tests" / "golden" / "scenarios";

/// Fields allowed to differ: wall-clock times, the version, the switch itself (in the resolved
/// scenario) and the event-stream hash (skipped events are counted, not hashed).
const std::set<std::string> kMayDiffer = {"lynxsim_version", "search_seconds",   "baseline_seconds",
                                          "confirm_seconds", "simulate_seconds", "event_fingerprint",
                                          "scenario_yaml"};

std::vector<std::string> with(std::vector<std::string> overrides, const char* extra) {
  overrides.emplace_back(extra);
  return overrides;
}

/// Executes `program` both ways; returns the number of periods the fast path skipped.
std::uint64_t check_program_both_ways(const schedule::BuiltProgram& built) {
  sim::ExecOptions slow_options;
  slow_options.fast_forward = false;
  const sim::ExecResult slow = sim::execute(built.machine, built.program, slow_options);
  const sim::ExecResult fast = sim::execute(built.machine, built.program);
  CHECK(fast.makespan_ps == slow.makespan_ps);
  CHECK(fast.task_start_ps == slow.task_start_ps);
  CHECK(fast.task_end_ps == slow.task_end_ps);
  CHECK(fast.flow_end_ps == slow.flow_end_ps);
  CHECK(fast.peak_bytes == slow.peak_bytes);
  CHECK(fast.first_oom_ps == slow.first_oom_ps);
  CHECK(fast.events == slow.events);  // the skipped periods' events are counted exactly
  CHECK(slow.skipped_periods == 0);
  return fast.skipped_periods;
}

/// Simulates `file` with `overrides` both ways and compares results and the executed program's
/// timelines; returns the periods the fast path skipped on the reported plan.
std::uint64_t check_both_ways(const std::string& file, const std::vector<std::string>& overrides) {
  const std::string path = (kScenarios / file).string();
  INFO(file);
  const SimRun slow = simulate(model::load_scenario_file(path, with(overrides, "sim.fast_forward=false")));
  const SimRun fast = simulate(model::load_scenario_file(path, with(overrides, "sim.fast_forward=true")));
  const StageBreakdown no_stage;
  for (const ResultField* f : fields_of(FieldLevel::kRun)) {
    if (kMayDiffer.count(f->name) != 0) continue;
    INFO(f->name);
    CHECK(csv_cell(f->value(fast.result, no_stage)) == csv_cell(f->value(slow.result, no_stage)));
  }
  REQUIRE(fast.result.stages.size() == slow.result.stages.size());
  for (std::size_t s = 0; s < slow.result.stages.size(); ++s) {
    for (const ResultField* f : fields_of(FieldLevel::kStage)) {
      INFO("stage " << s << " " << f->name);
      CHECK(csv_cell(f->value(fast.result, fast.result.stages[s])) == csv_cell(f->value(slow.result, slow.result.stages[s])));
    }
  }
  CHECK(fast.result.events == slow.result.events);
  // The reported plan's program, executed both ways: every timeline equal.
  const model::ResolvedScenario resolved = model::load_scenario_file(path, overrides);
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const schedule::BuiltProgram built =
      schedule::build_program(sc, slow.plan, topo, model::gpt_workload(sc.model, sc.parallel));
  return check_program_both_ways(built);
}

}  // namespace

TEST_CASE("fast-forward: every golden scenario gives the slow path's results") {
  int scenarios = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".yaml") continue;
    ++scenarios;
    check_both_ways(entry.path().filename().string(), {});
  }
  CHECK(scenarios == 9);
}

TEST_CASE("fast-forward: skips periods of 1F1B and changes nothing else") {
  // pp 8, 64 micro-batches, one rank per stage: most of the iteration is steady state.
  const std::vector<std::string> pp8 = {"parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64",
                                        "model.preset=gpt-1.3b", "hardware.nodes=2"};
  CHECK(check_both_ways("selective-1f1b.yaml", pp8) > 0);
  CHECK(check_both_ways("full-1f1b.yaml", pp8) > 0);
  CHECK(check_both_ways("none-1f1b.yaml", with(pp8, "parallel.dp=1")) > 0);
  // Out of memory (a result, not an error): the same first-OOM times and peaks.
  CHECK(check_both_ways("none-1f1b.yaml", with(with(pp8, "parallel.dp=1"), "hardware.gpu.memory=6GiB")) > 0);
  // pp 1: every step is a period.
  CHECK(check_both_ways("selective-1f1b.yaml", {"parallel.pp=1", "parallel.global_batch=128", "model.preset=gpt-1.3b"}) > 0);
}

TEST_CASE("fast-forward: lynx plans with overlapped recompute, dp with bucketed all-reduce, interleaved") {
  // PCIe: links shared between GPUs, so every rank is simulated with collective groups, which
  // the fast-forward leaves to the slow path.
  CHECK(check_both_ways("lynx-heu-pcie.yaml", {"parallel.global_batch=256"}) == 0);
  CHECK(check_both_ways("lynx-heu-multinode-dp.yaml", {"parallel.global_batch=512"}) > 0);
  CHECK(check_both_ways("lynx-opt-1f1b.yaml", {"parallel.global_batch=256"}) > 0);
  CHECK(check_both_ways("selective-interleaved.yaml", {}) == 0);  // no period hint: slow path
  CHECK(check_both_ways("none-gpipe.yaml", {"parallel.global_batch=128"}) == 0);
}

TEST_CASE("fast-forward: a wrong period hint is refused, not trusted") {
  const std::string path = (kScenarios / "selective-1f1b.yaml").string();
  const model::ResolvedScenario resolved = model::load_scenario_file(
      path, {"parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64", "model.preset=gpt-1.3b", "hardware.nodes=2"});
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const SimRun run = simulate(resolved);
  schedule::BuiltProgram built = schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel));
  REQUIRE(built.program.period_tasks_per_gpu.size() == built.machine.gpus.size());
  SUBCASE("every period one task too long") {
    for (sim::TaskId& d : built.program.period_tasks_per_gpu) ++d;
    CHECK(check_program_both_ways(built) == 0);
  }
  SUBCASE("the last GPU's period doubled") {
    built.program.period_tasks_per_gpu.back() *= 2;
    CHECK(check_program_both_ways(built) == 0);
  }
  SUBCASE("anchors one task late") {
    for (sim::TaskId& a : built.program.period_anchors) ++a;
    check_program_both_ways(built);
  }
}

TEST_CASE("fast-forward: with a host stream, host far ahead or host-bound") {
  const std::vector<std::string> pp8 = {"parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64",
                                        "model.preset=gpt-1.3b", "hardware.nodes=2"};
  // GPU-bound: the host runs ahead and never gates a copy; periods are skipped.
  CHECK(check_both_ways("selective-1f1b.yaml", with(with(pp8, "hardware.gpu.host_kernel=2us"),
                                                    "hardware.gpu.host_collective=5us")) > 0);
  // Host-bound (1 ms per kernel): every task waits for its issue; results still equal.
  check_both_ways("selective-1f1b.yaml", with(with(pp8, "hardware.gpu.host_kernel=1ms"), "hardware.gpu.host_collective=0s"));
  check_both_ways("none-1f1b.yaml", with(with(pp8, "parallel.dp=1"), "hardware.gpu.host_kernel=300us"));
}
