// End-to-end checks of a simulated GPT iteration against the public formulas (Korthikanti et
// al. 2022; Narayanan et al. 2021), layout errors, OOM as a result, determinism and the exact
// equivalence of the reduced (one rank per stage) simulation.
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "tests/runner/small_gpt.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/program_builder.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sim/executor.hpp"
#include "tests/common/engine_collective.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>

using namespace lynx;
using namespace lynx::runner;
using lynx::test::small_gpt;

namespace {

/// Resolves a scenario built in this file (as every programmatic user must) and simulates it.
SimRun run_scenario(const Scenario& sc, const SimOptions& options = {}) {
  return simulate(model::resolve_scenario(sc, "small_gpt"), options);
}

/// Activation bytes one more layer adds to the simulated peak (static memory removed):
/// peak(2 layers) − peak(1 layer), both measured by the executor's memory tracker.
std::int64_t measured_layer_activation_bytes(int tp, bool sp, RecomputeKind strategy) {
  std::int64_t act[2];
  for (int layers = 1; layers <= 2; ++layers) {
    const SimResult r = run_scenario(small_gpt(layers, tp, sp, strategy)).result;
    act[layers - 1] = r.stages[0].peak_memory_bytes - r.stages[0].static_memory_bytes;
  }
  return act[1] - act[0];
}

}  // namespace

TEST_CASE("activation memory per layer equals Korthikanti et al. exactly (bytes, from the tracker)") {
  const std::int64_t s = 512, b = 2, h = 1024, a = 16;
  const std::int64_t sbh = s * b * h;
  SUBCASE("no parallelism: sbh(34 + 5as/h)") {
    CHECK(measured_layer_activation_bytes(1, false, RecomputeKind::kNone) ==
          sbh * 34 + 5 * a * s * s * b);
  }
  SUBCASE("tensor parallel t = 8: sbh(10 + 24/t + 5as/(ht))") {
    const std::int64_t t = 8;
    CHECK(measured_layer_activation_bytes(8, false, RecomputeKind::kNone) ==
          sbh * 10 + sbh * 24 / t + 5 * a * s * s * b / t);
  }
  SUBCASE("tensor + sequence parallel t = 8: sbh(34 + 5as/h)/t") {
    CHECK(measured_layer_activation_bytes(8, true, RecomputeKind::kNone) ==
          (sbh * 34 + 5 * a * s * s * b) / 8);
  }
  SUBCASE("selective recomputation + SP, t = 4: 34sbh/t") {
    CHECK(measured_layer_activation_bytes(4, true, RecomputeKind::kSelective) == 34 * sbh / 4);
  }
  SUBCASE("full recomputation: 2sbh (layer input only)") {
    CHECK(measured_layer_activation_bytes(2, false, RecomputeKind::kFull) == 2 * sbh);
  }
}

