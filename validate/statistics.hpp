#pragma once
/// Error and rank statistics for predicted-vs-measured comparisons.
#include "common/statistics.hpp"

#include <cstddef>
#include <vector>

namespace lynx::validate {

/// 100 · |predicted − measured| / measured. Throws lynx::Error for measured <= 0.
double absolute_percentage_error(double predicted, double measured);

/// Mean of absolute_percentage_error over paired values (MAPE, percent).
/// Throws lynx::Error for empty or unequal-length inputs.
double mean_absolute_percentage_error(const std::vector<double>& predicted,
                                      const std::vector<double>& measured);

/// Median of absolute_percentage_error (the mean of the two middle values for an even count).
double median_absolute_percentage_error(const std::vector<double>& predicted,
                                        const std::vector<double>& measured);

/// Mean of |ln(predicted / measured)|: the fitting objective (symmetric in over- and
/// under-prediction, unlike MAPE). Throws for non-positive values.
double mean_absolute_log_error(const std::vector<double>& predicted,
                               const std::vector<double>& measured);

using lynx::median;  ///< common/statistics.hpp

/// Kendall's tau-b rank correlation (Kendall 1945), exact O(n²) pair count:
///   tau_b = (C − D) / sqrt((N0 − Tx) · (N0 − Ty)),  N0 = n(n−1)/2,
/// C / D = concordant / discordant pairs, Tx / Ty = pairs tied in x / in y (a pair tied in
/// both counts in both). Throws lynx::Error for unequal lengths, n < 2, or a constant input
/// (zero denominator).
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace lynx::validate
