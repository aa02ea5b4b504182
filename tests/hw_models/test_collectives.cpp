// Tests for hw_models/collectives: phases, flows and byte counts of ring, hierarchical and
// tree collectives over the topology.
#include "hw_models/collectives.hpp"

#include "hw_fixtures.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <utility>
#include <vector>

using namespace lynx;
using hw_models::Algorithm;
using hw_models::Collective;

namespace {

/// (src, dst) of every flow, in order.
std::vector<std::pair<int, int>> endpoints(const hw_models::Phase& phase) {
  std::vector<std::pair<int, int>> out;
  for (const hw_models::FlowSpec& f : phase.flows) out.emplace_back(f.src, f.dst);
  return out;
}

bool all_flows_carry(const hw_models::Phase& phase, std::uint64_t bytes) {
  for (const hw_models::FlowSpec& f : phase.flows)
    if (f.bytes != bytes) return false;
  return !phase.flows.empty();
}

using Pairs = std::vector<std::pair<int, int>>;

}  // namespace

// Fixture latencies: inside a node GPU->NVSwitch->GPU = 2 × 1 us; across nodes on one rail
// GPU->PCIe->NIC->fabric->NIC->PCIe->GPU = 0.5 + 0.5 + 2 + 2 + 0.5 + 0.5 = 6 us.
constexpr TimePs kIntraPs = 2'000'000;
constexpr TimePs kInterPs = 6'000'000;

TEST_CASE("ring all-reduce inside a node: one phase, 2(n-1)/n of the bytes per member") {
  const HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  const std::vector<hw_models::Rank> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, 8000);
  REQUIRE(phases.size() == 1);
  // 2·7/8·8000 = 14000 bytes to the successor; 14 steps, the flow pays one latency itself.
  CHECK(endpoints(phases[0]) ==
        Pairs{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 0}});
  CHECK(all_flows_carry(phases[0], 14000));
  CHECK(phases[0].steps == 14);
  CHECK(phases[0].latency_ps == 13 * kIntraPs);

  SUBCASE("ring order as given") {
    const auto p = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, {5, 2, 7}, 3000);
    REQUIRE(p.size() == 1);
    CHECK(endpoints(p[0]) == Pairs{{5, 2}, {2, 7}, {7, 5}});
    CHECK(all_flows_carry(p[0], 4000));  // 2·2/3·3000
  }
  SUBCASE("shares round up to whole bytes") {
    // 2·7·1001/8 = 1751.75 -> 1752.
    const auto p = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, 1001);
    CHECK(all_flows_carry(p[0], 1752));
  }
  SUBCASE("collective efficiency inflates the bytes on the wire") {
    HardwareSpec slow = hw;
    slow.collective_efficiency = 0.8;  // 14000 / 0.8 = 17500
    const auto p = hw_models::plan_collective(topo, slow, Collective::kAllReduce, Algorithm::kRing, ranks, 8000);
    CHECK(all_flows_carry(p[0], 17500));
  }
}

TEST_CASE("ring reduce-scatter and all-gather: (n-1)/n of the bytes, n-1 steps") {
  const HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    const auto p = hw_models::plan_collective(topo, hw, kind, Algorithm::kRing, {0, 1, 2, 3}, 8000);
    REQUIRE(p.size() == 1);
    CHECK(endpoints(p[0]) == Pairs{{0, 1}, {1, 2}, {2, 3}, {3, 0}});
    CHECK(all_flows_carry(p[0], 6000));  // 3/4·8000
    CHECK(p[0].steps == 3);
    CHECK(p[0].latency_ps == 2 * kIntraPs);
  }
}

