// Tests for the mixture-of-experts layers of model/gpt_moe: presets against the published
// parameter counts, the MoE layer's ops (GEMM shapes, FLOPs, collectives, saved bytes) against
// hand counts, imbalance and capacity, the moe_act op group's saved bytes, parameters per GPU
// under expert parallelism, static memory, model FLOPs and the layout checks.
#include "model/expert_grid.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"

#include "common/error.hpp"
#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::model;
using lynx::test::find_op;
using lynx::test::names_of;
using lynx::test::saved_in_group;
using lynx::test::saved_sum;

namespace {

ModelSpec preset(const std::string& name, int seq_len = 4096) {
  ModelSpec m;
  m.preset = name;
  m.seq_len = seq_len;
  return resolve_model(m);
}

/// |a / b − 1| <= tolerance.
bool within(double a, double b, double tolerance) { return std::abs(a / b - 1.0) <= tolerance; }

/// A small MoE model: h 1024, 16 heads, 8 kv heads, 8 experts of 512, top-2, s 1024, Llama
/// architecture (SwiGLU, RMSNorm, rotary, no biases, no dropout).
ModelSpec small_moe() {
  ModelSpec m;
  m.layers = 4;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  m.seq_len = 1024;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position_embedding = PositionKind::kRotary;
  m.embeddings = EmbeddingTie::kUntied;
  m.linear_bias = LinearBias::kOff;
  m.dropout = Dropout::kOff;
  m.flash_attention = true;
  m.moe.num_experts = 8;
  m.moe.router_topk = 2;
  m.moe.expert_ffn_hidden = 512;
  return resolve_model(m);
}

ParallelSpec layout(int tp, int ep, int dp, int micro_batch = 1) {
  ParallelSpec p;
  p.tp = tp;
  p.sequence_parallel = tp > 1;
  p.ep = ep;
  p.dp = dp;
  p.micro_batch = micro_batch;
  p.global_batch = dp * micro_batch;
  return p;
}

}  // namespace

