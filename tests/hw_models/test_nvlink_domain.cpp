// Tests for NVLink domains larger than a node (hardware.node.nvlink_domain_gpus, GB200 NVL72):
// paths between trays of one domain stay on NVLink, and collectives whose group lies inside one
// domain are NVLink collectives, not hierarchical ones over the NICs.
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"

#include "hw_fixtures.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace lynx;
using hw_models::Algorithm;
using hw_models::Collective;

namespace {

std::vector<std::string> link_names(const hw_models::Topology& topo, hw_models::Rank src, hw_models::Rank dst) {
  std::vector<std::string> names;
  for (sim::LinkId id : topo.path(src, dst)) names.push_back(topo.links()[static_cast<std::size_t>(id)].name);
  return names;
}

/// True when every flow of every phase goes GPU -> NVSwitch -> GPU (two NVLink links).
bool all_on_nvlink(const hw_models::Topology& topo, const std::vector<hw_models::Phase>& phases) {
  for (const hw_models::Phase& phase : phases)
    for (const hw_models::FlowSpec& f : phase.flows) {
      const std::vector<std::string> names = link_names(topo, f.src, f.dst);
      if (names.size() != 2) return false;
      for (const std::string& name : names)
        if (name.find("nvswitch") == std::string::npos) return false;
    }
  return !phases.empty();
}

/// True when every flow of every phase crosses the inter-node fabric.
bool all_over_nics(const hw_models::Topology& topo, const std::vector<hw_models::Phase>& phases) {
  for (const hw_models::Phase& phase : phases)
    for (const hw_models::FlowSpec& f : phase.flows) {
      bool fabric = false;
      for (const std::string& name : link_names(topo, f.src, f.dst)) fabric |= name.find("fabric") != std::string::npos;
      if (!fabric) return false;
    }
  return !phases.empty();
}

/// The data-parallel group of rank 0 with tp 8: ranks 0, 8, ..., 8·(dp-1).
std::vector<hw_models::Rank> dp_group(int dp) {
  std::vector<hw_models::Rank> ranks;
  for (int i = 0; i < dp; ++i) ranks.push_back(8 * i);
  return ranks;
}

}  // namespace