TEST_CASE("hierarchical all-reduce across nodes: 3 phases") {
  const HardwareSpec hw = test::nvswitch_cluster(2);
  const hw_models::Topology topo(hw);
  const std::vector<hw_models::Rank> ranks{0, 1, 2, 3, 8, 9, 10, 11};
  const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, 8000);
  REQUIRE(phases.size() == 3);
  // 1: reduce-scatter in each node, 3/4·8000 = 6000 per member.
  CHECK(endpoints(phases[0]) ==
        Pairs{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {8, 9}, {9, 10}, {10, 11}, {11, 8}});
  CHECK(all_flows_carry(phases[0], 6000));
  CHECK(phases[0].latency_ps == 2 * kIntraPs);
  // 2: all-reduce of the 8000/4 = 2000-byte shard between same-position ranks of the two
  //    nodes: 2·1/2·2000 = 2000 per member, 2 steps.
  CHECK(endpoints(phases[1]) ==
        Pairs{{0, 8}, {8, 0}, {1, 9}, {9, 1}, {2, 10}, {10, 2}, {3, 11}, {11, 3}});
  CHECK(all_flows_carry(phases[1], 2000));
  CHECK(phases[1].steps == 2);
  CHECK(phases[1].latency_ps == kInterPs);
  // 3: all-gather in each node, like phase 1.
  CHECK(endpoints(phases[2]) == endpoints(phases[0]));
  CHECK(all_flows_carry(phases[2], 6000));
}

TEST_CASE("hierarchical reduce-scatter and all-gather across nodes: 2 phases") {
  const HardwareSpec hw = test::nvswitch_cluster(2);
  const hw_models::Topology topo(hw);
  const std::vector<hw_models::Rank> ranks{0, 1, 2, 3, 8, 9, 10, 11};
  const auto rs = hw_models::plan_collective(topo, hw, Collective::kReduceScatter, Algorithm::kRing, ranks, 8000);
  REQUIRE(rs.size() == 2);
  CHECK(all_flows_carry(rs[0], 6000));  // intra: 3/4·8000
  CHECK(all_flows_carry(rs[1], 1000));  // inter: 1/2 of the 2000-byte shard
  CHECK(rs[1].steps == 1);
  CHECK(rs[1].latency_ps == 0);
  CHECK(endpoints(rs[1]) == Pairs{{0, 8}, {8, 0}, {1, 9}, {9, 1}, {2, 10}, {10, 2}, {3, 11}, {11, 3}});
  const auto ag = hw_models::plan_collective(topo, hw, Collective::kAllGather, Algorithm::kRing, ranks, 8000);
  REQUIRE(ag.size() == 2);
  CHECK(all_flows_carry(ag[0], 1000));  // inter first
  CHECK(all_flows_carry(ag[1], 6000));
}

TEST_CASE("one rank per node: the inter-node ring alone") {
  const HardwareSpec hw = test::nvswitch_cluster(4);
  const hw_models::Topology topo(hw);
  const auto p = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, {0, 8, 16, 24}, 4000);
  REQUIRE(p.size() == 1);
  CHECK(endpoints(p[0]) == Pairs{{0, 8}, {8, 16}, {16, 24}, {24, 0}});
  CHECK(all_flows_carry(p[0], 6000));  // 2·3/4·4000
  CHECK(p[0].steps == 6);
  CHECK(p[0].latency_ps == 5 * kInterPs);
}

TEST_CASE("uneven groups across nodes fall back to one flat ring") {
  const HardwareSpec hw = test::nvswitch_cluster(2);
  const hw_models::Topology topo(hw);
  const auto p = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, {0, 1, 8}, 3000);
  REQUIRE(p.size() == 1);
  CHECK(endpoints(p[0]) == Pairs{{0, 1}, {1, 8}, {8, 0}});
  CHECK(all_flows_carry(p[0], 4000));  // 2·2/3·3000
  CHECK(p[0].latency_ps == 3 * kInterPs);  // 4 steps, the slowest hop crosses nodes
}

