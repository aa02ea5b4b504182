#pragma once
/// What the GPT model's .cpp files share (gpt_presets, gpt_layout, gpt_ops, gpt_formulas):
/// the model dimensions one GPU of a TP group sees (Dims), the check every function taking a
/// ModelSpec runs, and the layout error. Internal to model/.
#include "model/gpt.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lynx::model::detail {

/// The model dimensions as 64-bit integers, resolved and checked, for one GPU of a TP group.
struct Dims {
  std::int64_t s, b, h, a, f, v, t;
  std::int64_t kv;            ///< key/value heads
  std::int64_t head_dim;      ///< model.head_dim, else h / a
  std::int64_t q_width;       ///< Q (and the attention output): a·head_dim (h unless head_dim is set)
  std::int64_t qkv_width;     ///< QKV GEMM output: q_width + 2·kv·head_dim (3h without GQA)
  bool sp;
  bool swiglu, rmsnorm, rotary, untied, bias, dropout;
  /// Megatron's fusion switches (ModelSpec); fused_softmax: the switch and the kernel's shape
  /// conditions (fused_softmax_available).
  bool grad_accumulation_fusion, bias_gelu_fusion, bias_dropout_fusion, fused_softmax;
  std::int64_t main_grad_bytes;  ///< bytes per element of the gradient buffer (fp32_main_grads: 4)
  std::int64_t cp;            ///< context-parallel degree
  std::int64_t seq_local;     ///< tokens of one sequence on this context-parallel rank: s / cp
  std::int64_t tokens;        ///< seq_local·b: rows of every GEMM (sequence gathered over tp)
  std::int64_t local_tokens;  ///< rows outside the TP region: tokens/t with SP, tokens without
};

/// Throws LayoutError for `keys` (in the order the message names them).
template <typename... Args>
[[noreturn]] void fail_layout(ErrorCode code, std::vector<std::string> keys, fmt::format_string<Args...> format,
                              Args&&... args) {
  throw LayoutError(code, std::move(keys), fmt::format(format, std::forward<Args>(args)...));
}

/// Every function taking a ModelSpec needs it resolved (resolve_model / resolve_scenario).
void require_resolved(const ModelSpec& m);

/// Key/value heads; an unresolved 0 means multi-head attention.
inline std::int64_t kv_heads_of(const ModelSpec& m) { return m.kv_heads > 0 ? m.kv_heads : m.heads; }

/// Throws LayoutError unless TP, SP and the model shape fit (check_layout without the pipeline).
void check_tensor_layout(const ModelSpec& m, const ParallelSpec& p);
/// Throws LayoutError unless the context-parallel degree fits the model (model/gpt_context_parallel.cpp).
void check_context_parallel_layout(const ModelSpec& m, const ParallelSpec& p);
/// Context parallelism on the flash-attention op (cp > 1): its cp ring steps and the bytes
/// of one key/value block (`kv_one`: K or V of this rank's tokens); cp 1: nothing.
void with_ring_attention(const Dims& d, std::int64_t kv_one, Op& flash);
/// The dimensions of `m` on one GPU of layout `p` (check_tensor_layout first).
Dims dims_of(const ModelSpec& m, const ParallelSpec& p);

/// A size that must not be negative, as unsigned.
inline std::uint64_t u64(std::int64_t v) {
  LYNX_CHECK(v >= 0, "negative size {}", v);
  return static_cast<std::uint64_t>(v);
}

inline double dbl(std::int64_t v) { return static_cast<double>(v); }

/// Parameters of one norm: LayerNorm γ and β (2h), RMSNorm γ only (h).
inline std::int64_t norm_parameters(const Dims& d) { return d.rmsnorm ? d.h : 2 * d.h; }

}  // namespace lynx::model::detail
