// The steady-state fast-forward (sim/fast_forward_*.cpp) against the slow path: every golden scenario
// and targeted cases run both ways. Every task start and end, flow end, memory peak and OOM
// time of the executed program, and every result field and per-stage breakdown but `events`
// and the event fingerprint, must be bit-identical.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"
#include "sim/full_program.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// pp 8 over two DGX A100 nodes, with the collective and memory-bound numbers the cases below
/// were written for (NCCL's tuning.cc defaults, before dgx-a100-80gb was fitted to measured
/// all-reduce tables; memory-bound kernels at 0.85 of HBM bandwidth, before Korthikanti Table 4
/// set 0.69), and overlapped pipeline sends (blocking exchanges, the 1F1B default, synchronize
/// every step and repeat sooner): the micro-batch load's two-period cycle and the pair from
/// which selective repeats depend on them.
const std::vector<std::string> kPp8 = {
    "parallel.pipeline_exchange=overlapped",
    "parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64", "model.preset=gpt-1.3b",
    "hardware.nodes=2", "hardware.collective_efficiency=0.8", "hardware.nccl.buffer_bw=0GB/s",
    "hardware.nccl.simple.base=8.4us", "hardware.nccl.simple.step_nvlink=3.4us", "hardware.nccl.ll128.base=14us",
    "hardware.nccl.ll128.step_nvlink=1.9us", "hardware.nccl.ll.base=6.6us",
    "hardware.gpu.memory_bound_efficiency.max=0.85"};

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

/// Every timeline the fast path reports equals the slow path's, bit for bit.
void check_same_timelines(const sim::ExecResult& fast, const sim::ExecResult& slow) {
  CHECK(fast.makespan_ps == slow.makespan_ps);
  CHECK(fast.task_start_ps == slow.task_start_ps);
  CHECK(fast.task_end_ps == slow.task_end_ps);
  CHECK(fast.flow_end_ps == slow.flow_end_ps);
  CHECK(fast.peak_bytes == slow.peak_bytes);
  CHECK(fast.first_oom_ps == slow.first_oom_ps);
  CHECK(fast.events == slow.events);  // the skipped periods' events are counted exactly
}

/// Executes `program` with and without the fast-forward, checks the timelines are the same,
/// and returns the fast-forwarded result.
sim::ExecResult run_program_both_ways(const schedule::BuiltProgram& built) {
  sim::ExecOptions slow_options;
  slow_options.fast_forward = false;
  const sim::ExecResult slow = sim::execute(built.machine, built.program, slow_options);
  sim::ExecResult fast = sim::execute(built.machine, built.program);
  check_same_timelines(fast, slow);
  CHECK(slow.skipped_periods == 0);
  return fast;
}

/// Executes `program` both ways; returns the number of periods the fast path skipped.
std::uint64_t check_program_both_ways(const schedule::BuiltProgram& built) {
  return run_program_both_ways(built).skipped_periods;
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
  // PCIe: links shared between GPUs, so every rank is simulated, with collective groups.
  CHECK(check_both_ways("lynx-heu-pcie.yaml", {"parallel.global_batch=256"}) > 0);
  CHECK(check_both_ways("lynx-heu-multinode-dp.yaml", {"parallel.global_batch=512"}) > 0);
  CHECK(check_both_ways("lynx-opt-1f1b.yaml", {"parallel.global_batch=256"}) > 0);
  CHECK(check_both_ways("selective-interleaved.yaml", {}) == 0);  // no period hint: slow path
  CHECK(check_both_ways("none-gpipe.yaml", {"parallel.global_batch=128"}) == 0);
}

