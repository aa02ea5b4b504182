// model: the GPT and Llama presets, and resolving a ModelSpec against them.
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

/// GPT's vocabulary as Megatron-LM pads GPT-2 BPE (50257 -> 51200), the default of every
/// model that names no other.
constexpr int kGptVocab = 51200;

/// A model preset: the shape, and for the Llama family its architecture.
struct Preset {
  std::string_view name;
  int layers;
  int hidden;
  int heads;
  int kv_heads = 0;      ///< 0: heads (multi-head attention)
  int ffn = 0;           ///< 0: 4 x hidden (GPT)
  int vocab = 51200;
  bool llama = false;    ///< SwiGLU, RMSNorm, rotary, untied embeddings, no linear biases
  int head_dim = 0;      ///< 0: hidden / heads
  MoeSpec moe{};         ///< num_experts 0: dense
};

/// A mixture-of-experts part of a preset: routed experts, top-k, expert inner size, shared
/// experts' inner size, leading dense layers.
constexpr MoeSpec moe_of(int experts, int topk, int expert_ffn, int shared_ffn = 0, int first_dense = 0) {
  MoeSpec e;
  e.num_experts = experts;
  e.router_topk = topk;
  e.expert_ffn_hidden = expert_ffn;
  e.shared_ffn_hidden = shared_ffn;
  e.first_dense_layers = first_dense;
  return e;
}

/// Llama-family architecture (Touvron et al. 2023, Llama 2 paper Sec. 2.2 and "Llama 1" Sec.
/// 2.2: pre-normalisation with RMSNorm, SwiGLU, rotary embeddings; no biases, an untied output
/// layer and no dropout, as in the HF configs: attention_bias false, mlp_bias false,
/// tie_word_embeddings false, attention_dropout 0.0).
constexpr bool kLlama = true;

