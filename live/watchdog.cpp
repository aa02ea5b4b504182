#include "live/watchdog.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace lynx::live {

TestStall test_stall_from_env() {
  const char* value = std::getenv("LYNXSIM_LIVE_TEST_STALL");
  TestStall stall;
  if (value == nullptr || *value == '\0') return stall;
  const std::string_view text(value);
  const auto first = text.find(':'), second = text.find(':', first == std::string_view::npos ? first : first + 1);
  const auto number = [&](std::string_view s, int& out) {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    out = std::stoi(std::string(s));
    return true;
  };
  const std::string_view where = text.substr(0, first);
  if (first == std::string_view::npos || second == std::string_view::npos || (where != "op" && where != "init") ||
      !number(text.substr(first + 1, second - first - 1), stall.rank) || !number(text.substr(second + 1), stall.index))
    fail(ErrorCode::kInvalidOption, "LYNXSIM_LIVE_TEST_STALL={}: expected op:RANK:K or init:RANK:K (a test hook)", text);
  stall.enabled = true;
  stall.at_init = where == "init";
  return stall;
}

bool is_communication(const LiveOp& op) {
  return op.launch == LaunchKind::kCollective || op.launch == LaunchKind::kSend || op.launch == LaunchKind::kRecv;
}

int stalled_op(const OpStream& ops, const TestStall& stall) {
  if (!stall.enabled || stall.at_init || stall.rank < 0 || stall.rank >= static_cast<int>(ops.rank_ops.size())) return -1;
  int seen = 0;
  for (int i : ops.rank_ops[static_cast<std::size_t>(stall.rank)])
    if (is_communication(ops.ops[static_cast<std::size_t>(i)]) && seen++ == stall.index) return i;
  return -1;
}

std::string communicator_label(const OpStream& ops, std::size_t i) {
  const LiveOp& op = ops.ops.at(i);
  if (op.comm >= 0) return ops.comms.at(static_cast<std::size_t>(op.comm)).name;
  if (op.launch == LaunchKind::kSend) return fmt::format("pp {}->{}", op.rank, op.peer);
  if (op.launch == LaunchKind::kRecv) return fmt::format("pp {}->{}", op.peer, op.rank);
  const std::int32_t group = op.task >= 0 ? ops.sim.built.program.tasks[static_cast<std::size_t>(op.task)].group : -1;
  if (group < 0) return fmt::format("none ({} stream)", ops.stream_names.at(static_cast<std::size_t>(op.stream)));
  std::vector<int> ranks;
  for (const sim::Task& t : ops.sim.built.program.tasks)
    if (t.group == group) ranks.push_back(t.gpu);
  std::sort(ranks.begin(), ranks.end());
  std::string members;
  for (int r : ranks) members += fmt::format("{}{}", members.empty() ? "" : ",", r);
  return fmt::format("{}[{}]", ops.stream_names.at(static_cast<std::size_t>(op.stream)), members);
}

std::string watchdog_message(const OpStream& ops, std::size_t i, const std::string& what, const std::string& detail) {
  const LiveOp& op = ops.ops.at(i);
  return fmt::format("live: watchdog: rank {} ({}) {} in op '{}' on communicator {}{}{}", op.rank,
                     ops.gpu_names.at(static_cast<std::size_t>(op.rank)), what, op.label, communicator_label(ops, i),
                     detail.empty() ? "" : "; ", detail);
}

}  // namespace lynx::live

namespace lynx::live {

std::string watchdog_comm_init_message(const OpStream& ops, int rank, const std::string& communicator, const std::string& what,
                                       const std::string& detail) {
  return fmt::format("live: watchdog: rank {} ({}) {} creating communicator {}{}{}", rank,
                     ops.gpu_names.at(static_cast<std::size_t>(rank)), what, communicator, detail.empty() ? "" : "; ", detail);
}

}  // namespace lynx::live
