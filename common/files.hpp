#pragma once
/// Reading the files users hand to lynxsim (scenarios, profiles, plans, CSVs): only regular
/// files, and only up to a size no real input comes near, so a directory or /dev/zero is a
/// clear error instead of an empty read or a 4 GiB one.
#include <cstdint>
#include <fstream>
#include <string>

namespace lynx {

/// Largest input file read: 64 MiB (the largest shipped input, a calibration CSV, is < 1 MiB).
inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{64} << 20;

/// The whole file; lynx::Error "PATH: cannot read the WHAT: why" otherwise.
std::string read_text_file(const std::string& path, const std::string& what,
                           std::uint64_t max_bytes = kMaxInputFileBytes);

}  // namespace lynx

namespace lynx {

/// An output file whose write errors are reported: close() flushes and throws lynx::Error
/// naming the file (a full disk, /dev/full), so no output is ever lost silently.
class OutputFile {
 public:
  /// Opens `path` for writing; `what` names it in messages ("-o", "--trace", ...).
  OutputFile(std::string path, std::string what);
  std::ostream& stream() { return out_; }
  /// Flushes and checks; throws lynx::Error "WHAT: cannot write 'PATH': why".
  void close();

 private:
  std::string path_;
  std::string what_;
  std::ofstream out_;
};

/// Writes `text` to `path`, checked as OutputFile does.
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

/// Flushes standard output; throws lynx::Error when it could not be written (a full disk).
void check_stdout();

}  // namespace lynx
