// Megatron options that change the answer: uneven pipeline stages (first / last stage layers),
// full uniform recomputation in chunks of num_layers, and FP8 GEMMs — their partition, plans,
// memory (exact bytes from the tracker), kernel times, refusals and fast mode's agreement.
#include "hw_models/compute_model.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/mode_agreement.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "search/bounds.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/recompute_plan.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>

using namespace lynx;
using namespace lynx::runner;
using lynx::test::error_of;

namespace {

/// A small GPT (s = 512, b = 2, h = 1024, a = 16) on one DGX A100 node, tp = dp = 1.
Scenario small_gpt(int layers, int pp, int global_batch, RecomputeKind strategy) {
  return model::load_scenario_text(
             fmt::format("model: {{layers: {}, hidden: 1024, heads: 16, seq_len: 512, vocab: 51200}}\n"
                         "parallel: {{pp: {}, micro_batch: 2, global_batch: {}}}\n"
                         "recompute: {{strategy: {}}}\nhardware: {{profile: dgx-a100-80gb}}\n",
                         layers, pp, global_batch, recompute_kind_name(strategy)),
             "small_gpt")
      .scenario();
}

SimResult run_scenario(const Scenario& sc) {
  return simulate(model::resolve_scenario(sc, "small_gpt")).result;
}

ParallelSpec uneven(int pp, int first, int last, int v = 1) {
  ParallelSpec p;
  p.pp = pp;
  p.first_stage_layers = first;
  p.last_stage_layers = last;
  p.virtual_stages = v;
  if (v > 1) p.schedule = ScheduleKind::kInterleaved;
  return p;
}

std::int64_t activations(const SimResult& r, int stage) {
  const StageBreakdown& b = r.stages[static_cast<size_t>(stage)];
  return b.peak_memory_bytes - b.static_memory_bytes;
}

}  // namespace

TEST_CASE("uneven pipeline stages: the split as Megatron-Core makes it") {
  using model::pipeline_stage_layers;
  CHECK(pipeline_stage_layers(12, uneven(4, 0, 0)) == std::vector<int>{3, 3, 3, 3});
  CHECK(pipeline_stage_layers(10, uneven(4, 1, 0)) == std::vector<int>{1, 3, 3, 3});
  CHECK(pipeline_stage_layers(10, uneven(4, 0, 1)) == std::vector<int>{3, 3, 3, 1});
  CHECK(pipeline_stage_layers(10, uneven(4, 2, 2)) == std::vector<int>{2, 3, 3, 2});
  CHECK(pipeline_stage_layers(7, uneven(2, 3, 4)) == std::vector<int>{3, 4});
  CHECK(pipeline_stage_layers(7, uneven(2, 3, 0)) == std::vector<int>{3, 4});
  // Interleaving: every chunk of a GPU holds its layers / v; virtual stage c·pp + k.
  CHECK(pipeline_stage_layers(12, uneven(3, 2, 2, 2)) == std::vector<int>{2, 8, 2});
  CHECK(strategies::stage_partition(12, uneven(3, 2, 2, 2)) == std::vector<int>{1, 4, 1, 1, 4, 1});
  CHECK(strategies::stage_partition(10, uneven(4, 1, 0)) == std::vector<int>{1, 3, 3, 3});
  CHECK(strategies::stage_partition(8, uneven(2, 0, 0, 2)) == strategies::uniform_partition(8, 4));
}

