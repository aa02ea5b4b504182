#pragma once
/// Collectives over the topology as link flows + latency, so concurrent TP, PP and DP traffic
/// contends on the links it really crosses. Ring all-reduce = reduce-scatter + all-gather;
/// groups spanning nodes run hierarchically (intra-node reduce-scatter, inter-node ring across
/// nodes' local shards, intra-node all-gather), each phase on its own links.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"

#include <cstdint>
#include <vector>

namespace lynx::hw {

enum class Collective : std::uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSendRecv };
enum class Algorithm : std::uint8_t { kRing, kTree };

/// One phase of a collective: every member sends `bytes` to its successor along its path,
/// all flows concurrently, then the phase pays `latency_ps` (step latencies).
struct FlowSpec {
  Rank src = 0;
  Rank dst = 0;
  std::uint64_t bytes = 0;
};
struct Phase {
  std::vector<FlowSpec> flows;
  TimePs latency_ps = 0;
};

/// Phases of `kind` over `ranks` (ring order as given) for a payload of `bytes` (the full
/// tensor for all-reduce/broadcast; the full gathered tensor for all-gather/reduce-scatter;
/// the message for send/recv, ranks = {src, dst}).
/// Ring all-reduce on n GPUs of one scope: one phase, each member sends 2(n-1)/n·bytes to its
/// successor, latency 2(n-1)·(path latency + hw step overhead).
std::vector<Phase> plan_collective(const Topology& topo, const HardwareSpec& hw, Collective kind,
                                   Algorithm algo, const std::vector<Rank>& ranks,
                                   std::uint64_t bytes);

}  // namespace lynx::hw