TEST_CASE("send/recv and broadcast") {
  const HardwareSpec hw = test::nvswitch_cluster(2);
  const hw_models::Topology topo(hw);
  const auto sr = hw_models::plan_collective(topo, hw, Collective::kSendRecv, Algorithm::kRing, {3, 12}, 5000);
  REQUIRE(sr.size() == 1);
  CHECK(endpoints(sr[0]) == Pairs{{3, 12}});
  CHECK(all_flows_carry(sr[0], 5000));
  CHECK(sr[0].latency_ps == 0);  // the flow pays its path latency in the executor

  // Pipelined chain from ranks[0]: every hop carries the whole message; 3 steps.
  const auto bc = hw_models::plan_collective(topo, hw, Collective::kBroadcast, Algorithm::kRing, {0, 1, 2, 3}, 1000);
  REQUIRE(bc.size() == 1);
  CHECK(endpoints(bc[0]) == Pairs{{0, 1}, {1, 2}, {2, 3}});
  CHECK(all_flows_carry(bc[0], 1000));
  CHECK(bc[0].steps == 3);
  CHECK(bc[0].latency_ps == 2 * kIntraPs);
}

TEST_CASE("tree all-reduce: reduce up the levels, then broadcast down") {
  const HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  // Heap order over 7 ranks: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5, 6}; depth 2 -> 4 phases.
  const auto p = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kTree,
                                     {0, 1, 2, 3, 4, 5, 6}, 700);
  REQUIRE(p.size() == 4);
  CHECK(endpoints(p[0]) == Pairs{{3, 1}, {4, 1}, {5, 2}, {6, 2}});
  CHECK(endpoints(p[1]) == Pairs{{1, 0}, {2, 0}});
  CHECK(endpoints(p[2]) == Pairs{{0, 1}, {0, 2}});
  CHECK(endpoints(p[3]) == Pairs{{1, 3}, {1, 4}, {2, 5}, {2, 6}});
  for (const hw_models::Phase& phase : p) {
    CHECK(all_flows_carry(phase, 700));
    CHECK(phase.latency_ps == 0);
    CHECK(phase.steps == 1);
  }
  const auto bc = hw_models::plan_collective(topo, hw, Collective::kBroadcast, Algorithm::kTree, {4, 6, 7}, 10);
  REQUIRE(bc.size() == 1);
  CHECK(endpoints(bc[0]) == Pairs{{4, 6}, {4, 7}});
}

TEST_CASE("a single rank communicates nothing") {
  const HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  CHECK(hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, {3}, 100).empty());
}

TEST_CASE("collective errors") {
  HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  auto plan = [&](Collective kind, Algorithm algo, std::vector<hw_models::Rank> ranks) {
    return hw_models::plan_collective(topo, hw, kind, algo, ranks, 100);
  };
  CHECK_THROWS_AS(plan(Collective::kAllReduce, Algorithm::kRing, {}), lynx::Error);
  CHECK_THROWS_AS(plan(Collective::kAllReduce, Algorithm::kRing, {0, 1, 0}), lynx::Error);
  CHECK_THROWS_AS(plan(Collective::kAllReduce, Algorithm::kRing, {0, 8}), lynx::Error);
  CHECK_THROWS_AS(plan(Collective::kSendRecv, Algorithm::kRing, {0, 1, 2}), lynx::Error);
  CHECK_THROWS_AS(plan(Collective::kReduceScatter, Algorithm::kTree, {0, 1}), lynx::Error);
  hw.collective_efficiency = 0.0;
  CHECK_THROWS_AS(plan(Collective::kAllReduce, Algorithm::kRing, {0, 1}), lynx::Error);
  hw.collective_efficiency = 1.5;
  CHECK_THROWS_AS(plan(Collective::kAllReduce, Algorithm::kRing, {0, 1}), lynx::Error);
}

