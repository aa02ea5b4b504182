#pragma once
/// A running 64-bit hash of a simulation's event stream (OMNeT++'s fingerprints): two runs with
/// the same fingerprint processed the same events at the same times in the same order. Used by
/// the golden tests, where a change that alters a fingerprint must be deliberate.
#include <cstdint>
#include <string>

namespace lynx::sim {

class Fingerprint {
 public:
  /// Mixes one 64-bit word into the hash (order matters).
  void add(std::uint64_t word) {
    state_ = (rotate_left(state_, 27) ^ word) * 0x9e3779b97f4a7c15ULL;  // golden-ratio multiplier
  }
  void add_signed(std::int64_t word) { add(static_cast<std::uint64_t>(word)); }
  std::uint64_t value() const { return state_; }
  /// 16 lower-case hex digits.
  std::string hex() const;

 private:
  static std::uint64_t rotate_left(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  std::uint64_t state_ = 0xcbf29ce484222325ULL;  // FNV-1a offset basis: any fixed non-zero start
};

inline std::string Fingerprint::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[static_cast<std::size_t>(15 - i)] = kDigits[(state_ >> (4 * i)) & 0xf];
  return out;
}

}  // namespace lynx::sim
