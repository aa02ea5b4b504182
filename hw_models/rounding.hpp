#pragma once
/// Rounding of model quantities computed in double to whole integers (ps, bytes), shared by
/// the compute and collective models.
#include "common/error.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace lynx::hw_models {

/// ceil(x) for x >= 0, except that a value within 4 ulp above a whole number (floating-point
/// noise of the division that produced it, e.g. 1000 / 0.8) rounds down to that number, so an
/// exact quotient is not pushed up by one. Throws lynx::Error for NaN, negative or > INT64_MAX.
inline std::int64_t ceil_to_int64(double x, const char* what) {
  if (!(x >= 0.0)) fail(ErrorCode::kInternal, "{} is negative or not a number ({})", what, x);
  if (x >= 9.2e18) fail(ErrorCode::kValueOverflow, "{} overflows 64 bits ({})", what, x);
  const double nearest = std::nearbyint(x);
  if (std::fabs(x - nearest) <= 4.0 * DBL_EPSILON * x) return static_cast<std::int64_t>(nearest);
  return static_cast<std::int64_t>(std::ceil(x));
}

}  // namespace lynx::hw_models
