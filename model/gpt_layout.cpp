// model: the checks of a model shape against a parallel layout, and the layers of each
// pipeline stage.
#include "model/gpt_dims.hpp"

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
  const std::int64_t widest = std::max<std::int64_t>({h, m.ffn_hidden, m.vocab});
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
