#include "runner/planning.hpp"

#include "common/clock.hpp"
#include "fast/compose.hpp"
#include "runner/step_progress.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace lynx::runner {
namespace {

/// The planners' inputs measured on the keep-everything baseline run.
strategies::PlanningInputs measure_inputs(const Scenario& sc, const model::Workload& workload,
                                          const EngineRun& baseline) {
  const ParallelSpec& p = sc.parallel;
  const int virtual_stages = p.pp * p.virtual_stages;
  const int micro_batches = p.global_batch / (p.micro_batch * p.dp);
  strategies::PlanningInputs in;
  // Backward steps right after a forward step of the same chunk: the builder issues
  // forward-window recomputes only in those forwards.
  in.forward_windowed_steps.assign(static_cast<size_t>(virtual_stages), 0);
  const auto order = schedule::pipeline_order(p.schedule, p.pp, micro_batches, p.virtual_stages);
  for (int k = 0; k < p.pp; ++k) {
    const auto& steps = order[static_cast<size_t>(k)];
    for (size_t i = 1; i < steps.size(); ++i)
      if (steps[i].backward() && steps[i - 1].forward && steps[i - 1].chunk == steps[i].chunk)
        ++in.forward_windowed_steps[static_cast<size_t>(steps[i].chunk * p.pp + k)];
  }
  for (int k = 0; k < p.pp; ++k) {
    in.in_flight_chunks.push_back(
        schedule::max_in_flight_micro_batches(p.schedule, p.pp, k, micro_batches, p.virtual_stages));
    in.weight_pending.push_back(schedule::weight_pending_micro_batches(p.schedule, p.pp, k, micro_batches));
  }
  for (const model::Op& op : workload.layer) in.weight_pass_bytes_per_layer += schedule::weight_pass_bytes(op).total();
  if (sc.sim.mode == SimMode::kFast) {  // the windows of the fast-mode baseline (capacities only: no
                                        // per-window timelines, so no SM-sharing cost yet)
    in.windows = strategies::stage_windows(baseline.fast.window_capacity, baseline.fast.forward_window_capacity,
                                         virtual_stages);
    TimePs tp_exposed = 0;
    for (const fast::FastStage& s : baseline.fast.stages) tp_exposed += s.tp_exposed_ps;
    in.tp_exposed_per_layer_ps = tp_exposed / std::max<TimePs>(1, static_cast<TimePs>(sc.model.layers) * micro_batches);
    return in;
  }
  in.windows = strategies::stage_windows(schedule::measure_window_capacity(baseline.built, baseline.exec),
                                       schedule::measure_forward_window_capacity(baseline.built, baseline.exec),
                                       virtual_stages);
  const auto profiles = schedule::measure_window_profiles(baseline.built, baseline.exec);
  for (size_t vs = 0; vs < profiles.size() && vs < in.windows.size(); ++vs) {
    strategies::StageWindows& w = in.windows[vs];
    w.profiled = true;
    w.inner_profile = profiles[vs].inner;
    w.top_profile = profiles[vs].top;
    w.forward_profile = profiles[vs].forward;
  }
  // Exposed TP communication per layer and micro-batch, for the partition's stage times.
  const schedule::BuiltProgram& built = baseline.built;
  TimePs tp_exposed = 0;
  for (const auto& per_gpu : schedule::compute_stream_gaps(built.program, baseline.exec, built.machine.gpus.size()))
    for (const schedule::IdleGap& gap : per_gpu)
      if (gap.comm_in_flight_ps > 0 &&
          built.program.tasks[static_cast<size_t>(gap.gate)].category == sim::Category::kTpComm)
        tp_exposed += gap.comm_in_flight_ps;
  const auto simulated_layers = static_cast<TimePs>(sc.model.layers) *
                                static_cast<TimePs>(built.machine.gpus.size()) / p.pp;
  in.tp_exposed_per_layer_ps = tp_exposed / std::max<TimePs>(1, simulated_layers * micro_batches);
  return in;
}

}  // namespace

