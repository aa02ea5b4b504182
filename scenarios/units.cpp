#include "scenarios/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace lynx::units {
namespace {

using U128 = UInt128;  // sim/time.hpp

/// How one unit spelling scales a number to the base unit: value * 2^pow2 * 10^pow10 / divisor.
struct UnitScale {
  int pow2 = 0;
  int pow10 = 0;
  unsigned divisor = 1;
};

/// Prefixes: SI decimal powers of 1000 and IEC 80000-13 binary powers of 1024.
struct Prefix {
  std::string_view spelling;
  int pow2 = 0;
  int pow10 = 0;
};
constexpr std::array<Prefix, 12> kPrefixes = {{{"", 0, 0},
                                               {"k", 0, 3},
                                               {"K", 0, 3},
                                               {"M", 0, 6},
                                               {"G", 0, 9},
                                               {"T", 0, 12},
                                               {"P", 0, 15},
                                               {"Ki", 10, 0},
                                               {"Mi", 20, 0},
                                               {"Gi", 30, 0},
                                               {"Ti", 40, 0},
                                               {"Pi", 50, 0}}};

/// What a quantity is called in messages and its largest representable value.
struct QuantityKind {
  std::string_view name;     ///< "size"
  std::string_view example;  ///< "80GiB"
  std::string_view help;     ///< accepted units, for the message
  U128 max_value;
};

constexpr U128 kMaxU64 = std::numeric_limits<std::uint64_t>::max();
constexpr U128 kMaxI64 = static_cast<U128>(std::numeric_limits<std::int64_t>::max());

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// A decimal number read exactly: mantissa * 10^exp10.
struct Decimal {
  U128 mantissa = 0;
  int exp10 = 0;
  std::size_t length = 0;  ///< characters consumed
};

/// Reads "[+]digits[.digits][(e|E)[+-]digits]" from the front of `text`.
std::optional<Decimal> read_decimal(std::string_view text) {
  constexpr int kMaxDigits = 36;  // 10^36 < 2^120, leaves room for scaling checks
  Decimal d;
  std::size_t i = 0;
  if (i < text.size() && text[i] == '+') ++i;
  int significant = 0;
  bool any_digit = false;
  auto take = [&](char c, bool fractional) {
    any_digit = true;
    if (d.mantissa == 0 && c == '0') {
      if (fractional) --d.exp10;
      return;
    }
    if (significant >= kMaxDigits) {  // beyond 36 significant digits: drop (truncate)
      if (!fractional) ++d.exp10;
      return;
    }
    d.mantissa = d.mantissa * 10 + static_cast<unsigned>(c - '0');
    ++significant;
    if (fractional) --d.exp10;
  };
  while (i < text.size() && is_digit(text[i])) take(text[i++], false);
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) take(text[i++], true);
  }
  if (!any_digit) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    bool negative = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) negative = text[j++] == '-';
    if (j < text.size() && is_digit(text[j])) {
      int exponent = 0;
      while (j < text.size() && is_digit(text[j])) {
        if (exponent < 10000) exponent = exponent * 10 + (text[j] - '0');
        ++j;
      }
      d.exp10 += negative ? -exponent : exponent;
      i = j;
    }
  }
  d.length = i;
  return d;
}

/// mantissa * 2^pow2 * 10^exp10 / divisor rounded to nearest (half up); nullopt on overflow.
std::optional<U128> scale(U128 mantissa, int exp10, int pow2, unsigned divisor) {
  if (mantissa == 0) return U128{0};
  U128 numerator = mantissa;
  for (int k = 0; k < pow2; ++k) {
    if (__builtin_mul_overflow(numerator, U128{2}, &numerator)) return std::nullopt;
  }
  U128 denominator = divisor;
  if (exp10 >= 0) {
    for (int k = 0; k < exp10; ++k) {
      if (__builtin_mul_overflow(numerator, U128{10}, &numerator)) return std::nullopt;
    }
  } else {
    for (int k = 0; k < -exp10; ++k) {
      // The denominator outgrew every possible numerator: the value rounds to 0.
      if (__builtin_mul_overflow(denominator, U128{10}, &denominator)) return U128{0};
    }
  }
  U128 quotient = numerator / denominator;
  const U128 remainder = numerator % denominator;
  if (remainder >= denominator - remainder) ++quotient;
  return quotient;
}

