#pragma once
/// Cluster topology (Boost.Graph): GPUs, NVSwitch / PCIe bridges / host, NICs and the IB fabric,
/// as one-directional links; shortest paths between GPUs as link lists for sim::Flow.
#include "scenarios/scenario.hpp"
#include "sim/program.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace lynx::hw {

/// Global GPU rank: node * gpus_per_node + local index.
using Rank = int;

class Topology {
 public:
  explicit Topology(const HardwareSpec& hw);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  int num_gpus() const;
  int node_of(Rank r) const;
  /// Every one-directional link of the cluster, indexed by sim::LinkId.
  const std::vector<sim::LinkDesc>& links() const;
  /// Links from src to dst, in order (empty when src == dst). Deterministic.
  const std::vector<sim::LinkId>& path(Rank src, Rank dst) const;
  /// Sum of link latencies along path(src, dst).
  TimePs path_latency_ps(Rank src, Rank dst) const;
  /// Smallest link bandwidth along path(src, dst).
  std::uint64_t path_bw_bytes_per_s(Rank src, Rank dst) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lynx::hw