TEST_CASE("workload collective kinds map to hw collectives") {
  CHECK(hw_models::to_collective(model::CollectiveKind::kAllReduce) == Collective::kAllReduce);
  CHECK(hw_models::to_collective(model::CollectiveKind::kReduceScatter) == Collective::kReduceScatter);
  CHECK(hw_models::to_collective(model::CollectiveKind::kAllGather) == Collective::kAllGather);
  CHECK_THROWS_AS(hw_models::to_collective(model::CollectiveKind::kNone), lynx::Error);
}

namespace {

/// nvswitch_cluster with collective_model nccl and round protocol numbers.
HardwareSpec nccl_cluster(int nodes) {
  HardwareSpec hw = test::nvswitch_cluster(nodes);
  hw.collective_model = CollectiveModel::kNccl;
  hw.nccl.ll = {6'000'000, 500'000, 1'000'000, 3'000'000, 0.25};
  hw.nccl.ll128 = {14'000'000, 2'000'000, 2'500'000, 4'000'000, 0.9};
  hw.nccl.simple = {8'000'000, 3'000'000, 5'000'000, 14'000'000, 1.0};
  return hw;
}

std::vector<int> first_ranks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  return ranks;
}

}  // namespace

TEST_CASE("nccl model: the fastest protocol per call, base + steps x step + wire / (bw x fraction)") {
  const HardwareSpec hw = nccl_cluster(1);
  const hw_models::Topology topo(hw);
  const auto ranks = first_ranks(8);
  // Small: LL. 8 ranks, 14 steps: 6 + 14 x 0.5 = 13 us of latency, plus one 2 us path.
  {
    const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, 8192);
    REQUIRE(phases.size() == 1);
    CHECK(phases[0].latency_ps == 13'000'000);
    CHECK(all_flows_carry(phases[0], 2 * 7 * 8192 / 8 * 4));  // wire / 0.25
  }
  // Large: Simple. 8 + 14 x 3 = 50 us, full bandwidth.
  {
    const std::uint64_t bytes = 1ULL << 30;
    const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, bytes);
    REQUIRE(phases.size() == 1);
    CHECK(phases[0].latency_ps == 50'000'000);
    CHECK(all_flows_carry(phases[0], 2 * 7 * bytes / 8));
  }
  // Any size: the choice is no slower than each protocol alone (a profile with only it).
  for (std::uint64_t bytes : {1ULL << 12, 1ULL << 20, 4ULL << 20, 64ULL << 20}) {
    CAPTURE(bytes);
    const TimePs t = hw_models::idle_collective_time_ps(
        topo, hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, bytes));
    for (const NcclProtocol* only : {&hw.nccl.ll, &hw.nccl.ll128, &hw.nccl.simple}) {
      HardwareSpec one = hw;
      one.nccl = {};
      one.nccl.simple = *only;
      const TimePs alone = hw_models::idle_collective_time_ps(
          topo, hw_models::plan_collective(topo, one, Collective::kAllReduce, Algorithm::kRing, ranks, bytes));
      CHECK(t <= alone);
    }
  }
  // 4 MiB (7.34 MB on the wire): LL128, 42 + 2 + 27.2 us, beats LL (13 + 2 + 97.9 us) and
  // Simple (50 + 2 + 24.5 us); at 1 MiB LL wins, at 16 MiB Simple.
  const auto mid = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, 4ULL << 20);
  CHECK(mid[0].latency_ps == 42'000'000);
}

TEST_CASE("nccl model: sequence parallelism's reduce-scatter + all-gather is slower than one all-reduce") {
  // Same bytes on the wire and the same 2(n-1) steps, but two calls: two base latencies and
  // two path latencies, and each half-size call sits lower on the bandwidth curve.
  const HardwareSpec hw = nccl_cluster(1);
  const hw_models::Topology topo(hw);
  const auto ranks = first_ranks(8);
  for (std::uint64_t bytes : {64ULL << 10, 4ULL << 20, 100ULL << 20}) {
    CAPTURE(bytes);
    const TimePs ar = hw_models::idle_collective_time_ps(
        topo, hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, ranks, bytes));
    const TimePs rs = hw_models::idle_collective_time_ps(
        topo, hw_models::plan_collective(topo, hw, Collective::kReduceScatter, Algorithm::kRing, ranks, bytes));
    const TimePs ag = hw_models::idle_collective_time_ps(
        topo, hw_models::plan_collective(topo, hw, Collective::kAllGather, Algorithm::kRing, ranks, bytes));
    CHECK(rs + ag > ar);
  }
}