TEST_CASE("executed FLOPs equal Eq. 7 (none), Eq. 8 (selective) and Narayanan Eq. 3 (full)") {
  // Several micro-batches, pipeline and data parallelism: FLOPs do not depend on the layout.
  Scenario sc = small_gpt(4, 2, true, RecomputeKind::kNone);
  sc.parallel.pp = 2;
  sc.parallel.dp = 2;
  sc.parallel.global_batch = 8;
  const ModelSpec m = model::resolve_scenario(sc, "small_gpt")->model;
  const auto run = [&](RecomputeKind k) {
    Scenario x = sc;
    x.recompute.strategy = k;
    return run_scenario(x).result;
  };
  const SimResult none = run(RecomputeKind::kNone);
  const SimResult selective = run(RecomputeKind::kSelective);
  const SimResult full = run(RecomputeKind::kFull);
  CHECK(none.executed_flops == doctest::Approx(model::model_flops_per_iteration(m, 8)).epsilon(1e-12));
  // Selective recomputation re-runs the attention core's forward: QK^T and ·V, 2·b·s²·h FLOPs
  // each per sequence and layer, so 4·B·s²·l·h more than Eq. 7. Korthikanti's Eq. 8 adds
  // 12·B·s²·l·h (the core's forward and backward); the simulator counts the kernels it runs,
  // so its HFU sits between Eq. 7 and Eq. 8.
  const double B = 8, s = m.seq_len, l = m.layers, h = m.hidden;
  CHECK(selective.executed_flops - none.executed_flops ==
        doctest::Approx(4 * B * s * s * l * h).epsilon(1e-12));
  CHECK(selective.executed_flops < model::selective_flops_per_iteration(m, 8));
  CHECK(full.executed_flops ==
        doctest::Approx(model::full_recompute_flops_per_iteration(m, 8)).epsilon(1e-12));
  // Time: none is fastest when memory allows, full recomputes the most.
  CHECK(none.iteration_time_s < selective.iteration_time_s);
  CHECK(selective.iteration_time_s < full.iteration_time_s);
  // Full recompute costs about one extra forward per layer: its recompute time is within 10%
  // of a third of the layers' forward+backward compute (backward ≈ 2× forward).
  for (const auto& st : full.stages)
    CHECK(st.recompute_s == doctest::Approx(none.stages[static_cast<size_t>(st.stage)].compute_s / 3).epsilon(0.10));
  CHECK(none.mfu == doctest::Approx(none.hfu).epsilon(1e-9));
  CHECK(full.hfu > full.mfu);
}

TEST_CASE("MFU equals HFU with no recomputation for any ffn_hidden (regression: f = 4h wired)") {
  // Model FLOPs used to assume f = 4h: gpt-1.3b with ffn_hidden 4096 (2h) reported MFU 0.477
  // above HFU 0.350. Here h = 1024: f = 2h, 3h and 8h.
  for (int f : {2 * 1024, 3 * 1024, 8 * 1024}) {
    CAPTURE(f);
    Scenario sc = small_gpt(4, 2, true, RecomputeKind::kNone);
    sc.model.ffn_hidden = f;
    sc.parallel.pp = 2;
    sc.parallel.dp = 2;
    sc.parallel.global_batch = 8;
    const SimResult none = run_scenario(sc).result;
    CHECK(none.model_flops == doctest::Approx(none.executed_flops).epsilon(1e-12));
    CHECK(none.mfu == doctest::Approx(none.hfu).epsilon(1e-12));
    sc.recompute.strategy = RecomputeKind::kFull;
    const SimResult full = run_scenario(sc).result;
    CHECK(full.mfu < full.hfu);
    CHECK(full.model_flops == none.model_flops);
  }
}

TEST_CASE("impossible layouts are clear errors, from the one resolve step") {
  Scenario sc = small_gpt(4, 1, false, RecomputeKind::kNone);
  SUBCASE("heads not divisible by tp") {
    sc.parallel.tp = 3;
    CHECK_THROWS_WITH_AS(model::resolve_scenario(sc, "small_gpt"),
                         "small_gpt: key 'model.heads': model.heads (16) is not divisible by "
                         "parallel.tp (3): pick a tp that divides the number of attention heads",
                         Error);
  }
  SUBCASE("layers not divisible by pp·v") {
    sc.model.layers = 6;
    sc.parallel.pp = 4;
    CHECK_THROWS_WITH_AS(model::resolve_scenario(sc, "small_gpt"),
                         "small_gpt: key 'model.layers': model.layers (6) is not divisible by "
                         "parallel.pp × parallel.virtual_stages (4 × 1 = 4): every model chunk "
                         "needs the same number of layers",
                         Error);
  }
}

TEST_CASE("an out-of-memory plan is a result naming the stage") {
  Scenario sc = small_gpt(4, 1, false, RecomputeKind::kNone);
  sc.parallel.pp = 2;
  sc.parallel.global_batch = 8;
  sc.hardware.memory_bytes = 1ull << 30;  // 1 GiB: far less than weights + activations
  const SimResult r = run_scenario(sc).result;
  CHECK(r.oom);
  CHECK(r.oom_stage == 0);
  CHECK(r.stages[0].oom);
  CHECK(r.stages[0].peak_memory_bytes > static_cast<std::int64_t>(sc.hardware.memory_bytes));
}

