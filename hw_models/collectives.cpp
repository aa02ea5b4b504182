#include "hw_models/collectives.hpp"

#include <cmath>

#include "hw_models/rounding.hpp"
#include "common/error.hpp"
#include "sim/time.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace lynx::hw_models {

namespace {


/// ceil(numerator · bytes / denominator), exact in 128-bit integers.
std::uint64_t scaled_share(std::uint64_t bytes, std::uint64_t numerator, std::uint64_t denominator) {
  const UInt128 scaled = static_cast<UInt128>(bytes) * numerator;
  const UInt128 share = (scaled + denominator - 1) / denominator;
  if (share > static_cast<UInt128>(UINT64_MAX)) fail(ErrorCode::kValueOverflow, "collective share of {} bytes overflows", bytes);
  return static_cast<std::uint64_t>(share);
}

/// steps × step latency, overflow-checked.
TimePs checked_product_ps(TimePs step, int steps) {
  if (step > 0 && steps > std::numeric_limits<TimePs>::max() / step)
    fail(ErrorCode::kTimeOverflow, "a collective's step latencies overflow the simulated clock (hardware nccl.*.step_*)");
  return step * steps;
}

struct Planner {
  const Topology& topo;
  double efficiency = 1.0;  ///< collective_efficiency (× the protocol's bw_fraction)
  const NcclProtocol* protocol = nullptr;  ///< null: alpha-beta steps (path latencies)
  IntraNode intra = IntraNode::kNvSwitch;

  /// Bytes a flow must move for `logical_bytes` of payload at the achieved fraction of link
  /// bandwidth: ceil(bytes / collective_efficiency) (exactly `logical_bytes` at efficiency 1).
  std::uint64_t on_wire(std::uint64_t logical_bytes) const {
    if (efficiency == 1.0) return logical_bytes;
    return static_cast<std::uint64_t>(
        ceil_to_int64(static_cast<double>(logical_bytes) / efficiency, "collective bytes on wire"));
  }

  void add_flow(Phase& phase, Rank src, Rank dst, std::uint64_t logical_bytes) const {
    phase.flows.push_back(FlowSpec{src, dst, on_wire(logical_bytes), logical_bytes});
  }

  /// Sets the phase latency for `steps` synchronised steps: every flow already pays its own
  /// path latency once in the executor, so the phase adds the other steps − 1, each costing
  /// the largest path latency among its flows (the slowest hop gates each ring step).
  void finish(Phase& phase, int steps) const {
    phase.steps = steps;
    if (protocol) {
      // NCCL's model: the protocol's step latency of the slowest scope any flow crosses, for
      // every step (the flows still pay one hardware path latency each: pipeline fill).
      TimePs step = 0;
      for (const FlowSpec& flow : phase.flows) {
        const bool net = topo.domain_of(flow.src) != topo.domain_of(flow.dst);
        step = std::max(step, net                          ? protocol->step_net_ps
                              : intra == IntraNode::kPcie ? protocol->step_pcie_ps
                                                          : protocol->step_nvlink_ps);
      }
      phase.latency_ps = checked_product_ps(step, steps);
      return;
    }
    TimePs step_latency = 0;
    for (const FlowSpec& flow : phase.flows)
      step_latency = std::max(step_latency, topo.path_latency_ps(flow.src, flow.dst));
    phase.latency_ps = static_cast<TimePs>(std::max(steps - 1, 0)) * step_latency;
  }

  /// Adds to `phase` one ring over `members` (order as given) in which every member sends
  /// `per_member_bytes` to its successor.
  void add_ring(Phase& phase, const std::vector<Rank>& members, std::uint64_t per_member_bytes) const {
    const std::size_t n = members.size();
    if (n < 2) return;
    for (std::size_t i = 0; i < n; ++i) add_flow(phase, members[i], members[(i + 1) % n], per_member_bytes);
  }

  /// Reduce-scatter (or all-gather) inside each ring of `rings`, one phase: each member sends
  /// (n−1)/n of `bytes` to its successor in n−1 steps.
  Phase rs_or_ag_phase(const std::vector<std::vector<Rank>>& rings, std::uint64_t bytes) const {
    Phase phase;
    const auto n = static_cast<std::uint64_t>(rings.front().size());
    for (const auto& ring : rings) add_ring(phase, ring, scaled_share(bytes, n - 1, n));
    finish(phase, static_cast<int>(n) - 1);
    return phase;
  }

