#include "common/files.hpp"

#include "common/error.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <fstream>

namespace lynx {

std::string read_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(ErrorCode::kFileNotFound, "{}: cannot open the {}: no such file", path, what);
  if (!fs::is_regular_file(status)) fail(ErrorCode::kNotRegularFile, "{}: cannot read the {}: not a regular file", path, what);
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail(ErrorCode::kReadFailed, "{}: cannot read the {}: {}", path, what, ec.message());
  if (size > max_bytes)
    fail(ErrorCode::kFileTooLarge, "{}: the {} is {} bytes, more than the {} bytes lynxsim reads", path, what, size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kReadFailed, "{}: cannot open the {}", path, what);
  // Read in chunks: a read error throws from the buffer (`text << in.rdbuf()` swallowed it and
  // returned an empty text: /proc/self/mem read as an empty scenario), and files whose size
  // reads 0 (/proc) are bounded too.
  std::string text;
  std::array<char, 1 << 16> chunk;
  try {
    for (std::streamsize got; (got = in.rdbuf()->sgetn(chunk.data(), chunk.size())) > 0;) {
      text.append(chunk.data(), static_cast<std::size_t>(got));
      if (text.size() > max_bytes)
        fail(ErrorCode::kFileTooLarge, "{}: the {} is more than the {} bytes lynxsim reads", path, what, max_bytes);
    }
  } catch (const std::ios_base::failure& e) {
    fail(ErrorCode::kReadFailed, "{}: cannot read the {}: {}", path, what, e.what());
  }
  return text;
}

}  // namespace lynx

namespace lynx {
namespace {

/// Why the last write failed, as the C library says it ("No space left on device").
std::string last_error() { return errno != 0 ? std::strerror(errno) : "write error"; }

}  // namespace

OutputFile::OutputFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)), out_(path_, std::ios::binary) {
  if (!out_) fail(ErrorCode::kWriteFailed, "{}: cannot open '{}' for writing: {}", what_, path_, last_error());
}

void OutputFile::close() {
  // errno is not reset here: a write that failed earlier (a large one bypasses the buffer) set
  // it, and it says why.
  out_.flush();
  const bool flushed = static_cast<bool>(out_);
  out_.close();
  if (!flushed || !out_) fail(ErrorCode::kWriteFailed, "{}: cannot write '{}': {}", what_, path_, last_error());
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  OutputFile out(path, what);
  out.stream() << text;
  out.close();
}

void check_stdout() {
  std::cout.flush();
  if (!std::cout) fail(ErrorCode::kWriteFailed, "cannot write to standard output: {}", last_error());
}

}  // namespace lynx