TEST_CASE("uneven pipeline stages that do not split are refused, naming the keys") {
  Scenario sc = small_gpt(8, 4, 4, RecomputeKind::kNone);
  auto resolve = [&] { return model::resolve_scenario(sc, "t"); };
  sc.parallel.first_stage_layers = 1;
  CHECK(error_of(resolve) ==
        "t: key 'parallel.first_stage_layers': parallel.first_stage_layers 1 and "
        "parallel.last_stage_layers 0 leave 7 of model.layers 8 for the 3 other stage(s) of "
        "parallel.pp 4: every other stage needs the same number of layers, at least one");
  sc.parallel.last_stage_layers = 7;
  CHECK(error_of(resolve).find("leave 0 of model.layers 8 for the 2 other stage(s)") != std::string::npos);
  sc.parallel.pp = 2;
  sc.parallel.first_stage_layers = 3;
  sc.parallel.last_stage_layers = 4;
  CHECK(error_of(resolve).find("with no other stage they must add up to model.layers") != std::string::npos);
  sc.parallel.pp = 1;
  CHECK(error_of(resolve) ==
        "t: key 'parallel.first_stage_layers': parallel.first_stage_layers / last_stage_layers "
        "(3 / 4) need parallel.pp >= 2 (with pp 1 the one stage holds every layer)");
  sc.parallel.pp = 2;
  sc.parallel.first_stage_layers = 3;
  sc.parallel.last_stage_layers = 5;
  sc.parallel.schedule = ScheduleKind::kInterleaved;
  sc.parallel.virtual_stages = 2;
  CHECK(error_of(resolve) ==
        "t: key 'parallel.first_stage_layers': pipeline stage 0 holds 3 layers, not divisible by "
        "parallel.virtual_stages 2: every model chunk of a GPU needs the same number of layers");
  sc.parallel.schedule = ScheduleKind::kOneFOneB;
  sc.parallel.virtual_stages = 1;
  sc.recompute.partition = PartitionKind::kBalanced;
  CHECK(error_of(resolve) ==
        "t: key 'recompute.partition': parallel.first_stage_layers / last_stage_layers (3 / 5) "
        "fix the layers per stage, recompute.partition balanced chooses them: set one or the other");
  // From a file: the position of the key.
  CHECK(error_of([] {
          model::load_scenario_text("model: {preset: gpt-1.3b}\nparallel:\n  pp: 4\n  first_stage_layers: 5\n"
                                    "hardware: {profile: dgx-a100-80gb}\n",
                                    "s.yaml");
        }).rfind("s.yaml:4:23: key 'parallel.first_stage_layers': parallel.first_stage_layers 5", 0) == 0);
}

TEST_CASE("uneven pipeline stages: layers, static memory and activations follow the real counts") {
  // 4 layers over pp 2 (3 + 1 against 2 + 2), 1F1B with 4 micro-batches, no recompute.
  Scenario even = small_gpt(4, 2, 8, RecomputeKind::kNone);
  Scenario light_first = even;
  light_first.parallel.first_stage_layers = 1;
  const SimResult e = run_scenario(even);
  const SimResult u = run_scenario(light_first);
  CHECK(e.layers_per_stage == std::vector<int>{2, 2});
  CHECK(u.layers_per_stage == std::vector<int>{1, 3});
  const model::ResolvedScenario resolved = model::resolve_scenario(even, "t");
  const Scenario& sc = resolved.scenario();
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  for (int k = 0; k < 2; ++k) {
    const std::uint64_t extra = k == 0 ? w.embedding_params : w.head_params;
    CHECK(u.stages[static_cast<size_t>(k)].static_memory_bytes ==
          model::static_bytes(sc, w.layer_params * static_cast<std::uint64_t>(u.layers_per_stage[static_cast<size_t>(k)]) + extra));
  }
  // Stage 0 holds pp = 2 micro-batches in flight at its peak: one layer fewer is 2 · A fewer,
  // A = sbh(34 + 5as/h) (Korthikanti et al. 2022, no parallelism).
  const std::int64_t s = 512, b = 2, h = 1024, a = 16;
  const std::int64_t layer_bytes = s * b * h * 34 + 5 * a * s * s * b;
  CHECK(activations(e, 0) - activations(u, 0) == 2 * layer_bytes);
  // The lighter stage finishes sooner, the heavier one is the bottleneck: slower overall.
  CHECK(u.iteration_time_s > e.iteration_time_s);
}

