#pragma once
/// lynx-opt and checkmate: the per-stage recomputation plan as a mixed-integer linear program
/// (one binary per layer and option, one continuous variable for the largest transient), solved
/// with COIN-OR CBC.
#include "scenarios/scenario.hpp"
#include "strategies/planning_problem.hpp"

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
/// Safe from several threads: the CBC solves themselves run one at a time (a lock), because
/// CBC's solve driver is not known to be reentrant.
StageSolution solve_stage_milp(const StageProblem& problem, const MilpOptions& options);

}  // namespace lynx::strategies
