#pragma once
// Shared by the model tests: sums and look-ups over a list of ops.
#include "model/gpt.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::test {

/// Activation bytes all `ops` save for backward.
inline std::uint64_t saved_sum(const std::vector<model::Op>& ops) {
  std::uint64_t total = 0;
  for (const model::Op& op : ops) total += op.saved_bytes;
  return total;
}

/// Activation bytes the ops of one group save.
inline std::uint64_t saved_in_group(const std::vector<model::Op>& ops, model::OpGroup group) {
  std::uint64_t total = 0;
  for (const model::Op& op : ops)
    if (op.group == group) total += op.saved_bytes;
  return total;
}

/// The op named `name` (fails the test if there is none).
inline const model::Op& find_op(const std::vector<model::Op>& ops, const std::string& name) {
  for (const model::Op& op : ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return ops.front();
}

/// The ops' names in order.
inline std::vector<std::string> names_of(const std::vector<model::Op>& ops) {
  std::vector<std::string> names;
  for (const model::Op& op : ops) names.push_back(op.name);
  return names;
}

}  // namespace lynx::test
