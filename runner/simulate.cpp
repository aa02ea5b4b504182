#include "runner/simulate.hpp"

#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "sim/error.hpp"
#include "strategies/recompute_plan.hpp"

#include <algorithm>

namespace lynx {
namespace {

/// Attributes the idle time of one GPU's compute stream: each gap before a task goes to the
/// communication that gated it (for as long as that communication was in flight during the
/// gap) and the remainder to the pipeline bubble.
StageBreakdown breakdown_of(const sim::Program& prog, const sim::ExecResult& ex, sim::GpuId gpu,
                            TimePs makespan) {
  StageBreakdown b;
  TimePs prev_end = 0;
  auto add_s = [](double& slot, TimePs ps) { slot += ps_to_s(ps); };
  for (size_t i = 0; i < prog.tasks.size(); ++i) {
    const sim::Task& t = prog.tasks[i];
    if (t.gpu != gpu) continue;
    const TimePs start = ex.task_start_ps[i];
    const TimePs end = ex.task_end_ps[i];
    if (t.stream == strategy::kRecomputeStream && t.kind == sim::TaskKind::kKernel)
      add_s(b.recompute_overlapped_s, end - start);
    if (t.stream != strategy::kCompute) continue;
    if (start > prev_end) {
      TimePs gap = start - prev_end;
      // The dependency that finished last is what the stream waited for.
      sim::TaskId gate = -1;
      for (std::uint32_t d = t.first_dep; d < t.first_dep + t.num_deps; ++d) {
        const sim::TaskId dep = prog.deps[d];
        if (gate < 0 || ex.task_end_ps[static_cast<size_t>(dep)] > ex.task_end_ps[static_cast<size_t>(gate)])
          gate = dep;
      }
      if (gate >= 0 && prog.tasks[static_cast<size_t>(gate)].kind == sim::TaskKind::kComm) {
        const sim::Task& g = prog.tasks[static_cast<size_t>(gate)];
        const TimePs in_flight =
            std::min(gap, ex.task_end_ps[static_cast<size_t>(gate)] -
                              std::max(ex.task_start_ps[static_cast<size_t>(gate)], prev_end));
        const TimePs exposed = std::max<TimePs>(0, in_flight);
        switch (g.category) {
          case sim::Category::kTpComm: add_s(b.tp_exposed_s, exposed); break;
          case sim::Category::kPpComm: add_s(b.pp_exposed_s, exposed); break;
          case sim::Category::kDpComm: add_s(b.dp_exposed_s, exposed); break;
          default: add_s(b.recompute_s, exposed); break;  // comm of a full-layer recompute
        }
        gap -= exposed;
      }
      add_s(b.bubble_s, gap);
    }
    if (t.kind == sim::TaskKind::kKernel) {
      if (t.category == sim::Category::kRecompute)
        add_s(b.recompute_s, end - start);
      else
        add_s(b.compute_s, end - start);
    }
    prev_end = std::max(prev_end, end);
  }
  add_s(b.bubble_s, makespan - prev_end);
  return b;
}

}  // namespace

SimRun simulate(const Scenario& input, const SimOptions& options) {
  SimRun run;
  Scenario sc = input;
  sc.model = model::resolve_model(sc.model);
  model::check_layout(sc.model, sc.parallel);
  const ParallelSpec& p = sc.parallel;

  const hw::Topology topo(sc.hardware);
  const int virtual_stages = p.pp * p.virtual_stages;
  const auto plan = strategy::plan_fixed_strategy(
      sc.model, p, sc.recompute, strategy::uniform_partition(sc.model.layers, virtual_stages));
  run.built = strategy::build_program(sc, plan, topo, strategy::gpt_workload(sc.model, p));
  sim::ExecOptions exec_options;
  exec_options.record_memory_timeline = options.keep_trace_data;
  run.exec = sim::execute(run.built.machine, run.built.program, exec_options);

  SimResult& r = run.result;
  r.scenario = sc;
  r.strategy = plan.strategy;
  r.gpus = p.tp * p.pp * p.dp;
  r.micro_batches = p.global_batch / (p.micro_batch * p.dp);
  r.symmetric = run.built.symmetric;
  r.events = run.exec.events;
  r.tasks = run.built.program.tasks.size();
  r.iteration_time_s = ps_to_s(run.exec.makespan_ps);
  LYNX_CHECK(r.iteration_time_s > 0, "empty iteration");
  r.samples_per_s = p.global_batch / r.iteration_time_s;
  r.tokens_per_s = r.samples_per_s * sc.model.seq_len;
  r.model_flops = model::model_flops_per_iteration(sc.model, p.global_batch);
  double executed = 0;
  for (double f : run.built.task_flops) executed += f;
  r.executed_flops = executed * run.built.replication;
  const double peak_total = static_cast<double>(sc.hardware.peak_flops_per_s) * r.gpus;
  r.tflops_per_gpu = r.model_flops / r.iteration_time_s / r.gpus / 1e12;
  r.mfu = r.model_flops / r.iteration_time_s / peak_total;
  r.hfu = r.executed_flops / r.iteration_time_s / peak_total;

  // One breakdown per pipeline stage, from its first simulated GPU.
  for (int s = 0; s < p.pp; ++s) {
    const auto it = std::find(run.built.gpu_stage.begin(), run.built.gpu_stage.end(), s);
    const auto gpu = static_cast<sim::GpuId>(it - run.built.gpu_stage.begin());
    StageBreakdown b = breakdown_of(run.built.program, run.exec, gpu, run.exec.makespan_ps);
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

}  // namespace lynx