TEST_CASE("fast-forward: with comm contention (flows slowed by kernels) the skips stay exact") {
  // Flow rates now change when kernels start and end: the snapshot holds each flow's share and
  // each GPU's slowed-flow list, and the skipped periods must still equal the slow path's.
  const std::vector<std::string> pp8 = {"parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64",
                                        "model.preset=gpt-1.3b", "hardware.nodes=2", "hardware.gpu.comm_contention=0.5"};
  CHECK(check_both_ways("selective-1f1b.yaml", pp8) > 0);
  CHECK(check_both_ways("full-1f1b.yaml", with(pp8, "parallel.dp=1")) > 0);
  CHECK(check_both_ways("lynx-heu-multinode-dp.yaml", {"parallel.global_batch=512", "hardware.gpu.comm_contention=0.3"}) > 0);
  CHECK(check_both_ways("lynx-opt-1f1b.yaml", {"parallel.global_batch=256", "hardware.gpu.comm_contention=0.6"}) > 0);
}

TEST_CASE("fast-forward: a wrong period hint is refused, not trusted") {
  const std::string path = (kScenarios / "selective-1f1b.yaml").string();
  const model::ResolvedScenario resolved = model::load_scenario_file(path, kPp8);
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

namespace {

/// The pp-8 pipeline of the tests above (`file`'s recompute), built for the plan simulate reports.
schedule::BuiltProgram pp8_program(const char* file) {
  const std::string path = (kScenarios / file).string();
  const model::ResolvedScenario resolved = model::load_scenario_file(path, kPp8);
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const SimRun run = simulate(resolved);
  return schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel));
}

/// `gpu`'s first task id (each GPU's tasks are one id range in these programs).
sim::TaskId first_task_of(const sim::Program& program, sim::GpuId gpu) {
  for (std::size_t t = 0; t < program.tasks.size(); ++t)
    if (program.tasks[t].gpu == gpu) return static_cast<sim::TaskId>(t);
  return -1;
}

/// One past `gpu`'s last task id.
sim::TaskId end_task_of(const sim::Program& program, sim::GpuId gpu) {
  sim::TaskId end = first_task_of(program, gpu);
  while (static_cast<std::size_t>(end) < program.tasks.size() && program.tasks[static_cast<std::size_t>(end)].gpu == gpu) ++end;
  return end;
}

/// A kernel task in the middle of `gpu`'s tasks (its steady state).
sim::TaskId middle_kernel(const sim::Program& program, sim::GpuId gpu) {
  const sim::TaskId first = first_task_of(program, gpu);
  const sim::TaskId end = end_task_of(program, gpu);
  const sim::TaskId d = program.period_tasks_per_gpu[static_cast<std::size_t>(gpu)];
  for (sim::TaskId t = first + (end - first) / 2; t < first + (end - first) / 2 + d; ++t)
    if (program.tasks[static_cast<std::size_t>(t)].kind == sim::TaskKind::kKernel) return t;
  return -1;
}

/// Adds `extra_ps(i)` to the work of every kernel among the tasks k + j·period of k's GPU (its
/// images under phi and phi^-1; i counts them from the GPU's first).
template <typename Extra>
void add_work_by_period(sim::Program& program, sim::TaskId k, Extra extra_ps) {
  const sim::GpuId gpu = program.tasks[static_cast<std::size_t>(k)].gpu;
  const sim::TaskId d = program.period_tasks_per_gpu[static_cast<std::size_t>(gpu)];
  const sim::TaskId first = first_task_of(program, gpu);
  std::int64_t i = 0;
  for (sim::TaskId t = first + (k - first) % d; t < end_task_of(program, gpu); t += d, ++i) {
    sim::Task& image = program.tasks[static_cast<std::size_t>(t)];
    if (image.kind == sim::TaskKind::kKernel) image.work_ps += extra_ps(i);
  }
}

}  // namespace

