// Tests for the Llama-family layers of model/gpt: presets against the published parameter
// counts, and every derived quantity of one llama3-8b layer (GEMM shapes and FLOPs with
// grouped-query attention, SwiGLU, RMSNorm, rotary; saved activation bytes per op group;
// parameters) against a hand count at tp 1 and tp 8, with and without sequence parallelism.
#include "model/gpt.hpp"
#include "model/workload.hpp"

#include "common/error.hpp"
#include "tests/error_of.hpp"
#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::model;
using lynx::test::error_of;
using lynx::test::find_op;
using lynx::test::names_of;
using lynx::test::saved_in_group;
using lynx::test::saved_sum;

namespace {

ModelSpec preset(const std::string& name, int seq_len = 2048) {
  ModelSpec m;
  m.preset = name;
  m.seq_len = seq_len;
  return resolve_model(m);
}

ParallelSpec parallel(int tp, bool sp) {
  ParallelSpec p;
  p.tp = tp;
  p.sequence_parallel = sp;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// llama3-8b (Dubey et al. 2024, Table 3): h 4096, 32 heads of 128, 8 kv heads, ffn 14336,
// vocab 128256; s 8192, b 1 below, so T = 8192 tokens per micro-batch.
constexpr std::uint64_t kT = 8192, kH = 4096, kKv = 8 * 128, kF = 14336, kV = 128256;

}  // namespace

TEST_CASE("Llama presets: shapes and the published parameter counts") {
  const ModelSpec m = preset("llama3-8b");
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn_hidden == 14336);
  CHECK(m.vocab == 128256);
  CHECK(m.mlp == MlpKind::kSwiglu);
  CHECK(m.norm == NormKind::kRmsNorm);
  CHECK(m.position_embedding == PositionKind::kRotary);
  CHECK(m.embeddings == EmbeddingTie::kUntied);
  CHECK(m.linear_bias == LinearBias::kOff);
  CHECK(m.dropout == Dropout::kOff);
  CHECK(preset("llama2-7b").kv_heads == 32);  // multi-head attention
  CHECK(preset("llama2-70b").kv_heads == 8);
  CHECK(preset("llama3-405b").layers == 126);
  // GPT presets keep GPT's architecture.
  const ModelSpec gpt = preset("gpt-1.3b");
  CHECK(gpt.kv_heads == gpt.heads);
  CHECK(gpt.vocab == 51200);
  CHECK(gpt.mlp == MlpKind::kGelu);
  CHECK(gpt.norm == NormKind::kLayerNorm);
  CHECK(gpt.position_embedding == PositionKind::kLearned);
  CHECK(gpt.embeddings == EmbeddingTie::kTied);
  CHECK(gpt.linear_bias == LinearBias::kOn);
  CHECK(gpt.dropout == Dropout::kOn);