bool surely_fits(const fast::FastResult& f, const strategies::RecomputePlan& plan, std::uint64_t memory_bytes) {
  if (memory_bytes == 0) return true;
  // Exact mode's peak is at most fast / (1 - bound) (equal to fast's without overlapped recomputation).
  const double bound = strategies::overlaps_recompute(plan) ? kFastModeMemoryBound : 0;
  return std::all_of(f.stages.begin(), f.stages.end(), [&](const fast::FastStage& s) {
    return static_cast<double>(s.peak_memory_bytes) / (1 - bound) <= static_cast<double>(memory_bytes);
  });
}

bool cannot_win(TimePs fast_makespan_ps, bool fast_oom, bool memory_exact, TimePs best_makespan_ps,
                bool best_oom) {
  if (fast_oom && memory_exact) return true;  // out of memory in exact mode too: never reported
  if (best_oom) return false;                 // a plan that fits beats one that does not
  // Its exact time is at least fast / (1 + bound): skip when even that is no faster.
  return static_cast<double>(fast_makespan_ps) >=
         static_cast<double>(best_makespan_ps) * (1 + kFastModeErrorBound);
}

PlanningResult plan_and_confirm(const Scenario& sc, const hw_models::Topology& topo,
                                const model::Workload& workload, EngineRuns& runs,
                                bool show_progress) {
  PlanningResult out;
  strategies::PlannerOutput& po = out.planner;
  const bool screen = sc.sim.mode == SimMode::kExact && sc.sim.fast_screening && fast::supports_schedule(sc.parallel) &&
                      fast::within_error_bound(sc.hardware);

  const auto started = WallClock::now();
  RecomputeSpec keep;
  const auto split = strategies::stage_partition(sc.model.layers, sc.parallel);
  out.baseline = runs.run(strategies::plan_fixed_strategy(keep, split), "the baseline");
  strategies::PlanningInputs inputs = measure_inputs(sc, workload, runs[out.baseline]);
  po.windows = inputs.windows;
  out.baseline_seconds = seconds_since(started);

  auto decide = [&](auto&& step) {  // planner work, timed as search
    const auto t = WallClock::now();
    auto result = step();
    out.search_seconds += seconds_since(t);
    return result;
  };
  const strategies::LynxPlanner planner =
      decide([&] { return strategies::LynxPlanner(sc, topo, workload, std::move(inputs)); });
  const std::string label = recompute_kind_name(sc.recompute.strategy);

  std::vector<std::int64_t> cut(static_cast<size_t>(sc.parallel.pp), 0);
  strategies::SearchResult searched;
  std::optional<std::size_t> searched_run;  // its engine run; none while fast mode vouches for it
  std::optional<fast::FastResult> searched_fast;
  std::vector<std::size_t> overflowed;  // runs of rounds searched again
  for (int round = 0; round < 3; ++round) {
    StepProgress bar(show_progress, fmt::format("{}: search {}, stage solves", label, round + 1));
    searched = decide([&] {
      return planner.search(cut, [&](int done, int total) {
        bar.update(static_cast<size_t>(done), static_cast<size_t>(total));
      });
    });
    bar.finish();
    po.confirm_rounds = round + 1;
    searched_run.reset();
    searched_fast.reset();
    // A plan fast mode shows fitting on every stage within its memory bound needs no budget cut:
    // its engine run waits until it is known whether it can win (the final run).
    if (screen && !runs.has_run(searched.plan)) {
      searched_fast = fast::simulate_fast(sc, searched.plan, workload, fast::StepCache::shared());
      if (surely_fits(*searched_fast, searched.plan, sc.hardware.memory_bytes)) break;
    }
    // Confirm with the engine; tighten the budget of any stage that overflowed.
    searched_run = runs.run(searched.plan, fmt::format("confirmation {}", round + 1));
    const EngineRun& r = runs[*searched_run];
    if (!decide([&] { return planner.tighten_budgets(searched, r.built.gpu_stage, r.exec.peak_bytes, cut); }))
      break;
    overflowed.push_back(*searched_run);
  }
  // Earlier rounds overflowed: out of memory, so never the winner (an identical plan loses too).
  for (std::size_t i : overflowed)
    if (i != out.baseline && i != searched_run && runs[i].oom) runs.discard(i);
  po.problems = searched.problems;
  po.solutions = searched.solutions;

  StepProgress bar(show_progress, fmt::format("{}: alternatives, stage solves", label));
  const auto alternatives = decide([&] {
    int done = 0;
    return planner.alternatives(searched, [&](int, int total) {
      bar.update(static_cast<size_t>(++done), static_cast<size_t>(2 * total));
    });
  });
  bar.finish();

  // The candidates in order of preference on ties: the searched plan, then its alternatives.
  struct Candidate {
    const strategies::RecomputePlan* plan;
    std::optional<std::size_t> run;
    std::optional<fast::FastResult> fast;  ///< when screening and not run (yet)
  };
  std::vector<Candidate> candidates{{&searched.plan, searched_run, std::move(searched_fast)}};
  for (const strategies::RecomputePlan& a : alternatives) candidates.push_back({&a, std::nullopt, std::nullopt});
  for (Candidate& c : candidates) {
    if (!c.run && runs.has_run(*c.plan)) c.run = runs.run(*c.plan, c.plan->strategy);  // costs nothing
    if (screen && !c.run && !c.fast) c.fast = fast::simulate_fast(sc, *c.plan, workload, fast::StepCache::shared());
  }
  // Only runs that may still be reported keep their programs (memory of large simulations).
  if (std::none_of(candidates.begin(), candidates.end(), [&](const Candidate& c) { return c.run == out.baseline; }))
    runs.discard(out.baseline);
  const auto fast_oom = [](const fast::FastResult& f) {
    return std::any_of(f.stages.begin(), f.stages.end(), [](const fast::FastStage& s) { return s.oom; });
  };
  // The first engine run: the searched plan when it ran, else fast mode's winner (fitting
  // first, then fastest, then earliest); every other candidate is run only when it can beat it.
  std::size_t first = 0;
  if (!candidates[0].run && screen) {
    const auto rank = [&](const Candidate& c) {
      const bool oom = c.run ? runs[*c.run].oom : fast_oom(*c.fast);
      return std::make_pair(oom, oom ? TimePs{0} : (c.run ? runs[*c.run].makespan_ps : c.fast->makespan_ps));
    };
    for (std::size_t k = 1; k < candidates.size(); ++k)
      if (rank(candidates[k]) < rank(candidates[first])) first = k;
  }
  const auto engine_run = [&](Candidate& c) {
    if (!c.run) c.run = runs.run(*c.plan, c.plan->strategy);
    return *c.run;
  };
  std::size_t best = first;  // candidate index
  engine_run(candidates[best]);
  // Whether candidate a beats candidate b in the engine: fits where b does not, or both fit and
  // a is faster; on a tie (or both out of memory) the earlier candidate.
  const auto beats = [&](std::size_t a, std::size_t b) {
    const EngineRun& ra = runs[*candidates[a].run];
    const EngineRun& rb = runs[*candidates[b].run];
    if (ra.oom != rb.oom) return rb.oom;
    if (!ra.oom && ra.makespan_ps != rb.makespan_ps) return ra.makespan_ps < rb.makespan_ps;
    return a < b;
  };
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    if (k == first) continue;
    Candidate& c = candidates[k];
    if (!c.run && c.fast) {
      const EngineRun& b = runs[*candidates[best].run];
      if (cannot_win(c.fast->makespan_ps, fast_oom(*c.fast), !strategies::overlaps_recompute(*c.plan), b.makespan_ps,
                     b.oom)) {
        ++out.fast_screened;
        continue;
      }
    }
    engine_run(c);
    if (*c.run == *candidates[best].run) continue;  // the same plan: the same result
    // A candidate that loses can never be reported, nor can a winner it replaces.
    const std::size_t loser = beats(k, best) ? std::exchange(best, k) : k;
    runs.discard(*candidates[loser].run);
  }
  out.winner = *candidates[best].run;
  po.plan = *candidates[best].plan;
  if (best > 0) po.fallback = po.plan.strategy;
  for (std::size_t i = 0; i < static_cast<std::size_t>(runs.executions()); ++i)
    if (i != out.baseline) out.confirm_seconds += runs[i].seconds;
  po.search_seconds = out.search_seconds;
  po.baseline_seconds = out.baseline_seconds;
  return out;
}

}  // namespace lynx::runner