TEST_CASE("determinism: the same scenario twice gives identical trace bytes") {
  Scenario sc = small_gpt(4, 2, false, RecomputeKind::kSelective);
  sc.parallel.pp = 2;
  sc.parallel.dp = 2;
  sc.parallel.global_batch = 8;
  SimOptions opt;
  opt.keep_trace_data = true;
  std::string traces[2];
  for (auto& t : traces) {
    const SimRun run = run_scenario(sc, opt);
    std::ostringstream out;
    sim::write_chrome_trace(out, run.built.machine, run.built.program, run.exec);
    t = out.str();
  }
  CHECK(traces[0].size() > 1000);
  CHECK(traces[0] == traces[1]);
}

TEST_CASE("the reduced simulation (one rank per stage) equals the full one exactly") {
  for (RecomputeKind k : {RecomputeKind::kNone, RecomputeKind::kSelective, RecomputeKind::kFull}) {
    for (bool sp : {false, true}) {
      Scenario sc = small_gpt(4, 2, sp, k);
      sc.parallel.pp = 2;
      sc.parallel.dp = 2;
      sc.parallel.global_batch = 8;
      sc.sim.exploit_symmetry = true;
      const SimResult reduced = run_scenario(sc).result;
      sc.sim.exploit_symmetry = false;
      const SimResult full = run_scenario(sc).result;
      REQUIRE(reduced.symmetric);
      REQUIRE_FALSE(full.symmetric);
      CHECK(reduced.iteration_time_s == full.iteration_time_s);
      CHECK(reduced.executed_flops == full.executed_flops);
      for (size_t s = 0; s < reduced.stages.size(); ++s) {
        CHECK(reduced.stages[s].peak_memory_bytes == full.stages[s].peak_memory_bytes);
        CHECK(reduced.stages[s].tp_exposed_s == full.stages[s].tp_exposed_s);
        CHECK(reduced.stages[s].dp_exposed_s == full.stages[s].dp_exposed_s);
      }
    }
  }
}

TEST_CASE("ring all-reduce on an idle NVSwitch ring takes 2(n-1)/n·S/bw + 2(n-1)·latency exactly") {
  HardwareSpec hw = model::default_scenario().scenario().hardware;
  hw.collective_efficiency = 1.0;
  hw.collective_model = CollectiveModel::kAlphaBeta;  // the NCCL protocol model: tests/hw_models
  const hw_models::Topology topo(hw);
  const int n = 8;
  const std::uint64_t size = 1ull << 30;
  std::vector<hw_models::Rank> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  const auto phases =
      hw_models::plan_collective(topo, hw, hw_models::Collective::kAllReduce, hw_models::Algorithm::kRing, ranks, size);
  REQUIRE(phases.size() == 1);
  // Each GPU sends 2(n-1)/n of the buffer to its successor over GPU->NVSwitch->GPU; every link
  // carries one flow, so each flow gets the full NVLink bandwidth; 2(n-1) steps each pay the
  // path latency (two NVLink hops).
  const std::uint64_t wire = (2ull * (n - 1) * size + n - 1) / n;
  const TimePs expected = transfer_time_ps(wire, hw.nvlink.bw_bytes_per_s) +
                          2 * (n - 1) * topo.path_latency_ps(0, 1);
  CHECK(topo.path_latency_ps(0, 1) == 2 * hw.nvlink.latency_ps);
  CHECK(test::engine_collective_ps(topo, phases, ranks) == expected);
}