TEST_CASE("full uniform recomputation in chunks of num_layers: the plan") {
  RecomputeSpec r;
  r.strategy = RecomputeKind::kFull;
  r.method = FullMethod::kUniform;
  auto input_kept = [](const strategies::RecomputePlan& plan) {
    std::vector<bool> out;
    for (const auto& st : plan.stages)
      for (const auto& d : st.layers) out.push_back(d.action(model::OpGroup::kLayerInput) == strategies::Action::kKeep);
    return out;
  };
  r.num_layers = 1;
  CHECK(input_kept(strategies::plan_fixed_strategy(r, {3, 2})) == std::vector<bool>{true, true, true, true, true});
  r.num_layers = 2;  // chunks from each virtual stage's first layer; the last one may be shorter
  const strategies::RecomputePlan two = strategies::plan_fixed_strategy(r, {5, 2});
  CHECK(input_kept(two) == std::vector<bool>{true, false, true, false, true, true, false});
  for (const auto& st : two.stages)
    for (const auto& d : st.layers) CHECK(!d.keeps_everything());
  // block: the first num_layers layers of each stage, each keeping its input.
  r.method = FullMethod::kBlock;
  const strategies::RecomputePlan block = strategies::plan_fixed_strategy(r, {3});
  CHECK(input_kept(block) == std::vector<bool>{true, true, true});
  CHECK(!block.stages[0].layers[1].keeps_everything());
  CHECK(block.stages[0].layers[2].keeps_everything());

  // A plan file may drop a layer's input only inside such a chunk.
  const Scenario sc = model::resolve_scenario(small_gpt(4, 1, 2, RecomputeKind::kFull), "t").scenario();
  const auto ops = model::gpt_workload(sc.model, sc.parallel);
  r.method = FullMethod::kUniform;
  r.num_layers = 4;
  strategies::RecomputePlan plan = strategies::plan_fixed_strategy(r, {4});
  CHECK(!strategies::find_plan_problem(plan, sc, ops));
  plan.stages[0].layers[1].group[static_cast<size_t>(model::OpGroup::kMlp)] = strategies::Action::kKeep;
  const auto problem = strategies::find_plan_problem(plan, sc, ops);  // layer 2 sits on a partial one
  REQUIRE(problem);
  CHECK(problem->index == 1);  // layer 1 drops its input but is not a whole recompute
}

TEST_CASE("full uniform recomputation in chunks: memory by the formula, the same FLOPs and time") {
  // pp 2, 8 layers (L = 4 per stage), 1F1B with 4 micro-batches: stage 0 holds f = 2 at its
  // peak. A = sbh(34 + 5as/h), I = 2sbh (strategies/recompute_plan.cpp derives
  // peak_N = static + f · (extras + L/N · I) + N · A − I).
  const std::int64_t s = 512, b = 2, h = 1024, a = 16, f = 2, L = 4;
  const std::int64_t A = s * b * h * 34 + 5 * a * s * s * b, I = 2 * s * b * h;
  auto run = [&](int n) {
    Scenario sc = small_gpt(8, 2, 8, RecomputeKind::kFull);
    sc.recompute.num_layers = n;
    return run_scenario(sc);
  };
  const SimResult one = run(1), two = run(2), four = run(4);
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SimResult& r = n == 2 ? two : four;
    CHECK(activations(r, 0) - activations(one, 0) == f * (L / n - L) * I + (n - 1) * A);
    CHECK(r.executed_flops == one.executed_flops);  // every layer re-runs once either way
    // One compute stream, no TP collectives: the same kernels in another order.
    CHECK(r.iteration_time_s == one.iteration_time_s);
  }
  CHECK(activations(four, 0) - activations(one, 0) == (L - 1) * (A - f * I));
}

TEST_CASE("fast mode agrees with exact mode on uneven stages and recompute chunks") {
  for (const char* config :
       {"model.preset=gpt-1.3b parallel.pp=4 parallel.dp=1 parallel.first_stage_layers=5 "
        "parallel.last_stage_layers=5 parallel.global_batch=16",
        "model.preset=gpt-1.3b parallel.pp=2 parallel.dp=1 parallel.virtual_stages=2 "
        "parallel.schedule=interleaved parallel.first_stage_layers=10 parallel.global_batch=16",
        "model.preset=gpt-1.3b recompute.strategy=full recompute.num_layers=4 parallel.global_batch=16",
        "model.preset=gpt-1.3b recompute.strategy=full recompute.num_layers=5 parallel.global_batch=16 "
        "parallel.sequence_parallel=true"}) {
    CAPTURE(config);
    const ModeComparison c = compare_modes(config);
    CHECK(std::abs(c.time_error()) <= 0.01);  // the NVLink agreement set's bound
    CHECK(c.memory_equal());
  }
}

