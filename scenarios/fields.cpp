#include "scenarios/fields.hpp"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <type_traits>
#include <utility>

#include "scenarios/units.hpp"
#include "common/error.hpp"

namespace lynx {
namespace {

using units::Bound;

// Ranges of the integer fields: physical sizes with a wide margin above the largest real runs,
// so every real model and sweep fits and the products of these fields (tensor bytes, GPU and
// task counts) stay inside 64 bits. The models that set them:
constexpr int kMaxLayers = 4096;        // GPT-1T 128, Llama 3 405B 126; DeepNet trained 1000
constexpr int kMaxHidden = 131072;      // GPT-1T 25600, Llama 3 405B 16384
constexpr int kMaxHeads = 4096;         // GPT-1T 160, Llama 3 405B 128
constexpr int kMaxFfnHidden = 524288;   // 4 x kMaxHidden; Llama 3 405B 53248
constexpr int kMaxSeqLen = 1048576;     // 1M-token contexts (Llama 3.1 128k)
constexpr int kMaxVocab = 1048576;      // Llama 3 128256, Gemma 256000
constexpr int kMaxTp = 1024;            // Megatron runs use tp <= 8 (one NVLink domain), NVL72 72
constexpr int kMaxPp = 1024;            // GPT-1T pp 64 (Narayanan et al. 2021, Table 1)
constexpr int kMaxDp = 1048576;         // Llama 3 405B dp 128 on 16384 GPUs
constexpr int kMaxCp = 1024;            // Llama 3 405B cp 16 for 128k tokens (Llama 3 paper, Table 4)
constexpr int kMaxExperts = 65536;     // DeepSeek-V3 256, Qwen3 128
constexpr int kMaxMicroBatch = 65536;   // sequences per micro-batch
constexpr int kMaxGlobalBatch = 16777216;  // GPT-3 1536, Llama 3 ~2000 sequences
constexpr int kMaxNodes = 131072;       // 1M GPUs at 8 per node (largest clusters: ~25k nodes)
constexpr int kMaxGpusPerNode = 1024;   // DGX 8, GB200 NVL72 72; also bounds NICs, GPUs per switch

/// Field builders. `access` is a generic lambda `[](auto& s) -> auto& { return s.x.y; }` so one
/// accessor serves both the setter (Scenario&) and the getter (const Scenario&).
FieldDesc base(std::string key, FieldPlace place, FieldType type, std::string meaning) {
  FieldDesc f;
  f.key = std::move(key);
  f.place = place;
  f.type = type;
  f.meaning = std::move(meaning);
  return f;
}

/// An integer in [min_value, max_value]: the range is documented and checked where the value
/// is read, so every later product of these fields stays far inside 64 bits.
template <typename Access>
FieldDesc integer_field(std::string key, FieldPlace place, int min_value, int max_value,
                        std::string meaning, Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kInteger, std::move(meaning));
  f.lower_bound = fmt::format(">= {}, <= {}", min_value, max_value);
  f.set = [access, min_value, max_value](Scenario& s, std::string_view text) {
    const std::int64_t value = units::parse_integer(text);
    if (value < min_value || value > max_value)
      fail(ErrorCode::kOutOfRange, "must be between {} and {}, got {}", min_value, max_value, value);
    access(s) = static_cast<int>(value);
  };
  f.get = [access](const Scenario& s) { return std::to_string(access(s)); };
  return f;
}

template <typename Access>
FieldDesc bool_field(std::string key, FieldPlace place, std::string meaning, Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kBool, std::move(meaning));
  f.set = [access](Scenario& s, std::string_view text) { access(s) = units::parse_bool(text); };
  f.get = [access](const Scenario& s) { return std::string(access(s) ? "true" : "false"); };
  return f;
}

template <typename Access>
FieldDesc string_field(std::string key, FieldPlace place, std::string meaning, Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kString, std::move(meaning));
  f.set = [access](Scenario& s, std::string_view text) { access(s) = std::string(text); };
  f.get = [access](const Scenario& s) { return access(s); };
  return f;
}

/// One word out of a fixed list, mapped to a value of type T (an enum or a string).
template <typename T, typename Access>
FieldDesc choice_field(std::string key, FieldPlace place,
                       std::vector<std::pair<std::string, T>> map, std::string meaning,
                       Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kChoice, std::move(meaning));
  for (const auto& entry : map) f.choices.push_back(entry.first);
  f.set = [access, map, choices = f.choices](Scenario& s, std::string_view text) {
    for (const auto& [word, value] : map) {
      if (word == text) {
        access(s) = value;
        return;
      }
    }
    fail(ErrorCode::kUnknownChoice, "'{}' is not one of: {}", text, fmt::join(choices, ", "));
  };
  f.get = [access, map](const Scenario& s) {
    for (const auto& [word, value] : map) {
      if (value == access(s)) return word;
    }
    fail(ErrorCode::kInternal, "internal: value of a choice field has no name");
  };
  return f;
}

/// The choices of an enum whose scenario-file names are `names`, indexed by the enum.
template <typename Enum, std::size_t N>
std::vector<std::pair<std::string, Enum>> enum_choices(const std::array<const char*, N>& names) {
  std::vector<std::pair<std::string, Enum>> map;
  for (std::size_t i = 0; i < N; ++i) map.emplace_back(names[i], static_cast<Enum>(i));
  return map;
}

/// A quantity with a unit, parsed by `parse` and written by `format` (both from units.hpp).
template <typename Parse, typename Format, typename Access>
FieldDesc quantity_field(std::string key, FieldPlace place, FieldType type, Bound bound,
                         std::string meaning, Parse parse, Format format, Access access) {
  FieldDesc f = base(std::move(key), place, type, std::move(meaning));
  f.lower_bound = bound == Bound::kPositive ? "> 0" : ">= 0";
  f.set = [access, parse, bound](Scenario& s, std::string_view text) {
    using Stored = std::remove_reference_t<decltype(access(s))>;
    access(s) = static_cast<Stored>(parse(text, bound));
  };
  f.get = [access, format](const Scenario& s) {
    using Raw = std::invoke_result_t<Parse, std::string_view, Bound>;
    return format(static_cast<Raw>(access(s)));
  };
  return f;
}

