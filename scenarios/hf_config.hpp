#pragma once
/// Model shapes from a Hugging Face config.json (scenario key model.hf_config, `lynxsim run
/// --hf-config`): dense decoder-only models of the Llama family (model_type llama, mistral,
/// qwen2, qwen3), turned into the model.* values a preset would give. JSON is YAML 1.2 flow
/// style, so yaml-cpp reads the file.
#include <string>
#include <vector>

namespace lynx {

/// One model.* value a config.json gives.
struct HfModelValue {
  std::string key;     ///< scenario key, e.g. "model.hidden"
  std::string text;    ///< its value as a scenario file would spell it
  std::string origin;  ///< "FILE:LINE:COL" of the JSON field (of the file for derived values)
};

/// The model.* values of the config.json at `path`: layers, hidden, heads, kv_heads,
/// ffn_hidden, vocab (num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
/// (default: heads), intermediate_size, vocab_size), embeddings (tie_word_embeddings) and the
/// Llama-family architecture (SwiGLU from hidden_act silu with the gated MLP, RMSNorm, rotary,
/// no linear biases, dropout only when attention_dropout > 0). max_position_embeddings is not
/// used: it is the inference context, not a training sequence length (docs/models.md).
/// Throws lynx::Error naming FILE:LINE:COL and the JSON field for a mixture-of-experts config,
/// an unknown model_type or architecture, an activation other than silu, active sliding-window
/// attention, a head_dim other than hidden_size / num_attention_heads, a missing or
/// non-integer shape field.
std::vector<HfModelValue> read_hf_config(const std::string& path);

/// The model.* keys read_hf_config fills (errors about them point at model.hf_config).
const std::vector<std::string>& hf_config_keys();

}  // namespace lynx
