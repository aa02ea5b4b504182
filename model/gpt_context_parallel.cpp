// model: context parallelism (parallel.cp) — the layout checks and the ring-attention split of
// the flash-attention op.
//
// Megatron-Core runs context parallelism only in Transformer Engine's attention: its own
// DotProductAttention asserts context_parallel_size == 1 (NVIDIA/Megatron-LM,
// megatron/core/transformer/dot_product_attention.py at 489c559bc51318a99a2eef40986f36542288785e).
// TE's p2p ring (--cp-comm-type p2p, the default; NVIDIA/TransformerEngine,
// transformer_engine/pytorch/attention.py, AttnFuncWithCPAndKVP2P, at
// 6792ecaa4131544b100ac4a552df3a85c560f085) cuts each sequence into 2·cp chunks, rank i holding
// chunks i and 2·cp−1−i, so that every rank does the same causal work; its forward runs cp
// steps, step j computing the local queries against one key/value block while the next block is
// sent to the next rank and received from the previous one; its backward passes the blocks and
// their gradients around the ring the same way.
#include "model/gpt_dims.hpp"

#include "common/bytes.hpp"

namespace lynx::model {

namespace detail {

void check_context_parallel_layout(const ModelSpec& m, const ParallelSpec& p) {
  if (p.cp < 1) fail_layout(ErrorCode::kOutOfRange, {"parallel.cp"}, "parallel.cp must be >= 1, got {}", p.cp);
  if (p.cp == 1) return;
  if (!m.flash_attention)
    fail_layout(ErrorCode::kIncompatibleSettings, {"parallel.cp", "model.flash_attention"},
                "parallel.cp {} needs model.flash_attention true: Megatron-Core runs context "
                "parallelism only in Transformer Engine's fused attention (its own "
                "DotProductAttention refuses context_parallel_size > 1)",
                p.cp);
  const std::int64_t chunks = 2 * std::int64_t{p.cp};
  if (m.seq_len % chunks != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.seq_len", "parallel.cp"},
                "model.seq_len ({}) is not divisible by 2 x parallel.cp ({}): the load-balanced "
                "causal split cuts every sequence into 2·cp equal chunks; change seq_len or cp",
                m.seq_len, chunks);
  const std::int64_t sp_chunks = std::int64_t{p.tp} * p.cp;
  if (p.sequence_parallel && m.seq_len % sp_chunks != 0)
    fail_layout(ErrorCode::kIndivisibleLayout,
                {"model.seq_len", "parallel.tp", "parallel.cp", "parallel.sequence_parallel"},
                "model.seq_len ({}) is not divisible by parallel.tp x parallel.cp ({} x {} = {}), "
                "which sequence parallelism on a context-parallel rank's seq_len / cp tokens "
                "needs: change seq_len, tp or cp, or turn off parallel.sequence_parallel",
                m.seq_len, p.tp, p.cp, sp_chunks);
}

void with_ring_attention(const Dims& d, std::int64_t kv_one, Op& flash) {
  if (d.cp == 1) return;
  flash.cp_steps = static_cast<int>(d.cp);
  flash.cp_kv_block_bytes = u64(2 * kv_one);  // K and V of this rank's seq_len / cp tokens
}

}  // namespace detail

Op ring_attention_block(const Op& attention) {
  if (attention.cp_steps <= 1) return attention;
  const double steps = attention.cp_steps;
  Op block = attention;
  // Every step: the local queries (gemm_m rows) against one block of gemm_n / cp keys.
  block.gemm_n = attention.gemm_n / attention.cp_steps;
  block.fwd_flops /= steps;
  block.fwd_bytes /= steps;
  block.bwd_dgrad_flops /= steps;
  block.bwd_dgrad_bytes /= steps;
  block.saved_bytes = 0;
  return block;
}

}  // namespace lynx::model
