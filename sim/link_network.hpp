#pragma once
/// The flows currently crossing each one-directional link: the state a bandwidth-sharing
/// policy reads. It holds no time and no rates; the executor owns those.
#include "sim/program.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace lynx::sim {

/// Active flows per link. A flow is named by a caller-chosen handle (a small dense integer)
/// and crosses the links of its path; its path storage must outlive the flow.
class LinkNetwork {
 public:
  /// One entry per link: its bandwidth in bytes per second (> 0 for links that carry bytes).
  explicit LinkNetwork(std::vector<std::uint64_t> link_bw_bytes_per_s);

  /// Adds active flow `handle` over `path` (the handle must not be active already).
  void add_flow(std::uint32_t handle, std::span<const LinkId> path);
  /// Removes active flow `handle` from every link of its path.
  void remove_flow(std::uint32_t handle);

  /// Handles of the flows crossing `link` now, in arrival order (removal may reorder).
  std::span<const std::uint32_t> flows_on(LinkId link) const { return link_flows_[static_cast<std::size_t>(link)]; }
  /// Path of active flow `handle`.
  std::span<const LinkId> path_of(std::uint32_t handle) const { return paths_[handle]; }
  /// Bandwidth of `link` in bytes per second.
  std::uint64_t bw_bytes_per_s(LinkId link) const { return link_bw_bytes_per_s_[static_cast<std::size_t>(link)]; }
  /// Number of links.
  std::size_t num_links() const { return link_bw_bytes_per_s_.size(); }
  /// One past the largest handle ever added (size for per-handle side arrays).
  std::size_t handle_bound() const { return paths_.size(); }

 private:
  std::vector<std::uint64_t> link_bw_bytes_per_s_;
  std::vector<std::vector<std::uint32_t>> link_flows_;
  std::vector<std::span<const LinkId>> paths_;
};

}  // namespace lynx::sim