namespace {

/// gpt-1.3b on two DGX A100 nodes, one pipeline stage, no recompute.
Scenario two_node_gpt(int tp, int dp) {
  Scenario sc = model::default_scenario().scenario();
  sc.hardware.nodes = 2;
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = tp;
  sc.parallel.dp = dp;
  sc.parallel.micro_batch = 2;
  sc.parallel.global_batch = 2 * dp;
  sc.parallel.dp_overlap = DpOverlap::kEnd;
  sc.recompute.strategy = RecomputeKind::kNone;
  // No host stream: its first issue (gpu.host_kernel) delays the first kernel, which the breakdown
  // counts as bubble; these cases check that no communication is counted so.
  sc.hardware.host_kernel_ps = 0;
  sc.hardware.host_collective_ps = 0;
  return sc;
}

/// Every second of the stage's iteration is in exactly one breakdown bucket (compute_s
/// includes the optimizer and contention).
double breakdown_total_s(const StageBreakdown& b) {
  return b.compute_s + b.recompute_s + b.tp_exposed_s + b.pp_exposed_s + b.dp_exposed_s +
         b.bubble_s;
}

/// Summed durations of GPU 0's communication tasks of `category` in [first, end) whose name
/// is `name` (every phase of a collective is a task of that name).
TimePs comm_time_ps(const SimRun& run, sim::Category category, const std::string& name,
                    sim::TaskId first = 0, sim::TaskId end = -1) {
  const sim::Program& prog = run.built.program;
  if (end < 0) end = static_cast<sim::TaskId>(prog.tasks.size());
  TimePs sum = 0;
  for (sim::TaskId i = first; i < end; ++i) {
    const sim::Task& t = prog.tasks[static_cast<size_t>(i)];
    if (t.gpu != 0 || t.category != category || prog.names[t.name] != name) continue;
    sum += run.exec.task_end_ps[static_cast<size_t>(i)] - run.exec.task_start_ps[static_cast<size_t>(i)];
  }
  return sum;
}

}  // namespace