[[noreturn]] void fail_expected(const QuantityKind& kind, std::string_view text,
                                std::string_view why) {
  fail(ErrorCode::kWrongUnit, "expected a {} like '{}'{}, got '{}' (units: {})", kind.name, kind.example, why, text,
       kind.help);
}

/// Parses `text` as a quantity whose unit is one of prefix + suffix combinations.
U128 parse_quantity(std::string_view original, const QuantityKind& kind,
                    const std::vector<std::pair<std::string_view, unsigned>>& suffixes,
                    bool binary_prefixes, Bound bound,
                    const std::vector<std::pair<std::string_view, int>>& extra_units = {}) {
  const std::string_view text = trim(original);
  if (!text.empty() && text.front() == '-') {
    fail(ErrorCode::kOutOfRange, "expected a non-negative {}, got '{}'", kind.name, original);
  }
  const std::optional<Decimal> number = read_decimal(text);
  if (!number) fail_expected(kind, original, "");
  const std::string_view unit = trim(text.substr(number->length));
  if (unit.empty()) fail_expected(kind, original, " (a unit is required)");

  std::optional<UnitScale> matched;
  for (const auto& [suffix, divisor] : suffixes) {
    if (unit.size() < suffix.size() || unit.substr(unit.size() - suffix.size()) != suffix) continue;
    const std::string_view prefix = unit.substr(0, unit.size() - suffix.size());
    for (const Prefix& p : kPrefixes) {
      if (!binary_prefixes && p.pow2 != 0) continue;
      if (p.spelling == prefix) matched = UnitScale{p.pow2, p.pow10, divisor};
    }
  }
  for (const auto& [spelling, pow10] : extra_units) {
    if (unit == spelling) matched = UnitScale{0, pow10, 1};
  }
  if (!matched) fail_expected(kind, original, "");

  const std::optional<U128> value =
      scale(number->mantissa, number->exp10 + matched->pow10, matched->pow2, matched->divisor);
  if (!value || *value > kind.max_value) fail(ErrorCode::kOutOfRange, "{} '{}' is too large", kind.name, original);
  if (bound == Bound::kPositive && *value == 0) {
    fail(ErrorCode::kOutOfRange, "expected a positive {}, got '{}'", kind.name, original);
  }
  return *value;
}

/// value / (2^pow2 * 10^pow10) as an exact decimal string, or nullopt if it does not fit.
std::optional<std::string> exact_decimal(std::uint64_t value, int pow2, int pow10) {
  // value / 2^b = value * 5^b / 10^b, so the quotient is always a finite decimal.
  U128 numerator = value;
  for (int k = 0; k < pow2; ++k) {
    if (__builtin_mul_overflow(numerator, U128{5}, &numerator)) return std::nullopt;
  }
  const int fraction_digits = pow2 + pow10;
  std::string digits;
  if (numerator == 0) digits = "0";
  while (numerator != 0) {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(numerator % 10)));
    numerator /= 10;
  }
  if (static_cast<int>(digits.size()) <= fraction_digits) {
    digits.insert(0, static_cast<std::size_t>(fraction_digits) - digits.size() + 1, '0');
  }
  std::string integer_part =
      digits.substr(0, digits.size() - static_cast<std::size_t>(fraction_digits));
  std::string fraction = digits.substr(integer_part.size());
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return fraction.empty() ? integer_part : integer_part + "." + fraction;
}

/// Among candidate spellings, the shortest; ties go to one without a decimal point, then to the
/// earlier candidate.
std::string shortest(const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  auto score = [](const std::string& s) {
    return s.size() * 2 + (s.find('.') == std::string::npos ? 0 : 1);
  };
  for (const std::string& c : candidates) {
    if (best == nullptr || score(c) < score(*best)) best = &c;
  }
  return best == nullptr ? std::string() : *best;
}

std::string format_with_prefixes(std::uint64_t value, std::string_view suffix, bool binary_too) {
  std::vector<std::string> candidates;
  for (const Prefix& p : kPrefixes) {
    if (p.spelling == "k") continue;  // write "K" for kilo, never both
    if (!binary_too && p.pow2 != 0) continue;
    if (const auto text = exact_decimal(value, p.pow2, p.pow10)) {
      candidates.push_back(*text + std::string(p.spelling) + std::string(suffix));
    }
  }
  return shortest(candidates);
}

}  // namespace

