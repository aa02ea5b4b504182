#pragma once
/// Byte units and element sizes used across the project.
#include <cstdint>

namespace lynx {

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

/// Bytes in GiB, for printing.
constexpr double to_gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

/// 16-bit training (bf16 / fp16): activations, weights and gradients are 2 bytes per element
/// (Korthikanti et al. 2022, Sec. 4.1); dropout masks are stored as 1 byte per element.
inline constexpr std::int64_t kBytesPerElement = 2;
inline constexpr std::int64_t kMaskBytesPerElement = 1;

}  // namespace lynx