TEST_CASE("every phase of a collective spanning nodes is exposed communication, not bubble") {
  // Regression: hierarchical collectives (intra-node reduce-scatter, inter-node ring,
  // intra-node all-gather) are one task per phase, and only the last phase counted as
  // communication; dp 16 over two nodes showed 26 ms of "bubble" without a pipeline.
  SimOptions keep;
  keep.keep_trace_data = true;
  SUBCASE("dp 16 over two nodes, all-reduce at the end: exposed dp = the all-reduce") {
    const SimRun run = run_scenario(two_node_gpt(1, 16), keep);
    const sim::Program& prog = run.built.program;
    std::vector<sim::TaskId> phases;
    for (size_t i = 0; i < prog.tasks.size(); ++i)
      if (prog.tasks[i].gpu == 0 && prog.tasks[i].category == sim::Category::kDpComm)
        phases.push_back(static_cast<sim::TaskId>(i));
    REQUIRE(phases.size() == 3);  // hierarchical
    const TimePs all_reduce_ps = run.exec.task_end_ps[static_cast<size_t>(phases.back())] -
                                 run.exec.task_start_ps[static_cast<size_t>(phases.front())];
    const StageBreakdown& b = run.result.stages.at(0);
    CHECK(b.dp_exposed_s == doctest::Approx(ps_to_s(all_reduce_ps)).epsilon(1e-12));
    CHECK(b.bubble_s == doctest::Approx(0).epsilon(1e-12));
    CHECK(breakdown_total_s(b) == doctest::Approx(run.result.iteration_time_s).epsilon(1e-12));
    // The trace's window covers the whole all-reduce too.
    TimePs dp_window_ps = 0;
    for (const sim::TraceSpan& span : trace_annotations(run))
      if (span.gpu == 0 && span.name == "dp window") dp_window_ps += span.end_ps - span.start_ps;
    CHECK(dp_window_ps == all_reduce_ps);
  }
  SUBCASE("tp 16 over two nodes: exposed tp covers every phase, the forward windows too") {
    const SimRun run = run_scenario(two_node_gpt(16, 1), keep);
    const StageBreakdown& b = run.result.stages.at(0);
    const schedule::LayerSpan& layer = run.built.layer_forward.at(0);
    int attn_phases = 0;
    for (sim::TaskId i = layer.first_task; i < layer.end_task; ++i)
      attn_phases += run.built.program.names[run.built.program.tasks[static_cast<size_t>(i)].name] ==
                     "tp_allreduce_attn";
    REQUIRE(attn_phases == 3);  // hierarchical
    CHECK(b.bubble_s == doctest::Approx(0).epsilon(1e-12));
    CHECK(breakdown_total_s(b) == doctest::Approx(run.result.iteration_time_s).epsilon(1e-12));
    // The compute stream waits for each forward all-reduce from its start (right after the
    // kernel producing its input) to its end: all of its phases are exposed.
    const TimePs forward_ps =
        comm_time_ps(run, sim::Category::kTpComm, "tp_allreduce_attn") +
        comm_time_ps(run, sim::Category::kTpComm, "tp_allreduce_mlp");
    CHECK(forward_ps > 0);
    CHECK(b.tp_exposed_s >= ps_to_s(forward_ps));
    // Lynx's forward window of a layer: both of its all-reduces, every phase.
    const TimePs layer_ps =
        comm_time_ps(run, sim::Category::kTpComm, "tp_allreduce_attn", layer.first_task,
                     layer.end_task) +
        comm_time_ps(run, sim::Category::kTpComm, "tp_allreduce_mlp", layer.first_task,
                     layer.end_task);
    const auto capacity = schedule::measure_forward_window_capacity(run.built, run.exec);
    REQUIRE(capacity.size() == 1);
    CHECK(capacity[0] == layer_ps);
    // Lynx's backward window of layer 0 is the TP idle in layer 1's backward: more than the
    // last (intra-node all-gather) phases of its all-reduces, which were all the old rule
    // counted, and no more than all of their phases.
    const schedule::LayerSpan* above = nullptr;
    for (const schedule::LayerSpan& s : run.built.layer_backward)
      if (s.gpu == 0 && s.layer == 1 && s.micro_batch == 0) above = &s;
    REQUIRE(above != nullptr);
    const sim::Program& prog = run.built.program;
    TimePs all_phases_ps = 0, last_phases_ps = 0;
    int backward_phases = 0;
    for (sim::TaskId i = above->first_task; i < above->end_task; ++i) {
      const sim::Task& t = prog.tasks[static_cast<size_t>(i)];
      if (t.gpu != 0 || t.category != sim::Category::kTpComm) continue;
      const TimePs d = run.exec.task_end_ps[static_cast<size_t>(i)] -
                       run.exec.task_start_ps[static_cast<size_t>(i)];
      all_phases_ps += d;
      if (++backward_phases % 3 == 0) last_phases_ps += d;  // phase 3 of each collective
    }
    REQUIRE(backward_phases == 6);  // two hierarchical all-reduces
    const auto backward = schedule::measure_window_capacity(run.built, run.exec);
    REQUIRE(backward.size() == 1);
    REQUIRE(!backward[0].empty());
    CHECK(backward[0][0] > last_phases_ps);
    CHECK(backward[0][0] <= all_phases_ps);
  }
}