// Shapes as published: 1.3B-175B from Narayanan et al. 2021 Table 1 / Brown et al. 2020 and
// Megatron-LM's examples; 22B from Korthikanti et al. 2022 Table 3 (48 layers, h 6144, 64
// heads); 530B (105, 20480, 128) and 1T (128, 25600, 160) from Narayanan et al. 2021 Table 1 /
// Korthikanti et al. 2022 Table 3.
//
// gpt-23b is our own definition (the Lynx paper names a 23B GPT without its shape here): the
// gpt-13b width (h 5120, 40 heads of 128) at 72 layers. By Eq. 2 that is
//   12·72·5120² + 13·72·5120 + (51200 + 2048)·5120 = 22,649,241,600 + 4,792,320 + 272,629,760
//   = 22.93e9 parameters (0.3% under 23B).
// Chosen over the gpt-22b width at 50 layers (22.98e9) because 72 layers split evenly over
// pp = 2, 3, 4, 6, 8, 9, 12, while 50 layers allow only pp = 2, 5, 10; heads 40 divide tp = 8.
//
// Llama 2 (Touvron et al. 2023, "Llama 2", Table 1: context 4096, GQA for 70B; shapes from the
// HF configs meta-llama/Llama-2-{7b,13b,70b}-hf config.json: hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size 32000, rope_theta
// 10000): 7B 32 x 4096, 32 heads, ffn 11008; 13B 40 x 5120, 40 heads, ffn 13824; 70B 80 x 8192,
// 64 heads, 8 kv heads, ffn 28672.
// Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3: layers, model dimension,
// FFN dimension, attention heads, key/value heads 8, RoPE base 500,000; vocab 128256 from the HF
// configs meta-llama/Meta-Llama-3-8B, -70B and Llama-3.1-405B config.json; context 8192): 8B
// 32 x 4096, 32 heads, ffn 14336; 70B 80 x 8192, 64 heads, ffn 28672; 405B 126 x 16384, 128
// heads, ffn 53248. The rotary base and context do not change the cost model: seq_len stays
// the scenario's (set 4096 / 8192 for the pretraining context).
//
// Mixtures of experts (Llama-family architecture: SwiGLU experts, RMSNorm, rotary, untied):
// - Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts", arXiv 2401.04088, Table 1: dim 4096,
//   32 layers, head_dim 128, hidden_dim 14336, 32 heads, 8 kv heads, vocab 32000, 8 experts,
//   top-2; Mistral AI's announcement "Mixtral of experts", 2023-12-11: 46.7B total, 12.9B used
//   per token).
// - Qwen3-30B-A3B and Qwen3-235B-A22B (Qwen Team 2025, "Qwen3 Technical Report", arXiv
//   2505.09388, Table 2: 48 / 94 layers, 32 / 64 query and 4 kv heads, 128 experts, 8 activated,
//   30B / 235B total, 3B / 22B activated; hidden 2048 / 4096, head_dim 128, moe_intermediate_size
//   768 / 1536, vocab 151936, untied, from the HF configs Qwen/Qwen3-30B-A3B and
//   Qwen/Qwen3-235B-A22B config.json; model cards: 30.5B total, 3.3B activated; 235B, 22B).
//   Their per-head q/k RMSNorms (2 x 128 parameters a layer) are not modelled.
// - DeepSeek-V3 (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", arXiv 2412.19437, Sec. 4.2:
//   61 layers, hidden 7168, 128 heads, every FFN but the first three MoE, 1 shared and 256 routed
//   experts of intermediate size 2048, 8 routed per token; 671B total, 37B activated, the
//   multi-token-prediction module excluded; first three layers' FFN 18432 and vocab 129280 from
//   the HF config deepseek-ai/DeepSeek-V3 config.json). Its multi-head latent attention is NOT
//   modelled: attention is approximated by multi-head attention with 128 heads of 56 (hidden /
//   heads; 4h^2 = 205.5M parameters a layer against MLA's 187.1M), which puts the total 0.2% and
//   the active count about 3% above an exact MLA count (tests/model/test_moe.cpp).
constexpr std::array<Preset, 20> kPresets{{
    {"gpt-1.3b", 24, 2048, 16},
    {"gpt-2.7b", 32, 2560, 32},
    {"gpt-6.7b", 32, 4096, 32},
    {"gpt-13b", 40, 5120, 40},
    {"gpt-22b", 48, 6144, 64},
    {"gpt-23b", 72, 5120, 40},
    {"gpt-39b", 48, 8192, 64},
    {"gpt-175b", 96, 12288, 96},
    {"gpt-530b", 105, 20480, 128},
    {"gpt-1t", 128, 25600, 160},
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, kLlama},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, kLlama},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, kLlama},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, kLlama},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, kLlama},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, kLlama},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, kLlama, 0, moe_of(8, 2, 14336)},
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, kLlama, 128, moe_of(128, 8, 768)},
    {"qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, kLlama, 128, moe_of(128, 8, 1536)},
    {"deepseek-v3", 61, 7168, 128, 128, 18432, 129280, kLlama, 0, moe_of(256, 8, 2048, 2048, 3)},
}};

const Preset* find_preset(std::string_view name) {
  for (const Preset& preset : kPresets)
    if (preset.name == name) return &preset;
  return nullptr;
}

