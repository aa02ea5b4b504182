#pragma once
/// Where one transformer layer's time goes in a simulated iteration: the per-layer forward and
/// backward times that Korthikanti et al. 2022 Table 4 reports for real runs, read from an
/// engine run's timeline so that they can be set beside measured ones.
#include "runner/simulate.hpp"

namespace lynx::runner {

/// One layer of one micro-batch on one simulated GPU, in seconds. A layer's forward is the time
/// from the end of the layer below's last compute-stream kernel to the end of its own (its
/// kernels plus the TP collectives it waits for); its backward likewise from the end of the
/// layer above's backward, so it includes the layer's on-demand recompute. Summed over the
/// layers of a step they tile the step.
struct LayerTimes {
  int layer = 0;              ///< global layer index
  double forward_s = 0;
  double backward_s = 0;      ///< includes recompute_s
  double recompute_s = 0;     ///< on-demand recompute kernels of this layer (compute stream)
};

/// The times of `layer` (a global index with a layer below and above it in its pipeline
/// chunk) in micro-batch 0 on the first simulated GPU that runs it. `run` must come from
/// simulate() with SimOptions::keep_trace_data (the full timeline). Throws lynx::Error when the
/// layer is the first or last of its chunk or the run kept no timeline.
LayerTimes layer_times(const SimRun& run, int layer);

}  // namespace lynx::runner
