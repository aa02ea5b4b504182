#pragma once
/// Order statistics of repeated timings (median, p10, p90), shared by the GPU benchmark
/// program and the fitter.
#include "common/statistics.hpp"

#include <vector>

namespace lynx::calibrate {

using lynx::median;
using lynx::percentile;

/// Median, p10 and p90 of one set of repetitions.
struct TimingSummary {
  double median = 0.0;
  double p10 = 0.0;
  double p90 = 0.0;
  int reps = 0;
};
/// Summary of `values` (all finite); throws lynx::Error when empty.
TimingSummary summarize(const std::vector<double>& values);

}  // namespace lynx::calibrate
