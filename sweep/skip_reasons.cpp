#include "sweep/skip_reasons.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace lynx::sweep {

void SkipReasons::add(ErrorCode code, const std::string& message, std::uint64_t point,
                      const std::function<std::string()>& values) {
  SkipReason& reason = reasons_[{code, skip_reason(message)}];
  if (reason.count++ > 0) return;
  reason.code = code;
  reason.reason = skip_reason(message);
  reason.first_point = point;
  reason.first_message = message;
  reason.first_values = values();
}

std::vector<SkipReason> SkipReasons::sorted() const {
  std::vector<SkipReason> out;
  for (const auto& [key, reason] : reasons_) out.push_back(reason);
  std::sort(out.begin(), out.end(), [](const SkipReason& a, const SkipReason& b) {
    return a.count != b.count ? a.count > b.count : a.first_point < b.first_point;
  });
  return out;
}

std::string skip_reason_text(const SkipReason& reason) {
  return fmt::format("{} {}", error_code_id(reason.code), reason.reason);
}

std::string skip_reason(const std::string& message) {
  constexpr std::string_view kFailed = "simulation failed: ";
  if (message.rfind(kFailed, 0) == 0) return std::string(kFailed) + skip_reason(message.substr(kFailed.size()));
  // The part from "key '...': " on, else after the last ": " of a position prefix.
  std::size_t begin = message.find("key '");
  if (begin == std::string::npos) {
    const std::size_t set = message.rfind(": --set ");
    begin = set == std::string::npos ? message.find(": ") : message.find(": ", set + 8);
    begin = begin == std::string::npos ? 0 : begin + 2;
  }
  std::string text = message.substr(begin);
  // Cut the advice after the message: "key 'k': what: advice" -> "key 'k': what".
  const std::size_t key_end = text.rfind("key '", 0) == 0 ? text.find("': ") : std::string::npos;
  const std::size_t advice = text.find(": ", key_end == std::string::npos ? 0 : key_end + 3);
  if (advice != std::string::npos) text.resize(advice);
  // Drop parenthesised numbers ("(24)", "(5 × 1 = 5)") and name the other numbers N.
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') {
      const std::size_t close = text.find(')', i);
      if (close != std::string::npos &&
          std::any_of(text.begin() + static_cast<std::ptrdiff_t>(i), text.begin() + static_cast<std::ptrdiff_t>(close),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        i = close;
        continue;
      }
    }
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      const bool in_word = i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '.' ||
                                     text[i - 1] == '-' || text[i - 1] == '_');
      if (in_word) {
        out += text[i];
        continue;
      }
      std::size_t last = i;
      while (last + 1 < text.size() && (std::isdigit(static_cast<unsigned char>(text[last + 1])) || text[last + 1] == '.')) ++last;
      // A name that starts with digits ("1F1B": a digit after a letter), not a number with a unit.
      std::size_t token_end = last + 1;
      bool digit_after_letter = false, letter_seen = false;
      for (; token_end < text.size() && std::isalnum(static_cast<unsigned char>(text[token_end])); ++token_end) {
        if (std::isalpha(static_cast<unsigned char>(text[token_end]))) letter_seen = true;
        else if (letter_seen) digit_after_letter = true;
      }
      if (digit_after_letter) {
        out.append(text, i, token_end - i);
        i = token_end - 1;
        continue;
      }
      i = last;
      out += 'N';
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace lynx::sweep
