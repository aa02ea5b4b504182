// End-to-end checks of Llama-family layers: the simulated memory tracker holds exactly the
// hand-counted activation bytes of a GQA + SwiGLU + RMSNorm + rotary layer, executed FLOPs equal
// the model FLOPs without recomputation, and every recompute strategy runs on the Llama 3 8B
// example.
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// A small Llama layer on one DGX A100 node: s 512, b 2, h 1024, 16 heads of 64 with 4 kv
/// heads, ffn 2816, SwiGLU, RMSNorm, rotary, untied embeddings, no biases, no dropout.
Scenario small_llama(int layers, int tp, bool sp, bool flash, RecomputeKind strategy) {
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.layers = layers;
  sc.model.hidden = 1024;
  sc.model.heads = 16;
  sc.model.kv_heads = 4;
  sc.model.ffn_hidden = 2816;
  sc.model.seq_len = 512;
  sc.model.vocab = 51200;
  sc.model.flash_attention = flash;
  sc.model.mlp = MlpKind::kSwiglu;
  sc.model.norm = NormKind::kRmsNorm;
  sc.model.position_embedding = PositionKind::kRotary;
  sc.model.embeddings = EmbeddingTie::kUntied;
  sc.model.linear_bias = LinearBias::kOff;
  sc.model.dropout = Dropout::kOff;
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = tp;
  sc.parallel.sequence_parallel = sp;
  sc.parallel.micro_batch = 2;
  sc.parallel.global_batch = 2;
  sc.recompute.strategy = strategy;
  return sc;
}

SimRun run_scenario(const Scenario& sc) { return simulate(model::resolve_scenario(sc, "small_llama")); }

/// peak(2 layers) − peak(1 layer), static memory removed, from the executor's tracker.
std::int64_t measured_layer_activation_bytes(int tp, bool sp, bool flash, RecomputeKind strategy) {
  std::int64_t act[2];
  for (int layers = 1; layers <= 2; ++layers) {
    const SimResult r = run_scenario(small_llama(layers, tp, sp, flash, strategy)).result;
    act[layers - 1] = r.stages[0].peak_memory_bytes - r.stages[0].static_memory_bytes;
  }
  return act[1] - act[0];
}

}  // namespace

TEST_CASE("a Llama layer's simulated activation memory equals the hand count") {
  const std::int64_t s = 512, b = 2, h = 1024, a = 16, kv_width = 4 * 64, f = 2816;
  const std::int64_t T = s * b;
  // Outside the TP region: norm inputs, QKV and FC1 inputs 4 × 2Th (no dropout masks).
  const std::int64_t outside = 8 * T * h;
  // Inside (÷ t): rotated Q, K, V; out-proj input; SwiGLU input (gate, up); FC2 input.
  const std::int64_t inside = 2 * T * (h + 2 * kv_width) + 2 * T * h + 4 * T * f + 2 * T * f;
  const std::int64_t lse = 4 * a * T;               // flash attention's statistics
  const std::int64_t unfused = 2 * 2 * T * h + 2 * a * s * s * b;  // expanded K, V + softmax
  for (int t : {1, 4}) {
    CAPTURE(t);
    CHECK(measured_layer_activation_bytes(t, false, true, RecomputeKind::kNone) ==
          outside + (inside + lse) / t);
    CHECK(measured_layer_activation_bytes(t, false, false, RecomputeKind::kNone) ==
          outside + (inside + unfused) / t);
    // Selective drops the core: the s² tensors and the expanded K, V.
    CHECK(measured_layer_activation_bytes(t, false, false, RecomputeKind::kSelective) ==
          outside + inside / t);
  }
  CHECK(measured_layer_activation_bytes(4, true, true, RecomputeKind::kNone) ==
        (outside + inside + lse) / 4);
  CHECK(measured_layer_activation_bytes(4, true, true, RecomputeKind::kFull) == 2 * T * h / 4);
}

TEST_CASE("a Llama model's executed FLOPs equal its model FLOPs without recomputation") {
  Scenario sc = small_llama(4, 2, true, false, RecomputeKind::kNone);
  sc.parallel.pp = 2;
  sc.parallel.dp = 2;
  sc.parallel.global_batch = 8;
  const model::ResolvedScenario resolved = model::resolve_scenario(sc, "small_llama");
  const SimResult none = simulate(resolved).result;
  CHECK(none.executed_flops ==
        doctest::Approx(model::model_flops_per_iteration(resolved->model, 8)).epsilon(1e-12));
  CHECK(none.mfu == doctest::Approx(none.hfu).epsilon(1e-9));
}

TEST_CASE("every recompute strategy runs on the Llama 3 8B example") {
  // Fewer layers than the example (8, two per stage) keep the MILP strategies quick; micro-batches
  // of 32 make stage 0's activations exceed its memory without recomputation.
  const std::vector<std::string> overrides = {"model.layers=8", "parallel.micro_batch=32",
                                              "parallel.global_batch=128"};
  std::vector<SimResult> results;
  for (const char* strategy : kRecomputeKindNames) {
    CAPTURE(strategy);
    std::vector<std::string> with = overrides;
    with.push_back(std::string("recompute.strategy=") + strategy);
    const model::ResolvedScenario sc = model::load_scenario_file(
        LYNXSIM_SOURCE_DIR "/scenarios/examples/llama3-8b-lynx.yaml", with);
    results.push_back(simulate(sc).result);
    CHECK(results.back().iteration_time_s > 0);
  }
  const SimResult& none = results[0];
  const SimResult& full = results[1];
  CHECK(none.oom);
  CHECK_FALSE(full.oom);
  for (std::size_t k = 3; k < results.size(); ++k) {  // checkmate, lynx-heu, lynx-opt
    CAPTURE(kRecomputeKindNames[k]);
    CHECK_FALSE(results[k].oom);
    CHECK(results[k].iteration_time_s <= full.iteration_time_s);
  }
}
