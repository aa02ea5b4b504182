// Tests for context parallelism in model/ (parallel.cp): layout checks, the per-rank op graph
// against hand-computed formulas (activation memory, FLOPs, ring bytes) and static memory.
#include "model/gpt.hpp"
#include "model/workload.hpp"

#include "common/error.hpp"
#include "tests/error_of.hpp"
#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::model;
using lynx::test::error_of;
using lynx::test::find_op;
using lynx::test::saved_sum;

namespace {

/// A GPT shape with flash attention (context parallelism needs it), resolved.
ModelSpec flash_gpt(int hidden, int heads, int seq_len) {
  ModelSpec m;
  m.layers = 4;
  m.hidden = hidden;
  m.heads = heads;
  m.seq_len = seq_len;
  m.vocab = 51200;
  m.flash_attention = true;
  return resolve_model(m);
}

ParallelSpec layout(int tp, int cp, int micro_batch, bool sp) {
  ParallelSpec p;
  p.tp = tp;
  p.cp = cp;
  p.micro_batch = micro_batch;
  p.sequence_parallel = sp;
  return p;
}

double flops(const std::vector<Op>& ops) {
  double total = 0;
  for (const Op& op : ops) total += op.fwd_flops + op.bwd_dgrad_flops + op.bwd_wgrad_flops;
  return total;
}

}  // namespace

TEST_CASE("context parallelism divides a layer's activation memory by cp exactly (hand formula)") {
  // Korthikanti et al. 2022 with flash attention (no s² tensors, the fp32 log-sum-exp instead),
  // on seq_len / cp tokens: s·b·h·(10 + 24/t)/cp without SP, s·b·h·34/(t·cp) with it, plus
  // 4·(a/t)·(s/cp)·b bytes of log-sum-exp.
  const std::int64_t s = 8192, b = 2, h = 1024, a = 16;
  const ModelSpec m = flash_gpt(static_cast<int>(h), static_cast<int>(a), static_cast<int>(s));
  for (std::int64_t t : {1, 2, 4})
    for (std::int64_t cp : {1, 2, 4, 8})
      for (bool sp : {false, true}) {
        if (sp && t == 1) continue;
        CAPTURE(t);
        CAPTURE(cp);
        CAPTURE(sp);
        const std::vector<Op> ops = layer_ops(m, layout(static_cast<int>(t), static_cast<int>(cp), static_cast<int>(b), sp));
        const std::int64_t sbh = s / cp * b * h;
        const std::int64_t lse = 4 * (a / t) * (s / cp) * b;
        const std::int64_t expected = sp ? 34 * sbh / t + lse : sbh * 10 + 24 * sbh / t + lse;
        CHECK(saved_sum(ops) == static_cast<std::uint64_t>(expected));
        // And exactly 1/cp of the layout without context parallelism.
        CHECK(saved_sum(ops) * static_cast<std::uint64_t>(cp) ==
              saved_sum(layer_ops(m, layout(static_cast<int>(t), 1, static_cast<int>(b), sp))));
      }
}

TEST_CASE("context parallelism: per-rank FLOPs are the layer's FLOPs / cp, attention the load-balanced share") {
  const ModelSpec m = flash_gpt(2048, 16, 16384);
  const std::int64_t s = 16384, b = 1, h = 2048;
  for (int t : {1, 2})
    for (int cp : {2, 4}) {
      CAPTURE(t);
      CAPTURE(cp);
      const std::vector<Op> one = layer_ops(m, layout(t, 1, 1, false));
      const std::vector<Op> ops = layer_ops(m, layout(t, cp, 1, false));
      CHECK(flops(ops) * cp == doctest::Approx(flops(one)).epsilon(1e-12));
      // Attention: this rank's s/cp queries against all s keys, 4·b·(s/cp)·s·h/t forward.
      const Op& flash = find_op(ops, "flash_attention");
      const double fwd = 4.0 * static_cast<double>(b * (s / cp) * s * h / t);
      CHECK(flash.fwd_flops == fwd);
      CHECK(flash.bwd_dgrad_flops == 2.5 * fwd);
      // The load-balanced causal split: 2·cp chunks, rank i holds chunks i and 2cp−1−i; a query
      // chunk q attends to key chunks k < q fully and to itself half (the causal diagonal).
      // Every rank's causal work is the total / cp, the share of the op's FLOPs per rank.
      const auto causal_pairs = [](int chunk) { return chunk + 0.5; };
      double total = 0;
      for (int c = 0; c < 2 * cp; ++c) total += causal_pairs(c);
      const double full = find_op(one, "flash_attention").fwd_flops;
      for (int rank = 0; rank < cp; ++rank) {
        const double share = (causal_pairs(rank) + causal_pairs(2 * cp - 1 - rank)) / total;
        CHECK(flash.fwd_flops / full == doctest::Approx(share).epsilon(1e-12));
      }
      CHECK(flash.cp_steps == cp);
      // One ring block: the local queries against s/cp keys.
      const Op block = ring_attention_block(flash);
      CHECK(block.fwd_flops * cp == fwd);
      CHECK(block.gemm_m == s / cp);
      CHECK(block.gemm_n == s / cp);
      CHECK(block.saved_bytes == 0);
      // Every per-token GEMM runs on s/cp rows.
      CHECK(find_op(ops, "qkv_gemm").gemm_m == b * s / cp);
      CHECK(find_op(ops, "fc1_gemm").fwd_flops * cp == find_op(one, "fc1_gemm").fwd_flops);
    }
  // No ring without context parallelism.
  CHECK(find_op(layer_ops(m, layout(2, 1, 1, false)), "flash_attention").cp_steps == 1);
  CHECK(find_op(layer_ops(m, layout(2, 1, 1, false)), "flash_attention").cp_kv_block_bytes == 0);
}

