#pragma once
/// The project's one exception type and the check macro that throws it.
/// Library code never exits: it throws lynx::Error and `main` decides.
#include "common/error_codes.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace lynx {

/// Every error lynxsim reports to a user. The message is complete and one line; the code says
/// which situation of the catalogue (common/error_codes.hpp, docs/errors.md) it is.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The catalogue code of this error.
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

/// Throws lynx::Error with `code` and a formatted message.
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lynx

/// Internal invariant check that stays on in release builds; names the source location.
#define LYNX_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::lynx::fail(::lynx::ErrorCode::kInternal, "internal check failed at {}:{}: {} ({})", __FILE__, __LINE__, #cond, \
                   ::fmt::format(__VA_ARGS__));                                      \
  } while (false)