  /// Ring all-reduce inside each ring of `rings`, one phase: each member sends 2(n−1)/n of
  /// `bytes` to its successor in 2(n−1) steps (reduce-scatter then all-gather).
  Phase all_reduce_phase(const std::vector<std::vector<Rank>>& rings, std::uint64_t bytes) const {
    Phase phase;
    const auto n = static_cast<std::uint64_t>(rings.front().size());
    for (const auto& ring : rings) add_ring(phase, ring, scaled_share(bytes, 2 * (n - 1), n));
    finish(phase, 2 * (static_cast<int>(n) - 1));
    return phase;
  }

  /// Pipelined ring broadcast from ranks[0] along the given order: the message is cut into
  /// small chunks that stream down the chain, so every hop carries the whole message at once
  /// (one phase, n−1 flows of `bytes`) and the last chunk arrives n−1 hop latencies after the
  /// first is sent. The pipeline-fill term (chunk size × (n−2) / bandwidth) is neglected.
  Phase broadcast_chain(const std::vector<Rank>& ranks, std::uint64_t bytes) const {
    Phase phase;
    for (std::size_t i = 0; i + 1 < ranks.size(); ++i) add_flow(phase, ranks[i], ranks[i + 1], bytes);
    finish(phase, static_cast<int>(ranks.size()) - 1);
    return phase;
  }
};

/// Depth of position i in a binary heap-ordered tree (root 0; children 2i+1, 2i+2).
int tree_depth(std::size_t i) {
  int depth = 0;
  for (std::size_t v = i + 1; v > 1; v >>= 1) ++depth;
  return depth;
}

/// Binary-tree phases over `ranks` in heap order, one phase per level: `up` sends every node
/// of a level to its parent (deepest level first), otherwise every parent to its children
/// (root first). Each phase is one step of full `bytes` per flow.
void add_tree_levels(const Planner& planner, const std::vector<Rank>& ranks, std::uint64_t bytes,
                     bool up, std::vector<Phase>& phases) {
  const int max_depth = tree_depth(ranks.size() - 1);
  for (int level = 1; level <= max_depth; ++level) {
    const int depth = up ? max_depth + 1 - level : level;
    Phase phase;
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      if (tree_depth(i) != depth) continue;
      const Rank child = ranks[i], parent = ranks[(i - 1) / 2];
      if (up)
        planner.add_flow(phase, child, parent, bytes);
      else
        planner.add_flow(phase, parent, child, bytes);
    }
    planner.finish(phase, 1);
    phases.push_back(std::move(phase));
  }
}

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllGather: return "all-gather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kSendRecv: return "send/recv";
    case Collective::kAllToAll: return "all-to-all";
  }
  return "?";
}

/// The phases of one collective on `planner`'s protocol (arguments checked by the caller).
std::vector<Phase> plan_phases(const Planner& planner, Collective kind, Algorithm algo,
                               const std::vector<Rank>& ranks, std::uint64_t bytes);

}  // namespace

Collective to_collective(model::CollectiveKind kind) {
  switch (kind) {
    case model::CollectiveKind::kAllReduce: return Collective::kAllReduce;
    case model::CollectiveKind::kReduceScatter: return Collective::kReduceScatter;
    case model::CollectiveKind::kAllGather: return Collective::kAllGather;
    case model::CollectiveKind::kBroadcast: return Collective::kBroadcast;
    case model::CollectiveKind::kAllToAll: return Collective::kAllToAll;
    case model::CollectiveKind::kNone: break;
  }
  fail(ErrorCode::kInternal, "to_collective: an op without a collective (kNone) has nothing to plan");
}

