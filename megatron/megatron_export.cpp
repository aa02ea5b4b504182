#include "megatron/megatron_export.hpp"

#include "megatron/megatron_vocab.hpp"
#include "model/gpt.hpp"
#include "model/sharding.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <string_view>
#include <utility>
#include <vector>

namespace lynx::megatron {

std::string scenario_to_megatron_args(const Scenario& scenario) {
  const ModelSpec& m = scenario.model;
  const ParallelSpec& p = scenario.parallel;
  const RecomputeSpec& r = scenario.recompute;
  std::vector<std::string> comments;
  std::vector<std::pair<std::string, std::string>> options;  // name, value ("" for a flag)
  const auto option = [&](std::string name, std::string value = {}) {
    options.emplace_back(std::move(name), std::move(value));
  };

  const auto gpus = gpus_used(p);
  comments.push_back(fmt::format(
      "Megatron-LM arguments for lynxsim scenario '{}'. Launch on {} GPUs ({} node(s) of {}, "
      "hardware profile {}): data parallel = GPUs / (tp x {}pp) = {}.",
      scenario.name, gpus, (gpus + scenario.hardware.gpus_per_node - 1) / scenario.hardware.gpus_per_node,
      scenario.hardware.gpus_per_node, scenario.hardware.profile, p.cp > 1 ? "cp x " : "", p.dp));
  std::string no_argument =
      "No Megatron-LM argument for: the hardware (GPU, links, efficiencies), parallel.dp_bucket, "
      "parallel.tp_comm_overlap_chunks (Transformer Engine's userbuffer config), "
      "recompute.solver_nodes, sim.exploit_symmetry, sim.fast_forward, sim.mode, sim.max_tasks";
  if (r.partition == PartitionKind::kBalanced)
    no_argument += ", recompute.partition balanced (Megatron-LM splits layers evenly)";
  comments.push_back(no_argument + ".");

  option("--num-layers", std::to_string(m.layers));
  option("--hidden-size", std::to_string(m.hidden));
  option("--num-attention-heads", std::to_string(m.heads));
  if (m.ffn_hidden != 4 * m.hidden) option("--ffn-hidden-size", std::to_string(m.ffn_hidden));
  if (m.kv_heads != m.heads) {
    option("--group-query-attention");
    option("--num-query-groups", std::to_string(m.kv_heads));
  }
  if (m.head_dim != 0 && m.head_dim * m.heads != m.hidden) option("--kv-channels", std::to_string(m.head_dim));
  if (m.mlp == MlpKind::kSwiglu) option("--swiglu");
  if (m.norm == NormKind::kRmsNorm) option("--normalization", "RMSNorm");
  if (m.position_embedding == PositionKind::kRotary) option("--position-embedding-type", "rope");
  if (m.embeddings == EmbeddingTie::kUntied) option("--untie-embeddings-and-output-weights");
  if (m.linear_bias == LinearBias::kOff) option("--disable-bias-linear");
  if (m.dropout == Dropout::kOff) {
    option("--attention-dropout", "0.0");
    option("--hidden-dropout", "0.0");
  }
  option("--seq-length", std::to_string(m.seq_len));
  option("--max-position-embeddings", std::to_string(m.seq_len));
  if (m.vocab == padded_vocab(kGpt2BpeVocab, kMegatronVocabDivisibleBy, p.tp)) {
    comments.push_back(fmt::format(
        "Vocabulary {}: GPT-2 BPE ({} tokens) as Megatron-LM pads it for tp {} (the default "
        "GPT2BPETokenizer with --vocab-file / --merge-file).",
        m.vocab, kGpt2BpeVocab, p.tp));
  } else {
    option("--vocab-size", std::to_string(m.vocab));
    if (m.vocab % (kMegatronVocabDivisibleBy * p.tp) != 0) option("--make-vocab-size-divisible-by", "1");
  }
  option("--micro-batch-size", std::to_string(p.micro_batch));
  option("--global-batch-size", std::to_string(p.global_batch));
  option("--tensor-model-parallel-size", std::to_string(p.tp));
  option("--pipeline-model-parallel-size", std::to_string(p.pp));
  if (p.cp > 1) {
    option("--context-parallel-size", std::to_string(p.cp));
    option("--cp-comm-type", "p2p");
  }
  if (p.first_stage_layers != 0) option("--decoder-first-pipeline-num-layers", std::to_string(p.first_stage_layers));
  if (p.last_stage_layers != 0) option("--decoder-last-pipeline-num-layers", std::to_string(p.last_stage_layers));
  const bool uneven = p.first_stage_layers != 0 || p.last_stage_layers != 0;
  if (p.schedule == ScheduleKind::kInterleaved && uneven)  // Megatron-LM's form for uneven stages
    option("--num-virtual-stages-per-pipeline-rank", std::to_string(p.virtual_stages));
  else if (p.schedule == ScheduleKind::kInterleaved)
    option("--num-layers-per-virtual-pipeline-stage",
           std::to_string(m.layers / (p.pp * p.virtual_stages)));
  if (p.schedule == ScheduleKind::kZbH1)
    comments.push_back("parallel.schedule zb-h1 has no Megatron-LM argument (Qi et al.'s zero-bubble "
                       "fork schedules it); closest: its 1F1B schedule (the default, printed here).");
  if (p.schedule == ScheduleKind::kGpipe)
    comments.push_back("parallel.schedule gpipe has no Megatron-LM equivalent; closest: its 1F1B "
                       "schedule (the default, printed here).");
  if (p.schedule == ScheduleKind::kInterleaved && blocking_exchange(p))
    option("--no-overlap-p2p-communication");
  if (p.pp > 1 && p.schedule == ScheduleKind::kOneFOneB && !blocking_exchange(p))
    comments.push_back("parallel.pipeline_exchange overlapped has no Megatron-LM argument without interleaving: "
                       "Megatron-Core's 1F1B exchanges blocking (batch_isend_irecv, then torch.cuda.synchronize()), "
                       "as parallel.pipeline_exchange blocking simulates.");
  if (p.pipeline_scatter_gather && p.tp > 1 && !p.sequence_parallel)
    comments.push_back("parallel.pipeline_scatter_gather has no Megatron-Core argument (Megatron-LM's "
                       "--scatter-gather-tensors-in-pipeline, its default before 2023).");
  if (p.sequence_parallel && p.tp > 1) option("--sequence-parallel");
  if (m.moe.num_experts > 0) {
    const MoeSpec& e = m.moe;
    option("--num-experts", std::to_string(e.num_experts));
    option("--moe-router-topk", std::to_string(e.router_topk > 0 ? e.router_topk : 2));
    if (e.expert_ffn_hidden != 0 && e.expert_ffn_hidden != m.ffn_hidden)
      option("--moe-ffn-hidden-size", std::to_string(e.expert_ffn_hidden));
    if (e.shared_ffn_hidden > 0) option("--moe-shared-expert-intermediate-size", std::to_string(e.shared_ffn_hidden));
    const int first_dense = std::max(0, e.first_dense_layers);
    if (first_dense > 0 && e.layer_freq > 1) {
      // Leading dense layers and every k-th MoE layer: the per-layer pattern as a list, which
      // Megatron-Core evaluates like the expression below.
      std::vector<int> pattern;
      for (int l = 0; l < m.layers; ++l) pattern.push_back(model::is_moe_layer(m, l) ? 1 : 0);
      option("--moe-layer-freq", fmt::format("\"[{}]\"", fmt::join(pattern, ",")));
    } else if (first_dense > 0) {  // Megatron-Core evaluates the list expression
      option("--moe-layer-freq", fmt::format("\"([0]*{}+[1]*{})\"", first_dense, m.layers - first_dense));
    } else if (e.layer_freq != 1) {
      option("--moe-layer-freq", std::to_string(e.layer_freq));
    }
    if (e.capacity_factor > 0) option("--moe-expert-capacity-factor", fmt::format("{}", e.capacity_factor));
    option("--moe-grouped-gemm");
    option("--moe-token-dispatcher-type", "alltoall");
    option("--expert-model-parallel-size", std::to_string(p.ep));
    option("--expert-tensor-parallel-size", std::to_string(expert_tp(p)));
    if (e.expert_imbalance != 1.0)
      comments.push_back(fmt::format("model.moe.expert_imbalance {} has no Megatron-LM argument (it describes the "
                                     "routing, which the router's load balancing decides).",
                                     e.expert_imbalance));
  }

  switch (r.strategy) {
    case RecomputeKind::kNone:
      break;
    case RecomputeKind::kFull:
      option("--recompute-granularity", "full");
      option("--recompute-method", r.method == FullMethod::kUniform ? "uniform" : "block");
      option("--recompute-num-layers", std::to_string(r.num_layers));
      break;
    case RecomputeKind::kSelective:
      option("--recompute-granularity", "selective");
      break;
    case RecomputeKind::kCheckmate:
    case RecomputeKind::kLynxHeu:
    case RecomputeKind::kLynxOpt:
      comments.push_back(fmt::format(
          "recompute.strategy {} has no Megatron-LM equivalent (per-layer keep / recompute "
          "decisions{}); closest: --recompute-granularity selective, printed here.",
          recompute_kind_name(r.strategy),
          r.strategy == RecomputeKind::kCheckmate ? "" : ", recomputation overlapped with communication"));
      option("--recompute-granularity", "selective");
      break;
  }
  // Sharding: the distributed optimizer for optimizer; Megatron-FSDP's strategies otherwise
  // (megatron/training/arguments.py: --data-parallel-sharding-strategy); shard_group node has no
  // one-flag equivalent.
  const Sharding level = model::sharding_level(p);
  if (level == Sharding::kOptimizer) option("--use-distributed-optimizer");
  if (level == Sharding::kGradients || level == Sharding::kFull) {
    option("--use-megatron-fsdp");
    option("--data-parallel-sharding-strategy", level == Sharding::kFull ? "optim_grads_params" : "optim_grads");
    option("--ckpt-format", "fsdp_dtensor");
  }
  if (p.shard_group == ShardGroup::kNode && level != Sharding::kNone)
    comments.push_back("parallel.shard_group node (hybrid sharding) has no one-flag Megatron-LM equivalent "
                       "(Megatron-FSDP's HSDP needs its outer data-parallel group set up); the flags shard over all of dp.");
  if (p.dp_overlap == DpOverlap::kBucketed) option("--overlap-grad-reduce");
  if (p.overlap_param_gather) option("--overlap-param-gather");
  if (p.tp_comm_overlap) option("--tp-comm-overlap");
  if (m.flash_attention) option("--use-flash-attn");
  if (!m.gradient_accumulation_fusion) option("--no-gradient-accumulation-fusion");
  if (!m.bias_gelu_fusion) option("--no-bias-gelu-fusion");
  if (!m.bias_dropout_fusion) option("--no-bias-dropout-fusion");
  if (!m.masked_softmax_fusion) option("--no-masked-softmax-fusion");
  comments.push_back("lynxsim simulates 16-bit mixed precision: --bf16 (or --fp16, the same to it).");
  option("--bf16");
  if (m.gemm_precision == GemmPrecision::kFp8) option("--fp8-format", "hybrid");

  std::string out;
  for (const std::string& c : comments) out += "# " + c + "\n";
  for (std::size_t k = 0; k < options.size(); ++k) {
    out += options[k].first;
    if (!options[k].second.empty()) out += " " + options[k].second;
    out += k + 1 < options.size() ? " \\\n" : "\n";
  }
  return out;
}

}  // namespace lynx::megatron
