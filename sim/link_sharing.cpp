#include "sim/link_sharing.hpp"

#include <algorithm>

namespace lynx::sim {

FlowRate BottleneckFairShare::rate_of(const LinkNetwork& network, std::uint32_t handle) {
  FlowRate best;
  for (const LinkId link : network.path_of(handle)) {
    const FlowRate share{network.bw_bytes_per_s(link), network.flows_on(link).size()};
    if (best.bytes_per_s_num == 0 || slower(share, best)) best = share;
  }
  return best;
}

void BottleneckFairShare::reshare(const LinkNetwork& network, std::span<const LinkId> touched_links,
                                  std::vector<RateChange>& changes) {
  if (seen_stamp_.size() < network.handle_bound()) seen_stamp_.resize(network.handle_bound(), 0);
  if (++stamp_ == 0) {  // wrapped: forget every old stamp
    std::fill(seen_stamp_.begin(), seen_stamp_.end(), 0);
    stamp_ = 1;
  }
  // Only the counts of touched links changed, so only their flows can change rate.
  for (const LinkId link : touched_links) {
    for (const std::uint32_t handle : network.flows_on(link)) {
      if (seen_stamp_[handle] == stamp_) continue;
      seen_stamp_[handle] = stamp_;
      changes.push_back({handle, rate_of(network, handle)});
    }
  }
}

}  // namespace lynx::sim