TEST_CASE("fast-forward: a state that repeats every two periods is skipped in whole two-period cycles") {
  schedule::BuiltProgram built = pp8_program("full-1f1b.yaml");
  const std::size_t num_gpus = built.machine.gpus.size();
  REQUIRE(num_gpus == 8);
  REQUIRE(built.program.period_tasks_per_gpu.size() == num_gpus);
  // Unchanged, the state repeats every period.
  sim::ExecResult one = sim::execute(built.machine, built.program);
  CHECK(one.skip_cycle_periods == 1);
  CHECK(one.skipped_periods > 0);
  // A program that alternates: one kernel of every GPU's period 3 µs longer in every other
  // period. Its state repeats every two periods only: a cycle of two is proven and skipped,
  // and every timeline is the full run's.
  for (std::size_t g = 0; g < num_gpus; ++g)
    add_work_by_period(built.program, middle_kernel(built.program, static_cast<sim::GpuId>(g)),
                       [](std::int64_t i) { return i % 2 == 0 ? 3'000'000 : 0; });
  const sim::ExecResult fast = run_program_both_ways(built);
  CHECK(fast.skip_cycle_periods == 2);
  CHECK(fast.skipped_periods > 0);
  CHECK(fast.skipped_periods % 2 == 0);  // whole cycles
  CHECK(fast.makespan_ps != one.makespan_ps);  // the change did something

  SUBCASE("a period that differs later on one GPU ends the skip before it, on every GPU") {
    // The cycle is proven on the state; the program's later periods are checked GPU by GPU:
    // one kernel 5 µs longer halfway between the middle of the GPU's tasks and their end.
    for (const std::size_t g : {std::size_t{0}, num_gpus / 2, num_gpus - 1}) {
      INFO("gpu " << g);
      schedule::BuiltProgram changed = built;
      const sim::TaskId k = middle_kernel(changed.program, static_cast<sim::GpuId>(g));
      const sim::TaskId d = changed.program.period_tasks_per_gpu[g];
      const std::int64_t late = (end_task_of(changed.program, static_cast<sim::GpuId>(g)) - k) / d / 2;  // within the skipped stretch
      changed.program.tasks[static_cast<std::size_t>(k + late * d)].work_ps += 5'000'000;
      const sim::ExecResult changed_fast = run_program_both_ways(changed);
      CHECK(changed_fast.skipped_periods < fast.skipped_periods);  // it was in the stretch skipped above
      CHECK(changed_fast.task_end_ps != fast.task_end_ps);  // fast's timelines are the full run's
    }
  }
}

TEST_CASE("fast-forward: the micro-batch load's broadcasts repeat every two periods at pp 8, selective") {
  // The last stage's data broadcast shares its uplink with the gradient send; the fair share's
  // rounding then alternates (docs/host.md, "The micro-batch load"). Proven as a two-period
  // cycle and skipped; the results are the slow path's (compressed: the full program runs).
  CHECK(check_both_ways("selective-1f1b.yaml", kPp8) > 0);
  const schedule::BuiltProgram built = pp8_program("selective-1f1b.yaml");
  CHECK(std::count(built.program.names.begin(), built.program.names.end(), "batch_broadcast") == 1);
  const sim::ExecResult fast = sim::execute(built.machine, built.program);
  CHECK(fast.skip_cycle_periods == 2);
  CHECK(fast.skipped_periods >= 40);
}

TEST_CASE("fast-forward: a program whose state does not repeat is not skipped") {
  schedule::BuiltProgram built = pp8_program("full-1f1b.yaml");
  // One kernel of the last GPU 1 µs longer every period than the period before: no two
  // periods, nor cycles of them, are alike.
  add_work_by_period(built.program, middle_kernel(built.program, static_cast<sim::GpuId>(built.machine.gpus.size() - 1)),
                     [](std::int64_t i) { return 1'000'000 * i; });
  CHECK(check_program_both_ways(built) == 0);
}