TEST_CASE("an NVLink domain of two 4-GPU trays: GPUs of both trays talk over one NVSwitch") {
  // 4 trays of 4 GPUs, domains of 8 GPUs: trays 0-1 are domain 0, trays 2-3 domain 1.
  const hw_models::Topology topo(test::nvlink_domain_cluster(4, 4, 8));
  CHECK(topo.num_gpus() == 16);
  CHECK(topo.node_of(5) == 1);
  CHECK(topo.domain_of(5) == 0);
  CHECK(topo.domain_of(7) == 0);
  CHECK(topo.domain_of(8) == 1);
  // A domain rewires the NVLink links; it adds none: 4 GPUs x 2 NVLink + 4 x 2 PCIe + 2 switch
  // uplinks x 2 + 4 NICs x 2 PCIe + 4 x 2 fabric = 36 per tray, as without it.
  CHECK(topo.links().size() == 4 * 36);
  CHECK(hw_models::Topology(test::nvlink_domain_cluster(4, 4, 0)).links().size() == 4 * 36);
  // Tray 0 to tray 1: NVLink through the domain's switch (tray 0's NVSwitch vertex), 2 x 1 us.
  CHECK(link_names(topo, 1, 6) == std::vector<std::string>{"n0.gpu1->nvswitch", "n0.nvswitch->n1.gpu2"});
  CHECK(link_names(topo, 6, 1) == std::vector<std::string>{"n1.gpu2->n0.nvswitch", "n0.nvswitch->gpu1"});
  CHECK(topo.path_latency_ps(1, 6) == 2'000'000);
  CHECK(topo.path_bw_bytes_per_s(1, 6) == 300'000'000'000);
  // Inside tray 1, the same switch.
  CHECK(link_names(topo, 5, 6) == std::vector<std::string>{"n1.gpu1->n0.nvswitch", "n0.nvswitch->n1.gpu2"});
  // Domain 1 has its own switch (tray 2's).
  CHECK(link_names(topo, 9, 14) == std::vector<std::string>{"n2.gpu1->nvswitch", "n2.nvswitch->n3.gpu2"});
  // Between domains: GPUDirect RDMA over the rail NICs, as between nodes.
  CHECK(link_names(topo, 1, 9) == std::vector<std::string>{"n0.gpu1->pcie0", "n0.pcie0->nic1", "n0.nic1->fabric",
                                                           "fabric->n2.nic1", "n2.nic1->pcie0", "n2.pcie0->gpu1"});
  // Each NVLink is still one GPU's own: the symmetry reduction may mirror them.
  CHECK(topo.links_private_per_gpu());
  std::vector<hw_models::Rank> rank_to_rep(16, -1);
  rank_to_rep[6] = 4;  // tray 1's GPU 2 stands for tray 1's GPU 0
  const sim::LinkId up_of_6 = topo.path(6, 1)[0];
  CHECK(topo.links()[static_cast<std::size_t>(topo.mirror_link(up_of_6, rank_to_rep))].name == "n1.gpu0->n0.nvswitch");
}

TEST_CASE("an NVLink domain must be whole NVSwitch nodes") {
  CHECK_THROWS_AS(hw_models::Topology(test::nvlink_domain_cluster(4, 4, 6)), lynx::Error);
  HardwareSpec pcie = test::nvlink_domain_cluster(4, 4, 8);
  pcie.intra_node = IntraNode::kPcie;
  CHECK_THROWS_AS(hw_models::Topology{pcie}, lynx::Error);
}

TEST_CASE("tp 8 / dp 9: on a 72-GPU NVLink domain every all-reduce is on NVLink; on 8-GPU nodes dp crosses NICs") {
  const HardwareSpec nvl72 = test::nvlink_domain_cluster(18, 4, 72);  // 18 trays of 4 GPUs
  const HardwareSpec hgx = test::nvswitch_cluster(9);                 // 9 nodes of 8 GPUs
  const hw_models::Topology nvl72_topo(nvl72);
  const hw_models::Topology hgx_topo(hgx);
  const std::uint64_t bytes = 9'000'000;  // ring all-reduce over 9: 2·8/9 of it = 16 MB per member

  // Data parallel (ranks 0, 8, ..., 64): on NVL72 one flat ring of 9 inside the domain, 16 steps.
  const auto dp72 = hw_models::plan_collective(nvl72_topo, nvl72, Collective::kAllReduce, Algorithm::kRing, dp_group(9), bytes);
  REQUIRE(dp72.size() == 1);
  CHECK(dp72[0].flows.size() == 9);
  CHECK(dp72[0].steps == 16);
  CHECK(all_on_nvlink(nvl72_topo, dp72));
  // 16 MB at 300 GB/s = 53.333... us (rounded up to whole ps), + 16 steps x 2 us of path latency.
  CHECK(hw_models::idle_collective_time_ps(nvl72_topo, dp72) == 53'333'334 + 16 * 2'000'000);
  // On HGX-like nodes one rank per node: the inter-node ring alone, over the NICs.
  const auto dp8 = hw_models::plan_collective(hgx_topo, hgx, Collective::kAllReduce, Algorithm::kRing, dp_group(9), bytes);
  REQUIRE(dp8.size() == 1);
  CHECK(all_over_nics(hgx_topo, dp8));
  // 16 MB at 25 GB/s = 640 us, + 16 steps x 6 us of path latency.
  CHECK(hw_models::idle_collective_time_ps(hgx_topo, dp8) == 640'000'000 + 16 * 6'000'000);

  // Tensor parallel (ranks 0-7, two trays): one NVLink ring on NVL72; the same trays without
  // the domain run hierarchically (RS in each tray, AR across over the NICs, AG).
  const std::vector<hw_models::Rank> tp{0, 1, 2, 3, 4, 5, 6, 7};
  const auto tp72 = hw_models::plan_collective(nvl72_topo, nvl72, Collective::kAllReduce, Algorithm::kRing, tp, bytes);
  REQUIRE(tp72.size() == 1);
  CHECK(all_on_nvlink(nvl72_topo, tp72));
  const HardwareSpec trays = test::nvlink_domain_cluster(18, 4, 0);
  const hw_models::Topology trays_topo(trays);
  const auto tp_trays = hw_models::plan_collective(trays_topo, trays, Collective::kAllReduce, Algorithm::kRing, tp, bytes);
  REQUIRE(tp_trays.size() == 3);
  CHECK(all_over_nics(trays_topo, {tp_trays[1]}));
}

TEST_CASE("nccl model: steps inside an NVLink domain cost step_nvlink, between domains step_net") {
  HardwareSpec nvl72 = test::nvlink_domain_cluster(36, 4, 72);  // two racks
  nvl72.collective_model = CollectiveModel::kNccl;
  nvl72.nccl.simple = {8'000'000, 3'000'000, 5'000'000, 14'000'000, 1.0};  // the only protocol
  const hw_models::Topology topo(nvl72);
  // dp 9 inside rack 0: one call, 16 NVLink steps.
  const auto inside = hw_models::plan_collective(topo, nvl72, Collective::kAllReduce, Algorithm::kRing, dp_group(9), 9'000'000);
  REQUIRE(inside.size() == 1);
  CHECK(inside[0].latency_ps == 8'000'000 + 16 * 3'000'000);
  // Rank 0 of each rack (ranks 0 and 72): 2 net steps.
  const auto across = hw_models::plan_collective(topo, nvl72, Collective::kAllReduce, Algorithm::kRing, {0, 72}, 9'000'000);
  REQUIRE(across.size() == 1);
  CHECK(across[0].latency_ps == 8'000'000 + 2 * 14'000'000);
}
