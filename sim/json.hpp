#pragma once
/// Minimal JSON string quoting shared by every JSON writer (trace, reports).
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace lynx::sim {

/// `text` as a quoted JSON string literal with control characters escaped.
inline std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        else
          out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace lynx::sim
