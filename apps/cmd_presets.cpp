// `lynxsim presets`: the GPT, Llama and mixture-of-experts presets model.preset accepts, with their shapes and parameter
// counts (model/gpt_presets.cpp's table, read through resolve_model).
#include "apps/cli.hpp"
#include "model/gpt.hpp"

#include <fmt/format.h>

namespace lynx::apps {

int cmd_presets(const std::vector<std::string>& argv) {
  po::options_description desc("presets options");
  desc.add_options()("help,h", "show this help");
  if (!parse_options(argv, desc, {}, "usage: lynxsim presets   (the GPT and Llama presets and their shapes)"))
    return 0;
  const ModelSpec defaults{};
  fmt::print("{:<11} {:>6} {:>6} {:>5} {:>3} {:>6} {:>7} {:>6} {:<6} {:<9} {:<7} {:<6} {:<4} {:>11}\n",
             "preset", "layers", "hidden", "heads", "kv", "ffn", "seq_len", "vocab", "mlp", "norm",
             "pos", "embed", "bias", "parameters");
  for (const std::string& name : model::preset_names()) {
    ModelSpec spec = defaults;
    spec.preset = name;
    const ModelSpec m = model::resolve_model(spec);
    fmt::print("{:<11} {:>6} {:>6} {:>5} {:>3} {:>6} {:>7} {:>6} {:<6} {:<9} {:<7} {:<6} {:<4} {:>10.2f}B\n",
               name, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.seq_len, m.vocab,
               architecture_name(m.mlp), architecture_name(m.norm),
               architecture_name(m.position_embedding), architecture_name(m.embeddings),
               architecture_name(m.linear_bias), model::parameter_count(m) / 1e9);
  }
  fmt::print("\n{:<16} {:>7} {:>4} {:>10} {:>10} {:>11} {:>11}\n", "mixture of experts", "experts", "topk",
             "expert_ffn", "shared_ffn", "first_dense", "active");
  for (const std::string& name : model::preset_names()) {
    ModelSpec spec = defaults;
    spec.preset = name;
    const ModelSpec m = model::resolve_model(spec);
    if (!model::is_moe(m)) continue;
    fmt::print("{:<16} {:>7} {:>4} {:>10} {:>10} {:>11} {:>10.2f}B\n", name, m.moe.num_experts, m.moe.router_topk,
               m.moe.expert_ffn_hidden, m.moe.shared_ffn_hidden, m.moe.first_dense_layers,
               model::active_parameter_count(m) / 1e9);
  }
  fmt::print(
      "\nMixtures of experts (model.moe.*): parameters count every expert; active ones a token\n"
      "passes (topk routed experts). deepseek-v3's attention is multi-head attention standing in\n"
      "for its multi-head latent attention (docs/models.md).\n");
  fmt::print(
      "\nA preset fixes layers, hidden, heads, kv (key/value heads), ffn, vocab and the\n"
      "architecture (model.mlp, model.norm, model.position_embedding, model.embeddings,\n"
      "model.linear_bias); seq_len is the scenario's model.seq_len (default shown: set 4096 for\n"
      "Llama 2, 8192 for Llama 3). Parameters: every weight but the final norm (Narayanan et al.\n"
      "2021, Eq. 2 for GPT). Any model.* key in a scenario overrides the preset's value\n"
      "(lynxsim fields model).\n");
  return 0;
}

}  // namespace lynx::apps
