#pragma once
/// Collectives over the topology as link flows + latency, so concurrent TP, PP and DP traffic
/// contends on the links it really crosses. Ring all-reduce = reduce-scatter + all-gather;
/// groups spanning nodes run hierarchically (intra-node reduce-scatter, inter-node ring across
/// nodes' local shards, intra-node all-gather), each phase on its own links. "Node" here is an
/// NVLink domain (Topology::domain_of): one node, or the nodes of node.nvlink_domain_gpus.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"

#include <cstdint>
#include <vector>

namespace lynx::hw_models {

enum class Collective : std::uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSendRecv, kAllToAll };
enum class Algorithm : std::uint8_t { kRing, kTree };

/// Share of a call's buffer S that its non-overlapped pass (S · share / nccl.buffer_bw) covers:
/// half per ring phase, so an all-reduce (a reduce-scatter phase then an all-gather phase) pays
/// S and a one-phase call (all-gather, reduce-scatter, broadcast) S / 2; send/recv none. The
/// pass is fitted on all-reduce tables only (docs/calibration.md, "NCCL tables"); per phase, it
/// keeps an all-gather's and a reduce-scatter's bus bandwidth equal to the all-reduce's at every
/// ring size, as NCCL's tuning model has it (src/graph/tuning.cc, commit
/// 5067397c2676d5aed50042fc39e5c8ee96eb0027: one busBw per algorithm and protocol for every
/// ring collective) and as nccl-tests show on H100 (NVIDIA/nccl issue 1281: reduce-scatter
/// 360 GB/s, all-gather 350 GB/s bus bandwidth). A whole-buffer pass per call would make
/// sequence parallelism's four one-phase calls per layer cost two passes more than the two
/// all-reduces they replace, which Korthikanti et al. 2022 Table 4 does not show (sequence
/// parallelism takes 0.5 ms off a 22B layer's forward: what its memory-bound ops save).
constexpr double buffer_pass_share(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce: return 1.0;
    case Collective::kSendRecv:
    case Collective::kAllToAll: return 0.0;  // NCCL runs it as grouped sends and receives
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kBroadcast: return 0.5;
  }
  return 1.0;
}

/// One phase of a collective: every member sends `bytes` to its successor along its path,
/// all flows concurrently, then the phase pays `latency_ps` (step latencies).
/// Timing contract with the executor: a flow over path(src, dst) already pays that path's
/// latency once (sim::LinkDesc::latency_ps), so latency_ps holds the remaining steps − 1 step
/// latencies: latency_ps = (steps − 1) · max over the phase's flows of path_latency_ps. On an
/// idle ring the phase therefore takes transfer + steps · path latency (alpha-beta model).
/// With collective_model alpha-beta the path latency is the step cost. With collective_model
/// nccl (NCCL's own cost model, src/graph/tuning.cc) a call on protocol p (LL, LL128, Simple)
/// has latency_ps = steps · nccl.p.step_<scope> (+ nccl.p.base on the call's first phase), where
/// scope is net when a flow crosses nodes, else pcie on PCIe nodes, else nvlink; its flows
/// carry bytes / (collective_efficiency · nccl.p.bw_fraction) and still pay their one path
/// latency (pipeline fill); the call's first phase also pays buffer_pass_share · bytes /
/// nccl.buffer_bw (0: none), the same on every protocol.
/// The protocol with the least idle time is used for each call (ties:
/// Simple, LL128, LL), as NCCL's tuner picks one, so the achieved bus bandwidth grows with the
/// message size: latency-bound LL for small messages, LL128, then Simple at the full ring rate.
/// Sequence parallelism's reduce-scatter + all-gather then costs more than one all-reduce of the
/// same bytes: the same wire bytes, ring steps and buffer pass, but two calls (two base and path
/// latencies), each half-size call lower on that curve.
struct FlowSpec {
  Rank src = 0;
  Rank dst = 0;
  std::uint64_t bytes = 0;  ///< on the wire: ceil(logical bytes / effective efficiency)
  std::uint64_t payload_bytes = 0;  ///< the logical bytes (for traces; timing uses `bytes`)
};
struct Phase {
  std::vector<FlowSpec> flows;
  TimePs latency_ps = 0;
  int steps = 1;  ///< synchronised algorithm steps in this phase (ring steps, tree levels = 1)
};

/// Phases of `kind` over `ranks` (ring order as given) for a payload of `bytes` (the full
/// tensor for all-reduce/broadcast; the full gathered tensor for all-gather/reduce-scatter;
/// the message for send/recv, ranks = {src, dst}).
/// Ring all-reduce on n GPUs of one scope: one phase, each member sends 2(n-1)/n·bytes to its
/// successor, 2(n-1) steps; reduce-scatter / all-gather: (n-1)/n·bytes, n-1 steps (shares are
/// rounded up to whole bytes). Ranks on several nodes, the same number k on each of m nodes:
/// hierarchical — all-reduce = intra-node RS, inter-node ring all-reduce of the bytes/k shard
/// among the ranks with the same position in their node, intra-node AG (3 phases; 1 when
/// k = 1); reduce-scatter = intra RS + inter RS of the shard; all-gather = inter AG of the
/// shard + intra AG. Uneven groups: one flat ring. Broadcast (ring): pipelined chain from
/// ranks[0], one phase of n-1 flows of `bytes`, n-1 steps. Tree (all-reduce, broadcast only):
/// binary tree in heap order over `ranks` (root ranks[0], children of i at 2i+1, 2i+2), one
/// phase per level of full-size flows — reduce leaves-to-root, then broadcast root-to-leaves
/// (not pipelined, unlike NCCL's double binary tree: an upper bound for large messages).
/// Send/recv: one phase, one flow, one step. All-to-all (`bytes`: what each member sends, its
/// own share included, as NCCL's all-to-all sendcount x n): one phase in which every member
/// sends ceil(bytes / n) to every other member directly, all n·(n−1) flows at once, one step
/// (NCCL runs it as grouped point-to-point sends; the flows share the links they cross, so on
/// one node a GPU's NVLink carries (n−1)/n of `bytes` each way, and across nodes its NIC
/// carries the shares for the other nodes). One rank: no phases.
/// Throws lynx::Error for an empty rank list, duplicate or out-of-range ranks, send/recv
/// without exactly two ranks, tree for RS/AG, collective_efficiency outside (0, 1], an nccl
/// bw_fraction above 1 or no usable protocol.
std::vector<Phase> plan_collective(const Topology& topo, const HardwareSpec& hw, Collective kind,
                                   Algorithm algo, const std::vector<Rank>& ranks,
                                   std::uint64_t bytes);

/// Time of `phases` on an otherwise idle network when every flow has its path to itself:
/// Σ over phases of (max over flows of bytes / path bandwidth + path latency) + phase latency.
/// An estimate for planners; the engine's fair-shared links give the real time.
TimePs idle_collective_time_ps(const Topology& topo, const std::vector<Phase>& phases);

/// Appends to `program` one comm task per phase for `member` on `gpu` (its flows the ones it
/// sends, over topo's paths; task k in rendezvous group first_group + k, work = the phase's
/// latency), for running a collective alone on the engine; the tasks follow each other on the
/// GPU's one stream.
void append_member_tasks(sim::Program& program, const Topology& topo, const std::vector<Phase>& phases, Rank member,
                         sim::GpuId gpu, std::int32_t first_group, sim::Category category);

/// The hw collective for a workload op's collective; throws for kNone.
Collective to_collective(model::CollectiveKind kind);

}  // namespace lynx::hw_models
