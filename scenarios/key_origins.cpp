#include "scenarios/key_origins.hpp"

#include "common/error.hpp"

#include <utility>

namespace lynx {

KeyOrigins::KeyOrigins(std::string top) : top_(std::move(top)) {}

void KeyOrigins::set_value(const std::string& key, std::string origin, bool by_override) {
  values_[key] = Value{std::move(origin), by_override};
}

void KeyOrigins::set_section(const std::string& key, std::string origin) {
  sections_[key] = std::move(origin);
}

bool KeyOrigins::given(const std::string& key) const { return values_.count(key) != 0; }

std::string KeyOrigins::origin_of(const std::string& key) const {
  if (const auto it = values_.find(key); it != values_.end()) return it->second.origin;
  if (const auto it = sections_.find(key); it != sections_.end()) return it->second;
  std::string section = key;
  for (std::size_t dot = section.rfind('.'); dot != std::string::npos; dot = section.rfind('.')) {
    section.resize(dot);
    if (const auto it = sections_.find(section); it != sections_.end()) return it->second;
  }
  return top_;
}

std::string KeyOrigins::blame(const std::vector<std::string>& keys) const {
  LYNX_CHECK(!keys.empty(), "blame needs at least one key");
  for (const std::string& key : keys) {
    const auto it = values_.find(key);
    if (it != values_.end() && it->second.by_override) return key;
  }
  for (const std::string& key : keys) {
    if (given(key)) return key;
  }
  return keys.front();
}

}  // namespace lynx