TEST_CASE("nccl model: the buffer pass is half the buffer per ring phase") {
  // An all-reduce (reduce-scatter phase + all-gather phase) pays S / buffer_bw, a one-phase
  // call S / 2 / buffer_bw, send/recv nothing: all-gather and reduce-scatter keep the
  // all-reduce's bus bandwidth (tuning.cc's one busBw per ring collective). Simple only, so the
  // protocol choice cannot hide the pass.
  HardwareSpec hw = nccl_cluster(1);
  hw.nccl.ll = {};
  hw.nccl.ll128 = {};
  hw.nccl.buffer_bw_bytes_per_s = 500'000'000'000;  // 500 GB/s
  HardwareSpec no_pass = hw;
  no_pass.nccl.buffer_bw_bytes_per_s = 0;
  const hw_models::Topology topo(hw);
  const std::uint64_t bytes = 100ULL << 20;
  const auto pass_ps = [&](Collective kind) {
    const int n = kind == Collective::kSendRecv ? 2 : 8;
    const auto with = hw_models::plan_collective(topo, hw, kind, Algorithm::kRing, first_ranks(n), bytes);
    const auto without = hw_models::plan_collective(topo, no_pass, kind, Algorithm::kRing, first_ranks(n), bytes);
    REQUIRE(with.size() == without.size());
    return with.front().latency_ps - without.front().latency_ps;
  };
  CHECK(pass_ps(Collective::kAllReduce) == transfer_time_ps(bytes, hw.nccl.buffer_bw_bytes_per_s));
  CHECK(pass_ps(Collective::kAllGather) == transfer_time_ps(bytes / 2, hw.nccl.buffer_bw_bytes_per_s));
  CHECK(pass_ps(Collective::kReduceScatter) == transfer_time_ps(bytes / 2, hw.nccl.buffer_bw_bytes_per_s));
  CHECK(pass_ps(Collective::kBroadcast) == transfer_time_ps(bytes / 2, hw.nccl.buffer_bw_bytes_per_s));
  CHECK(pass_ps(Collective::kSendRecv) == 0);
  // Idle times: an all-gather costs half an all-reduce's wire time and pass, plus its own
  // base, step latencies (7 steps instead of 14) and one path latency.
  const TimePs ar = hw_models::idle_collective_time_ps(
      topo, hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, first_ranks(8), bytes));
  const TimePs ag = hw_models::idle_collective_time_ps(
      topo, hw_models::plan_collective(topo, hw, Collective::kAllGather, Algorithm::kRing, first_ranks(8), bytes));
  const TimePs fixed = hw.nccl.simple.base_ps + topo.path_latency_ps(0, 1);
  const TimePs step = hw.nccl.simple.step_nvlink_ps;
  CHECK(std::llabs((ar - fixed - 14 * step) - 2 * (ag - fixed - 7 * step)) <= 2);
}

TEST_CASE("nccl model: step latency by scope, base paid once per call") {
  const HardwareSpec hw = nccl_cluster(2);
  const hw_models::Topology topo(hw);
  // 2 nodes x 8: intra RS (7 NVLink steps), inter AR of the shard (2 net steps), intra AG.
  const std::uint64_t bytes = 1ULL << 30;  // Simple
  const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, first_ranks(16), bytes);
  REQUIRE(phases.size() == 3);
  CHECK(phases[0].latency_ps == 8'000'000 + 7 * 3'000'000);
  CHECK(phases[1].latency_ps == 2 * 14'000'000);
  CHECK(phases[2].latency_ps == 7 * 3'000'000);
  // PCIe nodes use step_pcie.
  HardwareSpec pcie = test::pcie_cluster(1);
  pcie.collective_model = CollectiveModel::kNccl;
  pcie.nccl = hw.nccl;
  const hw_models::Topology pcie_topo(pcie);
  const auto p = hw_models::plan_collective(pcie_topo, pcie, Collective::kAllGather, Algorithm::kRing, first_ranks(8), bytes);
  REQUIRE(p.size() == 1);
  CHECK(p[0].latency_ps == 8'000'000 + 7 * 5'000'000);
}

