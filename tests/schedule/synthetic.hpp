#pragma once
// A synthetic workload and cluster for schedule tests: one GEMM per layer with exactly 1 us
// forward and 2 us backward on a 1 PFLOP/s GPU at efficiency 1, no launch overhead, no
// collectives, zero-byte stage transfers over zero-latency links (free communication).
#include "scenarios/scenario.hpp"
#include "model/workload.hpp"

namespace lynx::test {

inline constexpr TimePs kForwardPs = 1'000'000;   // 1 us
inline constexpr TimePs kBackwardPs = 2'000'000;  // dgrad 1 us + wgrad 1 us
inline constexpr std::int64_t kSavedBytes = 1'000'000;

inline HardwareSpec synthetic_hardware(int gpus) {
  HardwareSpec hw;
  hw.profile = "synthetic";
  hw.gpu_name = "synthetic";
  hw.peak_flops_per_s = 1'000'000'000'000'000;  // 1e15: 1e9 FLOPs take 1 us
  hw.hbm_bw_bytes_per_s = 1'000'000'000'000;
  hw.memory_bytes = 1ull << 40;
  hw.gemm = {1.0, 0.0};
  hw.attention = {1.0, 0.0};
  hw.memory_bound = {1.0, 0.0};
  hw.nodes = 1;
  hw.gpus_per_node = gpus;
  hw.intra_node = IntraNode::kNvSwitch;
  hw.nvlink = {100'000'000'000, 0};
  hw.pcie = {32'000'000'000, 0};
  hw.pcie_host = {32'000'000'000, 0};
  hw.gpus_per_pcie_switch = 1;
  hw.nics_per_node = 1;
  hw.nic = {25'000'000'000, 0};
  return hw;
}

inline Scenario synthetic_scenario(int pp, int micro_batches, int chunks, ScheduleKind kind) {
  Scenario sc;
  sc.name = "synthetic";
  sc.model.layers = pp * chunks;
  sc.model.hidden = 64;
  sc.model.heads = 1;
  sc.model.ffn_hidden = 256;
  sc.parallel.pp = pp;
  sc.parallel.micro_batch = 1;
  sc.parallel.global_batch = micro_batches;
  sc.parallel.schedule = kind;
  sc.parallel.virtual_stages = chunks;
  sc.hardware = synthetic_hardware(pp);
  return sc;
}

inline model::Workload synthetic_workload() {
  model::Op gemm;
  gemm.name = "gemm";
  gemm.kind = model::OpKind::kGemm;
  gemm.group = model::OpGroup::kMlp;
  gemm.fwd_flops = 1e9;
  gemm.bwd_dgrad_flops = 1e9;
  gemm.bwd_wgrad_flops = 1e9;
  gemm.saved_bytes = static_cast<std::uint64_t>(kSavedBytes);
  model::Workload w;
  w.layer = {gemm};
  return w;
}

}  // namespace lynx::test
