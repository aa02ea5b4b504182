#pragma once
/// What every fuzz target accepts as a normal outcome: the reader returns, or it refuses the
/// input with a lynx::Error. Anything else is a finding and aborts the process, so libFuzzer
/// (and the replay driver, tests/fuzz/replay_main.cpp) report it with the input.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace lynx::fuzz {

/// Runs `read` on the input as text. Aborts with the message on an internal check failure
/// (LYNX_CHECK: "internal check failed at ..."), on any exception that is not a lynx::Error,
/// and on a lynx::Error that is not one line; returns 0 otherwise (libFuzzer's convention).
int check_reader(const std::uint8_t* data, std::size_t size,
                 const std::function<void(std::string_view text)>& read);

/// Aborts with `what` when `ok` is false: a property of an accepted input that does not hold
/// (a round trip that changes the value).
void require(bool ok, std::string_view what);

}  // namespace lynx::fuzz
