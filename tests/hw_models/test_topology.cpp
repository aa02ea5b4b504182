// Tests for hw_models/topology: links, paths (NVSwitch, PCIe, across nodes), rail alignment.
#include "hw_models/topology.hpp"

#include "hw_fixtures.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

using namespace lynx;

namespace {

std::vector<std::string> link_names(const hw_models::Topology& topo, hw_models::Rank src, hw_models::Rank dst) {
  std::vector<std::string> names;
  for (sim::LinkId id : topo.path(src, dst))
    names.push_back(topo.links()[static_cast<std::size_t>(id)].name);
  return names;
}

}  // namespace

TEST_CASE("NVSwitch node") {
  const hw_models::Topology topo(test::nvswitch_cluster(1));
  CHECK(topo.num_gpus() == 8);
  CHECK(topo.node_of(7) == 0);
  // 8 GPUs × 2 NVLink + 8 GPUs × 2 PCIe + 4 PCIe switches × 2 uplinks; no NICs on one node.
  CHECK(topo.links().size() == 40);
  CHECK(link_names(topo, 0, 3) == std::vector<std::string>{"n0.gpu0->nvswitch", "n0.nvswitch->gpu3"});
  CHECK(link_names(topo, 3, 0) == std::vector<std::string>{"n0.gpu3->nvswitch", "n0.nvswitch->gpu0"});
  CHECK(topo.path_latency_ps(0, 3) == 2'000'000);  // 2 × 1 us
  CHECK(topo.path_bw_bytes_per_s(0, 3) == 300'000'000'000);
  CHECK(topo.path(5, 5).empty());
  CHECK(topo.path_latency_ps(5, 5) == 0);
  // The link carries the profile's NVLink numbers.
  const sim::LinkDesc& up = topo.links()[static_cast<std::size_t>(topo.path(0, 3)[0])];
  CHECK(up.bw_bytes_per_s == 300'000'000'000);
  CHECK(up.latency_ps == 1'000'000);
}

TEST_CASE("PCIe node: same switch, and across switches through the host") {
  const hw_models::Topology topo(test::pcie_cluster(1));
  // 8 GPUs × 2 PCIe + 4 switches × 2 uplinks.
  CHECK(topo.links().size() == 24);
  CHECK(link_names(topo, 0, 1) == std::vector<std::string>{"n0.gpu0->pcie0", "n0.pcie0->gpu1"});
  CHECK(topo.path_latency_ps(0, 1) == 1'000'000);  // 2 × 0.5 us
  CHECK(topo.path_bw_bytes_per_s(0, 1) == 32'000'000'000);
  CHECK(link_names(topo, 0, 2) == std::vector<std::string>{"n0.gpu0->pcie0", "n0.pcie0->host",
                                                           "n0.host->pcie1", "n0.pcie1->gpu2"});
  CHECK(topo.path_latency_ps(0, 2) == 2'400'000);  // 0.5 + 0.7 + 0.7 + 0.5 us
  CHECK(topo.path_bw_bytes_per_s(0, 2) == 16'000'000'000);  // the shared uplink
  CHECK(link_names(topo, 7, 6) == std::vector<std::string>{"n0.gpu7->pcie3", "n0.pcie3->gpu6"});
}

TEST_CASE("across nodes: rail-aligned GPUDirect RDMA") {
  const hw_models::Topology topo(test::nvswitch_cluster(2));
  CHECK(topo.num_gpus() == 16);
  CHECK(topo.node_of(9) == 1);
  // Per node 40 links as above + 8 NICs × 2 PCIe + 8 NICs × 2 fabric links.
  CHECK(topo.links().size() == 2 * 72);
  CHECK(link_names(topo, 1, 9) ==
        std::vector<std::string>{"n0.gpu1->pcie0", "n0.pcie0->nic1", "n0.nic1->fabric",
                                 "fabric->n1.nic1", "n1.nic1->pcie0", "n1.pcie0->gpu1"});
  // 0.5 + 0.5 + 2 + 2 + 0.5 + 0.5 us; bottleneck the 25 GB/s NIC.
  CHECK(topo.path_latency_ps(1, 9) == 6'000'000);
  CHECK(topo.path_bw_bytes_per_s(1, 9) == 25'000'000'000);
  // GPU 2 sends on its rail NIC 2; GPU 5 receives on its own NIC 5 (same PCIe switch).
  CHECK(link_names(topo, 2, 13) ==
        std::vector<std::string>{"n0.gpu2->pcie1", "n0.pcie1->nic2", "n0.nic2->fabric",
                                 "fabric->n1.nic5", "n1.nic5->pcie2", "n1.pcie2->gpu5"});
  // Inside a node the NVSwitch is still used.
  CHECK(link_names(topo, 9, 10) ==
        std::vector<std::string>{"n1.gpu1->nvswitch", "n1.nvswitch->gpu2"});
}

TEST_CASE("rail alignment with fewer NICs than GPUs") {
  // 2 NICs on 8 GPUs: NIC 0 on the switch of GPU 0, NIC 1 on the switch of GPU 4 (pcie2);
  // GPU g uses NIC g % 2 (HardwareSpec's rail rule), so GPU 1 and GPU 4 cross the host.
  const hw_models::Topology topo(test::pcie_cluster(2));
  CHECK(link_names(topo, 1, 8) ==
        std::vector<std::string>{"n0.gpu1->pcie0", "n0.pcie0->host", "n0.host->pcie2",
                                 "n0.pcie2->nic1", "n0.nic1->fabric", "fabric->n1.nic0",
                                 "n1.nic0->pcie0", "n1.pcie0->gpu0"});
  CHECK(link_names(topo, 4, 12) ==
        std::vector<std::string>{"n0.gpu4->pcie2", "n0.pcie2->host", "n0.host->pcie0",
                                 "n0.pcie0->nic0", "n0.nic0->fabric", "fabric->n1.nic0",
                                 "n1.nic0->pcie0", "n1.pcie0->host", "n1.host->pcie2",
                                 "n1.pcie2->gpu4"});
}

TEST_CASE("1024 GPUs (128 nodes) build and route") {
  const hw_models::Topology topo(test::nvswitch_cluster(128));
  CHECK(topo.num_gpus() == 1024);
  CHECK(topo.links().size() == 128 * 72);
  CHECK(topo.node_of(1023) == 127);
  // GPU 0 (rail 0) -> GPU 1023 (node 127, local 7, rail 7).
  CHECK(link_names(topo, 0, 1023) ==
        std::vector<std::string>{"n0.gpu0->pcie0", "n0.pcie0->nic0", "n0.nic0->fabric",
                                 "fabric->n127.nic7", "n127.nic7->pcie3", "n127.pcie3->gpu7"});
  CHECK(link_names(topo, 1020, 1023) ==
        std::vector<std::string>{"n127.gpu4->nvswitch", "n127.nvswitch->gpu7"});
  // Deterministic: a second build gives the same link ids.
  const hw_models::Topology again(test::nvswitch_cluster(128));
  CHECK(again.path(517, 3) == topo.path(517, 3));
  // A cached path reference survives many later insertions.
  const std::vector<sim::LinkId>& first = topo.path(8, 16);
  const std::vector<sim::LinkId> copy = first;
  for (hw_models::Rank r = 0; r < 1024; r += 3) topo.path(r, 1023 - r);
  CHECK(first == copy);
}

TEST_CASE("topology errors") {
  HardwareSpec hw = test::nvswitch_cluster(2);
  CHECK_THROWS_AS(hw_models::Topology(hw).path(0, 16), lynx::Error);
  CHECK_THROWS_AS(hw_models::Topology(hw).node_of(-1), lynx::Error);
  hw = test::nvswitch_cluster(2);
  hw.nics_per_node = 0;
  CHECK_THROWS_AS(hw_models::Topology{hw}, lynx::Error);
  hw = test::nvswitch_cluster(1);
  hw.nics_per_node = 0;  // fine on one node
  hw.nic = {};
  CHECK_NOTHROW(hw_models::Topology{hw});
  hw.nvlink.bw_bytes_per_s = 0;
  CHECK_THROWS_AS(hw_models::Topology{hw}, lynx::Error);
  hw = test::nvswitch_cluster(1);
  hw.gpus_per_node = 0;
  CHECK_THROWS_AS(hw_models::Topology{hw}, lynx::Error);
}

TEST_CASE("links private per GPU and mirroring for the one-rank-per-group simulation") {
  const hw_models::Topology dgx(test::nvswitch_cluster(2));
  CHECK(dgx.links_private_per_gpu());
  // Representatives: every rank of node 0 stands for itself, every rank of node 1 for rank 8.
  std::vector<hw_models::Rank> rep(16);
  for (hw_models::Rank r = 0; r < 16; ++r) rep[static_cast<std::size_t>(r)] = r < 8 ? r : 8;
  auto name = [&](sim::LinkId id) { return dgx.links()[static_cast<std::size_t>(id)].name; };
  const std::vector<sim::LinkId>& intra = dgx.path(8, 11);  // n1.gpu0->nvswitch->gpu3
  CHECK(name(dgx.mirror_link(intra[0], rep)) == "n1.gpu0->nvswitch");
  CHECK(name(dgx.mirror_link(intra[1], rep)) == "n1.nvswitch->gpu0");
  const std::vector<sim::LinkId>& inter = dgx.path(2, 13);  // ... fabric->n1.nic5->pcie2->gpu5
  CHECK(name(dgx.mirror_link(inter[0], rep)) == "n0.gpu2->pcie1");  // rank 2 represents itself
  CHECK(name(dgx.mirror_link(inter[3], rep)) == "fabric->n1.nic0");
  CHECK(name(dgx.mirror_link(inter[4], rep)) == "n1.nic0->pcie0");
  CHECK(name(dgx.mirror_link(inter[5], rep)) == "n1.pcie0->gpu0");
  // A rank mapped to -1 keeps its links.
  rep[13] = -1;
  CHECK(dgx.mirror_link(inter[5], rep) == inter[5]);

  // PCIe nodes: GPUs 0 and 2 share the host uplinks on the way between switches.
  CHECK_FALSE(hw_models::Topology(test::pcie_cluster(1)).links_private_per_gpu());
  // One GPU per PCIe switch: every uplink has one owner again.
  HardwareSpec single = test::pcie_cluster(1);
  single.gpus_per_pcie_switch = 1;
  CHECK(hw_models::Topology(single).links_private_per_gpu());
  // Two NICs for eight GPUs: a NIC carries several GPUs' traffic.
  HardwareSpec shared_nics = test::nvswitch_cluster(2);
  shared_nics.nics_per_node = 2;
  CHECK_FALSE(hw_models::Topology(shared_nics).links_private_per_gpu());
}

TEST_CASE("only the nodes a layout uses are built") {
  // 131072 declared nodes (a million GPUs); 12 GPUs used occupy two nodes.
  const hw_models::Topology used(test::nvswitch_cluster(131072), 12);
  CHECK(used.num_gpus() == 16);
  CHECK(used.links().size() == hw_models::Topology(test::nvswitch_cluster(2)).links().size());
  CHECK(used.path(0, 15) == hw_models::Topology(test::nvswitch_cluster(2)).path(0, 15));
  // One node used: no NICs and no fabric, as on a one-node cluster.
  const hw_models::Topology one(test::nvswitch_cluster(131072), 8);
  CHECK(one.num_gpus() == 8);
  CHECK(one.links().size() == 40);
  // Never more than the cluster has; 0 = every node.
  CHECK(hw_models::Topology(test::nvswitch_cluster(2), 64).num_gpus() == 16);
  CHECK(hw_models::Topology(test::nvswitch_cluster(3)).num_gpus() == 24);
}

TEST_CASE("paths asked from several threads at once equal those asked from one") {
  // Fast mode's step simulations and the planners of other configurations ask one shared
  // Topology for paths concurrently (sweep, best); its path cache must take that.
  const hw_models::Topology reference(test::pcie_cluster(8));
  const int n = reference.num_gpus();
  for (int round = 0; round < 10; ++round) {  // a race shows in some rounds, not in every one
    const hw_models::Topology shared(test::pcie_cluster(8));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int k = 0; k < n * n; ++k) {
          const int pair = (k * 7 + t * 13 + round) % (n * n);  // each thread in its own order
          (void)shared.path(pair / n, pair % n);
        }
      });
    for (std::thread& th : threads) th.join();
    bool same = true;
    for (int src = 0; src < n; ++src)
      for (int dst = 0; dst < n; ++dst) same = same && shared.path(src, dst) == reference.path(src, dst);
    CHECK(same);
  }
}
