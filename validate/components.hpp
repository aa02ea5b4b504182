#pragma once
/// Per-layer validation: a measured layer's forward and backward time (Korthikanti et al. 2022
/// Table 4 style rows) beside the simulated ones, read from the engine's timeline
/// (runner::layer_times) of the row's scenario.
#include "runner/layer_times.hpp"
#include "scenarios/scenario.hpp"
#include "validate/measured_runs.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace lynx::validate {

/// One row scored per layer.
struct ComponentRow {
  MeasuredRun run;
  runner::LayerTimes predicted;     ///< of the middle layer of the first pipeline chunk
  double predicted_iteration_ms = 0;
  double forward_error_percent = 0;   ///< 100 · (predicted − measured) / measured
  double backward_error_percent = 0;
  double combined_error_percent = 0;  ///< forward + backward
};

/// Simulates each row (validate::scenario_for_run on `base`, exact mode with the full
/// timeline) and scores the middle layer of its first pipeline chunk, which needs at least
/// three layers. Every row must have per-layer times (require_layer_times).
std::vector<ComponentRow> simulate_components(const Scenario& base, const std::vector<MeasuredRun>& runs,
                                              const std::string& file_label);

/// A fixed-width table: per row its settings, measured and predicted forward, backward and
/// combined times (ms) with signed errors, the predicted on-demand recompute, then the mean
/// absolute error of each column.
void write_components_report(std::ostream& out, const std::vector<ComponentRow>& rows, const std::string& title);

}  // namespace lynx::validate
