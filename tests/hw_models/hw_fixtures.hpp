#pragma once
// Hand-built hardware specs for the hw_models tests (profiles are another component's files).
#include "scenarios/scenario.hpp"

#include <string>

namespace lynx::test {

/// A DGX-like node: 8 GPUs on an NVSwitch, 2 GPUs per PCIe switch, 8 rail NICs.
/// Round numbers so expected values are easy to compute by hand.
inline HardwareSpec nvswitch_cluster(int nodes) {
  HardwareSpec hw;
  hw.profile = "test-nvswitch";
  hw.peak_flops_per_s = 100'000'000'000'000;  // 100 TFLOP/s
  hw.hbm_bw_bytes_per_s = 2'000'000'000'000;  // 2 TB/s
  hw.nodes = nodes;
  hw.gpus_per_node = 8;
  hw.intra_node = IntraNode::kNvSwitch;
  hw.nvlink = {300'000'000'000, 1'000'000};    // 300 GB/s, 1 us
  hw.pcie = {32'000'000'000, 500'000};         // 32 GB/s, 0.5 us
  hw.gpus_per_pcie_switch = 2;
  hw.pcie_host = {32'000'000'000, 700'000};    // 32 GB/s, 0.7 us
  hw.nics_per_node = 8;
  hw.nic = {25'000'000'000, 2'000'000};        // 25 GB/s, 2 us
  hw.collective_efficiency = 1.0;
  return hw;
}

/// Compute trays of `gpus_per_node` GPUs (4 NICs each) whose NVLink domain spans
/// `domain_gpus` GPUs (GB200 NVL72: 4 and 72); the fixture's round link numbers otherwise.
inline HardwareSpec nvlink_domain_cluster(int nodes, int gpus_per_node, int domain_gpus) {
  HardwareSpec hw = nvswitch_cluster(nodes);
  hw.profile = "test-nvlink-domain";
  hw.gpus_per_node = gpus_per_node;
  hw.nvlink_domain_gpus = domain_gpus;
  hw.nics_per_node = gpus_per_node;
  return hw;
}

/// A PCIe node: no NVLink, 2 GPUs per PCIe switch, two NICs.
inline HardwareSpec pcie_cluster(int nodes) {
  HardwareSpec hw = nvswitch_cluster(nodes);
  hw.profile = "test-pcie";
  hw.intra_node = IntraNode::kPcie;
  hw.nvlink = {};
  hw.pcie_host = {16'000'000'000, 700'000};    // 16 GB/s uplink shared by two GPUs
  hw.nics_per_node = 2;
  return hw;
}

}  // namespace lynx::test
