// Tests for model/gpt: presets, parameter and FLOP formulas, per-layer op graph and the exact
// Korthikanti et al. 2022 activation-memory formulas.
#include "model/gpt.hpp"

#include "common/error.hpp"
#include "tests/error_of.hpp"
#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

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

ModelSpec preset(const std::string& name) {
  ModelSpec m;
  m.preset = name;
  return resolve_model(m);
}

/// A custom shape, resolved (ffn_hidden = 4 · hidden) as every model function needs it.
ModelSpec custom(int layers, int hidden, int heads, int seq_len, int vocab) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.seq_len = seq_len;
  m.vocab = vocab;
  return resolve_model(m);
}

/// The GPT presets (Eq. 2 and Eq. 7 describe them; the Llama presets are in test_llama.cpp).
std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> names;
  for (const std::string& name : preset_names())
    if (name.rfind("gpt-", 0) == 0) names.push_back(name);
  return names;
}

ParallelSpec parallel(int tp, int micro_batch, bool sp) {
  ParallelSpec p;
  p.tp = tp;
  p.micro_batch = micro_batch;
  p.sequence_parallel = sp;
  return p;
}

double flops_fwd_bwd(const std::vector<Op>& ops) {
  double total = 0;
  for (const Op& op : ops) total += op.fwd_flops + op.bwd_dgrad_flops + op.bwd_wgrad_flops;
  return total;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("presets resolve to the published shapes") {
  const ModelSpec m = preset("gpt-175b");
  CHECK(m.layers == 96);
  CHECK(m.hidden == 12288);
  CHECK(m.heads == 96);
  CHECK(m.ffn_hidden == 4 * 12288);
  CHECK(m.seq_len == 2048);
  CHECK(m.vocab == 51200);
  CHECK(preset("gpt-22b").layers == 48);
  CHECK(preset("gpt-22b").hidden == 6144);
  CHECK(preset("gpt-22b").heads == 64);
  CHECK(preset("gpt-1t").heads == 160);
  CHECK(preset_names().size() == 20);  // 10 GPT, 6 Llama (test_llama.cpp), 4 MoE (test_moe.cpp)

  // Every preset shards over tp = 8 (heads % 8 == 0) and has whole heads.
  for (const std::string& name : preset_names()) {
    const ModelSpec p = preset(name);
    CHECK_MESSAGE(p.heads % 8 == 0, name);
    CHECK_MESSAGE(p.hidden % p.heads == 0, name);
  }
}

TEST_CASE("explicit fields override the preset") {
  ModelSpec m;
  m.preset = "gpt-1.3b";
  m.layers = 4;
  m.ffn_hidden = 1000;
  m.seq_len = 1024;
  const ModelSpec r = resolve_model(m);
  CHECK(r.layers == 4);
  CHECK(r.hidden == 2048);
  CHECK(r.heads == 16);
  CHECK(r.ffn_hidden == 1000);
  CHECK(r.seq_len == 1024);

  ModelSpec wider;
  wider.preset = "gpt-1.3b";
  wider.hidden = 4096;  // ffn default follows the overridden hidden
  CHECK(resolve_model(wider).ffn_hidden == 4 * 4096);
}

TEST_CASE("resolve_model errors") {
  ModelSpec unknown;
  unknown.preset = "gpt-7b";
  const std::string msg = error_of([&] { resolve_model(unknown); });
  CHECK(contains(msg, "gpt-7b"));
  CHECK(contains(msg, "gpt-1.3b"));  // lists the known names
  CHECK(contains(msg, "gpt-1t"));

  const ModelSpec no_shape;
  CHECK(contains(error_of([&] { resolve_model(no_shape); }), "custom model"));

  CHECK(contains(error_of([&] { custom(2, 100, 3, 128, 1024); }),
                 "not divisible by model.heads"));
  CHECK(contains(error_of([&] { custom(2, 64, 4, 0, 1024); }), "seq_len"));
}

TEST_CASE("parameter count: Narayanan Eq. 2 and published sizes") {
  for (const std::string& name : gpt_preset_names()) {
    const ModelSpec m = preset(name);
    const double l = m.layers, h = m.hidden, v = m.vocab, s = m.seq_len;
    const double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h));
    CHECK_MESSAGE(std::abs(parameter_count(m) - eq2) <= 0.005 * eq2, name);
  }
  // gpt-1.3b by hand: 12·24·2048² = 1,207,959,552; 13·24·2048 = 638,976;
  // (51200 + 2048)·2048 = 109,051,904; total 1,317,650,432.
  CHECK(parameter_count(preset("gpt-1.3b")) == 1'317'650'432.0);
  // gpt-23b (our shape, 72 × 5120): 22,649,241,600 + 4,792,320 + 272,629,760.
  CHECK(parameter_count(preset("gpt-23b")) == 22'926'663'680.0);

  auto within = [](double value, double published, double tolerance) {
    return std::abs(value - published) <= tolerance * published;
  };
  CHECK(within(parameter_count(preset("gpt-1.3b")), 1.3e9, 0.03));
  CHECK(within(parameter_count(preset("gpt-2.7b")), 2.7e9, 0.03));
  CHECK(within(parameter_count(preset("gpt-6.7b")), 6.7e9, 0.03));
  CHECK(within(parameter_count(preset("gpt-13b")), 13e9, 0.03));
  CHECK(within(parameter_count(preset("gpt-175b")), 175e9, 0.03));
  CHECK(within(parameter_count(preset("gpt-23b")), 23e9, 0.01));
}

TEST_CASE("FLOP formulas: hand values") {
  // l = 2, h = 64, s = 128, V = 1024, B = 4: s/(6h) = 1/3, V/(12lh) = 2/3, s/(3h) = 2/3,
  // V/(16lh) = 1/2. 72·4·2·128·64² = 301,989,888; 96·4·128·2·64² = 402,653,184.
  const ModelSpec m = custom(2, 64, 4, 128, 1024);
  CHECK(eq7_model_flops_per_iteration(m, 4) ==
        doctest::Approx(301'989'888.0 * 2.0).epsilon(1e-12));
  CHECK(model_flops_per_iteration(m, 4) == doctest::Approx(301'989'888.0 * 2.0).epsilon(1e-12));
  CHECK(selective_flops_per_iteration(m, 4) ==
        doctest::Approx(301'989'888.0 * 7.0 / 3.0).epsilon(1e-12));
  CHECK(full_recompute_flops_per_iteration(m, 4) ==
        doctest::Approx(402'653'184.0 * 11.0 / 6.0).epsilon(1e-12));
}

TEST_CASE("layer FLOPs: fwd + bwd = 72·b·s·h²·(1 + s/(6h))/t, and the ops reproduce Eq. 7") {
  const ModelSpec m = custom(2, 64, 4, 128, 1024);
  // b = 2, t = 2: 72·2·128·64² = 75,497,472; × (1 + 1/3) / 2 = 50,331,648.
  const std::vector<Op> ops = layer_ops(m, parallel(2, 2, false));
  CHECK(flops_fwd_bwd(ops) == 50'331'648.0);
  double fwd = 0;
  for (const Op& op : ops) fwd += op.fwd_flops;
  CHECK(fwd == 50'331'648.0 / 3.0);  // backward is exactly twice the forward

  // Independent cross-check: B/b micro-batches × l layers × t GPUs + the LM head GEMM
  // (fwd + dgrad + wgrad) must equal Korthikanti Eq. 7 for B = 4, b = 2.
  for (bool sp : {false, true}) {
    const ParallelSpec p = parallel(2, 2, sp);
    const std::vector<Op> head_side = head_ops(m, p);
    const Op& head = find_op(head_side, "lm_head_gemm");
    const double per_micro_batch =
        2 * flops_fwd_bwd(layer_ops(m, p)) + head.fwd_flops + head.bwd_dgrad_flops +
        head.bwd_wgrad_flops;
    CHECK(per_micro_batch * 2 /*TP GPUs*/ * 2 /*micro-batches*/ ==
          doctest::Approx(eq7_model_flops_per_iteration(m, 4)).epsilon(1e-12));
  }
}

TEST_CASE("model FLOPs: counted from the ops, Eq. 7 for every GPT preset (f = 4h)") {
  for (const std::string& name : gpt_preset_names()) {
    CAPTURE(name);
    const ModelSpec m = preset(name);
    CHECK(model_flops_per_iteration(m, 512) ==
          doctest::Approx(eq7_model_flops_per_iteration(m, 512)).epsilon(1e-12));
    ModelSpec flash = m;
    flash.flash_attention = true;  // the fused kernel's recomputed QK^T is not model work
    CHECK(model_flops_per_iteration(flash, 512) == model_flops_per_iteration(m, 512));
  }
}

TEST_CASE("model FLOPs follow ffn_hidden (regression: Eq. 7 hard-wired f = 4h)") {
  // Per token and layer, forward: QKV 6h², out-proj 2h², FC1 + FC2 2·2hf, attention 4sh;
  // ×3 for forward + backward; LM head 6hV per token. l = 2, h = 64, s = 128, V = 1024, B = 4.
  for (int f : {4096, 3 * 64, 100}) {
    CAPTURE(f);
    ModelSpec m = custom(2, 64, 4, 128, 1024);
    m.ffn_hidden = f;
    const double l = 2, h = 64, s = 128, v = 1024, tokens = 4 * s;
    const double expected =
        tokens * (3 * l * (8 * h * h + 4 * h * f + 4 * s * h) + 6 * h * v);
    CHECK(model_flops_per_iteration(m, 4) == doctest::Approx(expected).epsilon(1e-12));
    CHECK(model_flops_per_iteration(m, 4) != doctest::Approx(eq7_model_flops_per_iteration(m, 4)));
  }
}

TEST_CASE("saved activation bytes equal Korthikanti's per-layer formulas exactly") {
  struct Shape {
    std::int64_t s, b, h, a;
  };
  const std::vector<Shape> shapes{{2048, 1, 2048, 16}, {2048, 2, 2048, 16}, {1024, 4, 4096, 32},
                                  {512, 3, 1536, 24}, {128, 1, 64, 8}};
  for (const Shape& x : shapes) {
    for (std::int64_t t : {1, 2, 8}) {
      const ModelSpec m = custom(4, static_cast<int>(x.h), static_cast<int>(x.a),
                                 static_cast<int>(x.s), 51200);
      const std::int64_t sbh = x.s * x.b * x.h;
      // 5·a·s²·b; where Megatron's fused softmax cannot run (micro-batch × local heads not
      // divisible by 4) PyTorch's softmax saves its fp32 output, 2·a·s²·b more (model/gpt_ops.cpp).
      const bool fused_softmax = (x.b * (x.a / t)) % 4 == 0;
      const std::int64_t s2 = (fused_softmax ? 5 : 7) * x.a * x.s * x.s * x.b;
      CAPTURE(x.s);
      CAPTURE(x.b);
      CAPTURE(x.h);
      CAPTURE(x.a);
      CAPTURE(t);
      {
        // Tensor parallel only: s·b·h·(10 + 24/t + 5as/(ht)) = 10sbh + 24sbh/t + 5as²b/t.
        const std::vector<Op> ops = layer_ops(m, parallel(static_cast<int>(t), static_cast<int>(x.b), false));
        const auto expected = static_cast<std::uint64_t>(10 * sbh + 24 * sbh / t + s2 / t);
        CHECK(saved_sum(ops) == expected);
        // Selective drops the attention core's 5as²b/t only.
        CHECK(saved_sum(ops) - saved_in_group(ops, OpGroup::kAttnCore) ==
              static_cast<std::uint64_t>(10 * sbh + 24 * sbh / t));
        // Full recomputation keeps the layer input 2sbh.
        CHECK(saved_in_group(ops, OpGroup::kLayerInput) == static_cast<std::uint64_t>(2 * sbh));
      }
      {
        // Tensor + sequence parallel: s·b·h·(34 + 5as/h)/t; selective 34sbh/t; full 2sbh/t.
        const std::vector<Op> ops = layer_ops(m, parallel(static_cast<int>(t), static_cast<int>(x.b), true));
        CHECK(saved_sum(ops) == static_cast<std::uint64_t>((34 * sbh + s2) / t));
        CHECK(saved_sum(ops) - saved_in_group(ops, OpGroup::kAttnCore) ==
              static_cast<std::uint64_t>(34 * sbh / t));
        CHECK(saved_in_group(ops, OpGroup::kLayerInput) == static_cast<std::uint64_t>(2 * sbh / t));
      }
    }
  }
  // One value by hand, no parallelism: s = 2048, b = 1, h = 2048, a = 16: sbh = 4,194,304;
  // 34·sbh = 142,606,336; 5·a·s²·b = 5·16·4,194,304 = 335,544,320; total 478,150,656.
  CHECK(saved_sum(layer_ops(custom(4, 2048, 16, 2048, 51200), parallel(1, 1, false))) ==
        478'150'656U);
}

TEST_CASE("Korthikanti breakdown: attention 11sbh + 5as²b, MLP 19sbh, LayerNorms 4sbh, by group") {
  const ModelSpec m = custom(2, 256, 8, 512, 1024);
  const std::vector<Op> ops = layer_ops(m, parallel(1, 2, false));
  const std::uint64_t sbh = 512 * 2 * 256;
  const std::uint64_t s2 = 5ULL * 8 * 512 * 512 * 2;
  // LN1 (the layer input) and LN2 inputs: 2sbh each.
  CHECK(find_op(ops, "ln1").saved_bytes == 2 * sbh);
  CHECK(find_op(ops, "ln2").saved_bytes == 2 * sbh);
  // Attention: QKV input 2sbh + Q,K,V 6sbh, out-proj input 2sbh, s² part (its residual mask,
  // sbh, is in kPost with the other post-collective tensors).
  CHECK(saved_in_group(ops, OpGroup::kAttnProjInput) + saved_in_group(ops, OpGroup::kAttnCore) ==
        10 * sbh + s2);
  // Post-collective tensors: LN2 input 2sbh and the two residual dropout masks sbh each.
  CHECK(saved_in_group(ops, OpGroup::kPost) == 4 * sbh);
  CHECK(find_op(ops, "softmax").saved_bytes == 2 * 8 * 512 * 512 * 2);
  CHECK(find_op(ops, "attn_dropout").saved_bytes == 8 * 512 * 512 * 2);
  // MLP: FC1 input 2sbh, GeLU input 8sbh, FC2 input 8sbh (its dropout mask sbh: kPost).
  CHECK(saved_in_group(ops, OpGroup::kMlp) == 18 * sbh);
  CHECK(find_op(ops, "gelu").saved_bytes == 8 * sbh);
}

TEST_CASE("flash attention stores no s² tensors") {
  ModelSpec m = custom(2, 1024, 16, 2048, 51200);
  m.flash_attention = true;
  for (std::int64_t t : {1, 2, 8}) {
    const ParallelSpec p = parallel(static_cast<int>(t), 2, true);
    const std::vector<Op> ops = layer_ops(m, p);
    const std::int64_t sbh = 2048 * 2 * 1024;
    const std::int64_t lse = 4 * 16 * 2048 * 2;  // fp32 log-sum-exp per (head, row)
    CHECK(saved_sum(ops) == static_cast<std::uint64_t>((34 * sbh + lse) / t));
    const Op& flash = find_op(ops, "flash_attention");
    CHECK(flash.kind == OpKind::kAttention);
    CHECK(flash.group == OpGroup::kAttnCore);
    CHECK(flash.saved_bytes == static_cast<std::uint64_t>(lse / t));
    // Forward QK^T + ·V = 4·b·s²·h/t; backward 2.5x (Dao et al. 2022).
    const double fwd = 4.0 * 2 * 2048.0 * 2048.0 * 1024.0 / static_cast<double>(t);
    CHECK(flash.fwd_flops == fwd);
    CHECK(flash.bwd_dgrad_flops == 2.5 * fwd);
  }
  for (const Op& op : layer_ops(m, parallel(1, 1, false))) {
    CHECK(op.name != "softmax");
    CHECK(op.name != "qk_matmul");
  }
}

TEST_CASE("layer op order, shapes and collectives") {
  const ModelSpec m = custom(2, 1024, 16, 512, 51200);
  SUBCASE("tp = 1: no collectives") {
    const std::vector<std::string> expected{"ln1", "qkv_gemm", "qk_matmul", "softmax",
                                            "attn_dropout", "attn_v_matmul", "out_proj_gemm",
                                            "attn_dropout_residual", "ln2", "fc1_gemm", "gelu",
                                            "fc2_gemm", "mlp_dropout_residual"};
    CHECK(names_of(layer_ops(m, parallel(1, 1, false))) == expected);
  }
  SUBCASE("tp = 4 without SP: copy (bwd all-reduce) and all-reduce (fwd)") {
    const std::vector<Op> ops = layer_ops(m, parallel(4, 2, false));
    const std::vector<std::string> expected{
        "ln1", "tp_copy_attn", "qkv_gemm", "qk_matmul", "softmax", "attn_dropout",
        "attn_v_matmul", "out_proj_gemm", "tp_allreduce_attn", "attn_dropout_residual", "ln2",
        "tp_copy_mlp", "fc1_gemm", "gelu", "fc2_gemm", "tp_allreduce_mlp",
        "mlp_dropout_residual"};
    CHECK(names_of(ops) == expected);
    const Op& ar = find_op(ops, "tp_allreduce_attn");
    CHECK(ar.kind == OpKind::kCollective);
    CHECK(ar.collective == CollectiveKind::kAllReduce);
    CHECK(ar.bwd_collective == CollectiveKind::kNone);
    CHECK(ar.collective_bytes == 2ULL * 512 * 2 * 1024);  // 2·s·b·h
    const Op& copy = find_op(ops, "tp_copy_mlp");
    CHECK(copy.collective == CollectiveKind::kNone);
    CHECK(copy.bwd_collective == CollectiveKind::kAllReduce);
    // QKV: [s·b × h] · [h × 3h/t]; FC2: [s·b × f/t] · [f/t × h].
    const Op& qkv = find_op(ops, "qkv_gemm");
    CHECK(qkv.gemm_m == 1024);
    CHECK(qkv.gemm_n == 3 * 1024 / 4);
    CHECK(qkv.gemm_k == 1024);
    CHECK(qkv.fwd_flops == 2.0 * 1024 * 768 * 1024);
    CHECK(qkv.fwd_bytes == 2.0 * (1024 * 1024 + 1024 * 768 + 1024 * 768));
    CHECK(qkv.bwd_dgrad_flops == qkv.fwd_flops);
    CHECK(qkv.bwd_wgrad_flops == qkv.fwd_flops);
    CHECK(qkv.bwd_input_allgather_bytes == 0);
    const Op& fc2 = find_op(ops, "fc2_gemm");
    CHECK(fc2.gemm_n == 1024);
    CHECK(fc2.gemm_k == 4096 / 4);
    // QK^T: b·a/t = 2·4 batched [s × d]·[d × s].
    const Op& qk = find_op(ops, "qk_matmul");
    CHECK(qk.gemm_batch == 8);
    CHECK(qk.gemm_m == 512);
    CHECK(qk.gemm_n == 512);
    CHECK(qk.gemm_k == 64);
    CHECK(qk.bwd_wgrad_flops == 0);
    CHECK(qk.bwd_dgrad_flops == 2 * qk.fwd_flops);
    // Memory-bound: softmax reads and writes b·(a/t)·s² 2-byte elements; backward ~2x.
    const Op& softmax = find_op(ops, "softmax");
    CHECK(softmax.fwd_bytes == 2.0 * 2 * 8 * 512 * 512);
    CHECK(softmax.bwd_dgrad_bytes == 2 * softmax.fwd_bytes);
    CHECK(softmax.fwd_flops == 0);
  }
  SUBCASE("tp = 4 with SP: all-gather after LN1 and LN2, reduce-scatter after out-proj and FC2") {
    const std::vector<Op> ops = layer_ops(m, parallel(4, 2, true));
    const std::vector<std::string> expected{
        "ln1", "sp_allgather_attn", "qkv_gemm", "qk_matmul", "softmax", "attn_dropout",
        "attn_v_matmul", "out_proj_gemm", "sp_reducescatter_attn", "attn_dropout_residual", "ln2",
        "sp_allgather_mlp", "fc1_gemm", "gelu", "fc2_gemm", "sp_reducescatter_mlp",
        "mlp_dropout_residual"};
    CHECK(names_of(ops) == expected);
    CHECK(find_op(ops, "sp_allgather_mlp").collective == CollectiveKind::kAllGather);
    CHECK(find_op(ops, "sp_allgather_mlp").bwd_collective == CollectiveKind::kReduceScatter);
    CHECK(find_op(ops, "sp_reducescatter_attn").collective == CollectiveKind::kReduceScatter);
    CHECK(find_op(ops, "sp_reducescatter_attn").bwd_collective == CollectiveKind::kAllGather);
    // GEMMs still run on the gathered sequence; their sharded inputs are re-gathered.
    CHECK(find_op(ops, "fc1_gemm").gemm_m == 1024);
    CHECK(find_op(ops, "fc1_gemm").bwd_input_allgather_bytes == 2ULL * 1024 * 1024);
    CHECK(find_op(ops, "qkv_gemm").bwd_input_allgather_bytes == 2ULL * 1024 * 1024);
    CHECK(find_op(ops, "fc2_gemm").bwd_input_allgather_bytes == 0);
    // LayerNorm on s·b/t tokens: read + write 2·256·1024·2 bytes, plus γ, β.
    CHECK(find_op(ops, "ln2").fwd_bytes == 2.0 * 2 * 256 * 1024 + 4 * 1024);
  }
}

TEST_CASE("layout checks") {
  const ModelSpec m = custom(24, 2048, 16, 2048, 51200);
  ParallelSpec p;
  p.tp = 8;
  p.pp = 4;
  CHECK_NOTHROW(check_layout(m, p));

  p.tp = 3;
  CHECK(contains(error_of([&] { check_layout(m, p); }), "model.heads (16) is not divisible by parallel.tp (3)"));
  p.tp = 8;
  p.pp = 5;
  CHECK(contains(error_of([&] { check_layout(m, p); }), "model.layers (24)"));
  p.pp = 4;
  p.virtual_stages = 4;  // 24 % 16 != 0
  CHECK(contains(error_of([&] { check_layout(m, p); }), "4 × 4 = 16"));
  p.virtual_stages = 1;

  ModelSpec odd_ffn = m;
  odd_ffn.ffn_hidden = 8190;
  CHECK(contains(error_of([&] { check_layout(odd_ffn, p); }), "model.ffn_hidden (8190)"));
  ModelSpec odd_vocab = m;
  odd_vocab.vocab = 50257;
  CHECK(contains(error_of([&] { check_layout(odd_vocab, p); }), "pad the vocabulary"));
  ModelSpec odd_seq = m;
  odd_seq.seq_len = 2044;
  p.sequence_parallel = true;
  CHECK(contains(error_of([&] { check_layout(odd_seq, p); }), "model.seq_len (2044)"));
  // The op builders reject the same shapes.
  CHECK_THROWS_AS(layer_ops(odd_vocab, p), lynx::Error);
}

TEST_CASE("parameters per GPU") {
  const ModelSpec m = custom(4, 1024, 16, 2048, 51200);
  const std::uint64_t h = 1024;
  ParallelSpec p;
  // t = 1: 12h² + 13h (f = 4h).
  CHECK(layer_parameter_count_per_gpu(m, p) == 12 * h * h + 13 * h);
  // t = 4: QKV (3h²+3h)/4 + out-proj h²/4 + h + FC1 (4h²+4h)/4 + FC2 4h²/4 + h + LN 4h
  //      = 3h² + 7h/4 + 6h = 3h² + 7.75h.
  p.tp = 4;
  CHECK(layer_parameter_count_per_gpu(m, p) == 3 * h * h + 7 * h / 4 + 6 * h);
  // Across the TP group: the full layer plus (t−1) copies of the replicated 6h.
  CHECK(4 * layer_parameter_count_per_gpu(m, p) == 12 * h * h + 13 * h + 3 * 6 * h);
  CHECK(embedding_parameter_count_per_gpu(m, p) == 51200 * h / 4 + 2048 * h);
  p.pp = 1;
  CHECK(head_parameter_count_per_gpu(m, p) == 2 * h);
  p.pp = 2;
  CHECK(head_parameter_count_per_gpu(m, p) == 2 * h + 51200 * h / 4);
}

TEST_CASE("embedding and head ops") {
  const ModelSpec m = custom(4, 1024, 16, 512, 51200);
  SUBCASE("tp = 4, SP") {
    const ParallelSpec p = parallel(4, 2, true);
    const std::vector<Op> emb = embedding_ops(m, p);
    CHECK(names_of(emb) ==
          std::vector<std::string>{"embedding_lookup", "sp_reducescatter_embedding",
                                   "embedding_dropout"});
    CHECK(find_op(emb, "embedding_lookup").saved_bytes == 8ULL * 1024);  // int64 ids
    CHECK(find_op(emb, "embedding_dropout").saved_bytes == 256ULL * 1024);  // mask, s·b·h/t
    for (const Op& op : emb) CHECK(op.group == OpGroup::kLayerInput);

    const std::vector<Op> head = head_ops(m, p);
    CHECK(names_of(head) == std::vector<std::string>{"final_layernorm", "sp_allgather_head",
                                                     "lm_head_gemm", "cross_entropy",
                                                     "tp_allreduce_loss"});
    const Op& gemm = find_op(head, "lm_head_gemm");
    CHECK(gemm.gemm_m == 1024);
    CHECK(gemm.gemm_n == 51200 / 4);
    CHECK(gemm.gemm_k == 1024);
    CHECK(gemm.saved_bytes == 2ULL * 256 * 1024);
    // fp32 softmax 4·s·b·V/t + int64 target and bool mask per token.
    CHECK(find_op(head, "cross_entropy").saved_bytes == 4ULL * 1024 * 12800 + 9 * 1024);
    CHECK(find_op(head, "tp_allreduce_loss").collective_bytes == 12ULL * 1024);
  }
  SUBCASE("tp = 1") {
    const ParallelSpec p = parallel(1, 1, false);
    CHECK(names_of(embedding_ops(m, p)) ==
          std::vector<std::string>{"embedding_lookup", "embedding_dropout"});
    CHECK(names_of(head_ops(m, p)) ==
          std::vector<std::string>{"final_layernorm", "lm_head_gemm", "cross_entropy"});
  }
}