TEST_CASE("the rest of an iteration: Megatron's optimizer step kernels, 18 B/param") {
  for (bool distributed : {false, true}) {
    CAPTURE(distributed);
    Scenario sc = small_gpt(4, 2, false, RecomputeKind::kNone);
    sc.parallel.pp = 2;
    sc.parallel.dp = 2;
    sc.parallel.global_batch = 8;
    sc.parallel.distributed_optimizer = distributed;
    sc.sim.exploit_symmetry = false;
    const model::ResolvedScenario resolved = model::resolve_scenario(sc, "small_gpt");
    const SimRun run = simulate(resolved);
    const Scenario& rs = resolved.scenario();
    const model::Workload w = model::gpt_workload(rs.model, rs.parallel);
    const hw_models::Topology topo(rs.hardware);
    const schedule::BuiltProgram built = schedule::build_program(rs, run.plan, topo, w);
    // Per GPU, in order: the optimizer's kernels.
    for (std::size_t g = 0; g < built.machine.gpus.size(); ++g) {
      std::vector<std::string> names;
      for (const sim::Task& t : built.program.tasks) {
        if (static_cast<std::size_t>(t.gpu) != g) continue;
        const std::string& name = built.program.names[t.name];
        if (t.category == sim::Category::kOptimizer) names.push_back(name);
        if (name == "dp_param_allgather") names.push_back(name);
      }
      const std::vector<std::string> want =
          distributed ? std::vector<std::string>{"grad_norm", "grad_clip", "adam", "param_copy_bf16",
                                                 "dp_param_allgather", "zero_grads"}
                      : std::vector<std::string>{"grad_norm", "grad_clip", "adam", "param_copy_bf16", "zero_grads"};
      CHECK(names == want);
    }
    // Static memory: bf16 weights + fp32 main grads + fp32 Adam state = 18 B/param, or
    // 6 + 12/dp with the distributed optimizer (Megatron-LM's distributed-optimizer docs).
    const std::uint64_t params = w.layer_params * 2 + w.embedding_params;
    const double per_param = distributed ? 6.0 + 12.0 / 2 : 18.0;
    CHECK(model::static_bytes(rs, params) ==
          static_cast<std::int64_t>(per_param * static_cast<double>(params)) +
              static_cast<std::int64_t>(rs.hardware.memory_reserve_bytes));
    CHECK(run.result.stages[0].static_memory_bytes == model::static_bytes(rs, params));
  }
}

TEST_CASE("host model: a GPU's host time is its launched kernels times gpu.host_kernel") {
  // One GPU, two micro-batches, no recompute: the host issues every forward, backward and
  // optimizer kernel of the op graph, and nothing else (no collectives at tp = dp = 1).
  const model::ResolvedScenario resolved = model::default_scenario(
      {"model.preset=gpt-1.3b", "parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.micro_batch=1",
       "parallel.global_batch=2", "recompute.strategy=none", "hardware.nodes=1", "hardware.gpu.host_kernel=1us",
       "hardware.gpu.host_collective=7us"});
  const Scenario& sc = resolved.scenario();
  const SimRun run = simulate(resolved);
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const schedule::BuiltProgram built = schedule::build_program(sc, run.plan, topo, w);
  REQUIRE(built.program.issue_ps.size() == built.program.tasks.size());
  TimePs last_issue = 0;
  for (std::size_t i = 0; i < built.program.tasks.size(); ++i)
    if (built.program.tasks[i].gpu == 0) last_issue = std::max(last_issue, built.program.issue_ps[i]);
  auto kernels = [](const std::vector<model::Op>& ops) {
    std::int64_t n = 0;
    for (const model::Op& op : ops)
      if (op.kind != model::OpKind::kCollective) n += op.fwd_kernels + op.bwd_dgrad_kernels + op.bwd_wgrad_kernels;
    return n;
  };
  const std::int64_t per_micro_batch = kernels(w.embedding) + sc.model.layers * kernels(w.layer) + kernels(w.head);
  const double params = static_cast<double>(w.embedding_params + w.head_params + w.layer_params * sc.model.layers);
  const std::int64_t tensors = w.embedding_param_tensors + w.head_param_tensors + w.layer_param_tensors * sc.model.layers;
  // Norm (+ its power), clip, Adam, bf16 copy, zeroing; fp32 main gradients: no cast.
  const std::int64_t optimizer = model::multi_tensor_launches(params, tensors, 1) + 1 +
                                 model::multi_tensor_launches(params, tensors, 2) +
                                 model::multi_tensor_launches(params, tensors, 4) +
                                 model::multi_tensor_launches(params, tensors, 2) + 1;
  CHECK(optimizer > 5);
  CHECK(last_issue == (2 * per_micro_batch + optimizer) * 1'000'000);
}

