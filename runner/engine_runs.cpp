#include "runner/engine_runs.hpp"

#include "common/clock.hpp"
#include "runner/step_progress.hpp"

#include <algorithm>

namespace lynx::runner {

EngineRuns::EngineRuns(const Scenario& sc, const hw_models::Topology& topo, const model::Workload& workload,
                       sim::ExecOptions options, bool show_progress)
    : sc_(sc), topo_(topo), workload_(workload), options_(std::move(options)),
      show_progress_(show_progress) {}

bool EngineRuns::has_run(const strategies::RecomputePlan& plan) const {
  return std::any_of(runs_.begin(), runs_.end(),
                     [&](const EngineRun& r) { return strategies::same_decisions(r.plan, plan); });
}

std::size_t EngineRuns::run(const strategies::RecomputePlan& plan, const std::string& what, bool compress) {
  for (std::size_t i = 0; i < runs_.size(); ++i)
    if (strategies::same_decisions(runs_[i].plan, plan)) return i;
  const auto start = WallClock::now();
  StepProgress progress(show_progress_, "simulating " + what);  // the build counts towards its second
  EngineRun r;
  r.plan = plan;
  if (sc_.sim.mode == SimMode::kFast) {
    r.fast = fast::simulate_fast(sc_, plan, workload_, fast::StepCache::shared(), true);
    r.seconds = seconds_since(start);
    r.makespan_ps = r.fast.makespan_ps;
    for (int s = 0; s < sc_.parallel.pp; ++s) {
      r.built.gpu_stage.push_back(s);
      r.exec.peak_bytes.push_back(r.fast.stages[static_cast<size_t>(s)].peak_memory_bytes);
      r.oom = r.oom || r.fast.stages[static_cast<size_t>(s)].oom;
    }
    runs_.push_back(std::move(r));
    return runs_.size() - 1;
  }
  sim::ExecOptions options = options_;
  if (show_progress_)
    options.on_progress = [&progress](std::size_t ended, std::size_t total) { progress.update(ended, total); };
  // Omitted periods need the fast-forward to insert them. Where the period is not proven on
  // the built periods, more of them; then the full program.
  bool done = false;
  for (const int pairs : schedule::kCompressedPairs) {
    if (!compress || !options.fast_forward) break;
    r.built = schedule::build_program(sc_, plan, topo_, workload_, pairs);
    r.exec = sim::execute(r.built.machine, r.built.program, options);
    done = r.exec.complete;
    if (done || !r.built.compressed) break;
  }
  if (!done) {
    r.built = schedule::build_program(sc_, plan, topo_, workload_);
    r.exec = sim::execute(r.built.machine, r.built.program, options);
  }
  ++exact_executions_;  // one exact run, however many compressed attempts it took
  progress.finish();
  r.seconds = seconds_since(start);
  r.makespan_ps = r.exec.makespan_ps;
  r.fingerprint = r.exec.fingerprint;
  for (TimePs t : r.exec.first_oom_ps) r.oom = r.oom || t >= 0;
  runs_.push_back(std::move(r));
  return runs_.size() - 1;
}

EngineRun EngineRuns::take(std::size_t i) { return std::move(runs_[i]); }

void EngineRuns::discard(std::size_t i) {
  runs_[i].built = {};
  runs_[i].exec = {};
}

}  // namespace lynx::runner
