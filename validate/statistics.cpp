#include "validate/statistics.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lynx::validate {

namespace {

void check_pairs(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  if (a.size() != b.size())
    fail(ErrorCode::kInternal, "{}: {} predicted values but {} measured values", what, a.size(), b.size());
  if (a.empty()) fail(ErrorCode::kInternal, "{}: no values", what);
}

std::vector<double> percentage_errors(const std::vector<double>& predicted,
                                      const std::vector<double>& measured, const char* what) {
  check_pairs(predicted, measured, what);
  std::vector<double> errors(predicted.size());
  for (std::size_t i = 0; i < predicted.size(); ++i)
    errors[i] = absolute_percentage_error(predicted[i], measured[i]);
  return errors;
}

}  // namespace

double absolute_percentage_error(double predicted, double measured) {
  if (!(measured > 0.0)) fail(ErrorCode::kInternal, "percentage error against a non-positive measurement {}", measured);
  return 100.0 * std::abs(predicted - measured) / measured;
}

double mean_absolute_percentage_error(const std::vector<double>& predicted,
                                      const std::vector<double>& measured) {
  const std::vector<double> errors = percentage_errors(predicted, measured, "MAPE");
  double sum = 0;
  for (double e : errors) sum += e;
  return sum / static_cast<double>(errors.size());
}

double median_absolute_percentage_error(const std::vector<double>& predicted,
                                        const std::vector<double>& measured) {
  return median(percentage_errors(predicted, measured, "median APE"));
}

double mean_absolute_log_error(const std::vector<double>& predicted,
                               const std::vector<double>& measured) {
  check_pairs(predicted, measured, "mean absolute log error");
  double sum = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    if (!(predicted[i] > 0.0) || !(measured[i] > 0.0))
      fail(ErrorCode::kInternal, "mean absolute log error: non-positive value (predicted {}, measured {})", predicted[i],
           measured[i]);
    sum += std::abs(std::log(predicted[i] / measured[i]));
  }
  return sum / static_cast<double>(predicted.size());
}

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) fail(ErrorCode::kInternal, "Kendall tau: {} x values but {} y values", x.size(), y.size());
  const std::size_t n = x.size();
  if (n < 2) fail(ErrorCode::kInsufficientData, "Kendall tau needs at least 2 pairs, got {}", n);
  std::int64_t concordant = 0, discordant = 0, tied_x = 0, tied_y = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j];
      const double dy = y[i] - y[j];
      if (dx == 0) ++tied_x;
      if (dy == 0) ++tied_y;
      if (dx == 0 || dy == 0) continue;
      if ((dx > 0) == (dy > 0))
        ++concordant;
      else
        ++discordant;
    }
  }
  const auto pairs = static_cast<std::int64_t>(n * (n - 1) / 2);
  const double denominator = std::sqrt(static_cast<double>(pairs - tied_x) *
                                       static_cast<double>(pairs - tied_y));
  if (denominator == 0.0) fail(ErrorCode::kInsufficientData, "Kendall tau is undefined: one of the inputs is constant");
  return static_cast<double>(concordant - discordant) / denominator;
}

}  // namespace lynx::validate