TEST_CASE("context parallelism: ring bytes and TP collectives per rank") {
  // Llama 3 70B's attention: 64 heads, 8 kv heads, head_dim 128.
  ModelSpec spec;
  spec.preset = "llama3-70b";
  spec.seq_len = 8192;
  spec.flash_attention = true;
  const ModelSpec m = resolve_model(spec);
  const std::int64_t s = 8192, kv = 8, head_dim = 128;
  for (int t : {1, 4, 8})
    for (int cp : {2, 4}) {
      CAPTURE(t);
      CAPTURE(cp);
      const std::vector<Op> ops = layer_ops(m, layout(t, cp, 2, t > 1));
      // K and V (2 tensors) of s/cp tokens × b 2 × kv/t heads × head_dim, 2 bytes each.
      const std::uint64_t block = 2ull * (s / cp) * 2 * (kv / t) * head_dim * 2;
      CHECK(find_op(ops, "flash_attention").cp_kv_block_bytes == block);
      if (t > 1) CHECK(find_op(ops, "sp_allgather_attn").collective_bytes == 2ull * (s / cp) * 2 * 8192);
    }
  // The stage boundary carries this rank's tokens only.
  CHECK(gpt_workload(m, layout(4, 2, 1, true)).boundary_bytes * 2 == gpt_workload(m, layout(4, 1, 1, true)).boundary_bytes);
}

TEST_CASE("context parallelism: gradients and the distributed optimizer over dp · cp") {
  Scenario sc;
  sc.model = flash_gpt(1024, 16, 4096);
  sc.parallel = layout(1, 2, 1, false);
  sc.parallel.dp = 2;
  sc.parallel.distributed_optimizer = true;
  sc.hardware.memory_reserve_bytes = 0;
  // 2 + 4 + 12 / (dp · cp) bytes per parameter.
  CHECK(static_bytes(sc, 1'000'000) == 2'000'000 + 4'000'000 + 3'000'000);
  CHECK(grad_replicas(sc.parallel) == 4);
}

TEST_CASE("context parallelism: layouts that do not fit are refused naming the keys") {
  ModelSpec m = flash_gpt(1024, 16, 4096);
  SUBCASE("flash attention is needed") {
    m.flash_attention = false;
    const std::string e = error_of([&] { check_layout(m, layout(1, 2, 1, false)); });
    CHECK(e.find("parallel.cp 2 needs model.flash_attention true") != std::string::npos);
    try {
      check_layout(m, layout(1, 2, 1, false));
    } catch (const LayoutError& le) {
      CHECK(le.keys() == std::vector<std::string>{"parallel.cp", "model.flash_attention"});
    }
  }
  SUBCASE("seq_len divisible by 2·cp") {
    m.seq_len = 4100;  // divisible by 2·2, not by 2·4
    CHECK_NOTHROW(check_layout(m, layout(1, 2, 1, false)));
    CHECK(error_of([&] { check_layout(m, layout(1, 4, 1, false)); }) ==
          "model.seq_len (4100) is not divisible by 2 x parallel.cp (8): the load-balanced causal split cuts "
          "every sequence into 2·cp equal chunks; change seq_len or cp");
  }
  SUBCASE("seq_len divisible by tp · cp with sequence parallelism") {
    m.seq_len = 4 * 3 * 2 * 5;  // 120: divisible by 2·cp = 4, not by tp·cp = 16
    CHECK(error_of([&] { check_layout(m, layout(8, 2, 1, true)); })
              .find("is not divisible by parallel.tp x parallel.cp (8 x 2 = 16)") != std::string::npos);
  }
  SUBCASE("cp >= 1") {
    CHECK(error_of([&] { check_layout(m, layout(1, 0, 1, false)); }) == "parallel.cp must be >= 1, got 0");
  }
}
