// Megatron-LM's fusion switches (model.gradient_accumulation_fusion, bias_gelu_fusion,
// bias_dropout_fusion, masked_softmax_fusion): with each off, exactly which ops change, their
// kernel counts and the extra HBM bytes (formulas written out here, at tp 1 and tp 2), what
// stays (backward bytes, saved activations), the Llama cases where a switch does nothing, and
// the wgrad task's time with the accumulation kernel.
#include "hw_models/compute_model.hpp"
#include "model/gpt.hpp"

#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::model;
using lynx::test::find_op;

namespace {

constexpr std::int64_t kH = 1024, kS = 1024, kB = 4, kV = 51200, kHeads = 16;

ModelSpec gpt() {
  ModelSpec m;
  m.layers = 24;
  m.hidden = static_cast<int>(kH);
  m.heads = static_cast<int>(kHeads);
  m.seq_len = static_cast<int>(kS);
  m.vocab = static_cast<int>(kV);
  return resolve_model(m);
}

ModelSpec llama() {
  ModelSpec m;
  m.preset = "llama2-7b";
  m.seq_len = 1024;
  return resolve_model(m);
}

ParallelSpec parallel(int tp, bool sp = false) {
  ParallelSpec p;
  p.tp = tp;
  p.micro_batch = static_cast<int>(kB);
  p.sequence_parallel = sp;
  return p;
}

/// Every field of two ops that the switches could change, for "the other ops are untouched".
bool same_op(const Op& a, const Op& b) {
  return a.name == b.name && a.fwd_bytes == b.fwd_bytes && a.bwd_dgrad_bytes == b.bwd_dgrad_bytes &&
         a.bwd_wgrad_bytes == b.bwd_wgrad_bytes && a.saved_bytes == b.saved_bytes &&
         a.fwd_flops == b.fwd_flops && a.bwd_dgrad_flops == b.bwd_dgrad_flops &&
         a.bwd_wgrad_flops == b.bwd_wgrad_flops && a.fwd_kernels == b.fwd_kernels &&
         a.bwd_dgrad_kernels == b.bwd_dgrad_kernels && a.bwd_wgrad_kernels == b.bwd_wgrad_kernels &&
         a.bwd_wgrad_accumulate_bytes == b.bwd_wgrad_accumulate_bytes;
}

/// The names of the ops that differ between `on` and `off` (same op lists otherwise).
std::set<std::string> changed(const std::vector<Op>& on, const std::vector<Op>& off) {
  REQUIRE(on.size() == off.size());
  std::set<std::string> out;
  for (size_t i = 0; i < on.size(); ++i) {
    REQUIRE(on[i].name == off[i].name);
    if (!same_op(on[i], off[i])) out.insert(on[i].name);
  }
  return out;
}

}  // namespace

TEST_CASE("fusions: gradient accumulation off adds one add kernel per weight GEMM, n x k x (2 + 2 x main-grad bytes)") {
  for (int tp : {1, 2}) {
    for (bool fp32_grads : {true, false}) {
      INFO("tp " << tp << ", fp32 main grads " << fp32_grads);
      ParallelSpec p = parallel(tp);
      p.fp32_main_grads = fp32_grads;
      ModelSpec off = gpt();
      off.gradient_accumulation_fusion = false;
      const std::vector<Op> a = layer_ops(gpt(), p), b = layer_ops(off, p);
      CHECK(changed(a, b) == std::set<std::string>{"qkv_gemm", "out_proj_gemm", "fc1_gemm", "fc2_gemm"});
      // Read the 16-bit new gradient, read and write the accumulator (4 bytes, or 2).
      const std::int64_t per_element = 2 + 2 * (fp32_grads ? 4 : 2);
      const std::int64_t t = tp;
      CHECK(find_op(b, "qkv_gemm").bwd_wgrad_accumulate_bytes == static_cast<double>(3 * kH / t * kH * per_element));
      CHECK(find_op(b, "out_proj_gemm").bwd_wgrad_accumulate_bytes == static_cast<double>(kH * kH / t * per_element));
      CHECK(find_op(b, "fc1_gemm").bwd_wgrad_accumulate_bytes == static_cast<double>(4 * kH / t * kH * per_element));
      CHECK(find_op(b, "fc2_gemm").bwd_wgrad_accumulate_bytes == static_cast<double>(kH * 4 * kH / t * per_element));
      // Kernels: the QKV wgrad was GEMM + bias gradient (2), the others one GEMM.
      CHECK(find_op(b, "qkv_gemm").bwd_wgrad_kernels == 3);
      for (const char* name : {"out_proj_gemm", "fc1_gemm", "fc2_gemm"}) {
        CHECK(find_op(b, name).bwd_wgrad_kernels == 2);
        CHECK(find_op(b, name).fwd_kernels == find_op(a, name).fwd_kernels);
        CHECK(find_op(b, name).bwd_dgrad_kernels == find_op(a, name).bwd_dgrad_kernels);
        CHECK(find_op(a, name).bwd_wgrad_accumulate_bytes == 0);
      }
      // The LM head's weight too; the embedding's gradient takes the hook's add either way.
      const std::vector<Op> head_on = head_ops(gpt(), p), head_off = head_ops(off, p);
      CHECK(changed(head_on, head_off) == std::set<std::string>{"lm_head_gemm"});
      CHECK(find_op(head_off, "lm_head_gemm").bwd_wgrad_kernels == 2);
      CHECK(find_op(head_off, "lm_head_gemm").bwd_wgrad_accumulate_bytes ==
            static_cast<double>(kV / t * kH * per_element));
      CHECK(changed(embedding_ops(gpt(), p), embedding_ops(off, p)).empty());
    }
  }
}

