#pragma once
/// `lynxsim live --dry-run`: what live mode would launch — the processes (one per node) with
/// their ranks and devices, the NCCL communicators in creation order with the node making each
/// id, then rank by rank the streams, ops with shapes and bytes, dependencies, allocations and
/// frees — and the memory peak (replayed in the simulator's order, next to the simulator's
/// tracked peak).
#include "live/op_stream.hpp"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace lynx::live {

/// "12.00 MiB", "3.50 GiB", "512 B".
std::string format_bytes(std::uint64_t bytes);
/// What `op` launches, e.g. "bf16 4096x6144x2048, 88.00 MiB" or "all_reduce 16.00 MiB on tp[0,1]".
std::string describe_launch(const OpStream& ops, const LiveOp& op);
/// The dry run of `ops` (`plan_label` names the plan file).
void write_dry_run(std::ostream& out, const OpStream& ops, const std::string& plan_label);

}  // namespace lynx::live
