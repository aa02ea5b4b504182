#pragma once
/// Simulated time: a signed 64-bit count of picoseconds, the one time unit of the project.
/// 2^63 ps is about 106 days of simulated time; additions are overflow-checked.
#include "common/error.hpp"

#include <cstdint>
#include <string_view>

namespace lynx {

using TimePs = std::int64_t;  ///< picoseconds

/// 128-bit integers for exact intermediate products (a GCC/Clang extension; `__extension__`
/// keeps -Wpedantic quiet for every file that includes this header).
__extension__ using Int128 = __int128;
__extension__ using UInt128 = unsigned __int128;

inline constexpr TimePs kPsPerNs = 1'000;
inline constexpr TimePs kPsPerUs = 1'000'000;
inline constexpr TimePs kPsPerMs = 1'000'000'000;
inline constexpr TimePs kPsPerS = 1'000'000'000'000;

constexpr TimePs ns_to_ps(std::int64_t ns) { return ns * kPsPerNs; }
constexpr TimePs us_to_ps(std::int64_t us) { return us * kPsPerUs; }
constexpr TimePs ms_to_ps(std::int64_t ms) { return ms * kPsPerMs; }
constexpr double ps_to_s(TimePs t) { return static_cast<double>(t) / static_cast<double>(kPsPerS); }
constexpr double ps_to_us(TimePs t) { return static_cast<double>(t) / static_cast<double>(kPsPerUs); }

/// What the simulated clock grows with, for overflow messages of now + a delay.
inline constexpr std::string_view kSimulatedClock =
    "the simulated clock (it grows with model.layers, parallel.global_batch, the link latencies "
    "hardware.node.*.latency and the hardware's speeds)";

/// a + b, throwing lynx::Error instead of wrapping on overflow; `what` names the quantity and
/// the scenario keys it grows with, so the message says what to change.
inline TimePs checked_add(TimePs a, TimePs b, std::string_view what = "simulated time") {
  TimePs sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    fail(ErrorCode::kTimeOverflow, "simulated time overflow (2^63 ps, 106 days) in {}: {} ps + {} ps", what, a, b);
  return sum;
}

/// Time to move `bytes` at `bw_bytes_per_s`: ceil(bytes * 1e12 / bw) in 128-bit integers,
/// so it is exact and never 0 for a non-zero size.
inline TimePs transfer_time_ps(std::uint64_t bytes, std::uint64_t bw_bytes_per_s) {
  if (bw_bytes_per_s == 0) fail(ErrorCode::kBadHardware, "transfer of {} bytes over a link with zero bandwidth", bytes);
  const UInt128 scaled = static_cast<UInt128>(bytes) * kPsPerS;
  const UInt128 t = (scaled + bw_bytes_per_s - 1) / bw_bytes_per_s;
  if (t > static_cast<UInt128>(INT64_MAX)) fail(ErrorCode::kTimeOverflow, "transfer time of {} bytes at {} B/s overflows 2^63 ps (106 days): a link "
                                                 "bandwidth (hardware.node.*.bw) is too small",
                                                 bytes, bw_bytes_per_s);
  return static_cast<TimePs>(t);
}

namespace literals {
constexpr TimePs operator""_ps(unsigned long long v) { return static_cast<TimePs>(v); }
constexpr TimePs operator""_ns(unsigned long long v) { return static_cast<TimePs>(v) * kPsPerNs; }
constexpr TimePs operator""_us(unsigned long long v) { return static_cast<TimePs>(v) * kPsPerUs; }
constexpr TimePs operator""_ms(unsigned long long v) { return static_cast<TimePs>(v) * kPsPerMs; }
constexpr TimePs operator""_s(unsigned long long v) { return static_cast<TimePs>(v) * kPsPerS; }
}  // namespace literals

}  // namespace lynx
