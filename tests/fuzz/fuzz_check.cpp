#include "tests/fuzz/fuzz_check.hpp"

#include "common/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace lynx::fuzz {

namespace {

[[noreturn]] void finding(std::string_view kind, std::string_view message) {
  std::fprintf(stderr, "fuzz finding: %.*s: %.*s\n", static_cast<int>(kind.size()), kind.data(),
               static_cast<int>(message.size()), message.data());
  std::abort();
}

}  // namespace

int check_reader(const std::uint8_t* data, std::size_t size,
                 const std::function<void(std::string_view text)>& read) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    read(text);
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (std::getenv("LYNXSIM_FUZZ_SHOW") != nullptr)
      std::fprintf(stderr, "refused: %s\n", e.what());
    // LYNX_CHECK and every other invariant failure throw lynx::Error with the internal code
    // (common/error_codes.hpp); for user input it is a bug.
    if (e.code() == ErrorCode::kInternal) finding("internal error", message);
    if (message.find('\n') != std::string_view::npos) finding("multi-line error", message);
  } catch (const std::exception& e) {
    finding("exception that is not a lynx::Error", e.what());
  } catch (...) {
    finding("exception that is not a std::exception", "");
  }
  return 0;
}

void require(bool ok, std::string_view what) {
  if (!ok) finding("property violated", what);
}

}  // namespace lynx::fuzz