TEST_CASE("host model: gpu.host_gemm adds its cost once per GEMM call, and alone turns the host model on") {
  // gpt-1.3b at tp = pp = dp = 1, two micro-batches: per layer and micro-batch 16 GEMM calls
  // (qkv, out-proj, fc1, fc2: forward, dgrad, wgrad = 12; QK^T and ·V: forward, dgrad = 4),
  // the LM head 3 (forward, dgrad, wgrad); the embedding, norms, element-wise ops, the
  // optimizer and the cross-entropy none. 24 layers: 2 × (24 × 16 + 3) = 774 calls.
  const auto last_issue_ps = [](const std::string& kernel, const std::string& gemm) {
    const model::ResolvedScenario resolved = model::default_scenario(
        {"model.preset=gpt-1.3b", "parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.micro_batch=1",
         "parallel.global_batch=2", "recompute.strategy=none", "hardware.nodes=1", "hardware.gpu.host_kernel=" + kernel,
         "hardware.gpu.host_gemm=" + gemm});
    const Scenario& sc = resolved.scenario();
    const SimRun run = simulate(resolved);
    const hw_models::Topology topo(sc.hardware);
    const schedule::BuiltProgram built = schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel));
    REQUIRE(built.program.issue_ps.size() == built.program.tasks.size());
    TimePs last = 0;
    for (std::size_t i = 0; i < built.program.tasks.size(); ++i)
      if (built.program.tasks[i].gpu == 0) last = std::max(last, built.program.issue_ps[i]);
    return last;
  };
  constexpr TimePs kCallsTimesCostPs = TimePs{774} * 3'000'000;
  CHECK(last_issue_ps("0s", "3us") == kCallsTimesCostPs);
  CHECK(last_issue_ps("1us", "3us") == last_issue_ps("1us", "0s") + kCallsTimesCostPs);
}

TEST_CASE("host model: loading a micro-batch and the gradient norm's .item() block the host until the GPU") {
  // A host far faster than the GPU (1 ns per kernel) is ahead of it at every wait, so each wait
  // lets it go on exactly when the awaited task ends.
  const auto scenario = [](const std::string& host) {
    return model::default_scenario({"model.preset=gpt-1.3b", "parallel.tp=1", "parallel.pp=1", "parallel.dp=1",
                                    "parallel.micro_batch=1", "parallel.global_batch=2", "recompute.strategy=none",
                                    "hardware.nodes=1", "hardware.gpu.host_kernel=" + host, "hardware.gpu.host_collective=0s"});
  };
  const model::ResolvedScenario resolved = scenario("1ns");
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const SimRun run = simulate(resolved);
  const schedule::BuiltProgram built = schedule::build_program(sc, run.plan, topo, w);
  const sim::Program& prog = built.program;
  const sim::ExecResult ex = sim::execute(built.machine, prog);
  const auto named = [&](const std::string& name) {
    std::vector<std::size_t> ids;
    for (std::size_t t = 0; t < prog.tasks.size(); ++t)
      if (prog.names[prog.tasks[t].name] == name) ids.push_back(t);
    return ids;
  };
  // The second micro-batch's forward: its marker is issued when the compute stream has run
  // everything before it, and its first kernel one host cost later.
  const std::vector<std::size_t> forwards = named("forward");
  REQUIRE(forwards.size() == 2);
  const std::size_t marker = forwards[1];
  std::size_t before = marker - 1;
  while (prog.tasks[before].stream != schedule::kCompute) --before;
  std::size_t first_kernel = marker + 1;
  while (prog.issue_ps[first_kernel] == prog.issue_ps[marker]) ++first_kernel;
  const TimePs gpu_done = ex.task_end_ps[before];
  CHECK(prog.issue_ps[marker] < gpu_done);  // the host was ahead
  CHECK(ex.task_start_ps[marker] == gpu_done);
  CHECK(ex.task_start_ps[first_kernel] == gpu_done + (prog.issue_ps[first_kernel] - prog.issue_ps[marker]));
  // The clip kernel: issued after the norm has ended, at its own launches' host cost.
  const std::size_t norm = named("grad_norm").at(0), clip = named("grad_clip").at(0);
  const TimePs clip_cost = prog.issue_ps[clip] - prog.issue_ps[clip - 1];
  CHECK(clip_cost > 0);
  CHECK(ex.task_start_ps[clip] == ex.task_end_ps[norm] + clip_cost);
  // Each micro-batch's load (the first one's is over at once: nothing runs before it) and the
  // gradient norm.
  CHECK(prog.host_waits.size() == 3);

  // Without the host model: no issue times, no waits, the clip right after the norm.
  const model::ResolvedScenario free_resolved = scenario("0s");
  const schedule::BuiltProgram free = schedule::build_program(free_resolved.scenario(), run.plan, topo, w);
  CHECK(free.program.issue_ps.empty());
  CHECK(free.program.host_waits.empty());
  const sim::ExecResult free_ex = sim::execute(free.machine, free.program);
  CHECK(free_ex.task_start_ps[clip] == free_ex.task_end_ps[norm]);
}