template <typename Access>
FieldDesc size_field(std::string key, FieldPlace place, Bound bound, std::string meaning,
                     Access access) {
  return quantity_field(std::move(key), place, FieldType::kSize, bound, std::move(meaning),
                        units::parse_size_bytes, units::format_size, access);
}

template <typename Access>
FieldDesc bandwidth_field(std::string key, FieldPlace place, Bound bound, std::string meaning,
                          Access access) {
  return quantity_field(std::move(key), place, FieldType::kBandwidth, bound, std::move(meaning),
                        units::parse_bandwidth_bytes_per_s, units::format_bandwidth, access);
}

template <typename Access>
FieldDesc time_field(std::string key, FieldPlace place, std::string meaning, Access access) {
  return quantity_field(std::move(key), place, FieldType::kTime, Bound::kNonNegative,
                        std::move(meaning), units::parse_time_ps, units::format_time, access);
}

template <typename Access>
FieldDesc flop_rate_field(std::string key, FieldPlace place, std::string meaning, Access access,
                          Bound bound = Bound::kPositive) {
  return quantity_field(std::move(key), place, FieldType::kFlopRate, bound,
                        std::move(meaning), units::parse_flop_rate_per_s, units::format_flop_rate,
                        access);
}

/// A plain number >= 0.
template <typename Access>
FieldDesc number_field(std::string key, FieldPlace place, std::string meaning, Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kNumber, std::move(meaning));
  f.lower_bound = ">= 0";
  f.set = [access](Scenario& s, std::string_view text) {
    const double value = units::parse_number(text);
    if (value < 0.0) fail(ErrorCode::kOutOfRange, "must be >= 0, got {}", text);
    access(s) = value;
  };
  f.get = [access](const Scenario& s) { return units::format_number(access(s)); };
  return f;
}

/// A ratio in (0, 1] (efficiencies: zero would mean infinitely slow).
template <typename Access>
FieldDesc ratio_field(std::string key, FieldPlace place, std::string meaning, Access access) {
  FieldDesc f = base(std::move(key), place, FieldType::kRatio, std::move(meaning));
  f.lower_bound = "> 0, <= 1";
  f.set = [access](Scenario& s, std::string_view text) {
    const double value = units::parse_ratio(text);
    if (value <= 0.0) fail(ErrorCode::kOutOfRange, "must be > 0, got '{}'", text);
    access(s) = value;
  };
  f.get = [access](const Scenario& s) { return units::format_number(access(s)); };
  return f;
}

/// A link's bandwidth and latency, under "<prefix>.bw" and "<prefix>.latency".
template <typename Access>
void add_link(std::vector<FieldDesc>& table, const std::string& prefix, const std::string& what,
              Access access) {
  table.push_back(bandwidth_field(
      prefix + ".bw", FieldPlace::kHardware, Bound::kNonNegative,
      what + ": bandwidth per direction", [access](auto& s) -> auto& {
        return access(s).bw_bytes_per_s;
      }));
  table.push_back(time_field(
      prefix + ".latency", FieldPlace::kHardware,
      what + ": latency of one traversal (a path adds its links' latencies)",
      [access](auto& s) -> auto& { return access(s).latency_ps; }));
}

/// An efficiency curve eff(w) = max * w / (w + half), under "<prefix>.max" and "<prefix>.<half>".
template <typename Access>
void add_curve(std::vector<FieldDesc>& table, const std::string& prefix, const std::string& what,
               bool half_in_bytes, Access access) {
  table.push_back(ratio_field(
      prefix + ".max", FieldPlace::kHardware,
      what + ": efficiency limit for large kernels (fraction of peak)", [access](auto& s) -> auto& {
        return access(s).max;
      }));
  if (half_in_bytes) {
    table.push_back(size_field(
        prefix + ".half_bytes", FieldPlace::kHardware, Bound::kNonNegative,
        what + ": kernel bytes at which efficiency is half its limit", [access](auto& s) -> auto& {
          return access(s).half_work;
        }));
  } else {
    table.push_back(number_field(
        prefix + ".half_flops", FieldPlace::kHardware,
        what + ": kernel FLOPs at which efficiency is half its limit", [access](auto& s) -> auto& {
          return access(s).half_work;
        }));
  }
}

/// One NCCL protocol's cost terms under "<prefix>.base", ".step_nvlink", ".step_pcie",
/// ".step_net" and ".bw_fraction"; optional in a profile (used with collective_model: nccl).
template <typename Access>
void add_nccl_protocol(std::vector<FieldDesc>& table, const std::string& prefix,
                       const std::string& what, Access access) {
  table.push_back(time_field(prefix + ".base", FieldPlace::kHardware,
                             what + ": fixed time per collective call",
                             [access](auto& s) -> auto& { return access(s).base_ps; }));
  table.push_back(time_field(prefix + ".step_nvlink", FieldPlace::kHardware,
                             what + ": latency per ring step inside an NVSwitch node",
                             [access](auto& s) -> auto& { return access(s).step_nvlink_ps; }));
  table.push_back(time_field(prefix + ".step_pcie", FieldPlace::kHardware,
                             what + ": latency per ring step over PCIe inside a node",
                             [access](auto& s) -> auto& { return access(s).step_pcie_ps; }));
  table.push_back(time_field(prefix + ".step_net", FieldPlace::kHardware,
                             what + ": latency per ring step across nodes",
                             [access](auto& s) -> auto& { return access(s).step_net_ps; }));
  table.push_back(number_field(
      prefix + ".bw_fraction", FieldPlace::kHardware,
      what + ": fraction of the ring bandwidth its wire format carries, <= 1 (0: not used)",
      [access](auto& s) -> auto& { return access(s).bw_fraction; }));
  for (std::size_t i = table.size() - 5; i < table.size(); ++i) table[i].optional_in_profile = true;
}

}  // namespace

std::string FieldDesc::scenario_key() const {
  switch (place) {
    case FieldPlace::kScenario:
      return key;
    case FieldPlace::kHardware:
    case FieldPlace::kHardwareScenario:
      return "hardware." + key;
    case FieldPlace::kProfile:
      return {};
  }
  return {};
}

std::string FieldDesc::profile_key() const {
  return in_profile() ? key : std::string();
}

