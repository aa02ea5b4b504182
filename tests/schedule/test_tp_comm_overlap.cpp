// TP-comm overlap (parallel.tp_comm_overlap) on a synthetic sequence-parallel layer with
// uniform costs and no contention: the chunked all-gather -> GEMM and GEMM -> reduce-scatter
// pipelines take exactly the analytic time of their dependency graph.
#include "hw_models/topology.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"
#include "tests/schedule/synthetic.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace lynx;
using namespace lynx::schedule;
using lynx::strategies::plan_fixed_strategy;
using lynx::strategies::uniform_partition;

namespace {

/// A GEMM of 2·500·1000·1000 = 1e9 FLOPs: 1 us on the synthetic GPU (its 4 MB of HBM traffic
/// take 4 ps at the bandwidth the test sets, so compute bounds it; a row chunk of 1/n takes
/// 1/n us).
model::Op gemm(const std::string& name) {
  model::Op op;
  op.name = name;
  op.kind = model::OpKind::kGemm;
  op.group = model::OpGroup::kMlp;
  op.gemm_m = 500;
  op.gemm_n = 1000;
  op.gemm_k = 1000;
  op.fwd_flops = op.bwd_dgrad_flops = op.bwd_wgrad_flops = 1e9;
  op.fwd_bytes = op.bwd_dgrad_bytes = op.bwd_wgrad_bytes = 4e6;
  return op;
}

model::Op collective(const std::string& name, model::CollectiveKind fwd, model::CollectiveKind bwd,
                     std::uint64_t bytes) {
  model::Op op;
  op.name = name;
  op.kind = model::OpKind::kCollective;
  op.group = model::OpGroup::kMlp;
  op.collective = fwd;
  op.bwd_collective = bwd;
  op.collective_bytes = bytes;
  return op;
}

struct Run {
  TimePs forward_ps = 0;        ///< the layer's forward: AG -> GEMM1, GEMM2 -> RS
  TimePs backward_head_ps = 0;  ///< from the forward's end to GEMM2's last dgrad (after the AG)
};

/// A zero-cost elementwise op after the reduce-scatter, as the residual add of a real layer:
/// the backward all-gather then follows its dgrad (Megatron's `g` conjugate), not the step start.
model::Op residual() {
  model::Op op;
  op.name = "residual";
  op.kind = model::OpKind::kMemoryBound;
  op.group = model::OpGroup::kPost;
  return op;
}

/// SP layer [all-gather, GEMM1, GEMM2, reduce-scatter (, residual)] on tp 2, one micro-batch;
/// the collective moves `bytes` in all (each rank sends bytes/2 over 100 GB/s, zero latency).
Run run_layer(bool overlap, int chunks, std::uint64_t bytes, bool with_residual) {
  Scenario sc = test::synthetic_scenario(1, 1, 1, ScheduleKind::kOneFOneB);
  sc.hardware = test::synthetic_hardware(2);
  sc.hardware.hbm_bw_bytes_per_s = 1'000'000'000'000'000'000ull;
  sc.parallel.tp = 2;
  sc.parallel.sequence_parallel = true;
  sc.parallel.tp_comm_overlap = overlap;
  sc.parallel.tp_comm_overlap_chunks = chunks;
  model::Workload w;
  w.layer = {collective("ag", model::CollectiveKind::kAllGather, model::CollectiveKind::kReduceScatter, bytes),
             gemm("gemm1"), gemm("gemm2"),
             collective("rs", model::CollectiveKind::kReduceScatter, model::CollectiveKind::kAllGather, bytes)};
  if (with_residual) w.layer.push_back(residual());
  const hw_models::Topology topo(sc.hardware);
  const auto plan = plan_fixed_strategy(sc.recompute, uniform_partition(sc.model.layers, 1));
  const BuiltProgram built = build_program(sc, plan, topo, w);
  const sim::ExecResult ex = sim::execute(built.machine, built.program);
  REQUIRE(built.steps.size() == 2);
  const StepSpan& fwd = built.steps[0];
  const StepSpan& bwd = built.steps[1];
  Run r;
  // From the micro-batch load's end (its two TP broadcasts, builder_steps.cpp
  // emit_micro_batch_load, come before the layer).
  TimePs loaded_ps = ex.task_start_ps[static_cast<size_t>(fwd.marker)];
  for (sim::TaskId i = fwd.first_task; i < fwd.end_task; ++i)
    if (built.program.names[built.program.tasks[static_cast<size_t>(i)].name] == "batch_loaded")
      loaded_ps = ex.task_end_ps[static_cast<size_t>(i)];
  r.forward_ps = ex.task_end_ps[static_cast<size_t>(fwd.compute_tail)] - loaded_ps;
  TimePs last_dgrad = 0;
  for (sim::TaskId i = bwd.first_task; i < bwd.end_task; ++i)
    if (built.program.names[built.program.tasks[static_cast<size_t>(i)].name] == "gemm2_dgrad")
      last_dgrad = std::max(last_dgrad, ex.task_end_ps[static_cast<size_t>(i)]);
  // The backward's all-gather queues behind the forward's last reduce-scatter on the tp stream
  // (the compute stream reaches the backward marker first).
  r.backward_head_ps = last_dgrad - std::max(ex.task_start_ps[static_cast<size_t>(bwd.marker)],
                                             ex.task_end_ps[static_cast<size_t>(fwd.compute_tail)]);
  return r;
}

/// The pipeline of n chunks, c per communication chunk, g per GEMM chunk: the first chunk's
/// communication (or GEMM) cannot overlap, the last chunk's GEMM (or communication) neither,
/// and the n - 1 in between run at the pace of the slower of the two.
TimePs pipeline_ps(int n, TimePs g, TimePs c) { return c + g + (n - 1) * std::max(g, c); }

}  // namespace

