#include "live/cpu_reference.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::live {

namespace {
std::size_t at(std::int64_t r, std::int64_t c, std::int64_t cols) { return static_cast<std::size_t>(r * cols + c); }
}  // namespace

std::vector<float> layernorm_reference(const std::vector<float>& x, const std::vector<float>& gamma,
                                       const std::vector<float>& beta, std::int64_t rows, std::int64_t cols) {
  std::vector<float> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += x[at(r, c, cols)];
    const double mean = sum / static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) sq += (x[at(r, c, cols)] - mean) * (x[at(r, c, cols)] - mean);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(cols) + 1e-5);
    for (std::int64_t c = 0; c < cols; ++c)
      y[at(r, c, cols)] = static_cast<float>((x[at(r, c, cols)] - mean) * rstd * gamma[static_cast<std::size_t>(c)] +
                                             beta[static_cast<std::size_t>(c)]);
  }
  return y;
}

std::vector<float> bias_gelu_reference(const std::vector<float>& x, const std::vector<float>& bias,
                                       std::int64_t rows, std::int64_t cols) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  std::vector<float> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double v = x[at(r, c, cols)] + bias[static_cast<std::size_t>(c)];
      y[at(r, c, cols)] = static_cast<float>(0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
    }
  return y;
}

std::vector<float> causal_softmax_reference(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                            std::int64_t seq_len, float scale) {
  std::vector<float> y(x.size(), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t query = r % seq_len;
    double top = -INFINITY;
    for (std::int64_t c = 0; c <= query && c < cols; ++c) top = std::max(top, static_cast<double>(x[at(r, c, cols)]) * scale);
    double sum = 0;
    for (std::int64_t c = 0; c <= query && c < cols; ++c) sum += std::exp(x[at(r, c, cols)] * scale - top);
    for (std::int64_t c = 0; c <= query && c < cols; ++c)
      y[at(r, c, cols)] = static_cast<float>(std::exp(x[at(r, c, cols)] * scale - top) / sum);
  }
  return y;
}

std::vector<float> dropout_reference(const std::vector<float>& x, const std::vector<std::uint8_t>& mask,
                                     float keep_prob) {
  LYNX_CHECK(x.size() == mask.size(), "dropout reference: {} values, {} mask bytes", x.size(), mask.size());
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = mask[i] != 0 ? x[i] / keep_prob : 0.0f;
  return y;
}

std::vector<float> dropout_residual_reference(const std::vector<float>& x, const std::vector<float>& bias,
                                              const std::vector<float>& residual,
                                              const std::vector<std::uint8_t>& mask, std::int64_t rows,
                                              std::int64_t cols, float keep_prob) {
  std::vector<float> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = at(r, c, cols);
      const float dropped = mask[i] != 0 ? (x[i] + bias[static_cast<std::size_t>(c)]) / keep_prob : 0.0f;
      y[i] = residual[i] + dropped;
    }
  return y;
}

void check_close(const std::string& what, const std::vector<float>& actual, const std::vector<float>& expected,
                 float rel_tol, float abs_tol) {
  if (actual.size() != expected.size())
    fail(ErrorCode::kInternal, "kernel check {}: {} values, the reference has {}", what, actual.size(), expected.size());
  if (std::all_of(expected.begin(), expected.end(), [](float v) { return v == 0.0f; }))
    fail(ErrorCode::kInternal, "kernel check {}: the reference is all zeros (the check needs random data)", what);
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const float tol = abs_tol + rel_tol * std::fabs(expected[i]);
    if (!(std::fabs(actual[i] - expected[i]) <= tol))
      fail(ErrorCode::kSystemFailure, "kernel check {}: element {} is {}, the CPU reference gives {} (tolerance {})", what, i, actual[i],
           expected[i], tol);
  }
}

void check_keep_fraction(const std::string& what, const std::vector<std::uint8_t>& mask, float keep_prob,
                         float tolerance) {
  LYNX_CHECK(!mask.empty(), "empty mask");
  const auto kept = static_cast<double>(std::count_if(mask.begin(), mask.end(), [](std::uint8_t m) { return m != 0; }));
  const double fraction = kept / static_cast<double>(mask.size());
  if (std::fabs(fraction - keep_prob) > tolerance)
    fail(ErrorCode::kSystemFailure, "kernel check {}: kept {:.4f} of the elements, expected {} +- {}", what, fraction, keep_prob, tolerance);
}

}  // namespace lynx::live
