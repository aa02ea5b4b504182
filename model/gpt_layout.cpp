// model: the checks of a model shape against a parallel layout, and the layers of each
// pipeline stage.
#include "model/gpt_dims.hpp"
#include "model/gpt_moe.hpp"
#include "model/sharding.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace lynx::model {

using namespace detail;

namespace {

/// Headroom factor over the largest per-element byte and FLOP multipliers the op graph applies
/// (34 bytes per logit, 5 bytes per attention score, 3 matrices per GEMM): with every size below
/// checked at 64x, each product this file forms stays inside 64 bits.
constexpr std::int64_t kSizeHeadroom = 64;

/// Refuses a shape whose tensors or parameter counts do not fit 64-bit integers, naming the keys
/// (the fields' ranges admit such products: s² · a · b reaches 2^68).
void check_sizes_fit(const ModelSpec& m, const ParallelSpec& p) {
  const std::int64_t s = m.seq_len, b = p.micro_batch, h = m.hidden, a = m.heads;  // a > 0
  const std::int64_t widest = std::max<std::int64_t>(
      {h, m.ffn_hidden, m.vocab, std::int64_t{a} * m.head_dim, std::int64_t{m.moe.num_experts},
       std::int64_t{m.moe.expert_ffn_hidden} * std::max(1, m.moe.router_topk), m.moe.shared_ffn_hidden});
  auto require = [](std::optional<std::int64_t> product, std::vector<std::string> keys,
                    std::string_view what, std::string_view formula) {
    if (!product)
      fail_layout(ErrorCode::kValueOverflow, std::move(keys), "{} ({}) does not fit in 64-bit integers; make it smaller", what,
                  formula);
  };
  require(try_product({kSizeHeadroom, s, b, widest}),
          {"model.seq_len", "parallel.micro_batch", "model.vocab", "model.ffn_hidden", "model.hidden"},
          "an activation's size", fmt::format("seq_len {} x micro_batch {} x {}", s, b, widest));
  if (!m.flash_attention)
    require(try_product({kSizeHeadroom, s, s, b, a}),
            {"model.seq_len", "parallel.micro_batch", "model.heads", "model.flash_attention"},
            "the attention scores' size",
            fmt::format("seq_len² {}² x micro_batch {} x heads {}", s, b, a));
  require(try_product({kSizeHeadroom, h, widest}), {"model.hidden", "model.ffn_hidden", "model.vocab"},
          "a weight matrix's size", fmt::format("hidden {} x {}", h, widest));
  // What one GPU holds at once: every layer's tensors for each micro-batch in flight (all of
  // them with GPipe, up to pp · virtual_stages with 1F1B), so memory sums stay in 64 bits too.
  const std::int64_t per_token = m.flash_attention ? widest : std::max(widest, s * a);
  const std::int64_t micro_batches =
      p.global_batch / std::max<std::int64_t>(1, std::int64_t{p.micro_batch} * p.dp);
  const std::int64_t in_flight = p.schedule == ScheduleKind::kGpipe
                                     ? micro_batches
                                     : std::int64_t{p.pp} * p.virtual_stages;
  require(try_product({kSizeHeadroom, s, b, per_token, m.layers, std::max<std::int64_t>(1, in_flight)}),
          {"model.layers", "parallel.global_batch", "parallel.schedule", "model.seq_len",
           "parallel.micro_batch"},
          "the activations one GPU holds",
          fmt::format("seq_len {} x micro_batch {} x {} per token x {} layers x {} micro-batches in "
                      "flight", s, b, per_token, m.layers, in_flight));
}

/// Model.moe against itself and the parallel layout (Megatron-Core's constraints).
void check_moe_layout(const ModelSpec& m, const ParallelSpec& p) {
  const MoeSpec& e = m.moe;
  const int topk = e.router_topk > 0 ? e.router_topk : 2;
  if (topk > e.num_experts)
    fail_layout(ErrorCode::kOutOfRange, {"model.moe.router_topk", "model.moe.num_experts"},
                "model.moe.router_topk ({}) exceeds model.moe.num_experts ({}): a token cannot use "
                "more experts than there are",
                topk, e.num_experts);
  if (!(e.expert_imbalance >= 1.0))
    fail_layout(ErrorCode::kOutOfRange, {"model.moe.expert_imbalance"},
                "model.moe.expert_imbalance must be >= 1 (the busiest rank's tokens over the uniform "
                "share), got {}",
                e.expert_imbalance);
  if (m.moe.first_dense_layers >= m.layers)
    fail_layout(ErrorCode::kOutOfRange, {"model.moe.first_dense_layers", "model.layers"},
                "model.moe.first_dense_layers ({}) leaves no MoE layer of model.layers ({}); set "
                "model.moe.num_experts 0 for a dense model",
                m.moe.first_dense_layers, m.layers);
  if (e.num_experts % p.ep != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.moe.num_experts", "parallel.ep"},
                "model.moe.num_experts ({}) is not divisible by parallel.ep ({}): every "
                "expert-parallel rank holds the same number of experts",
                e.num_experts, p.ep);
  // The routed experts shard over the expert-tensor-parallel group, the shared experts over
  // tp like a dense MLP (Megatron-Core's TEGroupedMLP takes pg_collection.expt_tp,
  // SharedExpertMLP the dense tp group).
  const int etp = expert_tp(p);
  const int expert_ffn = e.expert_ffn_hidden > 0 ? e.expert_ffn_hidden : m.ffn_hidden;
  if (expert_ffn % etp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout,
                {"model.moe.expert_ffn_hidden", p.etp > 0 ? "parallel.etp" : "parallel.tp"},
                "model.moe.expert_ffn_hidden ({}) must be divisible by the expert tensor-parallel "
                "degree ({}, {}): each routed expert is sharded over those ranks",
                expert_ffn, etp, p.etp > 0 ? "parallel.etp" : "parallel.tp, as parallel.etp is 0");
  if (e.shared_ffn_hidden % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.moe.shared_ffn_hidden", "parallel.tp"},
                "model.moe.shared_ffn_hidden ({}) must be divisible by parallel.tp ({}): the shared "
                "experts are sharded over the tensor-parallel ranks",
                e.shared_ffn_hidden, p.tp);
  // Megatron-LM's validate_args: "When using expert parallelism and tensor parallelism,
  // sequence parallelism must be used" (the token dispatcher works on sequence-sharded tokens).
  if (p.tp > 1 && !p.sequence_parallel)
    fail_layout(ErrorCode::kIncompatibleSettings, {"parallel.sequence_parallel", "parallel.tp", "model.moe.num_experts"},
                "a mixture-of-experts model with parallel.tp {} needs parallel.sequence_parallel "
                "true (Megatron-LM requires it)",
                p.tp);
}

/// What a simulation of a MoE model needs beyond its shape: expert parallelism inside data
/// parallelism, and none of the features not modelled with it.
void check_moe_simulation(const ParallelSpec& p) {
  // Megatron-Core's initialize_model_parallel requires world_size % (etp · ep · pp) == 0: the
  // expert groups re-divide each stage's tp · dp · cp GPUs (model/expert_grid.hpp).
  const int etp = expert_tp(p);
  if ((std::int64_t{p.tp} * grad_replicas(p)) % (std::int64_t{etp} * p.ep) != 0) {
    if (etp == p.tp)
      fail_layout(ErrorCode::kIndivisibleLayout, {"parallel.ep", "parallel.dp", "parallel.cp"},
                  "parallel.ep ({}) does not divide parallel.dp · parallel.cp ({} · {}): the expert-parallel "
                  "ranks are data- and context-parallel ranks when parallel.etp is tp (Megatron-Core)",
                  p.ep, p.dp, p.cp);
    fail_layout(ErrorCode::kIndivisibleLayout, {"parallel.ep", "parallel.etp", "parallel.tp", "parallel.dp", "parallel.cp"},
                "parallel.etp · parallel.ep ({} · {}) does not divide parallel.tp · parallel.dp · "
                "parallel.cp ({} · {} · {}): Megatron-Core re-divides a pipeline stage's GPUs into "
                "etp × ep × expert-data-parallel",
                etp, p.ep, p.tp, p.dp, p.cp);
  }
  // The expert gradients and optimizer states follow the expert-data-parallel group; the
  // simulation shards them with the distributed optimizer only (Megatron-Core's MoE path).
  if (sharding_level(p) > Sharding::kOptimizer)
    fail_layout(ErrorCode::kNotModelled, {"parallel.sharding", "model.moe.num_experts"},
                "parallel.sharding {} is not modelled for mixture-of-experts models (experts would be "
                "gathered per layer over the expert-data-parallel group); use none or optimizer",
                kShardingNames[static_cast<std::size_t>(sharding_level(p))]);
  if (sharding_level(p) != Sharding::kNone && p.shard_group == ShardGroup::kNode)
    fail_layout(ErrorCode::kNotModelled, {"parallel.shard_group", "model.moe.num_experts"},
                "parallel.shard_group node is not modelled for mixture-of-experts models (the expert "
                "shards follow the expert-data-parallel group); use shard_group dp");
  if (p.tp_comm_overlap)
    fail_layout(ErrorCode::kIncompatibleSettings, {"parallel.tp_comm_overlap", "model.moe.num_experts"},
                "parallel.tp_comm_overlap is not modelled for mixture-of-experts layers");
  if (p.overlap_param_gather)
    fail_layout(ErrorCode::kIncompatibleSettings, {"parallel.overlap_param_gather", "model.moe.num_experts"},
                "parallel.overlap_param_gather is not modelled for mixture-of-experts models");
}

}  // namespace