std::string field_type_text(const FieldDesc& field) {
  switch (field.type) {
    case FieldType::kString:
      return "text";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kBool:
      return "true / false";
    case FieldType::kChoice:
      return fmt::format("one of {}", fmt::join(field.choices, ", "));
    case FieldType::kSize:
      return "size (e.g. 80GiB, 40GB)";
    case FieldType::kBandwidth:
      return "bandwidth (e.g. 600GB/s, 200Gb/s)";
    case FieldType::kTime:
      return "time (e.g. 1.5us, 10ns)";
    case FieldType::kFlopRate:
      return "FLOP rate (e.g. 312TFLOPS)";
    case FieldType::kNumber:
      return "number";
    case FieldType::kRatio:
      return "ratio (e.g. 0.8 or 80%)";
  }
  return {};
}

namespace {

std::vector<FieldDesc> build_scenario_field_table() {
  constexpr FieldPlace kScn = FieldPlace::kScenario;
  constexpr FieldPlace kHw = FieldPlace::kHardware;
  constexpr FieldPlace kHwScn = FieldPlace::kHardwareScenario;
  std::vector<FieldDesc> t;

  t.push_back(string_field(
      "name", kScn, "scenario name, used in results", [](auto& s) -> auto& { return s.name; }));
  t.back().default_text = "the file name without .yaml";

  // model:
  t.push_back(string_field(
      "model.preset", kScn,
      "model preset (e.g. gpt-1.3b, gpt-22b, llama3-8b; `lynxsim presets`) that fills layers, "
      "hidden, heads, kv_heads, ffn_hidden, vocab and the architecture; empty for a custom model",
      [](auto& s) -> auto& { return s.model.preset; }));
  t.back().default_text = "none (custom model)";
  t.push_back(string_field(
      "model.hf_config", kScn,
      "Hugging Face config.json (relative to the scenario file) of a dense Llama, Mistral, Qwen2 or "
      "Qwen3 model that fills the shape and architecture as a preset does (docs/models.md); "
      "explicit model keys override it; not with model.preset",
      [](auto& s) -> auto& { return s.model.hf_config; }));
  t.back().default_text = "none";
  t.push_back(integer_field(
      "model.layers", kScn, 0, kMaxLayers, "transformer layers; 0 = from the preset",
      [](auto& s) -> auto& { return s.model.layers; }));
  t.push_back(integer_field(
      "model.hidden", kScn, 0, kMaxHidden, "hidden size h; 0 = from the preset",
      [](auto& s) -> auto& { return s.model.hidden; }));
  t.push_back(integer_field(
      "model.heads", kScn, 0, kMaxHeads, "attention heads a; 0 = from the preset",
      [](auto& s) -> auto& { return s.model.heads; }));
  t.push_back(integer_field(
      "model.kv_heads", kScn, 0, kMaxHeads,
      "key/value heads (grouped-query attention: heads / kv_heads query heads share one K, V "
      "head); divides heads, and is divisible by parallel.tp (Megatron-Core); 0 = from the "
      "preset, else heads (multi-head attention)",
      [](auto& s) -> auto& { return s.model.kv_heads; }));
  t.push_back(integer_field(
      "model.ffn_hidden", kScn, 0, kMaxFfnHidden,
      "MLP inner size (SwiGLU: the width of gate and up); 0 = from the preset, else 4 * hidden",
      [](auto& s) -> auto& { return s.model.ffn_hidden; }));
  t.push_back(integer_field(
      "model.head_dim", kScn, 0, kMaxHidden,
      "size of one attention head (Q, K, V and the out-projection input are heads * head_dim "
      "wide); 0 = hidden / heads (Qwen3 uses 128 whatever the hidden size)",
      [](auto& s) -> auto& { return s.model.head_dim; }));
  t.back().default_text = "0 (hidden / heads)";
  t.push_back(integer_field(
      "model.seq_len", kScn, 1, kMaxSeqLen, "sequence length s in tokens",
      [](auto& s) -> auto& { return s.model.seq_len; }));
  t.push_back(integer_field(
      "model.vocab", kScn, 0, kMaxVocab, "vocabulary size V; 0 = from the preset, else 51200",
      [](auto& s) -> auto& { return s.model.vocab; }));
  t.back().default_text = "0 (the preset's; GPT presets and custom models 51200)";
  t.push_back(bool_field(
      "model.flash_attention", kScn, "fused attention kernel (no s^2 tensors saved)",
      [](auto& s) -> auto& { return s.model.flash_attention; }));
  t.push_back(choice_field<GemmPrecision>(
      "model.gemm_precision", kScn, enum_choices<GemmPrecision>(kGemmPrecisionNames),
      "precision of the layers' linear GEMMs (QKV, projection, MLP; forward, dgrad and wgrad): "
      "bf16 (16-bit), or fp8 as Transformer Engine runs them (Megatron --fp8-format hybrid) at "
      "the profile's gpu.fp8_peak, which must be set; attention core and LM head stay 16-bit",
      [](auto& s) -> auto& { return s.model.gemm_precision; }));
  // Architecture: "default" is the preset's choice, else GPT's (the first named below).
  t.push_back(choice_field<MlpKind>(
      "model.mlp", kScn, enum_choices<MlpKind>(kMlpKindNames),
      "MLP: gelu = FC1 -> GeLU -> FC2 (GPT); swiglu = gated MLP, down(silu(gate x) * up x), "
      "gate and up of width ffn_hidden run as one GEMM as Megatron-Core does (Llama)",
      [](auto& s) -> auto& { return s.model.mlp; }));
  t.back().default_text = "default (the preset's, else gelu)";
  t.push_back(choice_field<NormKind>(
      "model.norm", kScn, enum_choices<NormKind>(kNormKindNames),
      "normalisation: layernorm (gamma, beta; GPT) or rmsnorm (gamma only; Llama)",
      [](auto& s) -> auto& { return s.model.norm; }));
  t.back().default_text = "default (the preset's, else layernorm)";
  t.push_back(choice_field<PositionKind>(
      "model.position_embedding", kScn, enum_choices<PositionKind>(kPositionKindNames),
      "learned: an s x h table added to the embedding (GPT); rotary: RoPE applied to Q and K in "
      "every layer, no table (Llama)",
      [](auto& s) -> auto& { return s.model.position_embedding; }));
  t.back().default_text = "default (the preset's, else learned)";
  t.push_back(choice_field<EmbeddingTie>(
      "model.embeddings", kScn, enum_choices<EmbeddingTie>(kEmbeddingTieNames),
      "tied: the LM head reuses the input word embedding (GPT); untied: its own V x h matrix "
      "(Llama)",
      [](auto& s) -> auto& { return s.model.embeddings; }));
  t.back().default_text = "default (the preset's, else tied)";
  t.push_back(choice_field<LinearBias>(
      "model.linear_bias", kScn, enum_choices<LinearBias>(kLinearBiasNames),
      "biases on the QKV, out-projection, FC1 and FC2 GEMMs: true (GPT) or false (Llama, "
      "Megatron's --disable-bias-linear)",
      [](auto& s) -> auto& { return s.model.linear_bias; }));
  t.back().default_text = "default (the preset's, else true)";
  t.push_back(choice_field<Dropout>(
      "model.dropout", kScn, enum_choices<Dropout>(kDropoutNames),
      "attention and hidden dropout: true (GPT: the 1-byte masks are saved for backward) or false "
      "(Llama, Megatron's --attention-dropout 0 --hidden-dropout 0: no masks, no dropout kernel)",
      [](auto& s) -> auto& { return s.model.dropout; }));
  t.back().default_text = "default (the preset's, else true)";
  // Megatron-LM's fusion switches (model/gpt_ops.cpp, docs/host.md "Kernels per op": Variants).
  t.push_back(bool_field(
      "model.gradient_accumulation_fusion", kScn,
      "the weight-gradient GEMMs accumulate into the main gradient (Megatron's default); false "
      "(--no-gradient-accumulation-fusion): each writes a fresh 16-bit gradient that one more "
      "memory-bound kernel per weight tensor and micro-batch adds into the gradient buffer",
      [](auto& s) -> auto& { return s.model.gradient_accumulation_fusion; }));
  t.push_back(bool_field(
      "model.bias_gelu_fusion", kScn,
      "FC1's bias + GeLU as one kernel (Megatron's default); false (--no-bias-gelu-fusion): "
      "F.gelu(x + bias), two kernels forward; no effect without biases or with SwiGLU",
      [](auto& s) -> auto& { return s.model.bias_gelu_fusion; }));
  t.push_back(bool_field(
      "model.bias_dropout_fusion", kScn,
      "bias + dropout + residual add as one kernel (Megatron's default); false "
      "(--no-bias-dropout-fusion): a kernel each forward (without biases and dropout, as Llama, "
      "the one residual add either way)",
      [](auto& s) -> auto& { return s.model.bias_dropout_fusion; }));
  t.push_back(bool_field(
      "model.masked_softmax_fusion", kScn,
      "Megatron's fused scale-mask-softmax kernel where it applies (Megatron's default); false "
      "(--no-masked-softmax-fusion): PyTorch's fp32 softmax path, as for shapes the kernel "
      "cannot take; no effect with flash attention",
      [](auto& s) -> auto& { return s.model.masked_softmax_fusion; }));

  // Mixture of experts (model/gpt_moe.cpp, docs/models.md "Mixture of experts").
  t.push_back(integer_field(
      "model.moe.num_experts", kScn, 0, kMaxExperts,
      "routed experts per MoE layer (Megatron --num-experts); 0 = a dense model",
      [](auto& s) -> auto& { return s.model.moe.num_experts; }));
  t.push_back(integer_field(
      "model.moe.router_topk", kScn, 0, kMaxExperts,
      "experts each token is routed to (--moe-router-topk); 0 = 2, Megatron's default",
      [](auto& s) -> auto& { return s.model.moe.router_topk; }));
  t.back().default_text = "0 (2)";
  t.push_back(integer_field(
      "model.moe.expert_ffn_hidden", kScn, 0, kMaxFfnHidden,
      "MLP inner size of one routed expert (--moe-ffn-hidden-size; SwiGLU: gate and up width); "
      "0 = model.ffn_hidden",
      [](auto& s) -> auto& { return s.model.moe.expert_ffn_hidden; }));
  t.back().default_text = "0 (ffn_hidden)";
  t.push_back(integer_field(
      "model.moe.shared_ffn_hidden", kScn, 0, kMaxFfnHidden,
      "inner size of the shared experts together, a dense MLP every token passes "
      "(--moe-shared-expert-intermediate-size: shared experts x their size); 0 = none",
      [](auto& s) -> auto& { return s.model.moe.shared_ffn_hidden; }));
  t.push_back(integer_field(
      "model.moe.layer_freq", kScn, 1, kMaxLayers,
      "every layer_freq-th layer after first_dense_layers is an MoE layer, the others dense "
      "(--moe-layer-freq k)",
      [](auto& s) -> auto& { return s.model.moe.layer_freq; }));
  t.push_back(integer_field(
      "model.moe.first_dense_layers", kScn, -1, kMaxLayers,
      "leading dense layers before the first MoE layer (DeepSeek-V3: 3); -1 = the preset's, "
      "else 0",
      [](auto& s) -> auto& { return s.model.moe.first_dense_layers; }));
  t.back().default_text = "-1 (the preset's, else 0)";
  t.push_back(number_field(
      "model.moe.capacity_factor", kScn,
      "tokens an expert takes, at most, as a multiple of the uniform share tokens * topk / "
      "experts (--moe-expert-capacity-factor; the rest are dropped); 0 = dropless",
      [](auto& s) -> auto& { return s.model.moe.capacity_factor; }));
  t.push_back(number_field(
      "model.moe.expert_imbalance", kScn,
      "tokens of the busiest expert-parallel rank over the uniform share (>= 1): its expert "
      "GEMMs and their saved activations scale with it (capped by capacity_factor)",
      [](auto& s) -> auto& { return s.model.moe.expert_imbalance; }));

  // parallel:
  t.push_back(integer_field(
      "parallel.tp", kScn, 1, kMaxTp, "tensor-parallel degree",
      [](auto& s) -> auto& { return s.parallel.tp; }));
  t.push_back(integer_field(
      "parallel.pp", kScn, 1, kMaxPp, "pipeline-parallel degree (stages)",
      [](auto& s) -> auto& { return s.parallel.pp; }));
  t.push_back(integer_field(
      "parallel.dp", kScn, 1, kMaxDp, "data-parallel degree (replicas)",
      [](auto& s) -> auto& { return s.parallel.dp; }));
  t.push_back(integer_field(
      "parallel.cp", kScn, 1, kMaxCp,
      "context-parallel degree (Megatron-Core ring attention, p2p): each rank holds seq_len / cp "
      "tokens; needs flash attention and seq_len divisible by 2 * cp",
      [](auto& s) -> auto& { return s.parallel.cp; }));
  t.push_back(integer_field(
      "parallel.ep", kScn, 1, kMaxDp,
      "expert-parallel degree (--expert-model-parallel-size): each MoE layer's routed experts "
      "are split over ep ranks; etp · ep divides tp · dp · cp, and ep divides model.moe.num_experts",
      [](auto& s) -> auto& { return s.parallel.ep; }));
  t.push_back(integer_field(
      "parallel.etp", kScn, 0, kMaxTp,
      "expert tensor-parallel degree (--expert-tensor-parallel-size): the routed experts sharded "
      "over etp GPUs; 0 = tp, Megatron-Core's default; divides model.moe.expert_ffn_hidden",
      [](auto& s) -> auto& { return s.parallel.etp; }));
  t.back().default_text = "0 (tp)";
  t.push_back(bool_field(
      "parallel.sequence_parallel", kScn,
      "Megatron sequence parallelism (LayerNorm/dropout sharded over tp)",
      [](auto& s) -> auto& { return s.parallel.sequence_parallel; }));
  t.push_back(integer_field(
      "parallel.micro_batch", kScn, 1, kMaxMicroBatch, "micro-batch size b in sequences",
      [](auto& s) -> auto& { return s.parallel.micro_batch; }));
  t.push_back(integer_field(
      "parallel.global_batch", kScn, 1, kMaxGlobalBatch,
      "global batch B in sequences; divisible by micro_batch * dp",
      [](auto& s) -> auto& { return s.parallel.global_batch; }));
  t.push_back(choice_field<ScheduleKind>(
      "parallel.schedule", kScn,
      {{"gpipe", ScheduleKind::kGpipe},
       {"1f1b", ScheduleKind::kOneFOneB},
       {"interleaved", ScheduleKind::kInterleaved},
       {"zb-h1", ScheduleKind::kZbH1}},
      "pipeline schedule (zb-h1: 1F1B with the backward split into input- and weight-gradient "
      "passes, weight passes deferred into the bubbles; Qi et al., ICLR 2024; exact mode only)", [](auto& s) -> auto& { return s.parallel.schedule; }));
  t.push_back(integer_field(
      "parallel.virtual_stages", kScn, 1, kMaxLayers,
      "model chunks per GPU; > 1 only with the interleaved schedule",
      [](auto& s) -> auto& { return s.parallel.virtual_stages; }));
  t.push_back(choice_field<PipelineExchange>(
      "parallel.pipeline_exchange", kScn,
      {{"auto", PipelineExchange::kAuto}, {"overlapped", PipelineExchange::kOverlapped}, {"blocking", PipelineExchange::kBlocking}},
      "pipeline-parallel transfers: overlapped (each send runs beside the sender's next step; the "
      "receiver waits for its input only: Megatron-Core's interleaved schedule with its default "
      "--overlap-p2p-communication) or blocking (Megatron's batch_isend_irecv, wait and "
      "torch.cuda.synchronize(): Megatron-LM's schedules through 2023 and Megatron-Core's "
      "non-interleaved 1F1B. Each exchange sends the outputs of the steps since the last one and "
      "receives the inputs of the steps up to the next; a send waits for its receiver to reach "
      "its exchange, and the next step waits for every transfer of the exchange and for all of "
      "the GPU's work; docs/schedules.md); auto: as Megatron-Core, blocking for 1f1b and "
      "overlapped for the other schedules; blocking: schedules gpipe, 1f1b and interleaved",
      [](auto& s) -> auto& { return s.parallel.pipeline_exchange; }));
  t.push_back(bool_field(
      "parallel.pipeline_scatter_gather", kScn,
      "Megatron-LM's scatter-gather of pipeline tensors (--scatter-gather-tensors-in-pipeline, its "
      "default until pipeline parallelism moved to Megatron-Core, which has none): without "
      "sequence parallelism each tensor-parallel rank sends 1/tp of the boundary tensor and the "
      "receiving stage all-gathers it over tp before the step; no effect with sequence_parallel or tp 1",
      [](auto& s) -> auto& { return s.parallel.pipeline_scatter_gather; }));
  t.push_back(integer_field(
      "parallel.first_stage_layers", kScn, 0, kMaxLayers,
      "layers on the first pipeline stage (Megatron-Core --decoder-first-pipeline-num-layers); "
      "0 = an even share: the layers first_stage_layers and last_stage_layers leave split "
      "evenly over the other stages (they must divide, and each stage's count by "
      "virtual_stages); not with recompute.partition balanced",
      [](auto& s) -> auto& { return s.parallel.first_stage_layers; }));
  t.push_back(integer_field(
      "parallel.last_stage_layers", kScn, 0, kMaxLayers,
      "layers on the last pipeline stage (Megatron-Core --decoder-last-pipeline-num-layers); "
      "0 = an even share (see parallel.first_stage_layers)",
      [](auto& s) -> auto& { return s.parallel.last_stage_layers; }));
  t.push_back(bool_field(
      "parallel.distributed_optimizer", kScn,
      "Megatron --use-distributed-optimizer: an alias of sharding optimizer (ZeRO-1); with "
      "sharding set too, the higher level applies",
      [](auto& s) -> auto& { return s.parallel.distributed_optimizer; }));
  t.push_back(choice_field<Sharding>(
      "parallel.sharding", kScn, enum_choices<Sharding>(kShardingNames),
      "what data parallelism shards over the shard group: none (replicated, gradient "
      "all-reduce); optimizer (ZeRO-1: Adam state and fp32 main weights; gradients "
      "reduce-scattered, parameters all-gathered after the step); gradients (ZeRO-2: also the "
      "fp32 main gradients, reduce-scattered per bucket every micro-batch); full (ZeRO-3 / "
      "FSDP: also the 16-bit parameters, each layer's all-gathered before its forward and again "
      "before its backward, one layer prefetched, gradients reduce-scattered per layer every "
      "micro-batch)",
      [](auto& s) -> auto& { return s.parallel.sharding; }));
  t.push_back(choice_field<ShardGroup>(
      "parallel.shard_group", kScn, {{"dp", ShardGroup::kDp}, {"node", ShardGroup::kNode}},
      "ranks a sharded level shards over: every dp rank, or the dp ranks of one node (hybrid "
      "sharding, HSDP: reduce-scatter and all-gather inside the node, the gradient shard "
      "all-reduced across the nodes' replicas)",
      [](auto& s) -> auto& { return s.parallel.shard_group; }));
  t.push_back(bool_field(
      "parallel.fp32_main_grads", kScn,
      "gradients accumulate and are reduced over dp in fp32 (Megatron's bf16 default, "
      "--accumulate-allreduce-grads-in-fp32); false: 16-bit gradients cast to fp32 in the "
      "optimizer step (fp16 Megatron, DeepSpeed)",
      [](auto& s) -> auto& { return s.parallel.fp32_main_grads; }));
  t.push_back(choice_field<DpOverlap>(
      "parallel.dp_overlap", kScn, {{"bucketed", DpOverlap::kBucketed}, {"end", DpOverlap::kEnd}},
      "gradient all-reduce: per bucket overlapped with backward, or all at the end",
      [](auto& s) -> auto& { return s.parallel.dp_overlap; }));
  t.push_back(size_field(
      "parallel.dp_bucket", kScn, Bound::kPositive, "gradient bucket size for bucketed dp_overlap",
      [](auto& s) -> auto& { return s.parallel.dp_bucket_bytes; }));
  t.push_back(bool_field(
      "parallel.tp_comm_overlap", kScn,
      "Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers; needs "
      "sequence_parallel): each SP all-gather before QKV / FC1 and reduce-scatter after "
      "out-proj / FC2, and the backward all-gathers before the out-proj / FC2 dgrad, run as "
      "tp_comm_overlap_chunks chunks pipelined with the GEMM's row chunks",
      [](auto& s) -> auto& { return s.parallel.tp_comm_overlap; }));
  t.push_back(integer_field(
      "parallel.tp_comm_overlap_chunks", kScn, 0, kMaxTp,
      "chunks (row splits of the GEMM, 1/chunks of the collective each) per overlapped TP "
      "collective with tp_comm_overlap; 0: tp (Transformer Engine's ring-exchange split); "
      "must divide seq_len * micro_batch",
      [](auto& s) -> auto& { return s.parallel.tp_comm_overlap_chunks; }));
  t.back().default_text = "0 (tp)";
  t.push_back(bool_field(
      "parallel.overlap_param_gather", kScn,
      "Megatron --overlap-param-gather (needs distributed_optimizer): the bf16 parameter "
      "all-gather runs per bucket (dp_bucket) at the start of the iteration on the dp stream, "
      "each bucket's layers waiting for it at their first forward, instead of after the "
      "optimizer step",
      [](auto& s) -> auto& { return s.parallel.overlap_param_gather; }));

  // hardware: the profile selectors and the cluster size (scenario only).
  t.push_back(string_field(
      "profile", kHwScn, "built-in hardware profile to start from (see the list below)",
      [](auto& s) -> auto& { return s.hardware.profile; }));
  t.back().selects_profile = true;
  t.back().default_text = "required (or profile_file)";
  // Written back only for built-in profiles: a profile read from a file is named by its path.
  t.back().get = [](const Scenario& s) {
    return s.hardware.profile_file.empty() ? s.hardware.profile : std::string();
  };
  t.push_back(string_field(
      "profile_file", kHwScn, "hardware profile file to start from, relative to the scenario file",
      [](auto& s) -> auto& { return s.hardware.profile_file; }));
  t.back().selects_profile = true;
  t.back().default_text = "none";
  t.push_back(integer_field(
      "nodes", kHwScn, 1, kMaxNodes, "nodes in the cluster",
      [](auto& s) -> auto& { return s.hardware.nodes; }));

  // Profile fields (in a scenario: under hardware:, overriding the profile).
  t.push_back(string_field(
      "name", FieldPlace::kProfile, "profile name",
      [](auto& s) -> auto& { return s.hardware.profile; }));
  t.back().default_text = "the file name without .yaml";
  {
    FieldDesc inherit = base(
        "base", FieldPlace::kProfile, FieldType::kString,
        "built-in profile this file starts from: every field the file does not give is the base's "
        "(e.g. base: dgx-a100-80gb, then only what differs); without base the file must give "
        "every field but name");
    inherit.selects_profile = true;
    inherit.default_text = "none";
    // Resolved by the loader before any other field. A loaded profile is complete, so nothing
    // is written back.
    inherit.set = [](Scenario&, std::string_view) {};
    inherit.get = [](const Scenario&) { return std::string(); };
    t.push_back(std::move(inherit));
  }
  t.push_back(string_field(
      "source", kHw, "where the profile's numbers come from",
      [](auto& s) -> auto& { return s.hardware.source; }));
  t.push_back(string_field(
      "gpu.name", kHw, "GPU model, e.g. A100-SXM4-80GB",
      [](auto& s) -> auto& { return s.hardware.gpu_name; }));
  t.push_back(flop_rate_field(
      "gpu.peak", kHw, "dense bf16/fp16 tensor-core peak per GPU",
      [](auto& s) -> auto& { return s.hardware.peak_flops_per_s; }));
  t.push_back(flop_rate_field(
      "gpu.fp8_peak", kHw,
      "dense FP8 tensor-core peak per GPU, for model.gemm_precision fp8 (0: no FP8 tensor cores)",
      [](auto& s) -> auto& { return s.hardware.fp8_peak_flops_per_s; }, Bound::kNonNegative));
  t.back().optional_in_profile = true;
  t.push_back(bandwidth_field(
      "gpu.hbm_bw", kHw, Bound::kPositive, "HBM bandwidth per GPU",
      [](auto& s) -> auto& { return s.hardware.hbm_bw_bytes_per_s; }));
  t.push_back(size_field(
      "gpu.memory", kHw, Bound::kPositive, "HBM capacity per GPU",
      [](auto& s) -> auto& { return s.hardware.memory_bytes; }));
  t.push_back(size_field(
      "gpu.reserve", kHw, Bound::kNonNegative,
      "memory not available to tensors (CUDA context, workspaces, "
      "fragmentation); < gpu.memory",
      [](auto& s) -> auto& { return s.hardware.memory_reserve_bytes; }));
  t.push_back(time_field(
      "gpu.kernel_launch", kHw, "overhead added to every kernel",
      [](auto& s) -> auto& { return s.hardware.kernel_launch_ps; }));
  t.push_back(time_field(
      "gpu.host_kernel", kHw,
      "host (CPU) time per launched CUDA kernel (framework dispatch + launch); an op costs its "
      "Megatron kernel count times this (docs/host.md). Each GPU's host thread issues its tasks "
      "in program order and a task cannot start before its issue (0 with gpu.host_collective and "
      "gpu.host_gemm 0: no host model)",
      [](auto& s) -> auto& { return s.hardware.host_kernel_ps; }));
  t.back().optional_in_profile = true;
  t.push_back(time_field(
      "gpu.host_collective", kHw,
      "host time of one collective call or pipeline send/recv beyond its one NCCL kernel "
      "(torch.distributed + NCCL enqueue), separate from link latency",
      [](auto& s) -> auto& { return s.hardware.host_collective_ps; }));
  t.back().optional_in_profile = true;
  t.push_back(time_field(
      "gpu.host_gemm", kHw,
      "host time of one GEMM call beyond its kernels' gpu.host_kernel: each forward, input-gradient "
      "or weight-gradient task of a GEMM or attention op (cuBLAS heuristics, workspace, autograd "
      "wrapper; docs/host.md). Any of the three host keys > 0 turns the host model on",
      [](auto& s) -> auto& { return s.hardware.host_gemm_ps; }));
  t.back().optional_in_profile = true;
  add_curve(
      t, "gpu.gemm_efficiency", "GEMMs", false, [](auto& s) -> auto& { return s.hardware.gemm; });
  add_curve(
      t, "gpu.attention_efficiency", "attention (batched QK^T, .V or flash)", false,
      [](auto& s) -> auto& { return s.hardware.attention; });
  add_curve(
      t, "gpu.memory_bound_efficiency", "memory-bound kernels (vs HBM bandwidth)", true,
      [](auto& s) -> auto& { return s.hardware.memory_bound; });
  t.push_back(number_field(
      "gpu.contention", kHw,
      "slowdown of a compute kernel per concurrent communication kernel "
      "(rate = 1 / (1 + contention * n_comm))",
      [](auto& s) -> auto& { return s.hardware.contention_factor; }));
  t.push_back(number_field(
      "gpu.comm_contention", kHw,
      "slowdown of a communication flow per compute kernel running on its sending GPU "
      "(flow rate = fair share / (1 + comm_contention * n_kernels)); 0: communication is not "
      "slowed by kernels (docs/calibration.md, \"Contention\")",
      [](auto& s) -> auto& { return s.hardware.comm_contention; }));
  t.back().optional_in_profile = true;
  t.push_back(integer_field(
      "gpus_per_node", kHw, 1, kMaxGpusPerNode, "GPUs per node",
      [](auto& s) -> auto& { return s.hardware.gpus_per_node; }));
  t.push_back(choice_field<IntraNode>(
      "node.intra", kHw,
      {{std::string(to_string(IntraNode::kNvSwitch)), IntraNode::kNvSwitch},
       {std::string(to_string(IntraNode::kPcie)), IntraNode::kPcie}},
      "how GPUs of a node talk: NVLink through NVSwitch, or PCIe only",
      [](auto& s) -> auto& { return s.hardware.intra_node; }));
  add_link(
      t, "node.nvlink", "NVLink, per GPU to the NVSwitch",
      [](auto& s) -> auto& { return s.hardware.nvlink; });
  t.push_back(integer_field(
      "node.nvlink_domain_gpus", kHw, 0, kMaxGpusPerNode,
      "GPUs of one NVLink domain, a whole number of nodes (GB200 NVL72: 72 GPUs in trays of 4): "
      "GPUs of one domain talk over NVLink through one switch fabric, and collectives inside it "
      "are NVLink collectives; 0: one node",
      [](auto& s) -> auto& { return s.hardware.nvlink_domain_gpus; }));
  t.back().optional_in_profile = true;
  add_link(
      t, "node.pcie", "PCIe, per GPU to its PCIe switch",
      [](auto& s) -> auto& { return s.hardware.pcie; });
  t.push_back(integer_field(
      "node.gpus_per_pcie_switch", kHw, 1, kMaxGpusPerNode, "GPUs sharing one PCIe switch uplink",
      [](auto& s) -> auto& { return s.hardware.gpus_per_pcie_switch; }));
  add_link(
      t, "node.pcie_host", "PCIe switch uplink to the CPU root complex",
      [](auto& s) -> auto& { return s.hardware.pcie_host; });
  t.push_back(integer_field(
      "node.nics", kHw, 1, kMaxGpusPerNode, "inter-node NICs per node (GPU i uses NIC i % nics)",
      [](auto& s) -> auto& { return s.hardware.nics_per_node; }));
  add_link(
      t, "node.nic", "one NIC into the inter-node fabric",
      [](auto& s) -> auto& { return s.hardware.nic; });
  t.push_back(ratio_field(
      "collective_efficiency", kHw, "achieved / link bandwidth of NCCL ring steps",
      [](auto& s) -> auto& { return s.hardware.collective_efficiency; }));
  t.push_back(choice_field<CollectiveModel>(
      "collective_model", kHw,
      {{std::string(to_string(CollectiveModel::kAlphaBeta)), CollectiveModel::kAlphaBeta},
       {std::string(to_string(CollectiveModel::kNccl)), CollectiveModel::kNccl}},
      "how collectives are timed: alpha-beta (one path latency per ring step) or nccl (NCCL's "
      "LL / LL128 / Simple protocols, nccl.*, the fastest per call)",
      [](auto& s) -> auto& { return s.hardware.collective_model; }));
  t.back().optional_in_profile = true;
  add_nccl_protocol(t, "nccl.ll", "NCCL LL protocol",
                    [](auto& s) -> auto& { return s.hardware.nccl.ll; });
  add_nccl_protocol(t, "nccl.ll128", "NCCL LL128 protocol",
                    [](auto& s) -> auto& { return s.hardware.nccl.ll128; });
  add_nccl_protocol(t, "nccl.simple", "NCCL Simple protocol",
                    [](auto& s) -> auto& { return s.hardware.nccl.simple; });
  t.push_back(bandwidth_field(
      "nccl.buffer_bw", kHw, Bound::kNonNegative,
      "rate of the pass over a call's buffer that its ring transfers do not hide: the whole "
      "buffer for an all-reduce, half for an all-gather, reduce-scatter or broadcast, none for "
      "send/recv (0: no pass)",
      [](auto& s) -> auto& { return s.hardware.nccl.buffer_bw_bytes_per_s; }));
  t.back().optional_in_profile = true;

  // recompute:
  std::vector<std::pair<std::string, RecomputeKind>> strategies;
  for (std::size_t k = 0; k < kRecomputeKindNames.size(); ++k)
    strategies.emplace_back(kRecomputeKindNames[k], static_cast<RecomputeKind>(k));
  t.push_back(choice_field<RecomputeKind>(
      "recompute.strategy", kScn, std::move(strategies),
      "activation recomputation strategy", [](auto& s) -> auto& { return s.recompute.strategy; }));
  t.push_back(choice_field<FullMethod>(
      "recompute.method", kScn, {{"uniform", FullMethod::kUniform}, {"block", FullMethod::kBlock}},
      "full recomputation: Megatron's recompute_method",
      [](auto& s) -> auto& { return s.recompute.method; }));
  t.push_back(integer_field(
      "recompute.num_layers", kScn, 1, kMaxLayers,
      "full recomputation: uniform = layers per recomputed chunk, block = "
      "recomputed layers per stage",
      [](auto& s) -> auto& { return s.recompute.num_layers; }));

  t.push_back(choice_field<PartitionKind>(
      "recompute.partition", kScn,
      {{"uniform", PartitionKind::kUniform}, {"balanced", PartitionKind::kBalanced}},
      "layers per pipeline stage: equal, or balanced by recomputation-aware dynamic programming "
      "(lynx-heu, lynx-opt, checkmate)",
      [](auto& s) -> auto& { return s.recompute.partition; }));
  t.push_back(integer_field(
      "recompute.solver_nodes", kScn, 1, std::numeric_limits<int>::max(),
      "node limit of each CBC pass of the lynx-opt / checkmate MILP per stage (deterministic; "
      "when it binds, the result is the best plan found and `solver_limit_bound` says so)",
      [](auto& s) -> auto& { return s.recompute.solver_node_limit; }));

  // sim:
  t.push_back(bool_field(
      "sim.exploit_symmetry", kScn,
      "simulate one TP rank and one DP replica (exact for symmetric plans)",
      [](auto& s) -> auto& { return s.sim.exploit_symmetry; }));
  t.push_back(integer_field(
      "sim.max_tasks", kScn, 1, std::numeric_limits<int>::max(),
      "refuse, before building anything, a simulation estimated to build more tasks (about "
      "250 MB and 2 s of CPU per million); raise it for a deliberately huge run",
      [](auto& s) -> auto& { return s.sim.max_tasks; }));
  t.push_back(choice_field<SimMode>(
      "sim.mode", kScn, {{"exact", SimMode::kExact}, {"fast", SimMode::kFast}},
      "exact: the event engine runs the whole iteration; fast: each pipeline step is simulated "
      "alone (cached) and the pipeline composed from them (no --trace)",
      [](auto& s) -> auto& { return s.sim.mode; }));
  t.push_back(bool_field(
      "sim.fast_forward", kScn,
      "skip 1F1B steady-state periods (or cycles of up to 4 periods) proven to repeat; where it applies (1F1B, a fixed plan, no host "
      "model, no --trace) only warm-up, 8 (then 16, 32) steady pairs and cool-down are built (same results and "
      "events; the event fingerprint differs)",
      [](auto& s) -> auto& { return s.sim.fast_forward; }));
  t.push_back(bool_field(
      "sim.fast_screening", kScn,
      "exact mode: lynx-heu, lynx-opt and checkmate rank their narrower alternatives in fast mode "
      "and run in the engine only those that may beat the plan found (same result, fewer runs; "
      "not with zb-h1, which fast mode does not simulate, nor with gpu.comm_contention > 0, which it "
      "models only within each step)",
      [](auto& s) -> auto& { return s.sim.fast_screening; }));
  t.push_back(bandwidth_field(
      "sim.comm_standin.bw", kScn, Bound::kNonNegative,
      "one-GPU stand-in for communication (0: off): simulate tp rank 0 alone (pp = dp = 1) with each "
      "TP collective as device-to-host then host-to-device copies of the bytes it sends, at this bandwidth",
      [](auto& s) -> auto& { return s.sim.comm_standin_bw_bytes_per_s; }));
  t.push_back(time_field(
      "sim.comm_standin.latency", kScn, "latency of each stand-in copy (device to host, host to device)",
      [](auto& s) -> auto& { return s.sim.comm_standin_latency_ps; }));

  // Hardware fields have no default: a profile file gives each (or its base does), and a
  // scenario keeps its profile's value. Other defaults not written above are the struct
  // defaults, spelled as a file would spell them.
  const Scenario defaults{};
  for (FieldDesc& f : t) {
    if (f.place == kHw) f.default_text = f.optional_in_profile ? f.get(defaults) + " if the profile omits it" : "from the profile";
    if (f.default_text.empty()) {
      f.default_text = f.get(defaults);
      if (f.default_text.empty()) f.default_text = "empty";
    }
  }
  return t;
}

}  // namespace

const std::vector<FieldDesc>& scenario_field_table() {
  static const std::vector<FieldDesc> table = build_scenario_field_table();
  return table;
}

const std::map<std::string, FieldDesc>& scenario_fields_by_key() {
  static const std::map<std::string, FieldDesc> fields = [] {
    std::map<std::string, FieldDesc> out;
    for (const FieldDesc& field : scenario_field_table())
      if (field.in_scenario()) out.emplace(field.scenario_key(), field);
    return out;
  }();
  return fields;
}

}  // namespace lynx
