#include "common/files.hpp"

#include "common/error.hpp"

#include <filesystem>
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
