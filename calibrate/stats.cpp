#include "calibrate/stats.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace lynx::calibrate {

TimingSummary summarize(const std::vector<double>& values) {
  if (values.empty()) fail(ErrorCode::kInternal, "no timed repetitions to summarize");
  TimingSummary summary;
  summary.median = percentile(values, 50.0);
  summary.p10 = percentile(values, 10.0);
  summary.p90 = percentile(values, 90.0);
  summary.reps = static_cast<int>(values.size());
  return summary;
}

}  // namespace lynx::calibrate