TEST_CASE("TP-comm overlap: n chunks of GEMM g and communication c take c + g + (n-1)·max(g, c)") {
  for (const bool with_residual : {false, true})
  for (std::uint64_t bytes : {50'000ull, 100'000ull, 200'000ull, 400'000ull}) {
    CAPTURE(with_residual);
    // Unchunked: the all-gather (bytes/2 per rank at 100 GB/s) then the 1 us GEMM.
    const TimePs comm_ps = static_cast<TimePs>(bytes / 2 * 10);  // 10 ps per byte
    const Run plain = run_layer(false, 0, bytes, with_residual);
    CHECK(plain.forward_ps == 2 * (comm_ps + 1'000'000));
    for (int n : {1, 2, 4, 5}) {
      CAPTURE(bytes);
      CAPTURE(n);
      const Run chunked = run_layer(true, n, bytes, with_residual);
      const TimePs g = 1'000'000 / n, c = comm_ps / n;
      // AG -> GEMM1 pipeline, then GEMM2 -> RS pipeline (its mirror).
      CHECK(chunked.forward_ps == 2 * pipeline_ps(n, g, c));
      // Backward: the output gradient's all-gather pipelined with GEMM2's dgrad.
      CHECK(chunked.backward_head_ps == pipeline_ps(n, g, c));
      if (n == 1) {
        CHECK(chunked.forward_ps == plain.forward_ps);
        CHECK(chunked.backward_head_ps == plain.backward_head_ps);
      }
    }
  }
}

TEST_CASE("TP-comm overlap chunks: tp by default, 1 (off) without sequence parallelism or tp 1") {
  ParallelSpec p;
  p.tp = 4;
  p.sequence_parallel = true;
  CHECK(tp_overlap_chunks(p) == 1);
  p.tp_comm_overlap = true;
  CHECK(tp_overlap_chunks(p) == 4);
  p.tp_comm_overlap_chunks = 2;
  CHECK(tp_overlap_chunks(p) == 2);
  p.sequence_parallel = false;
  CHECK(tp_overlap_chunks(p) == 1);
  p.sequence_parallel = true;
  p.tp = 1;
  CHECK(tp_overlap_chunks(p) == 1);
}