TEST_CASE("alpha-beta model is unchanged by nccl fields") {
  HardwareSpec hw = test::nvswitch_cluster(1);
  hw.nccl.simple = {8'000'000, 3'000'000, 5'000'000, 14'000'000, 1.0};  // ignored
  const hw_models::Topology topo(hw);
  const auto phases = hw_models::plan_collective(topo, hw, Collective::kAllReduce, Algorithm::kRing, first_ranks(8), 8000);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].latency_ps == 13 * kIntraPs);
}

TEST_CASE("nccl model: a dp 48 reduce-scatter across 48 nodes (tp 8) costs NCCL's ring, exactly") {
  // 384 GPUs, tp 8 inside each node, dp 48 across nodes: each DP group holds the GPUs of one
  // local index, one per node, so NCCL runs one ring of 48 ranks (reduce-scatter is ring-only;
  // src/graph/tuning.cc: nsteps = nRanks - 1, all of them inter-node steps). Each rank sends
  // 47/48 of the buffer to its successor through its own rail NIC, the 8 groups on 8 rails:
  // bytes per NIC = ceil(47·S/48), 47 network steps, one call's base and half-buffer pass.
  HardwareSpec hw = nccl_cluster(48);
  hw.nccl.buffer_bw_bytes_per_s = 600'000'000'000;  // 600 GB/s
  const hw_models::Topology topo(hw);
  const std::uint64_t bytes = 1ULL << 30;  // 1 GiB of gradients
  for (int local = 0; local < 8; ++local) {
    std::vector<int> ranks;
    for (int node = 0; node < 48; ++node) ranks.push_back(node * 8 + local);
    const auto phases = hw_models::plan_collective(topo, hw, Collective::kReduceScatter, Algorithm::kRing, ranks, bytes);
    REQUIRE(phases.size() == 1);
    const std::uint64_t per_nic = (47 * bytes + 47) / 48;
    CHECK(all_flows_carry(phases[0], per_nic));
    CHECK(phases[0].flows.size() == 48);
    CHECK(phases[0].steps == 47);
    // Simple wins at 1 GiB: base 8 us + 47 × step_net 14 us + a one-phase call's pass over
    // half the buffer, 0.5 GiB / 600 GB/s.
    const TimePs buffer_ps = transfer_time_ps(bytes / 2, hw.nccl.buffer_bw_bytes_per_s);
    CHECK(phases[0].latency_ps == 8'000'000 + 47 * 14'000'000 + buffer_ps);
    // Each flow leaves through the NIC of its rail and enters the next node's NIC of that rail:
    // GPU -> PCIe -> NIC -> fabric -> NIC -> PCIe -> GPU, the 25 GB/s NIC the narrowest link.
    for (const hw_models::FlowSpec& f : phases[0].flows) {
      CHECK(topo.node_of(f.dst) == (topo.node_of(f.src) + 1) % 48);
      CHECK(f.dst % 8 == local);
      CHECK(topo.path_bw_bytes_per_s(f.src, f.dst) == hw.nic.bw_bytes_per_s);
    }
    CHECK(hw_models::idle_collective_time_ps(topo, phases) ==
          transfer_time_ps(per_nic, hw.nic.bw_bytes_per_s) + topo.path_latency_ps(0, 8) + phases[0].latency_ps);
  }
}
