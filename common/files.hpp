#pragma once
/// Reading the files users hand to lynxsim (scenarios, profiles, plans, CSVs): only regular
/// files, and only up to a size no real input comes near, so a directory or /dev/zero is a
/// clear error instead of an empty read or a 4 GiB one.
#include <cstdint>
#include <string>

namespace lynx {

/// Largest input file read: 64 MiB (the largest shipped input, a calibration CSV, is < 1 MiB).
inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{64} << 20;

/// The whole file; lynx::Error "PATH: cannot read the WHAT: why" otherwise.
std::string read_text_file(const std::string& path, const std::string& what,
                           std::uint64_t max_bytes = kMaxInputFileBytes);

}  // namespace lynx
