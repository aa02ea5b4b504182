#pragma once
/// `lynxsim best`: the fastest plan that fits for a scenario's model on N GPUs. Every candidate
/// of the search space (search_space.hpp) is the base scenario with `--set` overrides, read and
/// checked by the one loader (invalid ones counted by sweep::skip_reason); cheap bounds prune
/// (bounds.hpp); the rest are ranked in fast mode and the best confirmed in exact mode, on
/// sweep's ordered pool, so the outcome is the same for any thread count.
#include "runner/planning.hpp"
#include "runner/simulate.hpp"
#include "search/search_space.hpp"
#include "sweep/sweep.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lynx::search {

/// What `lynxsim best` was asked.
struct BestRequest {
  std::string scenario_path;           ///< the base scenario (model, hardware, global batch)
  std::string scenario_text;           ///< or its YAML text (when scenario_path is empty)
  std::vector<std::string> overrides;  ///< --set on the base
  SearchSpace space;                   ///< space.gpus = N
  int top = 5;                         ///< K plans confirmed in exact mode and reported
  int threads = 0;                     ///< 0: the machine's cores
  bool progress = false;               ///< progress bar on stderr (a terminal only)
  /// Also confirm candidates whose fast time is within this fraction of the K-th fastest
  /// (at most 3·K in all): fast mode's error must not reorder the top K. Twice the error
  /// bound, since both fast times compared can be off by it in opposite directions.
  double confirm_margin = 2 * runner::kFastModeErrorBound;
  /// No pruning by bounds (memory, compute, a configuration's time without recomputation):
  /// every valid candidate is simulated in fast mode (the reference the pruned search is tested
  /// against). A strategy on a configuration that fits without recomputation is still not run.
  bool exhaustive = false;
};

/// One plan of the top K.
struct RankedPlan {
  Candidate candidate;
  std::uint64_t index = 0;    ///< in enumerate_candidates order (the tie-break)
  double fast_time_s = 0;     ///< fast mode's iteration time
  runner::SimRun exact;       ///< the exact-mode run (what is reported)
  double headroom_gib = 0;    ///< GPU memory − the fullest GPU's peak
};

/// How the search went.
struct BestOutcome {
  std::string scenario;  ///< base scenario name
  int gpus = 0;
  std::string profile;
  std::vector<RankedPlan> top;  ///< fastest first (exact time, then index)
  std::uint64_t considered = 0;
  std::uint64_t invalid = 0;          ///< the loader refused the layout
  std::vector<sweep::SkipReason> invalid_reasons;
  std::uint64_t memory_pruned = 0;    ///< memory lower bound above the GPU's memory
  std::uint64_t compute_pruned = 0;   ///< compute lower bound no faster than the K-th best
  /// A recomputing strategy on a configuration that fits without recomputation (not run: it
  /// cannot be faster than keeping everything).
  std::uint64_t same_as_none = 0;
  std::uint64_t simulated = 0;        ///< fast-mode runs
  std::map<std::string, std::uint64_t> simulated_by_strategy;  ///< of `simulated`
  std::uint64_t oom = 0;              ///< simulated (fast or exact) and out of memory
  std::uint64_t confirmed = 0;        ///< exact-mode runs
  std::uint64_t slower = 0;           ///< fit, but not in the top K
  // Wall times (not part of the deterministic report).
  double prepare_seconds = 0, rank_seconds = 0, confirm_seconds = 0, seconds = 0;
  int threads = 1;
};

/// Runs the search. Errors: no candidate valid (names the first reason), none fits, K < 1.
BestOutcome run_best(const BestRequest& request);

/// The report (top K with throughput, MFU, headroom, plan; why the rest lost): the same bytes
/// for any thread count.
std::string best_text(const BestOutcome& outcome);
/// Counts per second and wall times per phase (for stderr).
std::string best_timing_text(const BestOutcome& outcome);

}  // namespace lynx::search
