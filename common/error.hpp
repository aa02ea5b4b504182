#pragma once
/// The project's one exception type and the check macro that throws it.
/// Library code never exits: it throws lynx::Error and `main` decides.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace lynx {

/// Every error lynxsim reports to a user. The message is complete and one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Throws lynx::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lynx

/// Internal invariant check that stays on in release builds; names the source location.
#define LYNX_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::lynx::fail("internal check failed at {}:{}: {} ({})", __FILE__, __LINE__, #cond, \
                   ::fmt::format(__VA_ARGS__));                                      \
  } while (false)
