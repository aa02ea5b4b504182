#pragma once
// Shared by the test suites: the message and code of the lynx::Error a callable throws.
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <string>

namespace lynx::test {

/// The message of the lynx::Error `f` throws (fails the test if it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected a lynx::Error");
  return {};
}

/// The catalogue code of the lynx::Error `f` throws (fails the test if it throws nothing).
template <typename F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("expected a lynx::Error");
  return ErrorCode::kInternal;
}

}  // namespace lynx::test
