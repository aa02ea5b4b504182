#include "sim/link_network.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace lynx::sim {

LinkNetwork::LinkNetwork(std::vector<std::uint64_t> link_bw_bytes_per_s)
    : link_bw_bytes_per_s_(std::move(link_bw_bytes_per_s)), link_flows_(link_bw_bytes_per_s_.size()) {}

void LinkNetwork::add_flow(std::uint32_t handle, std::span<const LinkId> path) {
  if (handle >= paths_.size()) paths_.resize(handle + 1);
  LYNX_CHECK(paths_[handle].empty(), "flow handle {} is already active", handle);
  paths_[handle] = path;
  for (const LinkId link : path) link_flows_[static_cast<std::size_t>(link)].push_back(handle);
}

void LinkNetwork::remove_flow(std::uint32_t handle) {
  LYNX_CHECK(handle < paths_.size() && !paths_[handle].empty(), "flow handle {} is not active", handle);
  for (const LinkId link : paths_[handle]) {
    // Links carry few concurrent flows; a linear search keeps the structure small.
    std::vector<std::uint32_t>& flows = link_flows_[static_cast<std::size_t>(link)];
    const auto found = std::find(flows.begin(), flows.end(), handle);
    LYNX_CHECK(found != flows.end(), "flow handle {} missing on link {}", handle, link);
    *found = flows.back();
    flows.pop_back();
  }
  paths_[handle] = {};
}

}  // namespace lynx::sim