TEST_CASE("fusions: the wgrad task times the accumulation as a memory-bound kernel of its own") {
  // A100-like numbers (assumed for the test): 312 TFLOP/s, 2 TB/s, 5 us per launch.
  HardwareSpec hw;
  hw.peak_flops_per_s = 312'000'000'000'000;
  hw.hbm_bw_bytes_per_s = 2'000'000'000'000;
  hw.kernel_launch_ps = 5'000'000;
  hw.gemm = {0.8, 1e9};
  hw.memory_bound = {0.9, 1e6};
  ModelSpec off = gpt();
  off.gradient_accumulation_fusion = false;
  const std::vector<Op> on_ops = layer_ops(gpt(), parallel(1)), off_ops = layer_ops(off, parallel(1));
  const Op& fused = find_op(on_ops, "fc1_gemm");
  const Op& unfused = find_op(off_ops, "fc1_gemm");
  const hw_models::OpTimes a = hw_models::op_times(hw, fused), b = hw_models::op_times(hw, unfused);
  CHECK(b.fwd_ps == a.fwd_ps);
  CHECK(b.dgrad_ps == a.dgrad_ps);
  CHECK(b.wgrad_ps ==
        a.wgrad_ps + hw_models::kernel_time_ps(hw, OpKind::kMemoryBound, 0, static_cast<double>(4 * kH * kH * 10)));
  CHECK(b.wgrad_ps > a.wgrad_ps);
}

TEST_CASE("fusions: bias-GeLU off is F.gelu(x + bias), one kernel and one f/t pass more forward, the rest as fused") {
  for (int tp : {1, 2}) {
    INFO("tp " << tp);
    ModelSpec off = gpt();
    off.bias_gelu_fusion = false;
    const std::vector<Op> a = layer_ops(gpt(), parallel(tp)), b = layer_ops(off, parallel(tp));
    CHECK(changed(a, b) == std::set<std::string>{"gelu"});
    const Op& on_gelu = find_op(a, "gelu");
    const Op& off_gelu = find_op(b, "gelu");
    CHECK(on_gelu.fwd_kernels == 1);
    CHECK(off_gelu.fwd_kernels == 2);
    CHECK(off_gelu.bwd_dgrad_kernels == 2);  // GeluBackward + FC1's bias gradient, as fused
    // The sum x + bias written and read again: 2 x (2 bytes x s x b x 4h / t).
    const std::int64_t ffn_act = 2 * kS * kB * 4 * kH / tp;
    CHECK(off_gelu.fwd_bytes - on_gelu.fwd_bytes == static_cast<double>(2 * ffn_act));
    CHECK(off_gelu.bwd_dgrad_bytes == on_gelu.bwd_dgrad_bytes);
    CHECK(off_gelu.saved_bytes == on_gelu.saved_bytes);  // F.gelu saves its input, one f/t tensor
    CHECK(off_gelu.saved_bytes == static_cast<std::uint64_t>(ffn_act));
  }
  // SwiGLU (Llama) and a GeLU model without biases: nothing to fuse, nothing changes.
  ModelSpec l = llama();
  l.bias_gelu_fusion = false;
  CHECK(changed(layer_ops(llama(), parallel(2)), layer_ops(l, parallel(2))).empty());
  ModelSpec no_bias = gpt();
  no_bias.linear_bias = LinearBias::kOff;
  ModelSpec no_bias_off = no_bias;
  no_bias_off.bias_gelu_fusion = false;
  CHECK(changed(layer_ops(no_bias, parallel(2)), layer_ops(no_bias_off, parallel(2))).empty());
}

