#include "runner/simulate.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/progress.hpp"
#include "fast/compose.hpp"
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "runner/engine_runs.hpp"
#include "runner/planning.hpp"
#include "runner/step_progress.hpp"
#include "runner/work_estimate.hpp"
#include "schedule/program_builder.hpp"
#include "schedule/overlap_windows.hpp"
#include "sim/full_program.hpp"
#include "strategies/recompute_plan.hpp"

#include <algorithm>
#include <array>

namespace lynx::runner {
namespace {

/// Where each GPU's iteration went (index = GPU): busy time of its compute stream by
/// category, and its idle gaps attributed to the communication in flight that the stream waited
/// for (schedule::compute_stream_gaps), the remainder being pipeline bubble. One pass.
std::vector<StageBreakdown> breakdown_per_gpu(const sim::FullProgram& prog, const sim::ExecResult& ex,
                                              size_t gpus) {
  std::vector<StageBreakdown> out(gpus);
  auto add_s = [](double& slot, TimePs ps) { slot += ps_to_s(ps); };
  const std::vector<sim::Task>& tasks = prog.built().tasks;
  // A copy of an omitted period whose tasks all repeat the copy before (their times one period
  // later, sim::ExecResult::periodic_tasks; the same task records) adds what that copy added:
  // its additions are kept per slot and replayed in the same order (the slots' sums are
  // independent), without reading its tasks.
  enum Slot { kOverlapped, kRecompute, kCompute, kContention };
  auto slot = [](StageBreakdown& b, int k) -> double& {
    switch (k) {
      case kOverlapped: return b.recompute_overlapped_s;
      case kRecompute: return b.recompute_s;
      case kCompute: return b.compute_s;
      default: return b.contention_s;
    }
  };
  std::array<std::vector<double>, 4> additions;  // per Slot, in order
  sim::GpuId added_by = -1;  // the GPU whose last run, a copy, made `additions`
  for (const sim::FullProgram::Run& run : prog.runs()) {
    if (run.count == 0) continue;
    const sim::GpuId gpu = tasks[static_cast<size_t>(run.built_first)].gpu;  // of a copy
    if (run.copy && added_by == gpu && ex.repeats_previous_period(gpu, run.full_first, run.full_first + run.count)) {
      for (int k = 0; k < 4; ++k) {
        double sum = slot(out[static_cast<size_t>(gpu)], k);
        for (const double s : additions[static_cast<size_t>(k)]) sum += s;
        slot(out[static_cast<size_t>(gpu)], k) = sum;
      }
      continue;
    }
    added_by = run.copy ? gpu : -1;
    for (auto& a : additions) a.clear();
    auto add = [&](StageBreakdown& b, int k, TimePs ps) {
      slot(b, k) += ps_to_s(ps);
      if (run.copy) additions[static_cast<size_t>(k)].push_back(ps_to_s(ps));
    };
    for (sim::TaskId k = 0; k < run.count; ++k) {
      const sim::Task& t = tasks[static_cast<size_t>(run.built_first + k)];
      if (t.kind != sim::TaskKind::kKernel) continue;
      const sim::TaskId x = run.full_first + k;
      const TimePs busy = prog.end_ps(ex, x, t.gpu) - prog.start_ps(ex, x, t.gpu);
      StageBreakdown& b = out[static_cast<size_t>(t.gpu)];  // a complete program's one run spans every GPU
      if (t.stream == schedule::kRecomputeStream) add(b, kOverlapped, busy);
      if (t.stream != schedule::kCompute) continue;
      add(b, t.category == sim::Category::kRecompute ? kRecompute : kCompute, busy);
      if (busy > t.work_ps) add(b, kContention, busy - t.work_ps);
    }
  }
  schedule::for_each_stream_gap(prog, ex, gpus, [&](size_t gpu, const schedule::IdleGap& gap) {
    StageBreakdown& b = out[gpu];
    add_s(b.tp_exposed_s, gap.tp_comm_ps);
    add_s(b.pp_exposed_s, gap.pp_comm_ps);
    add_s(b.dp_exposed_s, gap.dp_comm_ps);
    add_s(b.recompute_s, gap.other_comm_ps);  // the collectives of a full recompute
    add_s(b.bubble_s, gap.end_ps - gap.start_ps - gap.comm_in_flight_ps);
  });
  return out;
}

/// The fields every mode derives the same way from the iteration time and executed FLOPs.
void set_rates(SimResult& r, const Scenario& sc, TimePs makespan_ps, double executed_flops) {
  const ParallelSpec& p = sc.parallel;
  r.gpus = static_cast<int>(gpus_used(p));
  r.micro_batches = static_cast<int>(micro_batches_per_pipeline(p));
  r.iteration_time_s = ps_to_s(makespan_ps);
  LYNX_CHECK(r.iteration_time_s > 0, "empty iteration");
  r.samples_per_s = p.global_batch / r.iteration_time_s;
  r.tokens_per_s = r.samples_per_s * sc.model.seq_len;
  r.model_flops = model::model_flops_per_iteration(sc.model, p.global_batch);
  r.executed_flops = executed_flops;
  const double peak_total = static_cast<double>(sc.hardware.peak_flops_per_s) * r.gpus;
  r.tflops_per_gpu = r.model_flops / r.iteration_time_s / r.gpus / 1e12;
  r.mfu = r.model_flops / r.iteration_time_s / peak_total;
  r.hfu = r.executed_flops / r.iteration_time_s / peak_total;
}

/// sim.mode fast: fixed strategies and plan files, composed from cached steps (fast/).
SimRun simulate_fast_mode(const Scenario& sc, const SimOptions& options) {
  if (options.keep_trace_data)
    fail(ErrorCode::kIncompatibleSettings, "--trace needs sim.mode exact: fast mode (sim.mode: fast) simulates no full timeline");
  const ParallelSpec& p = sc.parallel;
  const RecomputeKind kind = sc.recompute.strategy;
  SimRun run;
  SimResult& r = run.result;
  const model::Workload workload = model::gpt_workload(sc.model, p);
  fast::FastResult f;
  if (!options.plan && (kind == RecomputeKind::kLynxHeu || kind == RecomputeKind::kLynxOpt ||
                        kind == RecomputeKind::kCheckmate)) {
    // The planners as in exact mode, every run of theirs (the window baseline too) in fast mode.
    const std::shared_ptr<const hw_models::Topology> topology = fast::StepCache::shared().context(sc)->topology;
    const hw_models::Topology& topo = *topology;
    EngineRuns runs(sc, topo, workload, {}, false);
    PlanningResult planned = plan_and_confirm(sc, topo, workload, runs, options.progress && is_terminal(stderr));
    run.planner = std::move(planned.planner);
    run.plan = run.planner.plan;
    r.search_seconds = planned.search_seconds;
    r.baseline_seconds = planned.baseline_seconds;
    r.confirm_seconds = planned.confirm_seconds;
    for (const auto& s : run.planner.solutions) r.solver_gap = std::max(r.solver_gap, s.gap);
    f = runs.take(planned.winner).fast;
  } else {
    run.plan = options.plan ? *options.plan
                            : strategies::plan_fixed_strategy(
                                  sc.recompute, strategies::stage_partition(sc.model.layers, p));
    const auto started = WallClock::now();
    f = fast::simulate_fast(sc, run.plan, workload, fast::StepCache::shared());
    r.simulate_seconds = seconds_since(started);
  }
  r.scenario = sc;
  r.strategy = run.plan.strategy;
  r.strategy_requested = options.plan ? options.plan->strategy : recompute_kind_name(kind);
  for (const auto& stage : run.plan.stages) r.layers_per_stage.push_back(static_cast<int>(stage.layers.size()));
  r.symmetric = f.symmetric;
  set_rates(r, sc, f.makespan_ps, f.executed_flops);
  for (int s = 0; s < p.pp; ++s) {
    const fast::FastStage& fs = f.stages[static_cast<size_t>(s)];
    StageBreakdown b;
    b.stage = s;
    b.compute_s = ps_to_s(fs.compute_ps);
    b.recompute_s = ps_to_s(fs.recompute_ps);
    b.recompute_overlapped_s = ps_to_s(fs.recompute_overlapped_ps);
    b.tp_exposed_s = ps_to_s(fs.tp_exposed_ps);
    b.pp_exposed_s = ps_to_s(fs.pp_exposed_ps);
    b.dp_exposed_s = ps_to_s(fs.dp_exposed_ps);
    b.bubble_s = ps_to_s(fs.bubble_ps);
    b.contention_s = ps_to_s(fs.contention_ps);
    b.peak_memory_bytes = fs.peak_memory_bytes;
    b.static_memory_bytes = fs.static_memory_bytes;
    b.oom = fs.oom;
    if (b.oom && r.oom_stage < 0) r.oom_stage = s;
    r.oom = r.oom || b.oom;
    r.stages.push_back(b);
  }
  return run;
}

}  // namespace

SimRun simulate(const model::ResolvedScenario& resolved, const SimOptions& options) {
  if (resolved.scenario().sim.mode == SimMode::kFast) return simulate_fast_mode(resolved.scenario(), options);
  SimRun run;
  const Scenario& sc = resolved.scenario();
  const ParallelSpec& p = sc.parallel;

  // Bounded work: refuse what cannot finish before building anything (first as if the
  // symmetry reduction applied, which needs the topology to decide; then as it is decided).
  check_work_bounded(sc, sc.sim.exploit_symmetry && p.tp * grad_replicas(p) > 1);
  const hw_models::Topology topo(sc.hardware, gpus_used(p));
  if (!schedule::simulates_one_gpu_per_stage(sc, topo)) check_work_bounded(sc, false);
  const model::Workload workload = model::gpt_workload(sc.model, p);
  SimResult& r = run.result;
  const RecomputeKind kind = sc.recompute.strategy;
  sim::ExecOptions exec_options;
  exec_options.record_memory_timeline = options.keep_trace_data;
  exec_options.record_event_order = options.record_event_order;
  exec_options.fast_forward = sc.sim.fast_forward && !options.keep_trace_data;
  const bool progress = options.progress && is_terminal(stderr);
  EngineRuns runs(sc, topo, workload, exec_options, progress);
  std::size_t reported = 0;
  if (options.plan) {
    run.plan = *options.plan;
    reported = runs.run(run.plan, run.plan.strategy, /*compress=*/!options.keep_trace_data && !options.record_event_order);
  } else if (kind == RecomputeKind::kLynxHeu || kind == RecomputeKind::kLynxOpt ||
             kind == RecomputeKind::kCheckmate) {
    PlanningResult planned = plan_and_confirm(sc, topo, workload, runs, progress);
    run.planner = std::move(planned.planner);
    run.plan = run.planner.plan;
    reported = planned.winner;
    r.search_seconds = planned.search_seconds;
    r.baseline_seconds = planned.baseline_seconds;
    r.confirm_seconds = planned.confirm_seconds;
    r.fast_screened_runs = planned.fast_screened;
    for (const auto& s : run.planner.solutions) {
      r.solver_gap = std::max(r.solver_gap, s.gap);
      r.solver_limit_bound = r.solver_limit_bound || s.limit_bound;
    }
  } else {
    run.plan = strategies::plan_fixed_strategy(
        sc.recompute, strategies::stage_partition(sc.model.layers, p));
    reported = runs.run(run.plan, run.plan.strategy, /*compress=*/!options.keep_trace_data && !options.record_event_order);
  }
  r.engine_runs = runs.executions();
  for (int i = 0; i < runs.executions(); ++i) {
    const EngineRun& e = runs[static_cast<std::size_t>(i)];
    run.engine_runs.push_back({e.plan.strategy, e.fingerprint, e.makespan_ps, e.oom, e.seconds});
  }
  run.reported_run = reported;
  {
    EngineRun final_run = runs.take(reported);
    LYNX_CHECK(!final_run.built.program.tasks.empty(), "the reported engine run was discarded");
    r.simulate_seconds = final_run.seconds;
    run.built = std::move(final_run.built);
    run.exec = std::move(final_run.exec);
  }

  r.scenario = sc;
  r.strategy = run.plan.strategy;
  r.strategy_requested = options.plan ? options.plan->strategy : recompute_kind_name(kind);
  for (const auto& stage : run.plan.stages) r.layers_per_stage.push_back(static_cast<int>(stage.layers.size()));
  r.symmetric = run.built.symmetric;
  r.events = run.exec.events;
  r.event_fingerprint = run.exec.fingerprint;
  // A compressed program's omitted periods are read through the full program's ids.
  const sim::FullProgram full(run.built.program);
  r.tasks = full.num_tasks();
  double executed = 0;
  full.for_each([&](sim::TaskId, sim::TaskId source, std::int64_t) { executed += run.built.task_flops[static_cast<size_t>(source)]; });
  set_rates(r, sc, run.exec.makespan_ps, executed * run.built.replication);

  // One breakdown per pipeline stage, from its first simulated GPU.
  const auto per_gpu =
      breakdown_per_gpu(full, run.exec, run.built.machine.gpus.size());
  for (int s = 0; s < p.pp; ++s) {
    const auto it = std::find(run.built.gpu_stage.begin(), run.built.gpu_stage.end(), s);
    StageBreakdown b = per_gpu[static_cast<size_t>(it - run.built.gpu_stage.begin())];
    b.stage = s;
    // Peak and OOM over every simulated GPU of the stage (they are equal when symmetric).
    for (size_t g = 0; g < run.built.gpu_stage.size(); ++g) {
      if (run.built.gpu_stage[g] != s) continue;
      b.peak_memory_bytes = std::max(b.peak_memory_bytes, run.exec.peak_bytes[g]);
      b.static_memory_bytes = run.built.program.static_bytes_per_gpu[g];
      b.oom = b.oom || run.exec.first_oom_ps[g] >= 0;
    }
    if (b.oom && r.oom_stage < 0) r.oom_stage = s;
    r.oom = r.oom || b.oom;
    r.stages.push_back(b);
  }
  if (!options.keep_trace_data) {
    run.built.program = {};
    run.exec = {};
  }
  return run;
}

std::vector<sim::TraceSpan> trace_annotations(const SimRun& run) {
  return schedule::window_annotations(run.built, run.exec);
}

}  // namespace lynx::runner
