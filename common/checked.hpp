#pragma once
/// Overflow-checked 64-bit products and sums of user values (model sizes, GPU counts, task
/// counts). Every product of scenario integers goes through these, so a value that would wrap
/// is an error that names the quantity instead of a wrong number.
#include "common/error.hpp"

#include <fmt/ranges.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace lynx {

/// The product of `factors` in 64 bits, or nothing when it overflows.
inline std::optional<std::int64_t> try_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t product = 1;
  for (const std::int64_t factor : factors)
    if (__builtin_mul_overflow(product, factor, &product)) return std::nullopt;
  return product;
}

/// The sum of `terms` in 64 bits, or nothing when it overflows.
inline std::optional<std::int64_t> try_sum(std::initializer_list<std::int64_t> terms) {
  std::int64_t sum = 0;
  for (const std::int64_t term : terms)
    if (__builtin_add_overflow(sum, term, &sum)) return std::nullopt;
  return sum;
}

/// The product of `factors`; lynx::Error "WHAT: A * B * ... overflows 64 bits" otherwise.
inline std::int64_t checked_product(std::string_view what,
                                    std::initializer_list<std::int64_t> factors) {
  if (const std::optional<std::int64_t> product = try_product(factors)) return *product;
  fail(ErrorCode::kValueOverflow, "{}: {} overflows 64 bits", what, fmt::join(factors, " * "));
}

/// The sum of `terms`; lynx::Error "WHAT: A + B + ... overflows 64 bits" otherwise.
inline std::int64_t checked_sum(std::string_view what, std::initializer_list<std::int64_t> terms) {
  if (const std::optional<std::int64_t> sum = try_sum(terms)) return *sum;
  fail(ErrorCode::kValueOverflow, "{}: {} overflows 64 bits", what, fmt::join(terms, " + "));
}

}  // namespace lynx
