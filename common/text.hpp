#pragma once
/// Small text helpers every reader of hand-written files uses.
#include <string>
#include <string_view>
#include <vector>

namespace lynx {

/// `text` without leading and trailing spaces, tabs and carriage returns.
std::string_view trim(std::string_view text);

/// The fields of `text` between `separator`s, untrimmed; "" gives one empty field.
std::vector<std::string_view> split(std::string_view text, char separator);

/// `text` for a one-line message: line breaks and other control characters (not tabs) written
/// as \n, \r, \xNN, so quoted user text cannot break an error in two.
std::string one_line(std::string_view text);

}  // namespace lynx
