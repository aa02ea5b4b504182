#pragma once
/// Exact against fast mode on one configuration (tests/fast and bench/fast_bench): both modes
/// run the same plan (a planner's plan is made once, in exact mode) and their results compared.
#include "runner/simulate.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::runner {

/// One configuration run in both modes.
struct ModeComparison {
  std::string config;  ///< its --set overrides, space-separated
  bool overlapped = false;  ///< the plan overlaps recomputation (lynx): memory within a bound
  SimResult exact, fast;
  double exact_seconds = 0, fast_seconds = 0;  ///< wall time of each mode's run

  double time_error() const { return fast.iteration_time_s / exact.iteration_time_s - 1; }
  /// Largest |fast − exact| peak memory over stages, relative to exact's.
  double memory_error() const;
  bool memory_equal() const;
};

/// The configurations of an agreement set file: one line of --set overrides each ('#' lines
/// are comments).
std::vector<std::string> read_agreement_set(const std::string& path);

/// Runs `config` (overrides of the default scenario) in exact mode, then its plan in fast mode.
ModeComparison compare_modes(const std::string& config);

/// Kendall's tau-b between two rankings of the same items.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lynx::runner
