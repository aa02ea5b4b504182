#pragma once
/// The one median and percentile of the project (calibration timings, validation errors,
/// overlap-window capacities).
#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace lynx {

/// Percentile q in [0, 100] with linear interpolation between closest ranks (q = 50 is the
/// median: the middle value, or the mean of the two middle values).
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) fail(ErrorCode::kInternal, "percentile of an empty set of values");
  if (!(q >= 0.0 && q <= 100.0)) fail(ErrorCode::kInternal, "percentile {} is outside [0, 100]", q);
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  const std::size_t upper = std::min(lower + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(lower);
  return values[lower] + fraction * (values[upper] - values[lower]);
}

/// Median of doubles: the middle value, or the mean of the two middle values.
inline double median(std::vector<double> values) {
  if (values.empty()) fail(ErrorCode::kInternal, "median of no values");
  return percentile(std::move(values), 50.0);
}

/// Median of integers (e.g. picoseconds) by the same definition, the mean of the two middle
/// values rounded down, in exact integer arithmetic.
template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
Int median(std::vector<Int> values) {
  if (values.empty()) fail(ErrorCode::kInternal, "median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  const Int a = values[mid - 1], b = values[mid];
  return a + (b - a) / 2;
}

}  // namespace lynx