TEST_CASE("FP8 GEMMs: the layer's linear GEMMs at the FP8 peak, attention and LM head at 16 bits") {
  Scenario sc = small_gpt(2, 1, 2, RecomputeKind::kNone);
  sc.hardware = model::default_scenario({"hardware.profile=dgx-h100-80gb"}).scenario().hardware;
  CHECK(sc.hardware.fp8_peak_flops_per_s == 1'979'000'000'000'000ull);
  sc.model.gemm_precision = GemmPrecision::kFp8;
  const Scenario fp8 = model::resolve_scenario(sc, "t").scenario();
  int gemms = 0;
  for (const model::Op& op : model::layer_ops(fp8.model, fp8.parallel)) {
    CHECK(op.fp8 == (op.kind == model::OpKind::kGemm));
    gemms += op.fp8 ? 1 : 0;
  }
  CHECK(gemms == 4);  // QKV, out-projection, FC1, FC2
  for (const model::Op& op : model::head_ops(fp8.model, fp8.parallel)) CHECK(!op.fp8);
  // FP8 operands are 1 byte, the result 16-bit: QKV's m·k + k·n + 2·m·n bytes per pass.
  const model::Op qkv = model::layer_ops(fp8.model, fp8.parallel)[1];
  REQUIRE(qkv.name == "qkv_gemm");
  CHECK(qkv.fwd_bytes == 1024.0 * 1024 + 1024.0 * 3072 + 2 * 1024.0 * 3072);
  CHECK(qkv.bwd_wgrad_bytes == qkv.fwd_bytes);
  // Kernel time of a compute-bound GEMM (8192³): the roofline at the FP8 peak, same curve.
  model::Op gemm;
  gemm.kind = model::OpKind::kGemm;
  gemm.fwd_flops = 2.0 * 8192 * 8192 * 8192;
  gemm.fwd_bytes = 3.0 * 8192 * 8192;
  gemm.fp8 = true;
  const HardwareSpec& hw = fp8.hardware;
  const double eff = hw_models::efficiency(hw.gemm, gemm.fwd_flops);
  const TimePs fp8_ps = hw_models::op_times(hw, gemm).fwd_ps;
  CHECK(fp8_ps == static_cast<TimePs>(std::ceil(gemm.fwd_flops * 1e12 / (1.979e15 * eff))) + hw.kernel_launch_ps);
  gemm.fp8 = false;
  CHECK(hw_models::op_times(hw, gemm).fwd_ps ==
        static_cast<TimePs>(std::ceil(gemm.fwd_flops * 1e12 / (9.895e14 * eff))) + hw.kernel_launch_ps);

  // The iteration: the same FLOPs, faster; MFU stays against the 16-bit peak.
  Scenario bf16 = sc;
  bf16.model.gemm_precision = GemmPrecision::kBf16;
  const SimResult r8 = run_scenario(sc), r16 = run_scenario(bf16);
  CHECK(r8.executed_flops == r16.executed_flops);
  CHECK(r8.iteration_time_s < r16.iteration_time_s);
  CHECK(r8.mfu == doctest::Approx(r8.model_flops / r8.iteration_time_s / 9.895e14));
  // `lynxsim best`'s bound stays below the simulated time.
  CHECK(search::compute_lower_bound_s(fp8) <= r8.iteration_time_s);
}

TEST_CASE("FP8 GEMMs on a GPU without FP8 tensor cores are refused, naming the key and the profile") {
  CHECK(error_of([] {
          model::load_scenario_text("model: {preset: gpt-1.3b, gemm_precision: fp8}\n"
                                    "hardware: {profile: dgx-a100-80gb}\n",
                                    "s.yaml");
        }) ==
        "s.yaml:1:43: key 'model.gemm_precision': model.gemm_precision fp8 needs FP8 tensor cores, and "
        "hardware profile 'dgx-a100-80gb' (A100-SXM4-80GB) declares none (gpu.fp8_peak 0; A100 has "
        "no FP8): use an H100 / H200 profile, or set hardware.gpu.fp8_peak");
  CHECK_NOTHROW(model::load_scenario_text(
      "model: {preset: gpt-1.3b, gemm_precision: fp8}\nhardware: {profile: dgx-a100-80gb, gpu: {fp8_peak: 600TFLOPS}}\n",
      "s.yaml"));
}
