#pragma once
/// Small weighted least-squares solvers used by the fitter.
#include <vector>

namespace lynx::calibrate {

/// y ≈ intercept + slope·x.
struct LineFit {
  double intercept = 0.0;
  double slope = 0.0;
};

/// Minimises Σ wᵢ·(yᵢ − intercept − slope·xᵢ)² (closed form about the weighted means, which
/// keeps it well conditioned when x is far from 0). Needs >= 2 points with distinct x and
/// positive weights; throws lynx::Error otherwise.
LineFit fit_line_weighted(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& weight);

/// y ≈ a·x1 + b·x2 (no intercept).
struct TwoTermFit {
  double a = 0.0;
  double b = 0.0;
};

/// Minimises Σ wᵢ·(yᵢ − a·x1ᵢ − b·x2ᵢ)² via the 2×2 normal equations. Throws lynx::Error when
/// they are singular (x1 and x2 proportional, or fewer than two points).
TwoTermFit fit_two_terms_weighted(const std::vector<double>& x1, const std::vector<double>& x2,
                                  const std::vector<double>& y, const std::vector<double>& weight);

/// Minimises Σ wᵢ·(yᵢ − a·xᵢ)²: a = Σwxy / Σwx². Throws lynx::Error when Σwx² = 0.
double fit_proportional_weighted(const std::vector<double>& x, const std::vector<double>& y,
                                 const std::vector<double>& weight);

/// Minimises Σ wᵢ·(yᵢ − Σⱼ cⱼ·columns[j]ᵢ)² over the coefficients c (returned in column
/// order): normal equations on RMS-scaled columns, Gaussian elimination with partial pivoting.
/// Throws lynx::Error for mismatched sizes, non-positive weights or a singular system
/// (columns linearly dependent over the points, or fewer points than columns).
std::vector<double> fit_columns_weighted(const std::vector<std::vector<double>>& columns,
                                         const std::vector<double>& y,
                                         const std::vector<double>& weight);

}  // namespace lynx::calibrate
