#pragma once
/// Quantities with units, parsed and written in one place: sizes ("80GiB"), bandwidths
/// ("600GB/s", "200Gb/s"), times ("1.5us"), FLOP rates ("312TFLOPS"), plain numbers and ratios.
/// Decimal prefixes k/K, M, G, T, P are powers of 1000; binary prefixes Ki, Mi, Gi, Ti, Pi are
/// powers of 1024. Parsing is exact decimal arithmetic in 128-bit integers, rounded to the
/// nearest integer of the base unit (bytes, bytes/s, picoseconds, FLOP/s). Errors are
/// lynx::Error with a one-line message that says what was expected and what was given; the
/// loader prefixes it with the file position and key.
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/time.hpp"

namespace lynx::units {

/// Whether zero is an acceptable value (negative values are always rejected).
enum class Bound : std::uint8_t { kNonNegative, kPositive };

/// "80GiB", "40GB", "512MiB", "1.5KB", "4096B" -> bytes. A unit is required.
std::uint64_t parse_size_bytes(std::string_view text, Bound bound = Bound::kPositive);
/// "600GB/s", "25GiB/s" (bytes) or "200Gb/s" (bits, divided by 8) -> bytes per second.
std::uint64_t parse_bandwidth_bytes_per_s(std::string_view text, Bound bound = Bound::kPositive);
/// "1.5us", "10ns", "2ms", "1s", "300ps" ("µs" also accepted) -> picoseconds.
TimePs parse_time_ps(std::string_view text, Bound bound = Bound::kNonNegative);
/// "312TFLOPS", "989.5TFLOPS", "1.2PFLOPS" ("FLOP/s" also accepted) -> FLOP per second.
std::uint64_t parse_flop_rate_per_s(std::string_view text, Bound bound = Bound::kPositive);
/// A plain decimal integer ("48", "-3"); no fraction, no unit.
std::int64_t parse_integer(std::string_view text);
/// A plain finite number ("0.75", "1e9", "3"); no unit.
double parse_number(std::string_view text);
/// A ratio in [0, 1]: "0.8" or a percentage "80%".
double parse_ratio(std::string_view text);
/// "true"/"false" (also "True", "TRUE", "False", "FALSE").
bool parse_bool(std::string_view text);

/// Shortest exact spelling, e.g. 85899345920 -> "80GiB", 40000000 -> "40MB", 1572864 -> "1.5MiB".
std::string format_size(std::uint64_t bytes);
/// Shortest exact spelling in bytes per second, e.g. 25000000000 -> "25GB/s".
std::string format_bandwidth(std::uint64_t bytes_per_s);
/// Shortest exact spelling, e.g. 1500000 -> "1.5us", 0 -> "0s".
std::string format_time(TimePs time_ps);
/// Shortest exact spelling, e.g. 989500000000000 -> "989.5TFLOPS".
std::string format_flop_rate(std::uint64_t flops_per_s);
/// Shortest spelling that parses back to the same double, e.g. 0.75 -> "0.75".
std::string format_number(double value);

}  // namespace lynx::units
