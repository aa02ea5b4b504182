#include "calibrate/stats.hpp"

#include "sim/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace lynx::calibrate {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) fail("percentile of an empty set of values");
  if (!(q >= 0.0 && q <= 100.0)) fail("percentile {} is outside [0, 100]", q);
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  const std::size_t upper = std::min(lower + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(lower);
  return values[lower] + fraction * (values[upper] - values[lower]);
}

double median(std::vector<double> values) { return percentile(std::move(values), 50.0); }

TimingSummary summarize(const std::vector<double>& values) {
  if (values.empty()) fail("no timed repetitions to summarize");
  TimingSummary summary;
  summary.median = percentile(values, 50.0);
  summary.p10 = percentile(values, 10.0);
  summary.p90 = percentile(values, 90.0);
  summary.reps = static_cast<int>(values.size());
  return summary;
}

}  // namespace lynx::calibrate
