#include "calibrate/least_squares.hpp"

#include "common/error.hpp"

#include <cmath>
#include <cstddef>

namespace lynx::calibrate {

namespace {
void check_sizes(std::size_t x, std::size_t y, std::size_t w, const char* what) {
  if (x != y || x != w) fail(ErrorCode::kInternal, "{}: {} x values, {} y values, {} weights", what, x, y, w);
}
void check_weights(const std::vector<double>& weight, const char* what) {
  for (double w : weight)
    if (!(w > 0.0) || !std::isfinite(w)) fail(ErrorCode::kInternal, "{}: weights must be positive and finite", what);
}
}  // namespace

LineFit fit_line_weighted(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& weight) {
  check_sizes(x.size(), y.size(), weight.size(), "line fit");
  check_weights(weight, "line fit");
  if (x.size() < 2) fail(ErrorCode::kInsufficientData, "line fit needs at least 2 points, got {}", x.size());
  double sum_w = 0, mean_x = 0, mean_y = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum_w += weight[i];
    mean_x += weight[i] * x[i];
    mean_y += weight[i] * y[i];
  }
  mean_x /= sum_w;
  mean_y /= sum_w;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mean_x;
    sxx += weight[i] * dx * dx;
    sxy += weight[i] * dx * (y[i] - mean_y);
  }
  if (!(sxx > 0.0)) fail(ErrorCode::kInsufficientData, "line fit needs at least 2 distinct x values");
  LineFit fit;
  fit.slope = sxy / sxx;
  fit.intercept = mean_y - fit.slope * mean_x;
  return fit;
}

TwoTermFit fit_two_terms_weighted(const std::vector<double>& x1, const std::vector<double>& x2,
                                  const std::vector<double>& y,
                                  const std::vector<double>& weight) {
  check_sizes(x1.size(), y.size(), weight.size(), "two-term fit");
  check_sizes(x2.size(), y.size(), weight.size(), "two-term fit");
  check_weights(weight, "two-term fit");
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    s11 += weight[i] * x1[i] * x1[i];
    s12 += weight[i] * x1[i] * x2[i];
    s22 += weight[i] * x2[i] * x2[i];
    s1y += weight[i] * x1[i] * y[i];
    s2y += weight[i] * x2[i] * y[i];
  }
  const double det = s11 * s22 - s12 * s12;
  // Singular (or nearly: Cauchy-Schwarz makes det >= 0, equality iff x1 ∝ x2).
  if (!(det > 1e-12 * s11 * s22))
    fail(ErrorCode::kInsufficientData, "two-term fit is singular: the two regressors are proportional over {} points",
         y.size());
  TwoTermFit fit;
  fit.a = (s1y * s22 - s2y * s12) / det;
  fit.b = (s2y * s11 - s1y * s12) / det;
  return fit;
}

double fit_proportional_weighted(const std::vector<double>& x, const std::vector<double>& y,
                                 const std::vector<double>& weight) {
  check_sizes(x.size(), y.size(), weight.size(), "proportional fit");
  check_weights(weight, "proportional fit");
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += weight[i] * x[i] * x[i];
    sxy += weight[i] * x[i] * y[i];
  }
  if (!(sxx > 0.0)) fail(ErrorCode::kInsufficientData, "proportional fit needs a non-zero regressor");
  return sxy / sxx;
}

}  // namespace lynx::calibrate
