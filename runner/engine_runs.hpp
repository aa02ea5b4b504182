#pragma once
/// Every engine run of one simulated iteration, kept: a plan whose decisions equal those of a
/// plan already run is not run again, and the run a caller picks is used as it is (the
/// winning plan is executed once).
#include "fast/compose.hpp"
#include "hw_models/topology.hpp"
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::runner {

/// One engine run: the plan executed, its programs and their simulated result.
struct EngineRun {
  strategies::RecomputePlan plan;  ///< as first run (a later identical plan may carry another name)
  schedule::BuiltProgram built;  ///< empty once discarded
  sim::ExecResult exec;          ///< empty once discarded
  // Kept after a discard: what comparing plans needs.
  TimePs makespan_ps = 0;
  bool oom = false;              ///< a simulated GPU exceeded its memory
  std::uint64_t fingerprint = 0;
  double seconds = 0;            ///< wall time of building + executing
  /// sim.mode fast: the composed result (built.program and exec stay empty, except
  /// built.gpu_stage and exec.peak_bytes: one entry per pipeline stage).
  fast::FastResult fast;
};

/// Builds and executes plans of one resolved scenario, keeping every run.
class EngineRuns {
 public:
  /// `sc` resolved and its layout checked; all referenced objects outlive this one.
  /// `show_progress`: a progress bar for engine runs longer than a second (runner decides).
  EngineRuns(const Scenario& sc, const hw_models::Topology& topo, const model::Workload& workload,
             sim::ExecOptions options, bool show_progress);

  /// Index of the run of `plan`'s decisions: an earlier one, else a new engine run (`what`
  /// names it on the progress bar). `compress`: the run's program may omit steady-state
  /// periods (schedule::build_program; read it through sim::FullProgram), for a caller that
  /// needs only the full program's results, not its task spans; when the executor cannot
  /// insert them, the full program is built and run instead.
  std::size_t run(const strategies::RecomputePlan& plan, const std::string& what, bool compress = false);
  /// Whether a run of `plan`'s decisions exists already (run() would reuse it).
  bool has_run(const strategies::RecomputePlan& plan) const;

  const EngineRun& operator[](std::size_t i) const { return runs_[i]; }
  /// Moves run `i` out (it stays listed, empty).
  EngineRun take(std::size_t i);
  /// Frees run `i`'s programs and result, keeping its plan and summary: for runs that will
  /// not be reported (a plan identical to it still reuses it, for comparison only).
  void discard(std::size_t i);
  /// Runs made so far (in sim.mode fast, fast-mode runs).
  int executions() const { return static_cast<int>(runs_.size()); }
  /// Exact engine runs (sim::execute of a whole program) made so far: 0 in sim.mode fast.
  int exact_executions() const { return exact_executions_; }

 private:
  const Scenario& sc_;
  const hw_models::Topology& topo_;
  const model::Workload& workload_;
  sim::ExecOptions options_;
  bool show_progress_;
  std::vector<EngineRun> runs_;
  int exact_executions_ = 0;
};

}  // namespace lynx::runner