TEST_CASE("MoE presets: the published parameter counts") {
  SUBCASE("Mixtral 8x7B: 46.7B total, 12.9B active (Mistral AI)") {
    const ModelSpec m = preset("mixtral-8x7b");
    CHECK(moe_layer_count(m) == 32);
    // Per layer: attention 4096·(4096 + 2·8·128) + 4096·4096 = 41,943,040, two RMSNorms 8192,
    // router 4096·8, experts 8·3·4096·14336; embedding and output layer 2·32000·4096.
    CHECK(parameter_count(m) == 46'702'788'608.0);
    CHECK(active_parameter_count(m) == 12'879'921'152.0);  // 6 of 8 experts left out per layer
    CHECK(within(parameter_count(m), 46.7e9, 0.01));
    CHECK(within(active_parameter_count(m), 12.9e9, 0.01));
  }
  SUBCASE("Qwen3-30B-A3B: 30.5B total, 3.3B active (Qwen3 model card)") {
    const ModelSpec m = preset("qwen3-30b-a3b");
    // head_dim 128 with hidden 2048: Q is 4096 wide.
    CHECK(parameter_count(m) == 30'532'108'288.0);
    CHECK(active_parameter_count(m) == 3'353'018'368.0);
    CHECK(within(parameter_count(m), 30.5e9, 0.01));
    CHECK(within(active_parameter_count(m), 3.3e9, 0.02));
  }
  SUBCASE("Qwen3-235B-A22B: 235B total, 22B active (Qwen3 technical report, Table 2)") {
    const ModelSpec m = preset("qwen3-235b-a22b");
    CHECK(parameter_count(m) == 235'093'606'400.0);
    CHECK(within(parameter_count(m), 235e9, 0.01));
    CHECK(within(active_parameter_count(m), 22e9, 0.01));
  }
  SUBCASE("DeepSeek-V3: 671B total (MLA approximated by multi-head attention)") {
    const ModelSpec m = preset("deepseek-v3");
    CHECK(m.moe.first_dense_layers == 3);
    CHECK(moe_layer_count(m) == 58);
    CHECK(!is_moe_layer(m, 2));
    CHECK(is_moe_layer(m, 3));
    // 58 MoE layers: attention 4·7168² (MHA standing in for MLA), norms, router 7168·256, 256
    // routed and 1 shared expert of 3·7168·2048; 3 dense layers with FFN 18432; 2·129280·7168.
    CHECK(parameter_count(m) == 672'149'624'832.0);
    CHECK(within(parameter_count(m), 671e9, 0.01));
    // Active: 8 routed experts of 256. MLA has 187,107,328 parameters a layer against the
    // stand-in's 205,520,896: an exact MLA count is 37.55B, the stand-in's 38.68B (+3%), both
    // above the rounded 37B published.
    CHECK(active_parameter_count(m) == 38'675'503'104.0);
    CHECK(within(active_parameter_count(m) - 61 * (205'520'896.0 - 187'107'328.0), 37e9, 0.02));
  }
}

TEST_CASE("MoE layer ops: tp 2 with sequence parallelism, ep 2") {
  const ModelSpec m = small_moe();
  const ParallelSpec p = layout(2, 2, 2);
  const std::vector<Op> ops = layer_ops(m, p);
  const std::int64_t s = 1024, h = 1024, t = 2, e = 8, k = 2, fe = 512;
  const std::int64_t local = s / t;  // tokens after the SP split
  CHECK(names_of(ops) == std::vector<std::string>{
                             "rmsnorm1", "sp_allgather_attn", "qkv_gemm", "rotary", "flash_attention",
                             "out_proj_gemm", "sp_reducescatter_attn", "attn_dropout_residual", "rmsnorm2",
                             "router_gemm", "router_topk", "moe_permute", "ep_dispatch", "moe_allgather",
                             "expert_fc1_gemm", "expert_swiglu", "expert_fc2_gemm", "moe_reducescatter",
                             "ep_combine", "moe_unpermute", "mlp_dropout_residual"});
  const Op& router = find_op(ops, "router_gemm");
  CHECK(router.gemm_m == local);
  CHECK(router.gemm_n == e);
  CHECK(router.gemm_k == h);
  const Op& dispatch = find_op(ops, "ep_dispatch");
  CHECK(dispatch.comm_group == CommGroup::kEp);
  CHECK(dispatch.collective == CollectiveKind::kAllToAll);
  CHECK(dispatch.bwd_collective == CollectiveKind::kAllToAll);
  CHECK(dispatch.collective_bytes == static_cast<std::uint64_t>(2 * local * k * h));
  CHECK(find_op(ops, "ep_combine").collective_bytes == dispatch.collective_bytes);
  const Op& gather = find_op(ops, "moe_allgather");
  CHECK(gather.comm_group == CommGroup::kEtp);  // etp = tp: the TP group's GPUs
  CHECK(gather.collective_bytes == static_cast<std::uint64_t>(2 * s * k * h));
  // Grouped GEMMs over s·k rows (all TP ranks' tokens, each at k experts), sharded over tp.
  const Op& fc1 = find_op(ops, "expert_fc1_gemm");
  CHECK(fc1.gemm_m == s * k);
  CHECK(fc1.gemm_n == 2 * fe / t);  // SwiGLU: gate and up
  CHECK(fc1.gemm_k == h);
  CHECK(fc1.fwd_flops == 2.0 * s * k * (2 * fe / t) * h);
  // HBM: the input and output once, the E/ep = 4 local experts' weights once.
  CHECK(fc1.fwd_bytes == 2.0 * (s * k * h + 4 * h * (2 * fe / t) + s * k * (2 * fe / t)));
  const Op& fc2 = find_op(ops, "expert_fc2_gemm");
  CHECK(fc2.gemm_m == s * k);
  CHECK(fc2.gemm_n == h);
  CHECK(fc2.gemm_k == fe / t);
  // Saved: router input 2·(s/t)·h, probabilities and routing map 3·(s/t)·E, expert FC1 input
  // 2·s·k·h, SwiGLU input 2·s·k·2fe/t, FC2 input 2·s·k·fe/t, unpermute input 2·(s/t)·k·h.
  std::uint64_t moe_saved = 0;
  for (const char* name : {"router_gemm", "router_topk", "moe_permute", "expert_fc1_gemm", "expert_swiglu",
                           "expert_fc2_gemm", "moe_unpermute"})
    moe_saved += find_op(ops, name).saved_bytes;
  CHECK(moe_saved == static_cast<std::uint64_t>(2 * local * h + 3 * local * e + 2 * s * k * h +
                                                2 * s * k * 2 * fe / t + 2 * s * k * fe / t + 2 * local * k * h));
  // Only the MLP changed: the attention half saves what the dense layer's does.
  ModelSpec dense = dense_layer_model(m);
  ParallelSpec dense_p = p;
  dense_p.ep = 1;
  const std::vector<Op> dense_ops = layer_ops(dense, dense_p);
  std::uint64_t dense_mlp = 0;
  for (const char* name : {"fc1_gemm", "swiglu", "fc2_gemm"}) dense_mlp += find_op(dense_ops, name).saved_bytes;
  CHECK(saved_sum(ops) - moe_saved == saved_sum(dense_ops) - dense_mlp);
}

TEST_CASE("moe_act holds the experts' FC2 input only: Mixtral-8x7B and DeepSeek-V3 exact") {
  // Megatron-Core's moe_act discards the expert activation's output (the FC2 input) and keeps
  // its input (the FC1 output), so the group is the FC2 input alone, on expert_fc2_gemm.
  auto moe_act_ops = [](const std::vector<Op>& ops) {
    std::vector<std::string> names;
    for (const Op& op : ops)
      if (op.group == OpGroup::kMoeAct) names.push_back(op.name);
    return names;
  };
  SUBCASE("Mixtral-8x7B, s 4096, b 1, tp 2 with SP, ep 4") {
    const ModelSpec m = preset("mixtral-8x7b");
    const std::vector<Op> ops = layer_ops(m, layout(2, 4, 4));
    CHECK(moe_act_ops(ops) == std::vector<std::string>{"expert_fc2_gemm"});
    // Rows per GPU: s·b·k = 4096·1·2 = 8192 (the TP group's tokens, all-gathered); FC2 input
    // 2 bytes × 8192 rows × f_e/t = 14336/2 = 7168 columns = 117,440,512 bytes.
    CHECK(saved_in_group(ops, OpGroup::kMoeAct) == 117'440'512u);
    // The FC1 output (SwiGLU input) stays in mlp: 2 × 8192 × 2·7168 = 234,881,024 bytes.
    CHECK(find_op(ops, "expert_swiglu").group == OpGroup::kMlp);
    CHECK(find_op(ops, "expert_swiglu").saved_bytes == 234'881'024u);
  }
  SUBCASE("DeepSeek-V3, s 4096, b 1, tp 1, ep 8, with imbalance 1.25") {
    ModelSpec m = preset("deepseek-v3");
    const ParallelSpec p = layout(1, 8, 8);
    std::vector<Op> ops = layer_ops(m, p);
    CHECK(moe_act_ops(ops) == std::vector<std::string>{"expert_fc2_gemm"});
    // Rows: s·b·k = 4096·8 = 32768; FC2 input 2 × 32768 × 2048 = 134,217,728 bytes.
    CHECK(saved_in_group(ops, OpGroup::kMoeAct) == 134'217'728u);
    // The shared expert's FC2 input (2 × 4096 × 2048 = 16,777,216 bytes) is not moe_act:
    // Megatron-Core recomputes shared experts with the separate module shared_experts.
    CHECK(find_op(ops, "shared_fc2_gemm").group == OpGroup::kMlp);
    CHECK(find_op(ops, "shared_fc2_gemm").saved_bytes == 16'777'216u);
    // The busiest rank's rows: ceil(1.25 · 32768) = 40960; 2 × 40960 × 2048 = 167,772,160.
    m.moe.expert_imbalance = 1.25;
    ops = layer_ops(m, p);
    CHECK(saved_in_group(ops, OpGroup::kMoeAct) == 167'772'160u);
  }
  SUBCASE("dense layers have no moe_act op") {
    const ModelSpec m = preset("deepseek-v3");
    CHECK(moe_act_ops(layer_ops(dense_layer_model(m), layout(1, 1, 8))).empty());
    CHECK(moe_act_ops(layer_ops(preset("gpt-2.7b", 2048), layout(2, 1, 1))).empty());
  }
}

TEST_CASE("MoE imbalance and capacity scale the busiest rank's expert GEMMs") {
  ModelSpec m = small_moe();
  const ParallelSpec p = layout(1, 2, 2);
  const std::int64_t rows = 1024 * 2;  // s·k
  CHECK(find_op(layer_ops(m, p), "expert_fc1_gemm").gemm_m == rows);
  m.moe.expert_imbalance = 1.5;
  const std::vector<Op> skewed = layer_ops(m, p);
  CHECK(find_op(skewed, "expert_fc1_gemm").gemm_m == rows * 3 / 2);
  CHECK(find_op(skewed, "expert_fc2_gemm").gemm_m == rows * 3 / 2);
  CHECK(find_op(skewed, "expert_fc1_gemm").saved_bytes == static_cast<std::uint64_t>(2 * rows * 3 / 2 * 1024));
  // The router, the dispatch and the shared part are per token: unchanged.
  CHECK(find_op(skewed, "ep_dispatch").collective_bytes == find_op(layer_ops(small_moe(), p), "ep_dispatch").collective_bytes);
  m.moe.capacity_factor = 1.25;  // dropped beyond 1.25x the uniform share
  CHECK(find_op(layer_ops(m, p), "expert_fc1_gemm").gemm_m == rows * 5 / 4);
  m.moe.capacity_factor = 0.5;  // drops tokens even when routing is even
  CHECK(find_op(layer_ops(m, p), "expert_fc1_gemm").gemm_m == rows / 2);
}

TEST_CASE("MoE shared experts: a dense MLP with its own SP gather and scatter") {
  ModelSpec m = small_moe();
  m.moe.shared_ffn_hidden = 1024;
  const ParallelSpec p = layout(2, 2, 2);
  const std::vector<Op> ops = layer_ops(m, p);
  const Op& sfc1 = find_op(ops, "shared_fc1_gemm");
  CHECK(sfc1.gemm_m == 1024);
  CHECK(sfc1.gemm_n == 2 * 1024 / 2);
  CHECK(sfc1.saved_bytes == 0);  // its input is the router's, saved once
  CHECK(sfc1.bwd_input_allgather_bytes == 2u * 1024 * 1024);
  CHECK(find_op(ops, "sp_allgather_shared").comm_group == CommGroup::kTp);
  CHECK(find_op(ops, "shared_fc2_gemm").saved_bytes == 2u * 1024 * 512);
  // Shared expert parameters are the layer's (reduced over dp), the routed ones apart.
  const std::uint64_t shared = 3u * 1024 * 1024 / 2;
  CHECK(layer_parameter_count_per_gpu(m, p) == layer_parameter_count_per_gpu(small_moe(), p) + shared);
}

TEST_CASE("MoE parameters per GPU and static memory under expert parallelism") {
  const ModelSpec m = small_moe();
  // Routed experts: E/ep experts of 3·h·fe/t each.
  CHECK(layer_expert_parameter_count_per_gpu(m, layout(1, 1, 1)) == 8u * 3 * 1024 * 512);
  CHECK(layer_expert_parameter_count_per_gpu(m, layout(2, 4, 4)) == 2u * 3 * 1024 * 512 / 2);
  // The rest of the layer: attention h·(h + 2·8·64)/t + h·h/t, two RMSNorms, the router h·E.
  CHECK(layer_parameter_count_per_gpu(m, layout(2, 4, 4)) ==
        (1024u * (1024 + 2 * 8 * 64) + 1024u * 1024) / 2 + 2 * 1024 + 1024 * 8);
  Scenario sc;
  sc.model = m;
  sc.parallel = layout(1, 4, 8);
  sc.hardware.memory_reserve_bytes = 0;
  // fp32 main gradients: 18 bytes a parameter, experts or not, without the distributed optimizer.
  CHECK(static_bytes(sc, 1000, 500) == 18 * 1500);
  // Distributed optimizer: the 12 optimizer bytes over dp = 8 for dense parameters, over
  // dp / ep = 2 for the experts.
  sc.parallel.distributed_optimizer = true;
  CHECK(static_bytes(sc, 1000, 500) == static_cast<std::int64_t>(1000 * (6 + 12.0 / 8) + 500 * (6 + 12.0 / 2)));
  const Workload w = gpt_workload(m, layout(1, 4, 8));
  CHECK(w.layer_expert_params == 2u * 3 * 1024 * 512);
}

TEST_CASE("MoE under expert tensor parallelism: etp 1 with tp 2, etp 2 with tp 4") {
  const ModelSpec m = small_moe();
  const std::int64_t s = 1024, h = 1024, k = 2, fe = 512;
  auto with_etp = [](int tp, int ep, int dp, int etp) {
    ParallelSpec p = layout(tp, ep, dp);
    p.etp = etp;
    return p;
  };
  SUBCASE("tp 2, etp 1, ep 2, dp 2: whole experts, no gather over the TP ranks") {
    const ParallelSpec p = with_etp(2, 2, 2, 1);
    const std::vector<Op> ops = layer_ops(m, p);
    const std::int64_t local = s / 2;  // this GPU's SP shard, routed as is
    CHECK(names_of(ops) == std::vector<std::string>{
                               "rmsnorm1", "sp_allgather_attn", "qkv_gemm", "rotary", "flash_attention",
                               "out_proj_gemm", "sp_reducescatter_attn", "attn_dropout_residual", "rmsnorm2",
                               "router_gemm", "router_topk", "moe_permute", "ep_dispatch", "expert_fc1_gemm",
                               "expert_swiglu", "expert_fc2_gemm", "ep_combine", "moe_unpermute",
                               "mlp_dropout_residual"});
    // The all-to-all sends the local tokens' k rows: 2 bytes × 512 × 2 × 1024 = 2,097,152.
    CHECK(find_op(ops, "ep_dispatch").collective_bytes == 2u * 512 * 2 * 1024);
    CHECK(find_op(ops, "ep_dispatch").collective_bytes == static_cast<std::uint64_t>(2 * local * k * h));
    CHECK(find_op(ops, "ep_combine").collective_bytes == 2'097'152u);
    // The GEMMs take the rows received, local·k = 1024, against whole experts (SwiGLU: 2·fe).
    const Op& fc1 = find_op(ops, "expert_fc1_gemm");
    CHECK(fc1.gemm_m == 1024);
    CHECK(fc1.gemm_n == 2 * fe);
    CHECK(fc1.gemm_k == h);
    CHECK(fc1.saved_bytes == 2u * 1024 * 1024);
    CHECK(find_op(ops, "expert_fc2_gemm").gemm_k == fe);
    // 4 experts of 3·h·fe each: 6,291,456 parameters, twice those of etp = tp = 2.
    CHECK(layer_expert_parameter_count_per_gpu(m, p) == 6'291'456u);
    CHECK(layer_expert_parameter_count_per_gpu(m, p) == 4u * 3 * 1024 * 512);
    CHECK(layer_expert_parameter_count_per_gpu(m, layout(2, 2, 2)) == 6'291'456u / 2);
    // The attention half and the router are tp's: the same as with etp = tp.
    CHECK(layer_parameter_count_per_gpu(m, p) == layer_parameter_count_per_gpu(m, layout(2, 2, 2)));
    CHECK(find_op(ops, "router_gemm").gemm_m == local);
  }
  SUBCASE("tp 4, etp 2, ep 2, dp 2: the expert-tensor-parallel pair gathers its rows") {
    const ParallelSpec p = with_etp(4, 2, 2, 2);
    const std::vector<Op> ops = layer_ops(m, p);
    // Local tokens s/4 = 256: the all-to-all sends 2 × 256 × 2 × 1024 = 1,048,576 bytes; the
    // all-gather over etp 2 makes 2 × 256 × 2 = 1024 rows, 2,097,152 bytes in all.
    CHECK(find_op(ops, "ep_dispatch").collective_bytes == 1'048'576u);
    const Op& gather = find_op(ops, "moe_allgather");
    CHECK(gather.comm_group == CommGroup::kEtp);
    CHECK(gather.collective == CollectiveKind::kAllGather);
    CHECK(gather.bwd_collective == CollectiveKind::kReduceScatter);
    CHECK(gather.collective_bytes == 2'097'152u);
    CHECK(find_op(ops, "moe_reducescatter").collective_bytes == 2'097'152u);
    CHECK(find_op(ops, "moe_reducescatter").comm_group == CommGroup::kEtp);
    const Op& fc1 = find_op(ops, "expert_fc1_gemm");
    CHECK(fc1.gemm_m == 1024);
    CHECK(fc1.gemm_n == 2 * fe / 2);
    CHECK(find_op(ops, "expert_fc2_gemm").gemm_k == fe / 2);
    // 4 experts of 3·h·fe / 2: 3,145,728 parameters (tp 4 alone would halve them again).
    CHECK(layer_expert_parameter_count_per_gpu(m, p) == 3'145'728u);
    CHECK(layer_expert_parameter_count_per_gpu(m, layout(4, 2, 2)) == 3'145'728u / 2);
    // The collectives run where their group has more than one GPU.
    CHECK(communicates(gather, p));
    CHECK(!communicates(gather, with_etp(4, 2, 2, 1)));
  }
  SUBCASE("the experts' optimizer state shards over tp · dp / (etp · ep)") {
    Scenario sc;
    sc.model = m;
    sc.parallel = with_etp(2, 2, 4, 1);
    sc.parallel.distributed_optimizer = true;
    sc.hardware.memory_reserve_bytes = 0;
    // Dense parameters over dp 4; experts over 2 · 4 / (1 · 2) = 4 (etp 2: 2 · 4 / 4 = 2).
    CHECK(static_bytes(sc, 1000, 500) == static_cast<std::int64_t>(1000 * (6 + 12.0 / 4) + 500 * (6 + 12.0 / 4)));
    sc.parallel.etp = 2;
    CHECK(static_bytes(sc, 1000, 500) == static_cast<std::int64_t>(1000 * (6 + 12.0 / 4) + 500 * (6 + 12.0 / 2)));
  }
}

TEST_CASE("expert groups follow Megatron-Core's expert rank order") {
  // NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
  // megatron/core/parallel_state.py: the dense RankGenerator orders tp-cp-dp-pp and the expert
  // one tp(=etp)-ep-dp(=edp)-pp over the same world, so inside a stage of 8 GPUs (tp 2, dp 4)
  // the expert stage rank is etp_rank + etp · (ep_rank + ep · edp_rank).
  // etp 1, ep 2 (edp 4): ep groups {0,1} {2,3} {4,5} {6,7} (each a dense TP pair),
  //   edp groups {0,2,4,6} {1,3,5,7}, etp groups single GPUs.
  // etp 2 = tp, ep 2 (edp 2): ep groups {0,2} {1,3} {4,6} {5,7}, edp {0,4} {1,5} {2,6} {3,7},
  //   etp groups the TP pairs.
  // etp 1, ep 4 (edp 2): ep groups {0,1,2,3} {4,5,6,7}, edp {0,4} {1,5} {2,6} {3,7}.
  // tp 4, dp 2, etp 2, ep 2 (edp 2): GPU 5 has etp_rank 1, ep_rank 0, edp_rank 1: etp {4,5},
  //   ep {5,7}, edp {1,5}.
  auto groups = [](int tp, int dp, int etp, int ep, int stage_rank) {
    ParallelSpec p = layout(tp, ep, dp);
    p.etp = etp;
    return expert_groups(p, stage_rank);
  };
  using V = std::vector<int>;
  ExpertGroups g = groups(2, 4, 1, 2, 3);
  CHECK(g.ep == V{2, 3});
  CHECK(g.edp == V{1, 3, 5, 7});
  CHECK(g.etp == V{3});
  g = groups(2, 4, 2, 2, 3);
  CHECK(g.ep == V{1, 3});
  CHECK(g.edp == V{3, 7});
  CHECK(g.etp == V{2, 3});
  g = groups(2, 4, 1, 4, 6);
  CHECK(g.ep == V{4, 5, 6, 7});
  CHECK(g.edp == V{2, 6});
  g = groups(4, 2, 2, 2, 5);
  CHECK(g.etp == V{4, 5});
  CHECK(g.ep == V{5, 7});
  CHECK(g.edp == V{1, 5});
  // The indices number each kind's groups of a stage once: every GPU of a group shares them.
  for (int etp : {1, 2}) {
    CAPTURE(etp);
    std::vector<int> ep_of(8), edp_of(8), etp_of(8);
    for (int r = 0; r < 8; ++r) {
      const ExpertGroups e = groups(2, 4, etp, 2, r);
      ep_of[static_cast<size_t>(r)] = e.ep_index;
      edp_of[static_cast<size_t>(r)] = e.edp_index;
      etp_of[static_cast<size_t>(r)] = e.etp_index;
    }
    for (int r = 0; r < 8; ++r) {
      const ExpertGroups e = groups(2, 4, etp, 2, r);
      for (int q = 0; q < 8; ++q) {
        const bool same_ep = std::find(e.ep.begin(), e.ep.end(), q) != e.ep.end();
        const bool same_edp = std::find(e.edp.begin(), e.edp.end(), q) != e.edp.end();
        const bool same_etp = std::find(e.etp.begin(), e.etp.end(), q) != e.etp.end();
        CHECK(same_ep == (ep_of[static_cast<size_t>(q)] == e.ep_index));
        CHECK(same_edp == (edp_of[static_cast<size_t>(q)] == e.edp_index));
        CHECK(same_etp == (etp_of[static_cast<size_t>(q)] == e.etp_index));
      }
    }
  }
}

TEST_CASE("MoE model FLOPs count the active experts") {
  // A top-k MoE layer does the work of a dense SwiGLU MLP of k·f_e plus the router GEMM
  // (forward, dgrad, wgrad: 3 · 2·s·h·E per sequence).
  const ModelSpec m = small_moe();
  ModelSpec dense = dense_layer_model(m);
  dense.ffn_hidden = 2 * 512;
  const double router = 3.0 * 2.0 * 1024 * 1024 * 8;
  CHECK(model_flops_per_iteration(m, 16) == doctest::Approx(model_flops_per_iteration(dense, 16) + 16 * 4 * router).epsilon(1e-12));
  // Imbalance and capacity change the busiest rank's work, not the model's.
  ModelSpec skewed = m;
  skewed.moe.expert_imbalance = 2.0;
  CHECK(model_flops_per_iteration(skewed, 16) == model_flops_per_iteration(m, 16));
  // Mixed models: dense layers with their own MLP.
  ModelSpec mixed = m;
  mixed.moe.first_dense_layers = 1;
  mixed.moe.layer_freq = 2;  // layers 1 and 3 MoE, 0 and 2 dense
  CHECK(moe_layer_count(mixed) == 2);
  CHECK(is_moe_layer(mixed, 1));
  CHECK(!is_moe_layer(mixed, 2));
  const double per_moe = (model_flops_per_iteration(m, 1) - model_flops_per_iteration(mixed, 1)) / 2;
  CHECK(per_moe == doctest::Approx(router + 6.0 * 1024 * (3.0 * 1024 * 1024 - 3.0 * 1024 * 4096)).epsilon(1e-12));
}

TEST_CASE("MoE layout errors name the keys") {
  const ModelSpec m = small_moe();
  auto problem = [&](const ModelSpec& model, const ParallelSpec& p) {
    try {
      check_layout(model, p);
    } catch (const LayoutError& e) {
      return e.keys().front() + ": " + e.what();
    }
    return std::string("no error");
  };
  CHECK(problem(m, layout(1, 3, 3)).rfind("model.moe.num_experts:", 0) == 0);
  CHECK(problem(m, layout(1, 4, 2)).rfind("parallel.ep:", 0) == 0);
  ParallelSpec no_sp = layout(2, 2, 2);
  no_sp.sequence_parallel = false;
  CHECK(problem(m, no_sp).rfind("parallel.sequence_parallel:", 0) == 0);
  // Expert tensor parallelism: etp divides the expert FFN size (512), etp · ep divides tp · dp.
  ParallelSpec etp = layout(2, 2, 2);
  etp.etp = 1;
  CHECK(problem(m, etp) == "no error");
  etp.etp = 3;
  CHECK(problem(m, etp).rfind("model.moe.expert_ffn_hidden: model.moe.expert_ffn_hidden (512) must be divisible by the "
                              "expert tensor-parallel degree (3, parallel.etp)", 0) == 0);
  etp.etp = 4;  // 4 · 2 GPUs per expert-data-parallel rank, 4 in the stage
  CHECK(problem(m, etp).rfind("parallel.ep: parallel.etp · parallel.ep (4 · 2) does not divide parallel.tp · "
                              "parallel.dp · parallel.cp (2 · 2 · 1)", 0) == 0);
  // ep 4 over dp 2 fits once etp 1 frees the TP ranks: the ep group spans tp · dp.
  ParallelSpec wide = layout(2, 4, 2);
  CHECK(problem(m, wide).rfind("parallel.ep: parallel.ep (4) does not divide parallel.dp · parallel.cp (2 · 1)", 0) == 0);
  wide.etp = 1;
  CHECK(problem(m, wide) == "no error");
  ModelSpec odd_shared = m;
  odd_shared.moe.shared_ffn_hidden = 1025;  // the shared experts shard over tp, whatever etp
  CHECK(problem(odd_shared, wide).rfind("model.moe.shared_ffn_hidden:", 0) == 0);
  ModelSpec mixed = m;  // dense and MoE layers mixed: simulated
  mixed.moe.first_dense_layers = 1;
  CHECK(problem(mixed, layout(1, 2, 2)) == "no error");
  ModelSpec too_many = m;
  too_many.moe.router_topk = 9;
  CHECK(problem(too_many, layout(1, 1, 1)).rfind("model.moe.router_topk:", 0) == 0);
  ParallelSpec dense_ep = layout(1, 2, 2);
  CHECK(problem(dense_layer_model(m), dense_ep).rfind("parallel.ep:", 0) == 0);
  CHECK(problem(m, layout(2, 2, 4)) == "no error");
}

TEST_CASE("MoE with context parallelism and sharding: ep spans dp · cp, sharding beyond the optimizer is refused") {
  const ModelSpec m = small_moe();
  auto problem = [&](const ParallelSpec& p) {
    try {
      check_layout(m, p);
    } catch (const LayoutError& e) {
      return e.keys().front() + ": " + e.what();
    }
    return std::string("no error");
  };
  // ep 4 over dp 2 alone does not fit; over dp 2 · cp 2 it does (Megatron-Core folds cp into
  // the expert-parallel group).
  ParallelSpec folded = layout(1, 4, 2);
  CHECK(problem(folded).rfind("parallel.ep:", 0) == 0);
  folded.cp = 2;
  CHECK(problem(folded) == "no error");
  ParallelSpec six = layout(1, 4, 3);  // dp 3 · cp 2 = 6 ranks: ep 4 does not divide them
  six.cp = 2;
  CHECK(problem(six).rfind("parallel.ep: parallel.ep (4) does not divide parallel.dp · parallel.cp (3 · 2)", 0) == 0);
  // A context-parallel rank routes its s / cp tokens: the MoE ops of cp 2 at s 1024 are those
  // of cp 1 at s 512.
  ModelSpec half = m;
  half.seq_len = 512;
  const std::vector<Op> cp_ops = layer_ops(m, folded);
  const std::vector<Op> half_ops = layer_ops(half, layout(1, 4, 4));
  for (const char* name : {"router_gemm", "expert_fc1_gemm", "expert_fc2_gemm", "ep_dispatch", "ep_combine"}) {
    CAPTURE(name);
    CHECK(find_op(cp_ops, name).gemm_m == find_op(half_ops, name).gemm_m);
    CHECK(find_op(cp_ops, name).fwd_flops == find_op(half_ops, name).fwd_flops);
    CHECK(find_op(cp_ops, name).collective_bytes == find_op(half_ops, name).collective_bytes);
  }
  CHECK(find_op(cp_ops, "ep_dispatch").collective_bytes == static_cast<std::uint64_t>(2 * 512 * 2 * 1024));
  ParallelSpec sharded = layout(1, 2, 4);
  sharded.sharding = Sharding::kOptimizer;
  CHECK(problem(sharded) == "no error");
  for (Sharding level : {Sharding::kGradients, Sharding::kFull}) {
    sharded.sharding = level;
    CHECK(problem(sharded).rfind("parallel.sharding: parallel.sharding ", 0) == 0);
  }
  sharded.sharding = Sharding::kOptimizer;
  sharded.shard_group = ShardGroup::kNode;
  CHECK(problem(sharded).rfind("parallel.shard_group:", 0) == 0);
}

TEST_CASE("mixed dense and MoE layers: each global layer's ops and parameters") {
  // layer_freq 2 after first_dense_layers 1: layers 1 and 3 MoE, 0 and 2 dense; tp 2 (SP), ep 2.
  ModelSpec m = small_moe();
  m.moe.first_dense_layers = 1;
  m.moe.layer_freq = 2;
  CHECK(mixes_dense_and_moe(m));
  const Workload w = gpt_workload(m, layout(2, 2, 2));
  CHECK(w.dense_at == std::vector<bool>{true, false, true, false});
  CHECK(&w.ops_of_layer(0) == &w.dense_layer);
  CHECK(&w.ops_of_layer(1) == &w.layer);
  CHECK(&w.ops_of_layer(2) == &w.dense_layer);
  // The dense layer's MLP is model.ffn_hidden's (f = 4096), as Megatron-Core builds the non-MoE
  // layers: FC1 (gate and up) s·b = 1024 rows × 2f/t = 4096 × h = 1024, 2·1024·4096·1024 FLOPs.
  const Op& fc1 = find_op(w.dense_layer, "fc1_gemm");
  CHECK(fc1.gemm_n * fc1.gemm_m * fc1.gemm_k == 1024ll * 4096 * 1024);
  CHECK(fc1.fwd_flops == 2.0 * 1024 * 4096 * 1024);
  for (const Op& op : w.dense_layer) CHECK(op.comm_group != CommGroup::kEp);
  CHECK(find_op(w.layer, "ep_dispatch").comm_group == CommGroup::kEp);
  // Ops both kinds have (attention, norms, residuals) are the same ops.
  for (const Op& op : w.dense_layer)
    for (const Op& other : w.layer)
      if (other.name == op.name) {
        CAPTURE(op.name);
        CHECK(other.fwd_flops == op.fwd_flops);
        CHECK(other.fwd_bytes == op.fwd_bytes);
        CHECK(other.saved_bytes == op.saved_bytes);
      }
  // Parameters per GPU. Attention: h·(h + 2·8·64)/t + h·h/t = (1024·2048 + 1024²)/2 = 1572864;
  // two RMSNorms 2h = 2048. Dense MLP: 3·h·f/t = 3·1024·4096/2 = 6291456 → 7866368 per dense
  // layer. MoE layer: the router h·E = 8192 beside attention and norms (1583104), and the
  // routed experts E/ep = 4 of 3·h·f_e/t = 786432 each (3145728).
  CHECK(w.dense_layer_params == 7866368u);
  CHECK(w.layer_params == 1583104u);
  CHECK(w.layer_expert_params == 3145728u);
  const LayerParams all = w.params_of_layers(0, 4);
  CHECK(all.params == 2u * 7866368 + 2u * 1583104);
  CHECK(all.expert_params == 2u * 3145728);
  // Tensors: a dense layer QKV, out-proj, FC1, FC2 and two norms (6); an MoE layer the
  // router and the experts' FC1 and FC2 for the MLP (7).
  CHECK(all.tensors == 2 * 6 + 2 * 7);
  const LayerParams top = w.params_of_layers(2, 2);
  CHECK(top.params == 7866368u + 1583104u);
  CHECK(top.expert_params == 3145728u);
  // Every layer one kind: no second list.
  CHECK(gpt_workload(small_moe(), layout(2, 2, 2)).dense_at.empty());
  CHECK(gpt_workload(dense_layer_model(m), layout(2, 1, 2)).dense_layer.empty());
}

