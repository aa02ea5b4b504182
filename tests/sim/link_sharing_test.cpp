#include "sim/link_sharing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

using lynx::sim::BottleneckFairShare;
using lynx::sim::FlowRate;
using lynx::sim::LinkId;
using lynx::sim::LinkNetwork;
using lynx::sim::RateChange;

namespace {
FlowRate rate_in(const std::vector<RateChange>& changes, std::uint32_t handle) {
  const auto found = std::find_if(changes.begin(), changes.end(), [&](const RateChange& c) { return c.handle == handle; });
  REQUIRE(found != changes.end());
  return found->rate;
}
bool same_rate(FlowRate a, FlowRate b) { return !lynx::sim::slower(a, b) && !lynx::sim::slower(b, a); }
}  // namespace

TEST_CASE("bottleneck fair share: each flow gets its smallest per-link share") {
  // Link 0: 2e9 B/s, link 1: 1e9 B/s.
  LinkNetwork network({2'000'000'000, 1'000'000'000});
  BottleneckFairShare policy;
  const std::vector<LinkId> both{0, 1};
  const std::vector<LinkId> first_only{0};
  network.add_flow(0, both);
  std::vector<RateChange> changes;
  const std::vector<LinkId> touched_both{0, 1};
  policy.reshare(network, touched_both, changes);
  REQUIRE(changes.size() == 1);
  // Alone: min(2e9 / 1, 1e9 / 1) = 1e9.
  CHECK(same_rate(changes[0].rate, FlowRate{1'000'000'000, 1}));

  network.add_flow(7, first_only);
  changes.clear();
  const std::vector<LinkId> touched_first{0};
  policy.reshare(network, touched_first, changes);
  REQUIRE(changes.size() == 2);  // both flows cross link 0; each listed once
  // flow 0: min(2e9 / 2, 1e9 / 1) = 1e9; flow 7: 2e9 / 2 = 1e9.
  CHECK(same_rate(rate_in(changes, 0), FlowRate{1'000'000'000, 1}));
  CHECK(same_rate(rate_in(changes, 7), FlowRate{1'000'000'000, 1}));

  network.add_flow(3, first_only);
  changes.clear();
  policy.reshare(network, touched_first, changes);
  // Three flows on link 0: 2e9 / 3 each; flow 0 is limited by link 0 now (2e9/3 < 1e9).
  CHECK(same_rate(rate_in(changes, 0), FlowRate{2'000'000'000, 3}));
  CHECK(same_rate(rate_in(changes, 3), FlowRate{2'000'000'000, 3}));

  network.remove_flow(7);
  network.remove_flow(3);
  CHECK(network.flows_on(0).size() == 1);
  CHECK(network.flows_on(1).size() == 1);
  changes.clear();
  policy.reshare(network, touched_first, changes);
  REQUIRE(changes.size() == 1);
  CHECK(same_rate(changes[0].rate, FlowRate{1'000'000'000, 1}));
}