namespace detail {

void check_tensor_layout(const ModelSpec& m, const ParallelSpec& p) {
  require_resolved(m);
  if (p.tp < 1) fail_layout(ErrorCode::kOutOfRange, {"parallel.tp"}, "parallel.tp must be >= 1, got {}", p.tp);
  if (p.micro_batch < 1)
    fail_layout(ErrorCode::kOutOfRange, {"parallel.micro_batch"}, "parallel.micro_batch must be >= 1, got {}",
                p.micro_batch);
  if (m.heads % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.heads", "parallel.tp"},
                "model.heads ({}) is not divisible by parallel.tp ({}): pick a tp that divides "
                "the number of attention heads",
                m.heads, p.tp);
  // Megatron-Core splits the key/value groups over the TP ranks like the heads:
  // Attention.__init__ (megatron/core/transformer/attention.py) sets num_query_groups_per_partition
  // = divide(num_query_groups, tp world size), and divide() asserts divisibility. (It does not
  // replicate K/V heads when tp > kv_heads, as some inference engines do.)
  if (kv_heads_of(m) % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.kv_heads", "parallel.tp"},
                "model.kv_heads ({}) is not divisible by parallel.tp ({}): Megatron-Core splits "
                "the key/value heads over the TP ranks (num_query_groups_per_partition = "
                "num_query_groups / tp); pick a tp that divides kv_heads",
                kv_heads_of(m), p.tp);
  if (m.ffn_hidden % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.ffn_hidden", "parallel.tp"},
                "model.ffn_hidden ({}) is not divisible by parallel.tp ({}): pick a tp that "
                "divides ffn_hidden, or change ffn_hidden",
                m.ffn_hidden, p.tp);
  if (m.vocab % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.vocab", "parallel.tp"},
                "model.vocab ({}) is not divisible by parallel.tp ({}): pad the vocabulary to a "
                "multiple of tp (Megatron-LM pads it to a multiple of 128·tp)",
                m.vocab, p.tp);
  check_sizes_fit(m, p);
  check_context_parallel_layout(m, p);
  if (is_moe(m)) check_moe_layout(m, p);
  if (p.sequence_parallel && p.cp == 1 && m.seq_len % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.seq_len", "parallel.tp", "parallel.sequence_parallel"},
                "model.seq_len ({}) is not divisible by parallel.tp ({}), which sequence "
                "parallelism needs: change seq_len or tp, or turn off "
                "parallel.sequence_parallel",
                m.seq_len, p.tp);
}

}  // namespace detail

