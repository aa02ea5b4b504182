#pragma once
/// lynx-opt and checkmate: the per-stage recomputation plan as a mixed-integer linear program
/// (one binary per layer and option, one continuous variable for the largest transient), solved
/// with COIN-OR CBC.
#include "scenarios/scenario.hpp"
#include "strategies/planning_problem.hpp"

#include <memory>

namespace lynx {
class WorkerProcesses;
}

namespace lynx::strategies {

/// Settings of the MILP planner.
struct MilpOptions {
  /// true: lynx-opt (on-demand and overlapped options). false: the checkmate baseline, the
  /// optimal recompute set without overlap (Jain et al., "Checkmate: Breaking the Memory Wall
  /// with Optimal Tensor Rematerialization", MLSys 2020): overlapped options are excluded.
  bool allow_overlap = true;
  /// Branch-and-bound nodes each CBC pass may explore (CBC's maxNodes): a budget that does not
  /// depend on the machine's speed, so equal inputs give equal plans. When it stops a pass the
  /// best plan found so far is returned, `limit_bound` is set and `gap` says how far from
  /// proven optimal it may be.
  int node_limit = kDefaultNodeLimit;
  static constexpr int kDefaultNodeLimit = RecomputeSpec{}.solver_node_limit;
};

/// Chooses one option per layer minimising the exposed recompute time under the memory budget.
/// The returned exposed_ps / activation_bytes / feasible are recomputed exactly with evaluate()
/// on the chosen assignment. When even the least-memory assignment does not fit, returns that
/// assignment with feasible = false and status "infeasible". Throws lynx::Error on malformed
/// input (layers < 1, no options, window_ps.size() != layers, negative sizes or times).
/// Safe from several threads: CBC's solve driver is not reentrant, so in-process solves run one
/// at a time (a lock); while a ParallelMilpSolves is alive they run in its solver processes,
/// several at once (the same plans: a solve is deterministic wherever it runs).
StageSolution solve_stage_milp(const StageProblem& problem, const MilpOptions& options);

/// While alive, CBC solves run in `threads` forked solver processes (when threads > 1), so that
/// that many planning threads solve at once. Construct it before starting those threads (a
/// process forked from a multi-threaded one may inherit another thread's lock); `best` and
/// single-process sweeps do. A solver process that fails leaves its solves to this process.
class ParallelMilpSolves {
 public:
  explicit ParallelMilpSolves(int threads);
  ~ParallelMilpSolves();
  ParallelMilpSolves(const ParallelMilpSolves&) = delete;
  ParallelMilpSolves& operator=(const ParallelMilpSolves&) = delete;
  /// Solver processes started (0: solves stay in this process).
  int processes() const;

 private:
  std::unique_ptr<WorkerProcesses> workers_;
};

}  // namespace lynx::strategies