  // Published totals: Llama 3 8.03B, 70.55B, 405.85B (Meta's model cards); Llama 2 6.74B,
  // 13.02B, 68.98B (HF configs). Exactly: the HF checkpoints' counts minus the final RMSNorm
  // (h weights), which parameter_count leaves out as Eq. 2 does; e.g. Llama-3-8B
  // 32·(4096·6144 + 4096² + 3·4096·14336 + 2·4096) + 2·128256·4096 = 8,030,257,152 and
  // 8,030,261,248 with the final norm.
  struct Published {
    const char* name;
    double exact;
    double billions;
  };
  for (const Published& p : {Published{"llama3-8b", 8'030'257'152.0, 8.03},
                             Published{"llama3-70b", 70'553'698'304.0, 70.55},
                             Published{"llama3-405b", 405'853'372'416.0, 405.85},
                             Published{"llama2-7b", 6'738'411'520.0, 6.74},
                             Published{"llama2-13b", 13'015'859'200.0, 13.02},
                             Published{"llama2-70b", 68'976'640'000.0, 68.98}}) {
    CAPTURE(p.name);
    const ModelSpec spec = preset(p.name);
    CHECK(parameter_count(spec) == p.exact);
    CHECK(std::round(parameter_count(spec) / 1e7) / 100 == doctest::Approx(p.billions));
    // The final norm closes the gap to the HF count; seq_len does not matter (rotary).
    CHECK(parameter_count(preset(p.name, 8192)) == p.exact);
  }
  // Every dense preset shards over tp 8: heads, kv heads, ffn and vocab (the MoE presets:
  // Qwen3's 4 kv heads take tp <= 4; tests/model/test_moe.cpp).
  for (const std::string& name : preset_names()) {
    CAPTURE(name);
    const ModelSpec spec = preset(name);
    if (!is_moe(spec)) CHECK_NOTHROW(check_layout(spec, parallel(8, true)));
  }
}

TEST_CASE("explicit fields override a Llama preset's architecture") {
  ModelSpec m;
  m.preset = "llama3-8b";
  m.mlp = MlpKind::kGelu;
  m.kv_heads = 32;
  m.embeddings = EmbeddingTie::kTied;
  const ModelSpec r = resolve_model(m);
  CHECK(r.mlp == MlpKind::kGelu);
  CHECK(r.kv_heads == 32);
  CHECK(r.embeddings == EmbeddingTie::kTied);
  CHECK(r.norm == NormKind::kRmsNorm);  // not overridden
  CHECK(r.ffn_hidden == 14336);         // the preset's, not 4h

  ModelSpec odd = m;
  odd.kv_heads = 5;
  CHECK(contains(error_of([&] { resolve_model(odd); }), "model.kv_heads (5) does not divide model.heads (32)"));
  // Megatron-Core's rule: kv_heads divisible by tp (no K/V replication).
  ModelSpec mqa = m;
  mqa.kv_heads = 1;
  CHECK_NOTHROW(check_layout(resolve_model(mqa), parallel(1, false)));
  CHECK(contains(error_of([&] { check_layout(resolve_model(mqa), parallel(2, false)); }),
                 "model.kv_heads (1) is not divisible by parallel.tp (2)"));
  CHECK(contains(error_of([&] { check_layout(preset("llama3-8b"), parallel(16, false)); }),
                 "model.kv_heads (8) is not divisible by parallel.tp (16)"));
  const std::vector<std::string> keys = preset_keys("llama3-8b");
  CHECK(std::find(keys.begin(), keys.end(), "model.kv_heads") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "model.mlp") != keys.end());
  CHECK(preset_keys("gpt-1.3b") ==
        std::vector<std::string>{"model.layers", "model.hidden", "model.heads", "model.vocab"});
}

TEST_CASE("llama3-8b layer: op order, GEMM shapes and FLOPs with GQA and SwiGLU") {
  ModelSpec m = preset("llama3-8b", 8192);
  m.flash_attention = true;
  SUBCASE("tp 1") {
    const std::vector<Op> ops = layer_ops(m, parallel(1, false));
    CHECK(names_of(ops) ==
          std::vector<std::string>{"rmsnorm1", "qkv_gemm", "rotary", "flash_attention",
                                   "out_proj_gemm", "attn_dropout_residual", "rmsnorm2",
                                   "fc1_gemm", "swiglu", "fc2_gemm", "mlp_dropout_residual"});
    // Q 4096 + K 1024 + V 1024 = 6144 columns.
    const Op& qkv = find_op(ops, "qkv_gemm");
    CHECK(qkv.gemm_m == 8192);
    CHECK(qkv.gemm_n == 6144);
    CHECK(qkv.gemm_k == 4096);
    CHECK(qkv.fwd_flops == 2.0 * 8192 * 6144 * 4096);
    // Gate and up as one GEMM of 2f; down from f.
    CHECK(find_op(ops, "fc1_gemm").gemm_n == 2 * 14336);
    CHECK(find_op(ops, "fc2_gemm").gemm_k == 14336);
    CHECK(find_op(ops, "fc2_gemm").gemm_n == 4096);
    // Forward GEMM FLOPs: 2·T·h·(6144 + 4096 + 2·14336 + 14336).
    double gemm = 0, attention = 0, elementwise = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::kGemm) gemm += op.fwd_flops;
      if (op.kind == OpKind::kAttention) attention += op.fwd_flops;
      if (op.kind == OpKind::kMemoryBound) elementwise += op.fwd_flops;
    }
    CHECK(gemm == 2.0 * 8192 * 4096 * (6144 + 4096 + 28672 + 14336));
    // Attention FLOPs follow the query heads: QK^T and ·V, 4·s²·h for b 1.
    CHECK(attention == 4.0 * 8192 * 8192 * 4096);
    CHECK(elementwise == 0);
    // Flash reads Q, grouped K, V and writes O: 2·T·(4096 + 1024 + 1024 + 4096) + lse 4·32·T.
    CHECK(find_op(ops, "flash_attention").fwd_bytes == 2.0 * 8192 * (4096 + 2048 + 4096) + 4.0 * 32 * 8192);
    // RMSNorm reads γ only.
    CHECK(find_op(ops, "rmsnorm1").fwd_bytes == 2.0 * 2 * 8192 * 4096 + 2 * 4096);
    // No biases, no dropout: the residual add reads x and the residual, writes the output.
    CHECK(find_op(ops, "attn_dropout_residual").fwd_bytes == 3.0 * 2 * 8192 * 4096);
    CHECK(find_op(ops, "attn_dropout_residual").saved_bytes == 0);
    // Rotary: read and write Q and K, read the fp32 angles s × head_dim.
    CHECK(find_op(ops, "rotary").fwd_bytes == 2.0 * 2 * 8192 * (4096 + 1024) + 4.0 * 8192 * 128);
    CHECK(find_op(ops, "swiglu").fwd_bytes == 2.0 * 8192 * (2 * 14336 + 14336));
  }
  SUBCASE("tp 8 with SP") {
    const std::vector<Op> ops = layer_ops(m, parallel(8, true));
    CHECK(names_of(ops) ==
          std::vector<std::string>{"rmsnorm1", "sp_allgather_attn", "qkv_gemm", "rotary",
                                   "flash_attention", "out_proj_gemm", "sp_reducescatter_attn",
                                   "attn_dropout_residual", "rmsnorm2", "sp_allgather_mlp",
                                   "fc1_gemm", "swiglu", "fc2_gemm", "sp_reducescatter_mlp",
                                   "mlp_dropout_residual"});
    const Op& qkv = find_op(ops, "qkv_gemm");
    CHECK(qkv.gemm_n == 6144 / 8);  // 4 query heads + 1 kv head of 128 each, for K and V
    CHECK(qkv.fwd_flops == 2.0 * 8192 * 768 * 4096);
    CHECK(qkv.bwd_dgrad_flops == qkv.fwd_flops);
    CHECK(qkv.bwd_wgrad_flops == qkv.fwd_flops);
    CHECK(find_op(ops, "fc1_gemm").gemm_n == 2 * 14336 / 8);
    CHECK(find_op(ops, "fc1_gemm").bwd_input_allgather_bytes == 2ULL * 8192 * 4096);
    CHECK(find_op(ops, "sp_allgather_mlp").collective_bytes == 2ULL * 8192 * 4096);
  }
  SUBCASE("model FLOPs: forward + backward of every op, GQA and SwiGLU included") {
    // Per token and layer, forward: QKV 2h·6144, out 2h², FC1 2h·2f, FC2 2fh, attention 4sh;
    // ×3 with the backward; the LM head 6hV per token. B 2.
    const double h = 4096, s = 8192, f = 14336, v = 128256, l = 32, tokens = 2 * s;
    const double expected =
        tokens * (3 * l * (2 * h * 6144 + 2 * h * h + 6 * h * f + 4 * s * h) + 6 * h * v);
    CHECK(model_flops_per_iteration(m, 2) == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("llama3-8b layer: saved activation bytes by hand, tp 1 and 8, with and without SP") {
  ModelSpec m = preset("llama3-8b", 8192);
  m.flash_attention = true;
  // Outside the TP region (sharded by SP): norm inputs 2·2Th, QKV and FC1 inputs 2·2Th = 8·Th
  // (no dropout: no residual masks). Inside (÷ t): rotated Q, K, V 2·T·6144, lse 4·32·T,
  // out-proj input 2Th, SwiGLU input 2·T·2f, FC2 input 2Tf.
  const std::uint64_t outside = 8 * kT * kH;
  const std::uint64_t inside =
      2 * kT * (kH + 2 * kKv) + 4 * 32 * kT + 2 * kT * kH + 4 * kT * kF + 2 * kT * kF;
  for (int t : {1, 8}) {
    for (bool sp : {false, true}) {
      CAPTURE(t);
      CAPTURE(sp);
      const std::vector<Op> ops = layer_ops(m, parallel(t, sp));
      const std::uint64_t out_factor = sp && t > 1 ? static_cast<std::uint64_t>(t) : 1;
      CHECK(saved_sum(ops) == outside / out_factor + inside / static_cast<std::uint64_t>(t));
      // SwiGLU keeps gate and up (2·2Tf/t), FC2 its input (2Tf/t): 6Tf/t for the MLP's inner part.
      CHECK(find_op(ops, "swiglu").saved_bytes == 4 * kT * kF / static_cast<std::uint64_t>(t));
      CHECK(find_op(ops, "fc2_gemm").saved_bytes == 2 * kT * kF / static_cast<std::uint64_t>(t));
      CHECK(saved_in_group(ops, OpGroup::kMlp) ==
            2 * kT * kH / out_factor + 6 * kT * kF / static_cast<std::uint64_t>(t));
      // Rotary holds the Q, K, V the core reads; the QKV GEMM only its input.
      CHECK(find_op(ops, "rotary").saved_bytes == 2 * kT * (kH + 2 * kKv) / static_cast<std::uint64_t>(t));
      CHECK(find_op(ops, "qkv_gemm").saved_bytes == 2 * kT * kH / out_factor);
      CHECK(find_op(ops, "qkv_gemm").saves == Saves::kInput);
      // Full recomputation keeps the layer input.
      CHECK(saved_in_group(ops, OpGroup::kLayerInput) == 2 * kT * kH / out_factor);
    }
  }
  // Hand total at tp 1: T·(10h + 2·6144 + 128 + 6f) = 8192 · 139,392 = 1,141,899,264 bytes.
  CHECK(saved_sum(layer_ops(m, parallel(1, false))) == 1'141'899'264U);
  // tp 8 with SP: 1,141,899,264 / 8.
  CHECK(saved_sum(layer_ops(m, parallel(8, true))) == 142'737'408U);
  // With dropout (as GPT): the two 1-byte residual masks, 2Th, come back.
  ModelSpec with_dropout = m;
  with_dropout.dropout = Dropout::kOn;
  CHECK(saved_sum(layer_ops(with_dropout, parallel(1, false))) == 1'141'899'264U + 2 * kT * kH);
}

TEST_CASE("GQA without flash attention: K, V expanded inside the core, dropped by selective") {
  const ModelSpec m = preset("llama3-8b", 4096);  // flash off
  for (int t : {1, 8}) {
    CAPTURE(t);
    const std::vector<Op> ops = layer_ops(m, parallel(t, false));
    const std::uint64_t tokens = 4096, tt = static_cast<std::uint64_t>(t);
    const Op& expand = find_op(ops, "gqa_expand_kv");
    CHECK(expand.group == OpGroup::kAttnCore);
    CHECK(expand.saved_bytes == 2 * 2 * tokens * kH / tt);  // K and V at 32 heads
    // Core: expanded K, V + the softmax output 2·a·s²·b/t (no dropout: no mask, no second copy).
    CHECK(saved_in_group(ops, OpGroup::kAttnCore) ==
          4 * tokens * kH / tt + 2ULL * 32 * tokens * tokens / tt);
    CHECK(find_op(ops, "attn_v_matmul").saved_bytes == 0);  // reads the softmax output
    // Selective keeps the grouped Q, K, V (on rotary) it recomputes the core from.
    CHECK(find_op(ops, "rotary").saved_bytes == 2 * tokens * (kH + 2 * kKv) / tt);
    const std::vector<std::string> names = names_of(ops);
    CHECK(std::find(names.begin(), names.end(), "gqa_expand_kv") + 1 ==
          std::find(names.begin(), names.end(), "qk_matmul"));
  }
  // Multi-head attention (llama2-7b) needs no expansion.
  for (const Op& op : layer_ops(preset("llama2-7b", 4096), parallel(1, false)))
    CHECK(op.name != "gqa_expand_kv");
}

TEST_CASE("llama3-8b parameters per GPU, embedding and head, static bytes") {
  const ModelSpec m = preset("llama3-8b", 8192);
  ParallelSpec p = parallel(1, false);
  // tp 1: QKV h·6144, out h², FC1 2hf, FC2 fh, two RMSNorms 2h.
  CHECK(layer_parameter_count_per_gpu(m, p) == kH * 6144 + kH * kH + 3 * kH * kF + 2 * kH);
  CHECK(layer_parameter_count_per_gpu(m, p) == 218'112'000U);
  CHECK(embedding_parameter_count_per_gpu(m, p) == kV * kH);  // no position table
  CHECK(head_parameter_count_per_gpu(m, p) == kH + kV * kH);  // untied: its own output layer
  p.tp = 8;
  // tp 8: 3,145,728 + 2,097,152 + 14,680,064 + 7,340,032 + 8,192 (norms replicated).
  CHECK(layer_parameter_count_per_gpu(m, p) == 27'271'168U);
  CHECK(embedding_parameter_count_per_gpu(m, p) == kV * kH / 8);
  CHECK(head_parameter_count_per_gpu(m, p) == kH + kV * kH / 8);
  // Static bytes: 18 per parameter (bf16 weight, fp32 main gradient, fp32 Adam state:
  // parallel.fp32_main_grads, the default) + reserve.
  Scenario sc;
  sc.parallel = p;
  sc.hardware.memory_reserve_bytes = 0;
  CHECK(static_bytes(sc, layer_parameter_count_per_gpu(m, p)) == 18LL * 27'271'168);
  // The workload carries them.
  const Workload w = gpt_workload(m, p);
  CHECK(w.layer_params == 27'271'168U);
  CHECK(w.embedding.back().fwd_bytes == 2.0 * 2 * 8192 * 4096);  // no position read, no mask
  CHECK(w.embedding.back().saved_bytes == 0);
}

TEST_CASE("GPT architecture switches one at a time") {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 1024;
  m.heads = 16;
  m.seq_len = 512;
  const ModelSpec gpt = resolve_model(m);
  const ParallelSpec p = parallel(4, false);
  const std::uint64_t h = 1024;
  SUBCASE("no linear biases: QKV, out, FC1, FC2 lose theirs") {
    ModelSpec nb = gpt;
    nb.linear_bias = LinearBias::kOff;
    // Biases per GPU at tp 4: QKV 3h/4, out h, FC1 4h/4, FC2 h.
    CHECK(layer_parameter_count_per_gpu(gpt, p) - layer_parameter_count_per_gpu(nb, p) ==
          3 * h / 4 + h + 4 * h / 4 + h);
    CHECK(parameter_count(gpt) - parameter_count(nb) == 2.0 * (3 * h + h + 4 * h + h));
  }
  SUBCASE("RMSNorm: γ only") {
    ModelSpec rms = gpt;
    rms.norm = NormKind::kRmsNorm;
    CHECK(layer_parameter_count_per_gpu(gpt, p) - layer_parameter_count_per_gpu(rms, p) == 2 * h);
    CHECK(saved_sum(layer_ops(rms, p)) == saved_sum(layer_ops(gpt, p)));
  }
  SUBCASE("untied embeddings: the output layer on the last stage even with pp 1") {
    ModelSpec untied = gpt;
    untied.embeddings = EmbeddingTie::kUntied;
    CHECK(head_parameter_count_per_gpu(untied, p) == 2 * h + 51200 * h / 4);
    CHECK(parameter_count(untied) - parameter_count(gpt) == 51200.0 * 1024);
  }
  SUBCASE("rotary: no position table, Q and K saved once (on rotary)") {
    ModelSpec rope = gpt;
    rope.position_embedding = PositionKind::kRotary;
    CHECK(parameter_count(gpt) - parameter_count(rope) == 512.0 * 1024);
    CHECK(saved_sum(layer_ops(rope, p)) == saved_sum(layer_ops(gpt, p)));
    CHECK(saved_in_group(layer_ops(rope, p), OpGroup::kAttnProjInput) ==
          saved_in_group(layer_ops(gpt, p), OpGroup::kAttnProjInput));
  }
  SUBCASE("SwiGLU at ffn f: FC1 2hf, activation memory 6sbf/t instead of 4sbf/t") {
    ModelSpec glu = gpt;
    glu.mlp = MlpKind::kSwiglu;
    const std::uint64_t sbf = 512 * 4096;
    CHECK(saved_sum(layer_ops(glu, p)) - saved_sum(layer_ops(gpt, p)) == 2 * sbf / 4);
    CHECK(parameter_count(glu) - parameter_count(gpt) == 2.0 * (1024.0 * 4096 + 4096));
  }
}