std::vector<Phase> plan_collective(const Topology& topo, const HardwareSpec& hw, Collective kind,
                                   Algorithm algo, const std::vector<Rank>& ranks,
                                   std::uint64_t bytes) {
  const char* name = collective_name(kind);
  if (ranks.empty()) fail(ErrorCode::kInternal, "{}: empty rank list", name);
  std::unordered_set<Rank> seen;
  for (Rank r : ranks) {
    if (r < 0 || r >= topo.num_gpus())
      fail(ErrorCode::kInternal, "{}: rank {} is out of range (the cluster has {} GPUs)", name, r, topo.num_gpus());
    if (!seen.insert(r).second) fail(ErrorCode::kInternal, "{}: rank {} appears twice in the rank list", name, r);
  }
  if (!(hw.collective_efficiency > 0.0 && hw.collective_efficiency <= 1.0))
    fail(ErrorCode::kBadHardware, "hardware '{}': collective_efficiency must be in (0, 1], got {}", hw.profile,
         hw.collective_efficiency);
  if (hw.collective_model == CollectiveModel::kAlphaBeta)
    return plan_phases(Planner{topo, hw.collective_efficiency}, kind, algo, ranks, bytes);
  // NCCL picks the protocol with the least modelled time for each call; so do we (ties go to
  // the protocol listed first: Simple, LL128, LL). The call's base latency is paid once.
  // The call's pass over its buffer (nccl.buffer_bw, buffer_pass_share), the same on every protocol.
  constexpr std::string_view kBufferWhat = "a collective's buffer pass (hardware nccl.buffer_bw)";
  const double pass_share = buffer_pass_share(kind);
  const TimePs buffer_ps =
      pass_share > 0.0 && hw.nccl.buffer_bw_bytes_per_s > 0
          ? transfer_time_ps(static_cast<std::uint64_t>(std::ceil(pass_share * static_cast<double>(bytes))),
                             hw.nccl.buffer_bw_bytes_per_s)
          : 0;
  std::vector<Phase> best;
  TimePs best_ps = 0;
  for (const NcclProtocol* proto : {&hw.nccl.simple, &hw.nccl.ll128, &hw.nccl.ll}) {
    if (!(proto->bw_fraction > 0.0)) continue;
    if (proto->bw_fraction > 1.0)
      fail(ErrorCode::kBadHardware, "hardware '{}': nccl bw_fraction must be <= 1, got {}", hw.profile, proto->bw_fraction);
    std::vector<Phase> phases = plan_phases(
        Planner{topo, hw.collective_efficiency * proto->bw_fraction, proto, hw.intra_node}, kind,
        algo, ranks, bytes);
    if (phases.empty()) return phases;
    phases.front().latency_ps = checked_add(phases.front().latency_ps, checked_add(proto->base_ps, buffer_ps, kBufferWhat),
                                            "a collective's latency (hardware nccl.*.base)");
    const TimePs t = idle_collective_time_ps(topo, phases);
    if (best.empty() || t < best_ps) {
      best = std::move(phases);
      best_ps = t;
    }
  }
  if (best.empty()) fail(ErrorCode::kBadHardware, "hardware '{}': collective_model nccl needs nccl.simple.bw_fraction > 0", hw.profile);
  return best;
}