TEST_CASE("fast-forward: with a host stream, host far ahead or host-bound") {
  const std::vector<std::string> pp8 = {"parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=64",
                                        "model.preset=gpt-1.3b", "hardware.nodes=2"};
  // The host model's waits for the GPU (each micro-batch's load, the gradient norm's .item():
  // docs/host.md) are not in the executor's period proof, so it skips nothing; the results
  // are still the slow path's.
  CHECK(check_both_ways("selective-1f1b.yaml", with(with(pp8, "hardware.gpu.host_kernel=2us"),
                                                    "hardware.gpu.host_collective=5us")) == 0);
  // Host-bound (1 ms per kernel): every task waits for its issue; results still equal.
  check_both_ways("selective-1f1b.yaml", with(with(pp8, "hardware.gpu.host_kernel=1ms"), "hardware.gpu.host_collective=0s"));
  check_both_ways("none-1f1b.yaml", with(with(pp8, "parallel.dp=1"), "hardware.gpu.host_kernel=300us"));
}

namespace {

/// The compressed program of `file` with `overrides` (the reported plan's) against its full
/// program on the slow path: the executor's results, read in full-program ids, and the full
/// program sim::FullProgram reads through the compressed one, must be the full program's.
/// Returns whether the executor inserted the omitted periods (ExecResult::complete).
bool check_compressed(const std::string& file, const std::vector<std::string>& overrides, int pairs = 16) {
  const std::string path = (kScenarios / file).string();
  INFO(file);
  const model::ResolvedScenario resolved = model::load_scenario_file(path, overrides);
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const SimRun run = simulate(model::load_scenario_file(path, with(overrides, "sim.fast_forward=false")));
  const model::Workload workload = model::gpt_workload(sc.model, sc.parallel);
  const schedule::BuiltProgram full = schedule::build_program(sc, run.plan, topo, workload);
  const schedule::BuiltProgram compressed = schedule::build_program(sc, run.plan, topo, workload, pairs);
  REQUIRE(compressed.compressed);
  REQUIRE(compressed.program.omitted_periods > 0);
  CHECK(compressed.program.tasks.size() < full.program.tasks.size());
  // The full program, read through the compressed one.
  const sim::FullProgram view(compressed.program);
  REQUIRE(view.num_tasks() == full.program.tasks.size());
  // Stream predecessors (the order a dependency does not list), of both programs.
  auto stream_prev = [](const sim::Program& prog) {
    std::map<std::pair<sim::GpuId, sim::StreamId>, sim::TaskId> last;
    std::vector<sim::TaskId> prev(prog.tasks.size(), -1);
    for (std::size_t i = 0; i < prog.tasks.size(); ++i) {
      auto [it, fresh] = last.try_emplace({prog.tasks[i].gpu, prog.tasks[i].stream}, -1);
      prev[i] = it->second;
      it->second = static_cast<sim::TaskId>(i);
    }
    return prev;
  };
  const std::vector<sim::TaskId> full_prev = stream_prev(full.program), built_prev = stream_prev(compressed.program);
  std::size_t mismatches = 0;
  view.for_each([&](sim::TaskId x, sim::TaskId source, std::int64_t periods) {
    const sim::TaskId before = built_prev[static_cast<std::size_t>(source)];
    if (full_prev[static_cast<std::size_t>(x)] != (before < 0 ? -1 : view.full_id(before, periods))) ++mismatches;
    const sim::Task& a = full.program.tasks[static_cast<std::size_t>(x)];
    const sim::Task& b = compressed.program.tasks[static_cast<std::size_t>(source)];
    bool same = a.kind == b.kind && a.gpu == b.gpu && a.stream == b.stream && a.category == b.category &&
                a.work_ps == b.work_ps && a.num_deps == b.num_deps && a.num_flows == b.num_flows && a.num_mem == b.num_mem &&
                full.task_flops[static_cast<std::size_t>(x)] == compressed.task_flops[static_cast<std::size_t>(source)];
    for (std::uint32_t k = 0; same && k < a.num_deps; ++k)
      same = full.program.deps[a.first_dep + k] == view.dep(source, periods, k);
    if (!same) ++mismatches;
  });
  CHECK(mismatches == 0);
  sim::ExecOptions slow_options;
  slow_options.fast_forward = false;
  const sim::ExecResult slow = sim::execute(full.machine, full.program, slow_options);
  const sim::ExecResult fast = sim::execute(compressed.machine, compressed.program);
  if (!fast.complete) return false;
  // The built tasks' times and the inserted periods, read in full-program ids.
  CHECK(fast.inserted.periods == compressed.program.omitted_periods);
  CHECK(fast.task_start_ps.size() == compressed.program.tasks.size());
  sim::ExecResult expanded = fast;
  expanded.task_start_ps = view.starts(fast);
  expanded.task_end_ps = view.ends(fast);
  check_same_timelines(expanded, slow);
  CHECK(fast.skipped_periods >= static_cast<std::uint64_t>(compressed.program.omitted_periods));
  // Where the executor says the inserted periods repeat, they do.
  REQUIRE(fast.periodic_tasks.size() == compressed.machine.gpus.size());
  std::size_t periodic = 0, wrong = 0;
  for (const sim::ExecResult::PeriodicRange& r : fast.periodic_tasks) {
    for (sim::TaskId x = r.first; x < r.end; ++x, ++periodic) {
      const auto i = static_cast<std::size_t>(x), before = static_cast<std::size_t>(x - r.period_tasks);
      if (slow.task_start_ps[i] != slow.task_start_ps[before] + fast.period_ps ||
          slow.task_end_ps[i] != slow.task_end_ps[before] + fast.period_ps)
        ++wrong;
    }
  }
  CHECK(periodic > 0);
  CHECK(wrong == 0);
  // The idle gaps, copied period to period over the compressed program, are the full
  // program's, gap by gap.
  const auto gaps = schedule::compute_stream_gaps(view, fast, compressed.machine.gpus.size());
  const auto full_gaps = schedule::compute_stream_gaps(full.program, slow, full.machine.gpus.size());
  REQUIRE(gaps.size() == full_gaps.size());
  std::size_t gap_mismatches = 0, num_gaps = 0;
  for (std::size_t g = 0; g < gaps.size(); ++g) {
    REQUIRE(gaps[g].size() == full_gaps[g].size());
    for (std::size_t k = 0; k < gaps[g].size(); ++k, ++num_gaps) {
      const schedule::IdleGap& a = gaps[g][k];
      const schedule::IdleGap& b = full_gaps[g][k];
      if (a.start_ps != b.start_ps || a.end_ps != b.end_ps || a.next_task != b.next_task || a.gate != b.gate ||
          a.comm_in_flight_ps != b.comm_in_flight_ps || a.tp_comm_ps != b.tp_comm_ps || a.pp_comm_ps != b.pp_comm_ps ||
          a.dp_comm_ps != b.dp_comm_ps || a.other_comm_ps != b.other_comm_ps)
        ++gap_mismatches;
    }
  }
  CHECK(num_gaps > 0);
  CHECK(gap_mismatches == 0);
  return true;
}


}  // namespace

