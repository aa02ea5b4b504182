#pragma once
/// Cluster topology (Boost.Graph): GPUs, NVSwitch (per node, or per NVLink domain of several
/// nodes) / PCIe bridges / host, NICs and the IB fabric,
/// as one-directional links; shortest paths between GPUs as link lists for sim::Flow.
#include "scenarios/scenario.hpp"
#include "sim/program.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace lynx::hw_models {

/// Global GPU rank: node * gpus_per_node + local index.
using Rank = int;

class Topology {
 public:
  /// Builds the link graph; throws lynx::Error for an invalid shape (nodes, gpus_per_node,
  /// gpus_per_pcie_switch, zero bandwidths of links that exist, no NICs on a
  /// multi-node cluster). NICs and the fabric exist only when nodes > 1. With `gpus_used` > 0
  /// only the first ceil(gpus_used / gpus_per_node) nodes are built (the ones a layout of that
  /// many GPUs occupies), so a large declared cluster costs nothing it does not use.
  explicit Topology(const HardwareSpec& hw, std::int64_t gpus_used = 0);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  int num_gpus() const;
  int node_of(Rank r) const;
  /// The NVLink domain of rank r: its node, or with hardware.node.nvlink_domain_gpus the
  /// group of consecutive nodes whose GPUs share one NVLink switch fabric.
  int domain_of(Rank r) const;
  /// Every one-directional link of the cluster, indexed by sim::LinkId.
  const std::vector<sim::LinkDesc>& links() const;
  /// Links from src to dst, in order (empty when src == dst). Deterministic: in a node or an
  /// NVLink domain, over the NVSwitch (GPU->switch->GPU; a domain's switch is the NVSwitch
  /// vertex of its first node, "n0.nvswitch") or, on PCIe nodes, the fewest-hop route through PCIe
  /// switches and the host; across nodes, GPUDirect RDMA with each GPU on its own rail NIC:
  /// src GPU -> PCIe -> NIC (src local % nics) -> fabric -> NIC (dst local % nics) -> PCIe ->
  /// dst GPU (the host is crossed only when a NIC is on another GPU's PCIe switch).
  /// Computed on first use and cached (the reference stays valid for the Topology's lifetime;
  /// safe from several threads: the cache is under a lock). Throws for an out-of-range rank.
  const std::vector<sim::LinkId>& path(Rank src, Rank dst) const;
  /// Sum of link latencies along path(src, dst).
  TimePs path_latency_ps(Rank src, Rank dst) const;
  /// Smallest link bandwidth along path(src, dst); UINT64_MAX when src == dst (no link).
  std::uint64_t path_bw_bytes_per_s(Rank src, Rank dst) const;

  /// For simulating one representative GPU per symmetric group: true when every link that
  /// any GPU-to-GPU path crosses belongs to a single GPU that is an end of that path (its own
  /// NVLink / PCIe links, a PCIe uplink or rail NIC no other GPU uses), so one GPU's traffic
  /// meets another's only on role-symmetric links. False e.g. when two GPUs share a PCIe
  /// uplink or a NIC on some path. Computed once.
  bool links_private_per_gpu() const;
  /// The link with the same role as `link` that belongs to rank_to_rep[owner], where owner is
  /// the GPU `link` belongs to (e.g. "n1.nvswitch->gpu3" with rank_to_rep[11] == 8 gives
  /// "n1.nvswitch->gpu0"). Unchanged when the link has no single owner, the owner is outside
  /// rank_to_rep or maps to -1, or the representative has no link of that role.
  sim::LinkId mirror_link(sim::LinkId link, const std::vector<Rank>& rank_to_rep) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lynx::hw_models