std::string joined_preset_names() {
  std::string out;
  for (const Preset& preset : kPresets) {
    if (!out.empty()) out += ", ";
    out += preset.name;
  }
  return out;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

ModelSpec resolve_model(const ModelSpec& spec) {
  ModelSpec m = spec;
  const Preset* found = nullptr;
  if (!spec.preset.empty()) {
    found = find_preset(spec.preset);
    if (found == nullptr)
      fail_layout(ErrorCode::kUnknownChoice, {"model.preset"}, "unknown model preset '{}' (known: {})", spec.preset,
                  joined_preset_names());
    // Explicit non-zero (non-default) fields override the preset's shape and architecture.
    if (m.layers == 0) m.layers = found->layers;
    if (m.hidden == 0) m.hidden = found->hidden;
    if (m.heads == 0) m.heads = found->heads;
    if (m.kv_heads == 0) m.kv_heads = found->kv_heads;
    if (m.ffn_hidden == 0) m.ffn_hidden = found->ffn;
    if (m.vocab == 0) m.vocab = found->vocab;
    if (m.head_dim == 0) m.head_dim = found->head_dim;
    // The preset's MoE, field by field unless given (a scenario's own value is non-default).
    const MoeSpec none{};
    MoeSpec& e = m.moe;
    if (e.num_experts == none.num_experts) e.num_experts = found->moe.num_experts;
    if (e.router_topk == none.router_topk) e.router_topk = found->moe.router_topk;
    if (e.expert_ffn_hidden == none.expert_ffn_hidden) e.expert_ffn_hidden = found->moe.expert_ffn_hidden;
    if (e.shared_ffn_hidden == none.shared_ffn_hidden) e.shared_ffn_hidden = found->moe.shared_ffn_hidden;
    if (e.first_dense_layers < 0) e.first_dense_layers = found->moe.first_dense_layers;
  } else if (m.layers == 0 || m.hidden == 0 || m.heads == 0) {
    fail_layout(ErrorCode::kMissingKey, {"model"},
                "a custom model (no model.preset) needs model.layers, model.hidden and "
                "model.heads (got layers {}, hidden {}, heads {}); or name a preset: {}",
                m.layers, m.hidden, m.heads, joined_preset_names());
  }
  const bool llama = found != nullptr && found->llama;
  if (m.mlp == MlpKind::kDefault) m.mlp = llama ? MlpKind::kSwiglu : MlpKind::kGelu;
  if (m.norm == NormKind::kDefault) m.norm = llama ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  if (m.position_embedding == PositionKind::kDefault)
    m.position_embedding = llama ? PositionKind::kRotary : PositionKind::kLearned;
  if (m.embeddings == EmbeddingTie::kDefault)
    m.embeddings = llama ? EmbeddingTie::kUntied : EmbeddingTie::kTied;
  if (m.linear_bias == LinearBias::kDefault) m.linear_bias = llama ? LinearBias::kOff : LinearBias::kOn;
  if (m.dropout == Dropout::kDefault) m.dropout = llama ? Dropout::kOff : Dropout::kOn;
  if (m.kv_heads == 0) m.kv_heads = m.heads;  // multi-head attention
  if (m.moe.first_dense_layers < 0) m.moe.first_dense_layers = 0;
  if (m.vocab == 0) m.vocab = kGptVocab;
  if (m.ffn_hidden == 0) {  // GPT convention: f = 4h
    const std::int64_t four_h = checked_product("model.ffn_hidden = 4 x model.hidden", {4, m.hidden});
    if (four_h > std::numeric_limits<int>::max())
      fail_layout(ErrorCode::kOutOfRange, {"model.hidden"}, "model.hidden ({}) is too large: 4 x hidden = {} (ffn_hidden)",
                  m.hidden, four_h);
    m.ffn_hidden = static_cast<int>(four_h);
  }
  const std::array<std::pair<const char*, int>, 6> positive{{{"layers", m.layers},
                                                              {"hidden", m.hidden},
                                                              {"heads", m.heads},
                                                              {"ffn_hidden", m.ffn_hidden},
                                                              {"seq_len", m.seq_len},
                                                              {"vocab", m.vocab}}};
  for (const auto& [field, value] : positive)
    if (value <= 0)
      fail_layout(ErrorCode::kOutOfRange, {fmt::format("model.{}", field)}, "model.{} must be positive, got {}", field,
                  value);
  if (m.head_dim == 0 && m.hidden % m.heads != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.hidden", "model.heads"},
                "model.hidden ({}) is not divisible by model.heads ({}): the head size must be "
                "whole",
                m.hidden, m.heads);
  // Megatron-LM's validate_args: num_attention_heads % num_query_groups == 0.
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.kv_heads", "model.heads"},
                "model.kv_heads ({}) does not divide model.heads ({}): every key/value head "
                "serves the same number of query heads",
                m.kv_heads, m.heads);
  return m;
}

std::vector<std::string> preset_keys(const std::string& preset) {
  const Preset* found = find_preset(preset);
  if (found == nullptr) return {};
  std::vector<std::string> keys = {"model.layers", "model.hidden", "model.heads", "model.vocab"};
  if (found->kv_heads != 0) keys.emplace_back("model.kv_heads");
  if (found->ffn != 0) keys.emplace_back("model.ffn_hidden");
  if (found->head_dim != 0) keys.emplace_back("model.head_dim");
  if (found->moe.num_experts != 0)
    for (const char* key : {"model.moe.num_experts", "model.moe.router_topk", "model.moe.expert_ffn_hidden",
                            "model.moe.shared_ffn_hidden", "model.moe.first_dense_layers"})
      keys.emplace_back(key);
  if (found->llama)
    for (const char* key : {"model.mlp", "model.norm", "model.position_embedding",
                            "model.embeddings", "model.linear_bias", "model.dropout"})
      keys.emplace_back(key);
  return keys;
}

}  // namespace lynx::model