TEST_CASE("compressed program: the omitted periods inserted give the full program's timelines") {
  // At tp 2 this pipeline's state repeats every two periods (the micro-batch load's
  // broadcasts), and omitted periods are inserted as copies of one period only: not inserted
  // (simulate() then runs the full program, its two-period cycles skipped).
  CHECK_FALSE(check_compressed("selective-1f1b.yaml", kPp8));
  CHECK(check_compressed("full-1f1b.yaml", kPp8));
  CHECK(check_compressed("none-1f1b.yaml", with(kPp8, "parallel.dp=1")));
  CHECK(check_compressed("none-1f1b.yaml", with(with(kPp8, "parallel.dp=1"), "hardware.gpu.memory=6GiB")));
  CHECK(check_compressed("selective-1f1b.yaml", {"parallel.pp=1", "parallel.global_batch=512", "model.preset=gpt-1.3b"}));
  CHECK(check_compressed("lynx-heu-multinode-dp.yaml", {"parallel.global_batch=512"}));
  CHECK(check_compressed("lynx-opt-1f1b.yaml", {"parallel.global_batch=256"}));
  // Blocking exchanges (cross-GPU rendezvous on the receivers' exchange markers): selective's
  // state repeats within 16 pairs there, and the inserted periods are the full program's.
  CHECK(check_compressed("selective-1f1b.yaml", with(kPp8, "parallel.pipeline_exchange=blocking")));
}