namespace {

/// GPT-1.3B with 24 micro-batches of 1, no recompute, on one node, with the host model on
/// (10 µs per kernel), `pp` stages: its scenario and its run (whose plan the programs use).
struct HostModelRun {
  model::ResolvedScenario resolved;
  SimRun run;
};
HostModelRun host_model_run(int pp, const std::string& exchange = "overlapped") {
  model::ResolvedScenario resolved = model::default_scenario(
      {"model.preset=gpt-1.3b", "parallel.tp=1", "parallel.pp=" + std::to_string(pp), "parallel.dp=1",
       "parallel.micro_batch=1", "parallel.global_batch=24", "recompute.strategy=none", "hardware.nodes=1",
       "hardware.gpu.host_kernel=10us", "parallel.pipeline_exchange=" + exchange});
  SimRun run = simulate(resolved);
  return {std::move(resolved), std::move(run)};
}

}  // namespace

TEST_CASE("host model: with a pipeline the first and the last stage wait for their GPU at each micro-batch") {
  const auto host_waits = [](const std::string& exchange) {
    const HostModelRun r = host_model_run(4, exchange);
    const Scenario& sc = r.resolved.scenario();
    const hw_models::Topology topo(sc.hardware);
    const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
    const schedule::BuiltProgram built = schedule::build_program(sc, r.run.plan, topo, w);
    std::vector<int> waits(static_cast<std::size_t>(built.machine.gpus.size()), 0);
    for (const sim::Program::HostWait& hw : built.program.host_waits)
      ++waits[static_cast<std::size_t>(built.program.tasks[static_cast<std::size_t>(hw.resume)].gpu)];
    return waits;
  };
  // 24 micro-batches: 24 loads (on the last stage each waits for its activation's receive too,
  // the first one's included), and the gradient norm; the middle stages load nothing
  // (DeepSpeed's LoadMicroBatch runs on the first and last stage).
  CHECK(host_waits("overlapped") == std::vector<int>{25, 1, 1, 25});
  // Blocking exchanges add the synchronize of every exchange made: on the first stage after
  // each of its 24 forwards (it sends) and after the backwards followed by a backward (the 3 of
  // the cool-down receive a gradient; one followed by a forward moves nothing and is skipped);
  // on the last stage before its first step (its input) and after each of its 24 backwards; in
  // the middle before the first step and after each of the 48.
  CHECK(host_waits("blocking") == std::vector<int>{25 + 27, 1 + 49, 1 + 49, 25 + 25});
}

TEST_CASE("host model: a program with host waits is never compressed (the same one without is)") {
  const HostModelRun r = host_model_run(1);
  const Scenario& sc = r.resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const schedule::BuiltProgram built = schedule::build_program(sc, r.run.plan, topo, w, 8);
  CHECK(built.program.omitted_periods == 0);
  CHECK(built.program.host_waits.size() == 25);  // 24 loads and the gradient norm
  Scenario no_host = sc;
  no_host.hardware.host_kernel_ps = 0;
  const schedule::BuiltProgram compressed = schedule::build_program(no_host, r.run.plan, topo, w, 8);
  CHECK(compressed.program.omitted_periods > 0);
  CHECK(compressed.program.host_waits.empty());
}
