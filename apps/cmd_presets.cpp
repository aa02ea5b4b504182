// `lynxsim presets`: the GPT presets model.preset accepts, with their shapes and parameter
// counts (model/gpt.cpp's table, read through resolve_model).
#include "apps/cli.hpp"
#include "model/gpt.hpp"

#include <fmt/format.h>

namespace lynx::apps {

int cmd_presets(const std::vector<std::string>& argv) {
  po::options_description desc("presets options");
  desc.add_options()("help,h", "show this help");
  if (!parse_options(argv, desc, {}, "usage: lynxsim presets   (the GPT presets and their shapes)"))
    return 0;
  const ModelSpec defaults{};
  fmt::print("{:<10} {:>6} {:>6} {:>5} {:>6} {:>7} {:>6} {:>11}\n", "preset", "layers", "hidden",
             "heads", "ffn", "seq_len", "vocab", "parameters");
  for (const std::string& name : model::preset_names()) {
    ModelSpec spec = defaults;
    spec.preset = name;
    const ModelSpec m = model::resolve_model(spec);
    fmt::print("{:<10} {:>6} {:>6} {:>5} {:>6} {:>7} {:>6} {:>10.2f}B\n", name, m.layers, m.hidden,
               m.heads, m.ffn_hidden, m.seq_len, m.vocab, model::parameter_count(m) / 1e9);
  }
  fmt::print(
      "\nA preset fixes layers, hidden, heads and ffn (4 x hidden); seq_len and vocab are the\n"
      "scenario's model.seq_len and model.vocab (defaults shown), and the parameter count\n"
      "(Narayanan et al. 2021, Eq. 2) uses them. Any model.* key in a scenario overrides the\n"
      "preset's value (lynxsim fields model).\n");
  return 0;
}

}  // namespace lynx::apps