namespace {

std::vector<Phase> plan_phases(const Planner& planner, Collective kind, Algorithm algo,
                               const std::vector<Rank>& ranks, std::uint64_t bytes) {
  const char* name = collective_name(kind);
  const Topology& topo = planner.topo;
  std::vector<Phase> phases;
  if (kind == Collective::kSendRecv) {
    if (ranks.size() != 2)
      fail(ErrorCode::kInternal, "send/recv needs exactly two ranks {{src, dst}}, got {}", ranks.size());
    Phase phase;
    planner.add_flow(phase, ranks[0], ranks[1], bytes);
    planner.finish(phase, 1);
    phases.push_back(std::move(phase));
    return phases;
  }
  if (algo == Algorithm::kTree && kind != Collective::kAllReduce && kind != Collective::kBroadcast)
    fail(ErrorCode::kInternal, "{}: the tree algorithm exists only for all-reduce and broadcast (use ring)", name);
  if (ranks.size() == 1) return phases;  // nothing to communicate

  if (algo == Algorithm::kTree) {
    if (kind == Collective::kAllReduce) add_tree_levels(planner, ranks, bytes, true, phases);
    add_tree_levels(planner, ranks, bytes, false, phases);
    return phases;
  }
  if (kind == Collective::kBroadcast) {
    phases.push_back(planner.broadcast_chain(ranks, bytes));
    return phases;
  }
  if (kind == Collective::kAllToAll) {
    Phase phase;
    const std::uint64_t share = scaled_share(bytes, 1, ranks.size());
    for (Rank src : ranks)
      for (Rank dst : ranks)
        if (src != dst) planner.add_flow(phase, src, dst, share);
    planner.finish(phase, 1);
    phases.push_back(std::move(phase));
    return phases;
  }

  // Group by NVLink domain (a node, or the nodes of hardware.node.nvlink_domain_gpus) in order
  // of first appearance; members keep their given order.
  std::vector<int> node_order;
  std::vector<std::vector<Rank>> by_node;
  for (Rank r : ranks) {
    const int node = topo.domain_of(r);
    auto it = std::find(node_order.begin(), node_order.end(), node);
    if (it == node_order.end()) {
      node_order.push_back(node);
      by_node.emplace_back();
      it = node_order.end() - 1;
    }
    by_node[static_cast<std::size_t>(it - node_order.begin())].push_back(r);
  }
  const std::size_t per_node = by_node.front().size();
  const bool uniform = std::all_of(by_node.begin(), by_node.end(),
                                   [&](const auto& g) { return g.size() == per_node; });
  if (by_node.size() == 1 || !uniform) {
    // One node, or a group that cannot be split evenly: one flat ring in the given order.
    const std::vector<std::vector<Rank>> ring{ranks};
    phases.push_back(kind == Collective::kAllReduce ? planner.all_reduce_phase(ring, bytes)
                                                    : planner.rs_or_ag_phase(ring, bytes));
    return phases;
  }

  // Hierarchical: k ranks on each of m nodes. Inter-node rings connect the j-th rank of every
  // node and carry the 1/k shard each rank owns after the intra-node reduce-scatter.
  std::vector<std::vector<Rank>> across(per_node);
  for (std::size_t j = 0; j < per_node; ++j)
    for (const auto& group : by_node) across[j].push_back(group[j]);
  const std::uint64_t shard = scaled_share(bytes, 1, per_node);
  const bool intra = per_node > 1;
  switch (kind) {
    case Collective::kAllReduce:
      if (intra) phases.push_back(planner.rs_or_ag_phase(by_node, bytes));
      phases.push_back(planner.all_reduce_phase(across, shard));
      if (intra) phases.push_back(planner.rs_or_ag_phase(by_node, bytes));
      break;
    case Collective::kReduceScatter:
      if (intra) phases.push_back(planner.rs_or_ag_phase(by_node, bytes));
      phases.push_back(planner.rs_or_ag_phase(across, shard));
      break;
    case Collective::kAllGather:
      phases.push_back(planner.rs_or_ag_phase(across, shard));
      if (intra) phases.push_back(planner.rs_or_ag_phase(by_node, bytes));
      break;
    case Collective::kBroadcast:
    case Collective::kSendRecv:
    case Collective::kAllToAll:
      LYNX_CHECK(false, "{} handled above", name);
  }
  return phases;
}

}  // namespace

void append_member_tasks(sim::Program& program, const Topology& topo, const std::vector<Phase>& phases, Rank member,
                         sim::GpuId gpu, std::int32_t first_group, sim::Category category) {
  for (std::size_t ph = 0; ph < phases.size(); ++ph) {
    sim::Task task;
    task.kind = sim::TaskKind::kComm;
    task.category = category;
    task.gpu = gpu;
    task.work_ps = phases[ph].latency_ps;
    task.group = first_group + static_cast<std::int32_t>(ph);
    task.first_flow = static_cast<std::uint32_t>(program.flows.size());
    for (const FlowSpec& f : phases[ph].flows) {
      if (f.src != member) continue;
      sim::append_flow(program, topo.path(f.src, f.dst), f.bytes);
      ++task.num_flows;
    }
    program.tasks.push_back(task);
  }
}

TimePs idle_collective_time_ps(const Topology& topo, const std::vector<Phase>& phases) {
  constexpr std::string_view kWhat =
      "a collective's time (link bandwidths hardware.node.*.bw and latencies hardware.node.*.latency)";
  TimePs total = 0;
  for (const Phase& phase : phases) {
    TimePs slowest = 0;
    for (const FlowSpec& f : phase.flows) {
      const TimePs t = f.src == f.dst ? 0
                                      : transfer_time_ps(f.bytes, topo.path_bw_bytes_per_s(f.src, f.dst)) +
                                            topo.path_latency_ps(f.src, f.dst);
      slowest = std::max(slowest, t);
    }
    total = checked_add(total, checked_add(slowest, phase.latency_ps, kWhat), kWhat);
  }
  return total;
}

}  // namespace lynx::hw_models
