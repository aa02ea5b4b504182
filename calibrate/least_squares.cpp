#include "calibrate/least_squares.hpp"

#include "common/error.hpp"

#include <cmath>
#include <cstddef>
#include <utility>

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

std::vector<double> fit_columns_weighted(const std::vector<std::vector<double>>& columns,
                                         const std::vector<double>& y,
                                         const std::vector<double>& weight) {
  const std::size_t n = columns.size();
  for (const auto& c : columns) check_sizes(c.size(), y.size(), weight.size(), "least-squares fit");
  check_sizes(y.size(), y.size(), weight.size(), "least-squares fit");
  check_weights(weight, "least-squares fit");
  if (n == 0 || y.size() < n) fail(ErrorCode::kInsufficientData, "least-squares fit of {} terms needs at least {} points, got {}", n, n, y.size());
  // Scale every column to unit weighted RMS so that bytes and step counts condition alike.
  std::vector<double> scale(n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    double sum = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += weight[i] * columns[j][i] * columns[j][i];
    if (!(sum > 0.0)) fail(ErrorCode::kInsufficientData, "least-squares fit: term {} is zero at every point", j + 1);
    scale[j] = std::sqrt(sum);
  }
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (std::size_t i = 0; i < y.size(); ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const double xj = columns[j][i] / scale[j];
      for (std::size_t k = 0; k < n; ++k) a[j][k] += weight[i] * xj * columns[k][i] / scale[k];
      a[j][n] += weight[i] * xj * y[i];
    }
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    if (!(std::fabs(a[pivot][col]) > 1e-10)) fail(ErrorCode::kInsufficientData, "least-squares fit: the terms are linearly dependent over the points");
    std::swap(a[col], a[pivot]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (std::size_t k = col; k <= n; ++k) a[r][k] -= f * a[col][k];
    }
  }
  std::vector<double> out(n);
  for (std::size_t j = 0; j < n; ++j) out[j] = a[j][n] / a[j][j] / scale[j];
  return out;
}

}  // namespace lynx::calibrate
