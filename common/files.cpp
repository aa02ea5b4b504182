#include "common/files.hpp"

#include "common/error.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <sstream>

namespace lynx {

std::string read_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail("{}: cannot open the {}: no such file", path, what);
  if (!fs::is_regular_file(status)) fail("{}: cannot read the {}: not a regular file", path, what);
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("{}: cannot read the {}: {}", path, what, ec.message());
  if (size > max_bytes)
    fail("{}: the {} is {} bytes, more than the {} bytes lynxsim reads", path, what, size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the {}", path, what);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("{}: cannot read the {}", path, what);
  return text.str();
}

}  // namespace lynx

namespace lynx {
namespace {

/// Why the last write failed, as the C library says it ("No space left on device").
std::string last_error() { return errno != 0 ? std::strerror(errno) : "write error"; }

}  // namespace

OutputFile::OutputFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)), out_(path_, std::ios::binary) {
  if (!out_) fail("{}: cannot open '{}' for writing: {}", what_, path_, last_error());
}

void OutputFile::close() {
  // errno is not reset here: a write that failed earlier (a large one bypasses the buffer) set
  // it, and it says why.
  out_.flush();
  const bool flushed = static_cast<bool>(out_);
  out_.close();
  if (!flushed || !out_) fail("{}: cannot write '{}': {}", what_, path_, last_error());
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  OutputFile out(path, what);
  out.stream() << text;
  out.close();
}

void check_stdout() {
  std::cout.flush();
  if (!std::cout) fail("cannot write to standard output: {}", last_error());
}

}  // namespace lynx