void check_layout(const ModelSpec& m, const ParallelSpec& p) {
  check_tensor_layout(m, p);
  if (is_moe(m)) check_moe_simulation(p);
  if (!is_moe(m) && p.ep != 1)
    fail_layout(ErrorCode::kIncompatibleSettings, {"parallel.ep", "model.moe.num_experts"},
                "parallel.ep {} needs a mixture-of-experts model (model.moe.num_experts > 0)", p.ep);
  if (p.pp < 1) fail_layout(ErrorCode::kOutOfRange, {"parallel.pp"}, "parallel.pp must be >= 1, got {}", p.pp);
  if (p.virtual_stages < 1)
    fail_layout(ErrorCode::kOutOfRange, {"parallel.virtual_stages"}, "parallel.virtual_stages must be >= 1, got {}",
                p.virtual_stages);
  pipeline_stage_layers(m.layers, p);
}

std::vector<int> pipeline_stage_layers(int layers, const ParallelSpec& p) {
  const int first = p.first_stage_layers, last = p.last_stage_layers;
  if (first == 0 && last == 0) {
    const std::int64_t chunks =
        checked_product("parallel.pp x parallel.virtual_stages", {p.pp, p.virtual_stages});
    if (layers % chunks != 0)
      fail_layout(ErrorCode::kIndivisibleLayout, {"model.layers", "parallel.pp", "parallel.virtual_stages"},
                  "model.layers ({}) is not divisible by parallel.pp × parallel.virtual_stages "
                  "({} × {} = {}): every model chunk needs the same number of layers",
                  layers, p.pp, p.virtual_stages, chunks);
    return std::vector<int>(static_cast<size_t>(p.pp), layers / p.pp);
  }
  std::vector<std::string> keys;  // the uneven-split keys given, first the ones the message names
  if (first != 0) keys.emplace_back("parallel.first_stage_layers");
  if (last != 0) keys.emplace_back("parallel.last_stage_layers");
  if (p.pp < 2) {
    keys.emplace_back("parallel.pp");
    fail_layout(ErrorCode::kIncompatibleSettings, std::move(keys),
                "parallel.first_stage_layers / last_stage_layers ({} / {}) need parallel.pp >= 2 "
                "(with pp {} the one stage holds every layer)",
                first, last, p.pp);
  }
  // Megatron-Core (get_transformer_layer_offset): a stage whose count is not set is a "middle"
  // stage; the middle stages split the remaining layers evenly.
  const int middle = p.pp - (first != 0 ? 1 : 0) - (last != 0 ? 1 : 0);
  const std::int64_t rest = std::int64_t{layers} - first - last;
  const bool splits = middle == 0 ? rest == 0 : rest >= middle && rest % middle == 0;
  if (!splits) {
    for (const char* k : {"model.layers", "parallel.pp"}) keys.emplace_back(k);
    fail_layout(ErrorCode::kIndivisibleLayout, std::move(keys),
                "parallel.first_stage_layers {} and parallel.last_stage_layers {} leave {} of "
                "model.layers {} for the {} other stage(s) of parallel.pp {}: {}",
                first, last, rest, layers, middle, p.pp,
                middle == 0 ? "with no other stage they must add up to model.layers"
                            : "every other stage needs the same number of layers, at least one");
  }
  std::vector<int> per_gpu(static_cast<size_t>(p.pp), middle > 0 ? static_cast<int>(rest / middle) : 0);
  if (first != 0) per_gpu.front() = first;
  if (last != 0) per_gpu.back() = last;
  // Interleaving: every chunk of a GPU holds the same share of its layers (Megatron-Core asserts
  // the first / last stage counts divisible by the virtual pipeline size).
  for (int k = 0; k < p.pp; ++k)
    if (per_gpu[static_cast<size_t>(k)] % p.virtual_stages != 0) {
      keys.emplace_back("parallel.virtual_stages");
      fail_layout(ErrorCode::kIndivisibleLayout, std::move(keys),
                  "pipeline stage {} holds {} layers, not divisible by parallel.virtual_stages {}: "
                  "every model chunk of a GPU needs the same number of layers",
                  k, per_gpu[static_cast<size_t>(k)], p.virtual_stages);
    }
  return per_gpu;
}

}  // namespace lynx::model