TEST_CASE("compressed program: every rank simulated, with collective groups, on PCIe with TP-comm overlap") {
  // Links shared between GPUs: no one-rank-per-stage reduction, every TP collective is a group
  // of its ranks' tasks (chunked by the overlap), and a group's image one period on is the group
  // of its members' images. GPT-23B's shape with 24 layers, micro-batch 2.
  const std::vector<std::string> overlap = {"model.preset=gpt-23b", "model.layers=24", "parallel.micro_batch=2",
                                            "parallel.pipeline_exchange=overlapped",
                                            "recompute.strategy=full", "parallel.tp_comm_overlap=true",
                                            "parallel.sequence_parallel=true"};
  // tp 4, 32 micro-batches: repeats within 8 built pairs.
  const std::vector<std::string> tp4 = with(overlap, "parallel.global_batch=64");
  CHECK(check_compressed("lynx-heu-pcie.yaml", tp4, 8));
  CHECK(check_both_ways("lynx-heu-pcie.yaml", tp4) > 0);  // simulate(): compressed, against the slow path
  // tp 8 (4 nodes), 48 micro-batches: the stages' phases settle over about 20 pairs, so the
  // period is proven within 32 built pairs, not 16.
  const std::vector<std::string> tp8 = with(with(with(overlap, "parallel.global_batch=96"), "parallel.tp=8"), "hardware.nodes=4");
  CHECK_FALSE(check_compressed("lynx-heu-pcie.yaml", tp8, 16));
  CHECK(check_compressed("lynx-heu-pcie.yaml", tp8, 32));
}

TEST_CASE("compressed program: never with the host model (its waits turn the fast-forward off)") {
  for (const char* host : {"hardware.gpu.host_kernel=2us", "hardware.gpu.host_kernel=1ms"}) {
    const std::string path = (kScenarios / "selective-1f1b.yaml").string();
    const model::ResolvedScenario resolved = model::load_scenario_file(path, with(kPp8, host));
    const Scenario& sc = resolved.scenario();
    const hw_models::Topology topo(sc.hardware);
    const SimRun run = simulate(resolved);
    const schedule::BuiltProgram built =
        schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel), 16);
    CHECK_FALSE(built.compressed);
    CHECK(built.program.omitted_periods == 0);
    CHECK_FALSE(built.program.host_waits.empty());
  }
}

TEST_CASE("compressed program: where the period is not proven, the full program runs instead") {
  // Selective at pp 8 repeats from its 11th pair: not within 8 built pairs (simulate() then
  // builds 16, check_both_ways above), within 16.
  CHECK_FALSE(check_compressed("selective-1f1b.yaml", kPp8, 8));
  CHECK(check_compressed("full-1f1b.yaml", kPp8, 8));
  // Fast-forward off: nothing inserts the omitted periods.
  const std::string path = (kScenarios / "full-1f1b.yaml").string();
  const model::ResolvedScenario resolved = model::load_scenario_file(path, kPp8);
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const SimRun run = simulate(resolved);
  schedule::BuiltProgram compressed =
      schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel), 8);
  REQUIRE(compressed.compressed);
  sim::ExecOptions slow_options;
  slow_options.fast_forward = false;
  CHECK_FALSE(sim::execute(compressed.machine, compressed.program, slow_options).complete);
  CHECK(sim::execute(compressed.machine, compressed.program).complete);
  // A wrong period hint: no period is proven, and the omitted periods are not inserted.
  for (sim::TaskId& d : compressed.program.period_tasks_per_gpu) ++d;
  CHECK_FALSE(sim::execute(compressed.machine, compressed.program).complete);
}
