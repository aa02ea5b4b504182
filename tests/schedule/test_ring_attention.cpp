// Context parallelism's ring attention (parallel.cp) on a synthetic layer of one attention op
// with uniform costs: the blocks wait for the key/value transfers over the real links exactly as
// the dependency graph says — hidden behind the blocks on a fast link, exposed on a slow one.
#include "hw_models/topology.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"
#include "tests/schedule/synthetic.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using namespace lynx;
using namespace lynx::schedule;
using lynx::strategies::plan_fixed_strategy;
using lynx::strategies::uniform_partition;

namespace {

/// A ring-attention op of `cp` blocks, each 1 us forward and 2 us backward on the synthetic GPU
/// (1e9 and 2e9 FLOPs at 1 PFLOP/s), passing `block_bytes` per ring step.
model::Op ring_attention(int cp, std::uint64_t block_bytes) {
  model::Op op;
  op.name = "attn";
  op.kind = model::OpKind::kAttention;
  op.group = model::OpGroup::kAttnCore;
  op.fwd_flops = 1e9 * cp;
  op.bwd_dgrad_flops = 2e9 * cp;
  op.cp_steps = cp;
  op.cp_kv_block_bytes = block_bytes;
  return op;
}

struct Run {
  TimePs forward_ps = 0;   ///< first block's start to the last block's end
  TimePs backward_ps = 0;  ///< first backward block's start to the last gradient's return
  int forward_blocks = 0, backward_blocks = 0, transfers = 0;
};

/// `layers` layers (one micro-batch, one stage), cp ranks on one node (NVLink at `nvlink_bw`
/// bytes/s, zero latency), built and executed.
struct Built {
  BuiltProgram built;
  sim::ExecResult ex;
};
Built build_ring(int cp, std::uint64_t block_bytes, std::uint64_t nvlink_bw, bool symmetry, int layers,
                 std::uint64_t layer_params = 0) {
  Scenario sc = test::synthetic_scenario(1, 1, 1, ScheduleKind::kOneFOneB);
  sc.model.layers = layers;
  sc.hardware = test::synthetic_hardware(cp);
  sc.hardware.nvlink = {nvlink_bw, 0};
  sc.parallel.cp = cp;
  sc.sim.exploit_symmetry = symmetry;
  model::Workload w;
  w.layer = {ring_attention(cp, block_bytes)};
  w.layer_params = layer_params;
  const hw_models::Topology topo(sc.hardware);
  const auto plan = plan_fixed_strategy(sc.recompute, uniform_partition(sc.model.layers, 1));
  Built out{build_program(sc, plan, topo, w), {}};
  CHECK(out.built.symmetric == symmetry);
  out.ex = sim::execute(out.built.machine, out.built.program);
  return out;
}

/// One layer: the ring's timings on GPU 0.
Run run_ring(int cp, std::uint64_t block_bytes, std::uint64_t nvlink_bw, bool symmetry) {
  const Built b = build_ring(cp, block_bytes, nvlink_bw, symmetry, 1);
  const BuiltProgram& built = b.built;
  const sim::ExecResult& ex = b.ex;
  Run r;
  TimePs fwd_start = -1, fwd_end = 0, bwd_start = -1, bwd_end = 0;
  for (size_t i = 0; i < built.program.tasks.size(); ++i) {
    const sim::Task& t = built.program.tasks[i];
    if (t.gpu != 0) continue;
    const std::string& name = built.program.names[t.name];
    const TimePs start = ex.task_start_ps[i], end = ex.task_end_ps[i];
    if (name == "attn") {
      ++r.forward_blocks;
      if (fwd_start < 0) fwd_start = start;
      fwd_end = std::max(fwd_end, end);
    } else if (name == "attn_dgrad") {
      ++r.backward_blocks;
      if (bwd_start < 0) bwd_start = start;
    } else if (name == "attn_cp_dkv_home") {
      bwd_end = end;
    }
    if (t.stream == kCp) {
      ++r.transfers;
      CHECK(t.category == sim::Category::kCpComm);
      CHECK(t.num_flows == 1);
    }
  }
  r.forward_ps = fwd_end - fwd_start;
  r.backward_ps = bwd_end - bwd_start;
  return r;
}

}  // namespace

