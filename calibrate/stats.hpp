#pragma once
/// Order statistics of repeated timings (median, p10, p90), shared by the GPU benchmark
/// program and the fitter.
#include <vector>

namespace lynx::calibrate {

/// Percentile `q` in [0, 100] of `values` with linear interpolation between closest ranks
/// (the "R-7" / NumPy default definition): rank = q/100·(n−1). Throws lynx::Error on an
/// empty input or q outside [0, 100].
double percentile(std::vector<double> values, double q);
/// percentile(values, 50).
double median(std::vector<double> values);

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
