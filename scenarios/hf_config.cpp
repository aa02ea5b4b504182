#include "scenarios/hf_config.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "scenarios/yaml_document.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace lynx {
namespace {

/// The architectures read: model_type and its transformers class (architectures). All are
/// pre-norm decoders with RMSNorm, rotary embeddings and a gated SiLU MLP (transformers'
/// LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config); Mixtral and Qwen3-MoE replace the
/// MLP by routed SwiGLU experts (MixtralConfig, Qwen3MoeConfig).
struct KnownArchitecture {
  std::string_view model_type;
  std::string_view class_name;
  bool moe = false;
};
constexpr std::array<KnownArchitecture, 6> kKnown{{
    {"llama", "LlamaForCausalLM"},
    {"mistral", "MistralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "Qwen3ForCausalLM"},
    {"mixtral", "MixtralForCausalLM", true},
    {"qwen3_moe", "Qwen3MoeForCausalLM", true},
}};

/// Fields whose positive value makes a config a mixture of experts (Mixtral:
/// num_local_experts; Qwen2-MoE / Qwen3-MoE: num_experts; DeepSeek: n_routed_experts).
constexpr std::array<std::string_view, 3> kExpertCountFields{"num_local_experts", "num_experts",
                                                             "n_routed_experts"};

std::string joined_known() {
  std::string out;
  for (const KnownArchitecture& k : kKnown) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", k.model_type, k.class_name);
  return out;
}

class ConfigReader {
 public:
  ConfigReader(const std::string& path, YAML::Node root) : path_(path), root_(std::move(root)) {}

  std::string where(const YAML::Node& node) const { return yaml_position(path_, node.Mark()); }
  std::string file_origin() const { return path_ + ":1:1"; }

  /// The field, or an undefined node when absent or null (JSON null means "not set" in HF).
  YAML::Node field(const char* name) const {
    const YAML::Node node = root_[name];
    if (!node.IsDefined() || node.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    return node;
  }

  template <typename... Args>
  [[noreturn]] void fail_field(ErrorCode code, const YAML::Node& node, std::string_view name,
                               fmt::format_string<Args...> format, Args&&... args) const {
    fail(code, "{}: field '{}': {}", node.IsDefined() ? where(node) : file_origin(), name,
         fmt::format(format, std::forward<Args>(args)...));
  }

  std::string text_of(const YAML::Node& node, std::string_view name) const {
    if (!node.IsScalar())
      fail_field(ErrorCode::kWrongType, node, name, "expected a single value, got a {}", node.IsMap() ? "map" : "list");
    return node.Scalar();
  }

  /// A whole number >= 0 (JSON integer), or `fallback` when absent (-1: required).
  std::int64_t integer(const char* name, std::int64_t fallback = -1) const {
    const YAML::Node node = field(name);
    if (!node.IsDefined()) {
      if (fallback >= 0) return fallback;
      fail(ErrorCode::kMissingKey, "{}: field '{}': missing; a dense model's config.json gives it", file_origin(), name);
    }
    const std::string text = text_of(node, name);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0)
      fail_field(ErrorCode::kWrongType, node, name, "expected a whole number >= 0, got '{}'", text);
    return value;
  }

  bool boolean(const char* name, bool fallback) const {
    const YAML::Node node = field(name);
    if (!node.IsDefined()) return fallback;
    const std::string text = text_of(node, name);
    if (text == "true") return true;
    if (text == "false") return false;
    fail_field(ErrorCode::kWrongType, node, name, "expected true or false, got '{}'", text);
  }

  double number(const char* name, double fallback) const {
    const YAML::Node node = field(name);
    if (!node.IsDefined()) return fallback;
    const std::string text = text_of(node, name);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      fail_field(ErrorCode::kWrongType, node, name, "expected a number, got '{}'", text);
    return value;
  }

  std::string string(const char* name) const {
    const YAML::Node node = field(name);
    return node.IsDefined() ? text_of(node, name) : std::string();
  }

  void add(std::vector<HfModelValue>& out, const char* key, std::string text, const char* name) const {
    const YAML::Node node = field(name);
    out.push_back(HfModelValue{key, std::move(text), node.IsDefined() ? where(node) : file_origin()});
  }

  std::vector<HfModelValue> read() const {
    const KnownArchitecture& arch = check_architecture();
    if (!arch.moe) refuse_mixture_of_experts(arch);
    std::vector<HfModelValue> out;
    const std::int64_t heads = integer("num_attention_heads");
    const std::int64_t hidden = integer("hidden_size");
    add(out, "model.layers", std::to_string(integer("num_hidden_layers")), "num_hidden_layers");
    add(out, "model.hidden", std::to_string(hidden), "hidden_size");
    add(out, "model.heads", std::to_string(heads), "num_attention_heads");
    // transformers: num_key_value_heads None means multi-head attention (= heads).
    add(out, "model.kv_heads", std::to_string(integer("num_key_value_heads", heads)), "num_key_value_heads");
    add(out, "model.ffn_hidden", std::to_string(integer("intermediate_size")), "intermediate_size");
    add(out, "model.vocab", std::to_string(integer("vocab_size")), "vocab_size");
    // A head size other than hidden / heads (Qwen3: 128 always; Mistral-Nemo) is model.head_dim.
    if (const YAML::Node node = field("head_dim"); node.IsDefined()) {
      const std::int64_t head_dim = integer("head_dim");
      if (head_dim == 0) fail_field(ErrorCode::kOutOfRange, node, "head_dim", "must be positive");
      if (heads > 0 && head_dim * heads != hidden) add(out, "model.head_dim", std::to_string(head_dim), "head_dim");
    }
    if (arch.moe) read_experts(arch, out);
    const std::string act = string("hidden_act");
    if (!act.empty() && act != "silu" && act != "swish")
      fail_field(ErrorCode::kNotModelled, field("hidden_act"), "hidden_act",
                 "'{}': the gated MLP of these architectures is modelled with SiLU (SwiGLU) only", act);
    // transformers' four config classes default tie_word_embeddings to false.
    add(out, "model.embeddings", boolean("tie_word_embeddings", false) ? "tied" : "untied", "tie_word_embeddings");
    add(out, "model.mlp", "swiglu", "hidden_act");
    add(out, "model.norm", "rmsnorm", "rms_norm_eps");
    add(out, "model.position_embedding", "rotary", "rope_theta");
    add(out, "model.linear_bias", linear_bias() ? "true" : "false", "attention_bias");
    // Megatron's one dropout switch (attention and hidden dropout) stands for attention_dropout.
    add(out, "model.dropout", number("attention_dropout", 0.0) > 0.0 ? "true" : "false", "attention_dropout");
    refuse_sliding_window();
    return out;
  }

 private:
  /// A dense architecture's config naming experts is not what its class builds.
  void refuse_mixture_of_experts(const KnownArchitecture& arch) const {
    for (std::string_view name : kExpertCountFields) {
      const std::string key(name);
      if (!field(key.c_str()).IsDefined()) continue;
      const std::int64_t experts = integer(key.c_str());
      if (experts > 0)
        fail_field(ErrorCode::kNotModelled, field(key.c_str()), name,
                   "{} experts in a model_type {} config (a dense architecture); mixtures of experts are read "
                   "from model_type mixtral and qwen3_moe",
                   experts, arch.model_type);
    }
  }

  /// Mixtral (MixtralConfig: num_local_experts, num_experts_per_tok; every layer's experts of
  /// intermediate_size) and Qwen3-MoE (Qwen3MoeConfig: num_experts, num_experts_per_tok,
  /// moe_intermediate_size, decoder_sparse_step; mlp_only_layers dense, with the dense MLP of
  /// intermediate_size). Router options (aux loss, norm_topk_prob) do not change the cost.
  void read_experts(const KnownArchitecture& arch, std::vector<HfModelValue>& out) const {
    const bool mixtral = arch.model_type == "mixtral";
    const char* count = mixtral ? "num_local_experts" : "num_experts";
    add(out, "model.moe.num_experts", std::to_string(integer(count)), count);
    add(out, "model.moe.router_topk", std::to_string(integer("num_experts_per_tok")), "num_experts_per_tok");
    const char* expert_ffn = mixtral ? "intermediate_size" : "moe_intermediate_size";
    add(out, "model.moe.expert_ffn_hidden", std::to_string(integer(expert_ffn)), expert_ffn);
    if (mixtral) return;
    // Qwen3MoeDecoderLayer (huggingface/transformers at 16b6c53c8ec3a720bd45c1c377bf94e1d01249c5,
    // src/transformers/models/qwen3_moe/modeling_qwen3_moe.py): layer i is MoE when i is not in
    // mlp_only_layers and (i + 1) % decoder_sparse_step == 0. Leading dense layers 0 .. j−1 in
    // mlp_only_layers and a step k make every k-th layer MoE from the first such i >= j:
    // model.moe.first_dense_layers i, layer_freq k.
    const std::int64_t step = integer("decoder_sparse_step", 1);
    if (step < 1) fail_field(ErrorCode::kOutOfRange, field("decoder_sparse_step"), "decoder_sparse_step", "must be >= 1, got 0");
    const YAML::Node dense = field("mlp_only_layers");
    std::int64_t leading = 0;
    if (dense.IsDefined()) {
      if (!dense.IsSequence())
        fail_field(ErrorCode::kWrongType, dense, "mlp_only_layers", "expected a list of layer indices");
      for (const YAML::Node& entry : dense) {
        if (text_of(entry, "mlp_only_layers") != std::to_string(leading))
          fail_field(ErrorCode::kNotModelled, entry, "mlp_only_layers",
                     "dense layers other than the leading ones (0, 1, 2, …) are not modelled "
                     "(model.moe.first_dense_layers and layer_freq express leading dense layers and every "
                     "k-th MoE layer)");
        ++leading;
      }
    }
    const std::int64_t first_moe = (leading / step + 1) * step - 1;  // the first i >= leading with (i + 1) % step == 0
    add(out, "model.moe.first_dense_layers", std::to_string(first_moe),
        dense.IsDefined() && leading > 0 ? "mlp_only_layers" : "decoder_sparse_step");
    add(out, "model.moe.layer_freq", std::to_string(step), "decoder_sparse_step");
  }

  const KnownArchitecture& check_architecture() const {
    const YAML::Node type = field("model_type");
    if (!type.IsDefined())
      fail(ErrorCode::kMissingKey, "{}: field 'model_type': missing; known: {}", file_origin(), joined_known());
    const std::string model_type = text_of(type, "model_type");
    const auto known = std::find_if(kKnown.begin(), kKnown.end(),
                                    [&](const KnownArchitecture& k) { return k.model_type == model_type; });
    if (known == kKnown.end())
      fail_field(ErrorCode::kUnknownChoice, type, "model_type", "'{}' is not an architecture lynxsim reads (known: {})",
                 model_type, joined_known());
    const YAML::Node classes = field("architectures");
    if (!classes.IsDefined()) return *known;
    if (!classes.IsSequence())
      fail_field(ErrorCode::kWrongType, classes, "architectures", "expected a list of class names");
    for (const YAML::Node& entry : classes) {
      const std::string name = text_of(entry, "architectures");
      if (name != known->class_name)
        fail_field(ErrorCode::kUnknownChoice, entry, "architectures",
                   "'{}' is not the causal-LM class of model_type {} ({})", name, model_type, known->class_name);
    }
    return *known;
  }

  /// Llama (attention_bias, mlp_bias) and Qwen3 (attention_bias) give their biases, Mistral has none;
  /// Qwen2 has a QKV bias in every layer and no field for it: (h + 2·kv·head_dim) parameters
  /// per layer, under 0.01% of the model, not modelled (linear_bias false).
  bool linear_bias() const {
    const bool attention = boolean("attention_bias", false);
    const bool mlp = boolean("mlp_bias", false);  // LlamaConfig's default; the others have no MLP bias
    if (attention != mlp)
      fail_field(ErrorCode::kNotModelled, field("mlp_bias"), "mlp_bias",
                 "{} with attention_bias {}: biases on some linear layers only are not modelled", mlp, attention);
    return attention;
  }

  /// Sliding-window attention changes attention's cost; this model builds full causal attention.
  /// Qwen2 / Qwen3 switch it with use_sliding_window; Mistral has it whenever sliding_window is set.
  void refuse_sliding_window() const {
    const YAML::Node window = field("sliding_window");
    const bool active = field("use_sliding_window").IsDefined() ? boolean("use_sliding_window", false)
                                                                : window.IsDefined();
    if (active)
      fail_field(ErrorCode::kNotModelled, window.IsDefined() ? window : field("use_sliding_window"), "sliding_window",
                 "sliding-window attention is not modelled (full causal attention only)");
  }

  std::string path_;
  YAML::Node root_;
};

}  // namespace

const std::vector<std::string>& hf_config_keys() {
  static const std::vector<std::string> keys = {
      "model.layers", "model.hidden", "model.heads", "model.kv_heads", "model.ffn_hidden", "model.vocab",
      "model.embeddings", "model.mlp", "model.norm", "model.position_embedding", "model.linear_bias",
      "model.dropout", "model.head_dim", "model.moe.num_experts", "model.moe.router_topk",
      "model.moe.expert_ffn_hidden", "model.moe.layer_freq", "model.moe.first_dense_layers"};
  return keys;
}

std::vector<HfModelValue> read_hf_config(const std::string& path) {
  const YAML::Node root = load_single_document(read_text_file(path, "Hugging Face config"), path);
  if (!root.IsMap()) fail(ErrorCode::kWrongShape, "{}:1:1: expected a JSON object of config fields", path);
  return ConfigReader(path, root).read();
}

}  // namespace lynx