std::uint64_t parse_size_bytes(std::string_view text, Bound bound) {
  constexpr QuantityKind kind{"size", "80GiB", "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB",
                              kMaxU64};
  return static_cast<std::uint64_t>(parse_quantity(text, kind, {{"B", 1}}, true, bound));
}

std::uint64_t parse_bandwidth_bytes_per_s(std::string_view text, Bound bound) {
  constexpr QuantityKind kind{"bandwidth", "600GB/s",
                              "B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s; bits: Mb/s, Gb/s, "
                              "Tb/s",
                              kMaxU64};
  return static_cast<std::uint64_t>(
      parse_quantity(text, kind, {{"B/s", 1}, {"b/s", 8}}, true, bound));
}

TimePs parse_time_ps(std::string_view text, Bound bound) {
  constexpr QuantityKind kind{"time", "1.5us", "ps, ns, us, ms, s", kMaxI64};
  return static_cast<TimePs>(
      parse_quantity(text, kind, {}, false, bound,
                     {{"ps", 0}, {"ns", 3}, {"us", 6}, {"\u00b5s", 6}, {"ms", 9}, {"s", 12}}));
}

std::uint64_t parse_flop_rate_per_s(std::string_view text, Bound bound) {
  constexpr QuantityKind kind{"FLOP rate", "312TFLOPS", "FLOPS, GFLOPS, TFLOPS, PFLOPS", kMaxU64};
  return static_cast<std::uint64_t>(
      parse_quantity(text, kind, {{"FLOPS", 1}, {"FLOP/s", 1}}, false, bound));
}

std::int64_t parse_integer(std::string_view original) {
  const std::string_view text = trim(original);
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) fail(ErrorCode::kOutOfRange, "integer '{}' is out of range", original);
  if (text.empty() || ec != std::errc() || ptr != end) {
    fail(ErrorCode::kWrongType, "expected an integer, got '{}'", original);
  }
  return value;
}

double parse_number(std::string_view original) {
  const std::string_view text = trim(original);
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    fail(ErrorCode::kWrongType, "expected a number, got '{}'", original);
  }
  return value;
}

double parse_ratio(std::string_view original) {
  std::string_view text = trim(original);
  double divide_by = 1.0;
  if (!text.empty() && text.back() == '%') {
    text.remove_suffix(1);
    divide_by = 100.0;  // dividing (not multiplying by 0.01) gives 80% == 0.8 exactly
  }
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    fail(ErrorCode::kWrongType, "expected a ratio like '0.8' or '80%', got '{}'", original);
  }
  value /= divide_by;
  if (value < 0.0 || value > 1.0) {
    fail(ErrorCode::kOutOfRange, "expected a ratio between 0 and 1 (or 0% to 100%), got '{}'", original);
  }
  return value;
}

bool parse_bool(std::string_view original) {
  const std::string_view text = trim(original);
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  fail(ErrorCode::kWrongType, "expected true or false, got '{}'", original);
}

std::string format_size(std::uint64_t bytes) {
  return format_with_prefixes(bytes, "B", true);
}

std::string format_bandwidth(std::uint64_t bytes_per_s) {
  return format_with_prefixes(bytes_per_s, "B/s", true);
}

std::string format_time(TimePs time_ps) {
  if (time_ps < 0) fail(ErrorCode::kInternal, "cannot write a negative time ({} ps)", time_ps);
  const auto value = static_cast<std::uint64_t>(time_ps);
  std::vector<std::string> candidates;
  for (const auto& [spelling, pow10] : std::array<std::pair<std::string_view, int>, 5>{
           {{"s", 12}, {"ms", 9}, {"us", 6}, {"ns", 3}, {"ps", 0}}}) {
    if (const auto text = exact_decimal(value, 0, pow10)) {
      candidates.push_back(*text + std::string(spelling));
    }
  }
  return shortest(candidates);
}

std::string format_flop_rate(std::uint64_t flops_per_s) {
  return format_with_prefixes(flops_per_s, "FLOPS", false);
}

std::string format_number(double value) {
  return fmt::format("{}", value);
}

}  // namespace lynx::units
