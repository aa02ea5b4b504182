#pragma once
/// Small text helpers every reader of hand-written files uses.
#include <string_view>
#include <vector>

namespace lynx {

/// `text` without leading and trailing spaces, tabs and carriage returns.
std::string_view trim(std::string_view text);

/// The fields of `text` between `separator`s, untrimmed; "" gives one empty field.
std::vector<std::string_view> split(std::string_view text, char separator);

}  // namespace lynx