TEST_CASE("fusions: bias-dropout off runs the bias add, dropout and residual add as three kernels, at both sites") {
  for (auto [tp, sp] : {std::pair{1, false}, std::pair{2, false}, std::pair{2, true}}) {
    INFO("tp " << tp << " sp " << sp);
    ModelSpec off = gpt();
    off.bias_dropout_fusion = false;
    const std::vector<Op> a = layer_ops(gpt(), parallel(tp, sp)), b = layer_ops(off, parallel(tp, sp));
    CHECK(changed(a, b) == std::set<std::string>{"attn_dropout_residual", "mlp_dropout_residual"});
    // x + bias written and read, the dropout output written and read: 4 x (2 bytes x local tokens x h).
    const std::int64_t act = 2 * kS * kB / (sp ? tp : 1) * kH;
    for (const char* name : {"attn_dropout_residual", "mlp_dropout_residual"}) {
      const Op& on_op = find_op(a, name);
      const Op& off_op = find_op(b, name);
      CHECK(off_op.fwd_kernels == 3);
      CHECK(off_op.bwd_dgrad_kernels == 2);  // dropout's backward + the bias gradient, as fused
      CHECK(off_op.fwd_bytes - on_op.fwd_bytes == static_cast<double>(4 * act));
      CHECK(off_op.bwd_dgrad_bytes == on_op.bwd_dgrad_bytes);
      CHECK(off_op.saved_bytes == on_op.saved_bytes);  // the 1-byte mask
    }
  }
  // Llama: no bias, no dropout — the residual add alone either way.
  ModelSpec l = llama();
  l.bias_dropout_fusion = false;
  CHECK(changed(layer_ops(llama(), parallel(2)), layer_ops(l, parallel(2))).empty());
}

TEST_CASE("fusions: masked-softmax off is the PyTorch fp32 softmax, the same op as where the fused kernel cannot run") {
  for (int tp : {1, 2}) {
    INFO("tp " << tp);
    ModelSpec off = gpt();
    off.masked_softmax_fusion = false;
    const std::vector<Op> a = layer_ops(gpt(), parallel(tp)), b = layer_ops(off, parallel(tp));
    CHECK(changed(a, b) == std::set<std::string>{"softmax"});
    const Op& on_op = find_op(a, "softmax");
    const Op& off_op = find_op(b, "softmax");
    const std::int64_t scores = kB * (kHeads / tp) * kS * kS;
    CHECK(on_op.fwd_kernels == 1);
    CHECK(on_op.fwd_bytes == static_cast<double>(4 * scores));
    CHECK(on_op.saved_bytes == static_cast<std::uint64_t>(2 * scores));
    CHECK(off_op.fwd_kernels == 5);
    CHECK(off_op.bwd_dgrad_kernels == 5);
    CHECK(off_op.fwd_bytes == static_cast<double>(36 * scores));
    CHECK(off_op.bwd_dgrad_bytes == static_cast<double>(40 * scores));
    CHECK(off_op.saved_bytes == static_cast<std::uint64_t>(4 * scores));  // the fp32 softmax output
  }
  // The shape rule's fallback is the same op: tp 8 leaves 2 heads, micro-batch 1 x 2 not divisible by 4.
  ParallelSpec p8 = parallel(8);
  p8.micro_batch = 1;
  const std::vector<Op> shape_rule = layer_ops(gpt(), p8);
  const Op& fallback = find_op(shape_rule, "softmax");
  ModelSpec off = gpt();
  off.masked_softmax_fusion = false;
  const std::vector<Op> switched = layer_ops(off, p8);
  CHECK(same_op(fallback, find_op(switched, "softmax")));
  CHECK(fallback.fwd_bytes == static_cast<double>(36 * 2 * kS * kS));
  // Flash attention has no softmax op: nothing changes.
  ModelSpec flash = gpt();
  flash.flash_attention = true;
  ModelSpec flash_off = flash;
  flash_off.masked_softmax_fusion = false;
  CHECK(changed(layer_ops(flash, parallel(2)), layer_ops(flash_off, parallel(2))).empty());
}

TEST_CASE("fusions: Llama with gradient accumulation off changes its four GEMMs and the output layer only") {
  ModelSpec off = llama();
  off.gradient_accumulation_fusion = false;
  const std::vector<Op> a = layer_ops(llama(), parallel(2)), b = layer_ops(off, parallel(2));
  CHECK(changed(a, b) == std::set<std::string>{"qkv_gemm", "out_proj_gemm", "fc1_gemm", "fc2_gemm"});
  // No biases: every wgrad goes from 1 kernel to 2; SwiGLU's FC1 weight is 2f x h.
  for (const char* name : {"qkv_gemm", "out_proj_gemm", "fc1_gemm", "fc2_gemm"}) CHECK(find_op(b, name).bwd_wgrad_kernels == 2);
  CHECK(find_op(b, "fc1_gemm").bwd_wgrad_accumulate_bytes == static_cast<double>(2 * 11008 / 2 * 4096 * 10));
  CHECK(changed(head_ops(llama(), parallel(2)), head_ops(off, parallel(2))) == std::set<std::string>{"lm_head_gemm"});
}