TEST_CASE("ring attention: cp blocks, transfers hidden on a fast link and waited for on a slow one") {
  constexpr TimePs g = 1'000'000, G = 2'000'000;  // forward / backward block
  constexpr std::uint64_t kBytes = 10'000;         // per ring step
  for (bool symmetry : {true, false})
    for (int cp : {2, 4}) {
      CAPTURE(symmetry);
      CAPTURE(cp);
      // Fast: 10 kB at 100 GB/s = 0.1 us per transfer, under a block: only the last partial
      // key/value gradient's trip home shows (backward cp·G + c).
      const TimePs fast_c = 100'000;
      const Run fast = run_ring(cp, kBytes, 100'000'000'000, symmetry);
      CHECK(fast.forward_blocks == cp);
      CHECK(fast.backward_blocks == cp);
      // cp − 1 forward transfers, cp − 1 backward key/value and cp gradient transfers.
      CHECK(fast.transfers == 3 * cp - 2);
      CHECK(fast.forward_ps == cp * g);
      CHECK(fast.backward_ps == cp * G + fast_c);
      // Slow: 10 kB at 2 GB/s = 5 us per transfer: every block after the first waits for its
      // key/value block (forward g + (cp − 1)·c); the backward's transfers queue one after
      // another on the cp stream: 2·cp − 1 of them.
      const TimePs slow_c = 5'000'000;
      const Run slow = run_ring(cp, kBytes, 2'000'000'000, symmetry);
      CHECK(slow.forward_ps == g + (cp - 1) * slow_c);
      CHECK(slow.backward_ps == (2 * cp - 1) * slow_c);
    }
}

TEST_CASE("ring attention: its waits are overlap windows for the layer below's recompute") {
  // Two layers: layer 0's window is the compute stream's idle time on in-layer communication
  // during layer 1's backward — here only ring transfers (no TP). Slow link (5 us per transfer,
  // 2 us blocks, cp 2): block 1 waits 3 us for its key/value block, the gradient's trip home
  // 8 us more: 11 us. Fast link: only the trip home, 0.1 us.
  for (const auto& [bw, expected] : {std::pair{std::uint64_t{2'000'000'000}, TimePs{11'000'000}},
                                     std::pair{std::uint64_t{100'000'000'000}, TimePs{100'000}}}) {
    CAPTURE(bw);
    const Built b = build_ring(2, 10'000, bw, true, 2);
    const auto capacity = measure_window_capacity(b.built, b.ex);
    REQUIRE(capacity.size() == 1);
    REQUIRE(capacity[0].size() == 2);
    CHECK(capacity[0][0] == expected);
  }
}

TEST_CASE("rank order tp-cp-dp-pp: the cp ring sits next to the tp ranks, in a node while tp · cp fits") {
  ParallelSpec p;
  p.tp = 4;
  p.cp = 2;
  p.dp = 2;
  p.pp = 2;
  // Replica = dp_rank · cp + cp_rank; rank = stage · (tp·cp·dp) + replica · tp + tp_rank.
  CHECK(global_rank(p, 1, 1 * 2 + 1, 2) == 16 + 3 * 4 + 2);
  CHECK(global_rank(p, 0, 1, 0) == 4);  // cp rank 1 of dp 0 follows tp ranks 0..3
  CHECK(global_rank(p, 0, 2, 0) == 8);  // dp rank 1 after both cp ranks
  HardwareSpec hw = test::synthetic_hardware(8);
  hw.nodes = 4;
  const hw_models::Topology topo(hw);
  // tp 4 · cp 2 = 8 = GPUs per node: rank 0's ring partner (rank 4) is in its node.
  CHECK(topo.node_of(global_rank(p, 0, 1, 0)) == topo.node_of(global_rank(p, 0, 0, 0)));
  // tp 8 · cp 2 = 16: the ring partner is in the next node, reached through the NICs.
  p.tp = 8;
  const hw_models::Rank partner = global_rank(p, 0, 1, 0);
  CHECK(partner == 8);
  CHECK(topo.node_of(partner) != topo.node_of(0));
}

TEST_CASE("context parallelism: gradients are reduced over the cp ranks too (dp 1, cp 2)") {
  // Megatron-Core's data-parallel group with context parallelism: the two cp ranks hold the
  // same parameters, so even with dp 1 their gradients are all-reduced, over the ring's link.
  const Built b = build_ring(2, 10'000, 100'000'000'000, false, 1, 1'000'000);
  int reductions = 0;
  for (size_t i = 0; i < b.built.program.tasks.size(); ++i) {
    const sim::Task& t = b.built.program.tasks[i];
    if (t.gpu != 0 || t.category != sim::Category::kDpComm) continue;
    ++reductions;
    CHECK(t.stream == kDp);
    CHECK(t.num_flows == 1);  // GPU 0 sends its share to GPU 1, its cp partner
  }
  CHECK(reductions > 0);
  // Without context parallelism (cp 1, dp 1) there is nothing to reduce.
  Scenario sc = test::synthetic_scenario(1, 1, 1, ScheduleKind::kOneFOneB);
  model::Workload w = test::synthetic_workload();
  w.layer_params = 1'000'000;
  const hw_models::Topology topo(sc.hardware);
  const auto plan = plan_fixed_strategy(sc.recompute, uniform_partition(sc.model.layers, 1));
  const BuiltProgram one = build_program(sc, plan, topo, w);
  for (const sim::Task& t : one.program.tasks) CHECK(t.category != sim::Category::kDpComm);
}
