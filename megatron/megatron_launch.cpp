#include "megatron/megatron_launch.hpp"

#include "megatron/megatron_vocab.hpp"
#include "model/gpt.hpp"
#include "scenarios/scenario_loader.hpp"

#include "common/error.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>

namespace lynx::megatron {
namespace {

namespace fs = std::filesystem;

/// One option as given: `--name value`, `--name=value`, or a flag.
struct Given {
  std::string name;
  std::optional<std::string> value;  ///< none for a flag
  std::string origin;
  std::string unresolved;  ///< what the value needed and could not resolve
};

/// Options lynxsim reads, with whether they take a value (all others are ignored, and take
/// every following word that does not start with "--", as Megatron's nargs options do).
const std::map<std::string, bool>& known_options() {
  static const std::map<std::string, bool> table = {
      {"--num-layers", true}, {"--hidden-size", true}, {"--num-attention-heads", true},
      {"--ffn-hidden-size", true}, {"--seq-length", true}, {"--encoder-seq-length", true},
      {"--max-position-embeddings", true}, {"--micro-batch-size", true},
      {"--global-batch-size", true}, {"--tensor-model-parallel-size", true},
      {"--pipeline-model-parallel-size", true}, {"--num-layers-per-virtual-pipeline-stage", true},
      {"--num-virtual-stages-per-pipeline-rank", true}, {"--sequence-parallel", false},
      {"--recompute-granularity", true}, {"--recompute-method", true},
      {"--recompute-num-layers", true}, {"--recompute-activations", false},
      {"--use-distributed-optimizer", false}, {"--use-flash-attn", false},
      {"--attention-backend", true}, {"--overlap-grad-reduce", false}, {"--bf16", false},
      {"--fp16", false}, {"--vocab-size", true}, {"--make-vocab-size-divisible-by", true},
      {"--tokenizer-type", true}, {"--num-query-groups", true}, {"--group-query-attention", false},
      {"--context-parallel-size", true}, {"--cp-comm-type", true}, {"--expert-model-parallel-size", true},
      {"--num-experts", true}, {"--normalization", true}, {"--position-embedding-type", true},
      {"--use-rotary-position-embeddings", false}, {"--attention-dropout", true},
      {"--hidden-dropout", true},
      {"--swiglu", false}, {"--untie-embeddings-and-output-weights", false},
      {"--disable-bias-linear", false}, {"--tp-comm-overlap", false}, {"--overlap-param-gather", false},
      {"--no-gradient-accumulation-fusion", false}, {"--no-bias-gelu-fusion", false},
      {"--no-bias-dropout-fusion", false}, {"--no-masked-softmax-fusion", false},
      {"--kv-channels", true}, {"--moe-router-topk", true}, {"--expert-tensor-parallel-size", true}, {"--moe-ffn-hidden-size", true},
      {"--moe-shared-expert-intermediate-size", true}, {"--moe-layer-freq", true},
      {"--moe-expert-capacity-factor", true}, {"--moe-grouped-gemm", false}, {"--moe-token-dispatcher-type", true},
      // Refused whenever given: lynxsim has no model for them (reason below).
      {"--squared-relu", false}, {"--distribute-saved-activations", false},
      {"--fp8-format", true}, {"--multi-latent-attention", false},
      {"--decoder-first-pipeline-num-layers", true}, {"--decoder-last-pipeline-num-layers", true},
      {"--account-for-embedding-in-pipeline-split", false},
      {"--account-for-loss-in-pipeline-split", false}, {"--pipeline-model-parallel-layout", true},
      {"--pipeline-model-parallel-split-rank", true},
      {"--use-torch-fsdp2", false}, {"--use-megatron-fsdp", false}, {"--use-custom-fsdp", false},
      {"--data-parallel-sharding-strategy", true}, {"--no-overlap-p2p-communication", false},
  };
  return table;
}

/// Why an option is refused whenever it is given.
const std::map<std::string, std::string>& not_modelled() {
  static const std::map<std::string, std::string> table = {
      {"--squared-relu", "lynxsim's MLP activation is GeLU or SwiGLU"},
      {"--distribute-saved-activations", "lynxsim keeps full recomputation's layer inputs on every TP rank"},
      {"--multi-latent-attention", "lynxsim's attention is multi-head attention"},
      {"--account-for-embedding-in-pipeline-split", "lynxsim splits layers over stages evenly, by --decoder-first/last-pipeline-num-layers or by recompute.partition"},
      {"--account-for-loss-in-pipeline-split", "lynxsim splits layers over stages evenly, by --decoder-first/last-pipeline-num-layers or by recompute.partition"},
      {"--pipeline-model-parallel-layout", "lynxsim splits layers over stages evenly, by --decoder-first/last-pipeline-num-layers or by recompute.partition"},
      {"--pipeline-model-parallel-split-rank", "lynxsim models decoder-only GPT"},
  };
  return table;
}

[[noreturn]] void refuse_not_modelled(const Given& g, const std::string& why) {
  fail(ErrorCode::kNotModelled, "{}: {}{}: not modelled by lynxsim yet: {}", g.origin, g.name,
       g.value ? " " + *g.value : std::string(), why);
}

/// Reads words into options; the same option twice must say the same.
class Options {
 public:
  Options(const std::vector<LaunchWord>& words, const std::string& label) : label_(label) {
    const Given* previous = nullptr;
    bool taking_values = false;  // after an ignored option: its values
    for (std::size_t k = 0; k < words.size(); ++k) {
      const LaunchWord& w = words[k];
      if (w.text.rfind("--", 0) != 0 || w.text.size() == 2) {
        if (taking_values) continue;
        if (!w.unresolved.empty())
          fail(ErrorCode::kBadLaunchLine, "{}: {} cannot be resolved{}; {}", w.origin, w.unresolved,
               previous ? " (after " + previous->name + ")" : std::string(), kResolveHint);
        fail(ErrorCode::kBadLaunchLine, "{}: unexpected word '{}'{}: Megatron-LM arguments are --name value, --name=value "
             "or --flag", w.origin, w.text, previous ? " after " + previous->name : std::string());
      }
      Given g;
      g.origin = w.origin;
      const std::size_t eq = w.text.find('=');
      g.name = w.text.substr(0, eq);
      std::replace(g.name.begin() + 2, g.name.end(), '_', '-');  // argparse accepts both
      const auto known = known_options().find(g.name);
      if (known == known_options().end()) {
        if (std::find(ignored_.begin(), ignored_.end(), g.name) == ignored_.end())
          ignored_.push_back(g.name);
        taking_values = true;
        previous = nullptr;
        continue;
      }
      taking_values = false;
      if (eq != std::string::npos) {
        if (!known->second) fail(ErrorCode::kBadLaunchLine, "{}: {} is a flag and takes no value", w.origin, g.name);
        g.value = w.text.substr(eq + 1);
        g.unresolved = w.unresolved;
      } else if (known->second) {
        if (k + 1 >= words.size() || words[k + 1].text.rfind("--", 0) == 0)
          fail(ErrorCode::kBadLaunchLine, "{}: {} needs a value", w.origin, g.name);
        ++k;
        g.value = words[k].text;
        g.unresolved = words[k].unresolved;
        g.origin = w.origin;
      } else if (!w.unresolved.empty()) {
        fail(ErrorCode::kBadLaunchLine, "{}: {} cannot be resolved; {}", w.origin, w.unresolved, kResolveHint);
      }
      const auto seen = given_.find(g.name);
      if (seen != given_.end()) {
        if (seen->second.value != g.value || !seen->second.unresolved.empty() || !g.unresolved.empty())
          fail(ErrorCode::kContradictingArguments, "{}: {} is given twice with different values ({} at {}, then {})", g.origin, g.name,
               seen->second.value.value_or("flag"), seen->second.origin, g.value.value_or("flag"));
        previous = &seen->second;
        continue;
      }
      previous = &given_.emplace(g.name, std::move(g)).first->second;
    }
  }

  const Given* get(const std::string& name) const {
    const auto it = given_.find(name);
    return it == given_.end() ? nullptr : &it->second;
  }
  bool has(const std::string& name) const { return get(name) != nullptr; }
  const std::map<std::string, Given>& all() const { return given_; }
  const std::vector<std::string>& ignored() const { return ignored_; }
  const std::string& label() const { return label_; }

  /// The value of a valued option (its unresolved variable is an error now).
  std::string text(const Given& g) const {
    if (!g.unresolved.empty()) fail(ErrorCode::kBadLaunchLine, "{}: {}: {} cannot be resolved; {}", g.origin, g.name, g.unresolved, kResolveHint);
    return *g.value;
  }
  /// A positive integer value.
  int integer(const Given& g) const {
    const std::string t = text(g);
    int v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || v < 1)
      fail(ErrorCode::kWrongType, "{}: {} {}: expected a positive integer", g.origin, g.name, t);
    return v;
  }
  std::optional<int> integer(const std::string& name) const {
    const Given* g = get(name);
    return g ? std::optional<int>(integer(*g)) : std::nullopt;
  }
  /// A required integer: Megatron-LM refuses to start without it.
  int required(const std::string& name, const char* alias = nullptr) const {
    const Given* g = get(name);
    if (g == nullptr && alias != nullptr) g = get(alias);
    if (g == nullptr) fail(ErrorCode::kMissingArgument, "{}: {} is missing (Megatron-LM needs it)", label_, name);
    return integer(*g);
  }

  static constexpr const char* kResolveHint =
      "lynxsim runs nothing and reads no environment: set the variable in the script or give "
      "--megatron-env NAME=VALUE";

 private:
  std::string label_;
  std::map<std::string, Given> given_;
  std::vector<std::string> ignored_;
};

/// Collects overrides; two arguments that set one key differently contradict each other.
class Overrides {
 public:
  void set(const std::string& key, const std::string& value, const Given* from,
           const std::string& fallback_source) {
    const std::string source =
        from ? fmt::format("{}: {}{}", from->origin, from->name, from->value ? " " + *from->value : "")
             : fallback_source;
    const auto seen = values_.find(key);
    if (seen != values_.end()) {
      if (seen->second.first != value)
        fail(ErrorCode::kContradictingArguments, "{}: contradicts {} (both set {}: {} vs {})", source, seen->second.second, key, value,
             seen->second.first);
      return;
    }
    values_[key] = {value, source};
    out_.overrides.push_back(key + "=" + value);
    out_.sources[key + "=" + value] = source;
  }
  MegatronArgs& out() { return out_; }
  /// The value set for `key`, or empty.
  std::string value_of(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? std::string() : it->second.first;
  }

 private:
  std::map<std::string, std::pair<std::string, std::string>> values_;
  MegatronArgs out_;
};

/// The preset whose shape and architecture `mapped` (resolved) is, or empty; of two such (Llama
/// 2 and 3 70B differ in the vocabulary only, which Megatron-LM pads), the one with its vocabulary.
std::string preset_of(const ModelSpec& mapped) {
  const auto architecture = [](const ModelSpec& m) {
    return std::tie(m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.mlp, m.norm,
                    m.position_embedding, m.embeddings, m.linear_bias, m.dropout, m.head_dim, m.moe.num_experts);
  };
  std::string first;
  for (const std::string& name : model::preset_names()) {
    ModelSpec spec;
    spec.preset = name;
    const ModelSpec preset = model::resolve_model(spec);
    if (architecture(preset) != architecture(mapped)) continue;
    if (preset.vocab == mapped.vocab) return name;
    if (first.empty()) first = name;
  }
  return first;
}

/// Sets model.vocab; returns it.
int map_vocab(const Options& o, Overrides& set, int tp) {
  const Given* size = o.get("--vocab-size");
  const Given* tokenizer = o.get("--tokenizer-type");
  if (size == nullptr && tokenizer != nullptr && o.text(*tokenizer) != "GPT2BPETokenizer")
    fail(ErrorCode::kMissingArgument, "{}: {} {}: the vocabulary size comes from the tokenizer's files, which lynxsim does not "
         "read: give --vocab-size", tokenizer->origin, tokenizer->name, o.text(*tokenizer));
  const int divisible_by =
      o.integer("--make-vocab-size-divisible-by").value_or(kMegatronVocabDivisibleBy);
  const int vocab = size ? o.integer(*size) : kGpt2BpeVocab;
  const int padded = padded_vocab(vocab, divisible_by, tp);
  set.set("model.vocab", std::to_string(padded), size,
          fmt::format("{}: GPT-2 BPE's {} tokens padded to a multiple of {} x tp", o.label(),
                      kGpt2BpeVocab, divisible_by));
  return padded;
}

/// A choice field's override and the spec value it stands for.
template <typename Enum>
void set_choice(Overrides& set, const std::string& key, Enum value, const Given* from,
                const std::string& fallback_source, Enum& spec_value) {
  set.set(key, architecture_name(value), from, fallback_source);
  spec_value = value;
}

/// A probability argument (--attention-dropout 0.1).
double probability(const Options& o, const Given& g) {
  const std::string t = o.text(g);
  double v = -1;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v < 0 || v > 1)
    fail(ErrorCode::kBadLaunchLine, "{}: {} {}: expected a probability between 0 and 1", g.origin, g.name, t);
  return v;
}

/// Dropout: Megatron-LM's defaults are 0.1 for both; lynxsim models both on or both off.
void map_dropout(const Options& o, Overrides& set, ModelSpec& mapped) {
  const Given* attention = o.get("--attention-dropout");
  const Given* hidden = o.get("--hidden-dropout");
  const bool attention_on = attention == nullptr || probability(o, *attention) > 0;
  const bool hidden_on = hidden == nullptr || probability(o, *hidden) > 0;
  if (attention_on != hidden_on)
    refuse_not_modelled(attention_on ? *hidden : *attention,
                        "lynxsim models attention and hidden dropout both on or both off");
  set_choice(set, "model.dropout", hidden_on ? Dropout::kOn : Dropout::kOff,
             hidden ? hidden : attention,
             o.label() + ": Megatron-LM's default --attention-dropout 0.1 --hidden-dropout 0.1",
             mapped.dropout);
}

/// Mixture of experts (Megatron-Core's --num-experts and --moe-* options) into model.moe.*;
/// `mapped.moe.num_experts` says whether the model is one (for the preset it may be).
void map_experts(const Options& o, Overrides& set, ModelSpec& mapped) {
  const Given* experts = o.get("--num-experts");
  if (experts == nullptr) {
    for (const char* name : {"--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
                             "--moe-layer-freq", "--moe-expert-capacity-factor", "--moe-grouped-gemm",
                             "--moe-token-dispatcher-type", "--expert-model-parallel-size",
                             "--expert-tensor-parallel-size"})
      if (const Given* g = o.get(name); g && std::string_view(name).rfind("--expert-", 0) != 0)
        fail(ErrorCode::kIncompatibleSettings, "{}: {} needs --num-experts (Megatron-LM builds a dense model without)",
             g->origin, g->name);
    return;
  }
  mapped.moe.num_experts = o.integer(*experts);
  set.set("model.moe.num_experts", std::to_string(mapped.moe.num_experts), experts, "");
  const std::string none = o.label() + ": no ";
  set.set("model.moe.router_topk", std::to_string(o.integer("--moe-router-topk").value_or(2)), o.get("--moe-router-topk"),
          none + "--moe-router-topk (Megatron-LM's default 2)");
  set.set("model.moe.expert_ffn_hidden", std::to_string(o.integer("--moe-ffn-hidden-size").value_or(0)),
          o.get("--moe-ffn-hidden-size"), none + "--moe-ffn-hidden-size (--ffn-hidden-size, Megatron-LM's default)");
  set.set("model.moe.shared_ffn_hidden", std::to_string(o.integer("--moe-shared-expert-intermediate-size").value_or(0)),
          o.get("--moe-shared-expert-intermediate-size"), none + "--moe-shared-expert-intermediate-size (no shared experts)");
  // --moe-layer-freq: an integer k (every k-th layer), or a Python list expression that
  // Megatron-Core evaluates, e.g. "([0]*3+[1]*58)": read here as first_dense_layers when it is
  // dense layers then MoE layers.
  std::string freq = "1", first_dense = "0";
  const Given* freq_arg = o.get("--moe-layer-freq");
  if (freq_arg != nullptr) {
    const std::string text = o.text(*freq_arg);
    int dense = 0, sparse = 0;
    char tail = 0;
    if (std::sscanf(text.c_str(), "([0]*%d+[1]*%d)%c", &dense, &sparse, &tail) == 2 && dense >= 0 && sparse > 0) {
      first_dense = std::to_string(dense);
    } else if (text.starts_with('[')) {
      // A per-layer list of 0 / 1 (what lynxsim writes for leading dense layers and every k-th
      // MoE layer): read when it is that pattern.
      std::vector<int> pattern;
      std::size_t at = 1;
      while (at < text.size() && text[at] != ']') {
        if (text[at] == '0' || text[at] == '1') pattern.push_back(text[at] - '0');
        else if (text[at] != ',' && text[at] != ' ') break;
        ++at;
      }
      ModelSpec read;
      read.layers = static_cast<int>(pattern.size());
      read.moe.num_experts = 1;
      read.moe.first_dense_layers = static_cast<int>(std::find(pattern.begin(), pattern.end(), 1) - pattern.begin());
      const auto second = std::find(pattern.begin() + std::min<std::ptrdiff_t>(read.moe.first_dense_layers + 1, read.layers), pattern.end(), 1);
      read.moe.layer_freq = second == pattern.end() ? std::max(1, read.layers - read.moe.first_dense_layers)
                                                    : static_cast<int>(second - pattern.begin()) - read.moe.first_dense_layers;
      bool matches = at + 1 == text.size() && read.moe.first_dense_layers < read.layers;
      for (int l = 0; matches && l < read.layers; ++l) matches = model::is_moe_layer(read, l) == (pattern[static_cast<std::size_t>(l)] == 1);
      if (!matches)
        fail(ErrorCode::kNotModelled, "{}: --moe-layer-freq {}: lynxsim models leading dense layers and then every k-th "
             "layer MoE (a list of that pattern, '([0]*N+[1]*M)' or an integer k)", freq_arg->origin, text);
      first_dense = std::to_string(read.moe.first_dense_layers);
      freq = std::to_string(read.moe.layer_freq);
    } else {
      freq = std::to_string(o.integer(*freq_arg));  // a positive integer, or refused there
    }
  }
  set.set("model.moe.layer_freq", freq, freq_arg, none + "--moe-layer-freq (Megatron-LM's default 1: every layer)");
  set.set("model.moe.first_dense_layers", first_dense, freq_arg, none + "--moe-layer-freq (no dense layers)");
  std::string capacity = "0";
  const Given* capacity_arg = o.get("--moe-expert-capacity-factor");
  if (capacity_arg != nullptr) {
    capacity = o.text(*capacity_arg);
    double value = 0;
    const auto [end, ec] = std::from_chars(capacity.data(), capacity.data() + capacity.size(), value);
    if (ec != std::errc() || end != capacity.data() + capacity.size() || !(value > 0))
      fail(ErrorCode::kWrongType, "{}: {} {}: expected a positive number", capacity_arg->origin, capacity_arg->name, capacity);
  }
  set.set("model.moe.capacity_factor", capacity, capacity_arg,
          none + "--moe-expert-capacity-factor (dropless, Megatron-LM's default)");
  if (const Given* g = o.get("--moe-token-dispatcher-type"); g && o.text(*g) != "alltoall")
    refuse_not_modelled(*g, "lynxsim models the alltoall token dispatcher");
}

/// Model shape: layers, hidden, heads, ffn, sequence, vocabulary, architecture (GQA, SwiGLU,
/// RMSNorm, rotary, untied embeddings, biases); refuses shapes not modelled.
void map_model(const Options& o, Overrides& set, int tp) {
  const int layers = o.required("--num-layers");
  const int hidden = o.required("--hidden-size");
  const int heads = o.required("--num-attention-heads");
  const int seq = o.required("--seq-length", "--encoder-seq-length");
  const int ffn = o.integer("--ffn-hidden-size").value_or(4 * hidden);
  ModelSpec mapped;  // what the overrides below say, to name the preset it is
  mapped.layers = layers;
  mapped.hidden = hidden;
  mapped.heads = heads;
  mapped.ffn_hidden = ffn;
  mapped.kv_heads = heads;
  if (const Given* g = o.get("--group-query-attention")) {
    const Given* groups = o.get("--num-query-groups");
    mapped.kv_heads = groups ? o.integer(*groups) : 1;  // Megatron-LM's default: 1 group
    set.set("model.kv_heads", std::to_string(mapped.kv_heads), groups ? groups : g, "");
  } else {
    set.set("model.kv_heads", std::to_string(heads), nullptr,
            o.label() + ": no --group-query-attention (one key/value head per query head)");
  }
  const std::string none = o.label() + ": no ";
  set_choice(set, "model.mlp", o.has("--swiglu") ? MlpKind::kSwiglu : MlpKind::kGelu,
             o.get("--swiglu"), none + "--swiglu (GeLU MLP)", mapped.mlp);
  set_choice(set, "model.embeddings",
             o.has("--untie-embeddings-and-output-weights") ? EmbeddingTie::kUntied
                                                            : EmbeddingTie::kTied,
             o.get("--untie-embeddings-and-output-weights"),
             none + "--untie-embeddings-and-output-weights (tied)", mapped.embeddings);
  set_choice(set, "model.linear_bias",
             o.has("--disable-bias-linear") ? LinearBias::kOff : LinearBias::kOn,
             o.get("--disable-bias-linear"), none + "--disable-bias-linear (biases)",
             mapped.linear_bias);
  NormKind norm = NormKind::kLayerNorm;
  const Given* norm_arg = o.get("--normalization");
  if (norm_arg != nullptr) {
    const std::string text = o.text(*norm_arg);
    if (text == "RMSNorm")
      norm = NormKind::kRmsNorm;
    else if (text != "LayerNorm")
      fail(ErrorCode::kBadLaunchLine, "{}: {} {}: expected LayerNorm or RMSNorm", norm_arg->origin, norm_arg->name, text);
  }
  set_choice(set, "model.norm", norm, norm_arg, none + "--normalization (LayerNorm)", mapped.norm);
  PositionKind position = PositionKind::kLearned;
  const Given* position_arg = o.get("--position-embedding-type");
  if (position_arg != nullptr) {
    const std::string text = o.text(*position_arg);
    if (text == "rope")
      position = PositionKind::kRotary;
    else if (text != "learned_absolute")
      refuse_not_modelled(*position_arg, "lynxsim models learned_absolute and rope position "
                                         "embeddings");
  }
  // The deprecated flag Megatron-LM's validate_args turns into --position-embedding-type rope.
  if (const Given* g = o.get("--use-rotary-position-embeddings")) {
    if (position_arg != nullptr && position != PositionKind::kRotary)
      fail(ErrorCode::kContradictingArguments, "{}: {} contradicts {}: {} {}", g->origin, g->name, position_arg->origin,
           position_arg->name, o.text(*position_arg));
    position = PositionKind::kRotary;
    if (position_arg == nullptr) position_arg = g;
  }
  set_choice(set, "model.position_embedding", position, position_arg,
             none + "--position-embedding-type (learned_absolute)", mapped.position_embedding);

  if (const Given* g = o.get("--kv-channels")) {
    mapped.head_dim = o.integer(*g);
    // Megatron-LM's default is hidden / heads: only a different head size is a key of its own.
    if (mapped.head_dim * heads != hidden) set.set("model.head_dim", std::to_string(mapped.head_dim), g, "");
    else mapped.head_dim = 0;
  }
  mapped.vocab = map_vocab(o, set, tp);
  map_dropout(o, set, mapped);
  map_experts(o, set, mapped);
  const std::string preset = preset_of(mapped);
  if (!preset.empty()) set.set("model.preset", preset, nullptr, "the shape of preset " + preset);
  set.set("model.layers", std::to_string(layers), o.get("--num-layers"), "");
  set.set("model.hidden", std::to_string(hidden), o.get("--hidden-size"), "");
  set.set("model.heads", std::to_string(heads), o.get("--num-attention-heads"), "");
  set.set("model.ffn_hidden", std::to_string(ffn), o.get("--ffn-hidden-size"),
          fmt::format("{}: Megatron-LM's default --ffn-hidden-size 4 x --hidden-size", o.label()));
  for (const char* name : {"--seq-length", "--encoder-seq-length"})
    if (const Given* g = o.get(name)) set.set("model.seq_len", std::to_string(o.integer(*g)), g, "");
  if (const Given* g = o.get("--max-position-embeddings")) {
    const int max_pos = o.integer(*g);
    if (max_pos < seq)
      fail(ErrorCode::kIncompatibleSettings, "{}: {} {} is less than the sequence length {}: Megatron-LM refuses it", g->origin,
           g->name, max_pos, seq);
    // Rotary embeddings have no table, so a longer maximum costs nothing.
    if (max_pos > seq && position == PositionKind::kLearned)
      refuse_not_modelled(*g, fmt::format("lynxsim sizes the learned position embedding by the "
                                          "sequence length; give --max-position-embeddings {}",
                                          seq));
  }
}

/// Layout: tp, pp, virtual stages, sequence parallelism, batch sizes, DP options.
/// Sharded data parallelism: --use-torch-fsdp2 (full), or Megatron-FSDP (--use-megatron-fsdp,
/// its older name --use-custom-fsdp) with --data-parallel-sharding-strategy (default
/// optim_grads_params). Refuses what Megatron-LM's validate_args refuses (NVIDIA/Megatron-LM,
/// megatron/training/arguments.py at d98e8a64ddf34856e74b24714e3bedb2f5a39553: torch FSDP2
/// "is not supported with pipeline parallelism", "... with MCore's distributed optimizer",
/// "... with gradient accumulation fusion", "requires --untie-embeddings-and-output-weights",
/// "not supported with fp16 yet"). Sets parallel.sharding only when one of them is given;
/// returns the option that sharded gradients (they are then reduce-scattered as each backward
/// produces them, whatever --overlap-grad-reduce says), or null.
const Given* map_sharding(const Options& o, Overrides& set, int pp) {
  const Given* torch_fsdp = o.get("--use-torch-fsdp2");
  const Given* megatron_fsdp = o.get("--use-megatron-fsdp");
  if (megatron_fsdp == nullptr) megatron_fsdp = o.get("--use-custom-fsdp");
  const Given* strategy = o.get("--data-parallel-sharding-strategy");
  if (torch_fsdp && megatron_fsdp)
    fail(ErrorCode::kContradictingArguments, "{}: {} and {}: {}: two FSDP implementations at once", torch_fsdp->origin,
         torch_fsdp->name, megatron_fsdp->name, megatron_fsdp->origin);
  if (torch_fsdp) {
    auto refuse = [&](const std::string& why) {
      fail(ErrorCode::kIncompatibleSettings, "{}: --use-torch-fsdp2 {} (Megatron-LM's validate_args refuses it)",
           torch_fsdp->origin, why);
    };
    if (pp > 1) refuse(fmt::format("is not supported with pipeline parallelism (pp {})", pp));
    if (o.get("--use-distributed-optimizer")) refuse("is not supported with MCore's distributed optimizer (--use-distributed-optimizer)");
    if (!o.get("--no-gradient-accumulation-fusion"))
      refuse("is not supported with gradient accumulation fusion: add --no-gradient-accumulation-fusion");
    if (!o.get("--untie-embeddings-and-output-weights")) refuse("requires --untie-embeddings-and-output-weights");
    if (o.get("--fp16")) refuse("is not supported with --fp16 yet");
    set.set("parallel.sharding", "full", torch_fsdp, "");
    return torch_fsdp;
  }
  if (!megatron_fsdp) {
    if (strategy)
      fail(ErrorCode::kIncompatibleSettings, "{}: --data-parallel-sharding-strategy {} needs --use-megatron-fsdp "
           "(or --use-custom-fsdp): without it Megatron-LM does not shard by it", strategy->origin, strategy->value.value_or(""));
    return nullptr;
  }
  const std::string name = strategy ? strategy->value.value_or("") : "optim_grads_params";
  const std::map<std::string, std::string> levels = {
      {"no_shard", "none"}, {"optim", "optimizer"}, {"optim_grads", "gradients"}, {"optim_grads_params", "full"}};
  const auto level = levels.find(name);
  if (level == levels.end())
    fail(ErrorCode::kBadLaunchLine, "{}: --data-parallel-sharding-strategy {}: expected no_shard, optim, optim_grads or "
         "optim_grads_params", strategy->origin, name);
  // Megatron-FSDP v1 turns the distributed optimizer on itself: its level is the strategy's.
  set.set("parallel.distributed_optimizer", "false", megatron_fsdp, "");
  const Given* source = strategy ? strategy : megatron_fsdp;
  set.set("parallel.sharding", level->second, source, "");
  return level->second == "gradients" || level->second == "full" ? source : nullptr;
}

void map_parallel(const Options& o, Overrides& set, std::vector<std::string>& notes) {
  MegatronArgs& out = set.out();
  out.tp = o.integer("--tensor-model-parallel-size").value_or(1);
  out.pp = o.integer("--pipeline-model-parallel-size").value_or(1);
  const Given* tp_arg = o.get("--tensor-model-parallel-size");
  const Given* pp_arg = o.get("--pipeline-model-parallel-size");
  out.layout_source = fmt::format("tp {} ({}) x pp {} ({})", out.tp,
                                  tp_arg ? tp_arg->origin : "Megatron-LM's default", out.pp,
                                  pp_arg ? pp_arg->origin : "Megatron-LM's default");
  set.set("parallel.tp", std::to_string(out.tp), tp_arg, o.label() + ": Megatron-LM's default tp 1");
  set.set("parallel.pp", std::to_string(out.pp), pp_arg, o.label() + ": Megatron-LM's default pp 1");
  // Context parallelism: Megatron-Core's ring attention over p2p send/recv (--cp-comm-type
  // p2p, its default); the all-to-all and all-gather variants and hierarchical a2a+p2p are not
  // modelled.
  const Given* cp_arg = o.get("--context-parallel-size");
  out.cp = o.integer("--context-parallel-size").value_or(1);
  if (const Given* g = o.get("--cp-comm-type"); g && o.text(*g) != "p2p")
    refuse_not_modelled(*g, "lynxsim models context parallelism's ring attention over p2p send/recv only "
                            "(--cp-comm-type p2p, Megatron-Core's default), not the a2a, allgather or "
                            "hierarchical a2a+p2p variants");
  set.set("parallel.cp", std::to_string(out.cp), cp_arg, o.label() + ": Megatron-LM's default cp 1");
  if (out.cp > 1 && cp_arg) out.layout_source += fmt::format(" x cp {} ({})", out.cp, cp_arg->origin);
  if (o.has("--num-experts")) {
    const Given* ep = o.get("--expert-model-parallel-size");
    set.set("parallel.ep", std::to_string(o.integer("--expert-model-parallel-size").value_or(1)), ep,
            o.label() + ": Megatron-LM's default --expert-model-parallel-size 1");
    const Given* etp = o.get("--expert-tensor-parallel-size");
    set.set("parallel.etp", std::to_string(o.integer("--expert-tensor-parallel-size").value_or(out.tp)), etp,
            o.label() + ": Megatron-LM's default --expert-tensor-parallel-size (= tp)");
  } else if (const Given* g = o.get("--expert-model-parallel-size"); g && o.integer(*g) > 1) {
    fail(ErrorCode::kIncompatibleSettings, "{}: {} {} needs --num-experts (a dense model has no experts to split)",
         g->origin, g->name, o.integer(*g));
  }

  // Uneven pipeline stages (Megatron-Core): layers on the first / last stage.
  const Given* uneven = nullptr;
  for (const auto& [name, key] : {std::pair{"--decoder-first-pipeline-num-layers", "parallel.first_stage_layers"},
                                  std::pair{"--decoder-last-pipeline-num-layers", "parallel.last_stage_layers"}})
    if (const Given* g = o.get(name)) {
      if (o.integer(*g) < 1)
        fail(ErrorCode::kOutOfRange, "{}: {} {}: expected at least 1 layer", g->origin, g->name, o.integer(*g));
      set.set(key, std::to_string(o.integer(*g)), g, "");
      uneven = g;
    }

  // Interleaving: chunks per GPU = (layers / pp) / layers per virtual stage.
  int chunks = 1;
  const Given* chunk_source = nullptr;
  if (const Given* g = o.get("--num-layers-per-virtual-pipeline-stage")) {
    if (uneven != nullptr)
      fail(ErrorCode::kIncompatibleSettings, "{}: {} with {} ({}): Megatron-LM refuses it (give the chunks per GPU "
           "with --num-virtual-stages-per-pipeline-rank for an uneven pipeline)",
           g->origin, g->name, uneven->name, uneven->origin);
    const int layers = o.required("--num-layers");
    const int per_chunk = o.integer(*g);
    if (layers % out.pp != 0 || (layers / out.pp) % per_chunk != 0)
      fail(ErrorCode::kIndivisibleLayout, "{}: {} {}: --num-layers {} does not split into pipeline stages of whole chunks of {} "
           "layers (pp {}): Megatron-LM refuses it",
           g->origin, g->name, per_chunk, layers, per_chunk, out.pp);
    chunks = layers / out.pp / per_chunk;
    chunk_source = g;
  }
  if (const Given* g = o.get("--num-virtual-stages-per-pipeline-rank")) {
    if (chunk_source != nullptr && o.integer(*g) != chunks)
      fail(ErrorCode::kContradictingArguments, "{}: {} {} contradicts {} ({} chunks per GPU)", g->origin, g->name, o.integer(*g),
           chunk_source->name, chunks);
    chunks = o.integer(*g);
    chunk_source = g;
  }
  set.set("parallel.schedule", chunks > 1 ? "interleaved" : "1f1b", chunk_source,
          o.label() + ": Megatron-LM's 1F1B schedule");
  set.set("parallel.virtual_stages", std::to_string(chunks), chunk_source,
          o.label() + ": one model chunk per GPU");
  // Megatron-Core's pipeline p2p (megatron/training/arguments.py at d98e8a64dd): the interleaved
  // schedule overlaps it (overlap_p2p_comm, on unless --no-overlap-p2p-communication); without
  // interleaving it is forced off, and each exchange is a batch_isend_irecv followed by
  // torch.cuda.synchronize() (batch_p2p_comm, batch_p2p_sync): lynxsim's default
  // parallel.pipeline_exchange auto does both.
  const Given* no_overlap_p2p = o.get("--no-overlap-p2p-communication");
  if (out.pp > 1 && chunks > 1 && no_overlap_p2p)
    set.set("parallel.pipeline_exchange", "blocking", no_overlap_p2p, "");
  if (chunk_source != nullptr && chunks == 1)
    notes.push_back(fmt::format("{}: {} gives one chunk per GPU: plain 1F1B", chunk_source->origin,
                                chunk_source->name));

  const Given* sp = o.get("--sequence-parallel");
  if (sp != nullptr && out.tp == 1)
    notes.push_back(fmt::format("{}: --sequence-parallel with tp 1: Megatron-LM turns it off, and "
                                "so does lynxsim", sp->origin));
  set.set("parallel.sequence_parallel", sp != nullptr && out.tp > 1 ? "true" : "false", sp,
          o.label() + ": no --sequence-parallel");

  out.micro_batch = o.required("--micro-batch-size");
  set.set("parallel.micro_batch", std::to_string(out.micro_batch), o.get("--micro-batch-size"), "");
  if (const Given* g = o.get("--global-batch-size")) {
    out.global_batch_given = true;
    set.set("parallel.global_batch", std::to_string(o.integer(*g)), g, "");
  }
  const Given* dist = o.get("--use-distributed-optimizer");
  const bool fsdp = o.get("--use-megatron-fsdp") || o.get("--use-custom-fsdp");
  if (!fsdp)
    set.set("parallel.distributed_optimizer", dist ? "true" : "false", dist,
            o.label() + ": no --use-distributed-optimizer");
  const Given* sharded_grads = map_sharding(o, set, out.pp);
  const bool shards_params = sharded_grads && set.value_of("parallel.sharding") == "full";
  const Given* overlap = sharded_grads ? sharded_grads : o.get("--overlap-grad-reduce");
  set.set("parallel.dp_overlap", overlap ? "bucketed" : "end", overlap,
          o.label() + ": no --overlap-grad-reduce (gradients all-reduced after the backward pass)");
  for (const auto& [option, key] : {std::pair{"--tp-comm-overlap", "parallel.tp_comm_overlap"},
                                     std::pair{"--overlap-param-gather", "parallel.overlap_param_gather"}}) {
    const Given* flag = o.get(option);
    if (flag && shards_params && std::string_view(option) == "--overlap-param-gather") {
      notes.push_back(fmt::format("{}: --overlap-param-gather with full sharding: lynxsim overlaps FSDP's "
                                  "per-layer parameter all-gathers by prefetch (parallel.sharding full)",
                                  flag->origin));
      flag = nullptr;
    }
    set.set(key, flag ? "true" : "false", flag, fmt::format("{}: no {}", o.label(), option));
  }
}

/// Activation recomputation.
void map_recompute(const Options& o, Overrides& set) {
  const Given* granularity = o.get("--recompute-granularity");
  const Given* activations = o.get("--recompute-activations");
  const Given* method = o.get("--recompute-method");
  const Given* layers = o.get("--recompute-num-layers");
  std::string kind = "none";
  if (granularity != nullptr) {
    kind = o.text(*granularity);
    if (kind != "full" && kind != "selective")
      fail(ErrorCode::kUnknownChoice, "{}: {} {}: expected full or selective", granularity->origin, granularity->name, kind);
  }
  if (activations != nullptr) {
    if (granularity != nullptr && kind != "selective")
      fail(ErrorCode::kContradictingArguments, "{}: --recompute-activations (selective) contradicts {}: --recompute-granularity {}",
           activations->origin, granularity->origin, kind);
    kind = "selective";
  }
  const Given* strategy_source = granularity ? granularity : activations;
  set.set("recompute.strategy", kind, strategy_source, o.label() + ": no --recompute-granularity");
  if (kind != "full") {
    for (const Given* g : {method, layers})
      if (g != nullptr)
        fail(ErrorCode::kIncompatibleSettings, "{}: {} needs --recompute-granularity full (Megatron-LM refuses it {})", g->origin,
             g->name, kind == "none" ? "without a granularity" : "with selective granularity");
    return;
  }
  if (method == nullptr)
    fail(ErrorCode::kMissingArgument, "{}: --recompute-granularity full needs --recompute-method uniform or block "
         "(Megatron-LM refuses it without)", granularity->origin);
  if (layers == nullptr)
    fail(ErrorCode::kMissingArgument, "{}: --recompute-granularity full needs --recompute-num-layers (Megatron-LM refuses it "
         "without)", granularity->origin);
  const std::string m = o.text(*method);
  if (m != "uniform" && m != "block")
    fail(ErrorCode::kUnknownChoice, "{}: {} {}: expected uniform or block", method->origin, method->name, m);
  set.set("recompute.method", m, method, "");
  const int n = o.integer(*layers);
  set.set("recompute.num_layers", std::to_string(n), layers, "");
}

/// Precision and the attention kernel.
void map_kernels(const Options& o, Overrides& set, std::vector<std::string>& notes) {
  const Given* bf16 = o.get("--bf16");
  const Given* fp16 = o.get("--fp16");
  if (bf16 != nullptr && fp16 != nullptr)
    fail(ErrorCode::kContradictingArguments, "{}: --fp16 contradicts --bf16 ({}): Megatron-LM refuses both", fp16->origin, bf16->origin);
  if (bf16 == nullptr && fp16 == nullptr)
    fail(ErrorCode::kNotModelled, "{}: neither --bf16 nor --fp16: fp32 training is not modelled by lynxsim yet (it "
         "simulates 16-bit mixed precision); add --bf16 or --fp16", o.label());

  // FP8 GEMMs (Transformer Engine): hybrid = E4M3 forward, E5M2 gradients; e4m3 everywhere.
  // Both run the GEMMs at the FP8 tensor-core rate, which is all lynxsim models of them.
  if (const Given* g = o.get("--fp8-format")) {
    const std::string format = o.text(*g);
    if (format != "hybrid" && format != "e4m3")
      fail(ErrorCode::kUnknownChoice, "{}: {} {}: expected hybrid or e4m3", g->origin, g->name, format);
    set.set("model.gemm_precision", "fp8", g, "");
  }

  // Megatron-LM's fusion switches (on unless turned off; the keys default to on).
  for (const auto& [option, key] : std::array<std::pair<const char*, const char*>, 4>{{
           {"--no-gradient-accumulation-fusion", "model.gradient_accumulation_fusion"},
           {"--no-bias-gelu-fusion", "model.bias_gelu_fusion"},
           {"--no-bias-dropout-fusion", "model.bias_dropout_fusion"},
           {"--no-masked-softmax-fusion", "model.masked_softmax_fusion"}}})
    if (const Given* g = o.get(option)) set.set(key, "false", g, "");

  const Given* flash = o.get("--use-flash-attn");
  if (flash != nullptr) set.set("model.flash_attention", "true", flash, "");
  if (const Given* g = o.get("--attention-backend")) {
    const std::string backend = o.text(*g);
    if (backend == "auto")
      notes.push_back(fmt::format("{}: --attention-backend auto: assumed a fused (flash) attention "
                                  "kernel, what Megatron-LM picks with Transformer Engine or "
                                  "flash-attn installed", g->origin));
    if (backend != "auto" && backend != "flash" && backend != "fused" && backend != "unfused" &&
        backend != "local")
      fail(ErrorCode::kUnknownChoice, "{}: {} {}: expected flash, fused, unfused, local or auto", g->origin, g->name, backend);
    set.set("model.flash_attention", backend == "unfused" || backend == "local" ? "false" : "true",
            g, "");
  }
  if (!o.has("--attention-backend") && flash == nullptr)
    set.set("model.flash_attention", "false", nullptr, o.label() + ": no --use-flash-attn");
}

}  // namespace

MegatronArgs map_megatron_args(const std::vector<LaunchWord>& words, const std::string& label) {
  const Options o(words, label);
  for (const auto& [name, why] : not_modelled())
    if (const Given* g = o.get(name)) refuse_not_modelled(*g, why);
  Overrides set;
  std::vector<std::string> notes;
  map_parallel(o, set, notes);
  map_model(o, set, set.out().tp);
  map_recompute(o, set);
  map_kernels(o, set, notes);
  if (const Given* g = o.get("--num-query-groups"); g && !o.has("--group-query-attention"))
    notes.push_back(fmt::format("{}: --num-query-groups without --group-query-attention: "
                                "Megatron-LM ignores it", g->origin));
  MegatronArgs out = std::move(set.out());
  out.notes = std::move(notes);
  out.ignored = o.ignored();
  return out;
}

std::map<std::string, std::string> parse_megatron_env(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : entries) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      fail(ErrorCode::kInvalidOption, "--megatron-env {}: expected NAME=VALUE", entry);
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

namespace {

/// "LABEL: --set key=value" in a loader message, replaced by the argument behind the override.
std::string name_the_argument(std::string message, const std::string& label,
                              const std::map<std::string, std::string>& sources) {
  for (const auto& [override_text, source] : sources) {
    const std::string written = fmt::format("{}: --set {}:", label, override_text);
    const std::size_t at = message.find(written);
    if (at != std::string::npos) return message.replace(at, written.size(), source + ":");
  }
  return message;
}

}  // namespace

MegatronScenario load_megatron_scenario(const MegatronRequest& request) {
  const MegatronArgs args =
      map_megatron_args(launch_words(request.text, request.label, request.env), request.label);
  if (request.profile.empty() == request.profile_file.empty())
    fail(ErrorCode::kMissingArgument, "{}: give the hardware with --profile NAME (built-in: {}) or --profile-file FILE, one "
         "of them", request.label, fmt::join(builtin_profile_names(), ", "));
  const HardwareSpec hardware = request.profile.empty()
                                    ? load_hardware_profile_file(request.profile_file)
                                    : builtin_hardware_profile(request.profile);
  const int model_parallel = args.tp * args.cp * args.pp;
  const int gpus = request.gpus > 0 ? request.gpus : model_parallel;
  if (gpus % model_parallel != 0)
    fail(ErrorCode::kIndivisibleLayout, "--gpus {}: not divisible by {} = {} GPUs per model replica", gpus, args.layout_source,
         model_parallel);
  const int per_node = hardware.gpus_per_node;
  if (gpus > per_node && gpus % per_node != 0)
    fail(ErrorCode::kIndivisibleLayout, "--gpus {}: not a whole number of nodes of {} GPUs (hardware profile {})", gpus, per_node,
         hardware.profile);
  const int dp = gpus / model_parallel;
  const int nodes = gpus > per_node ? gpus / per_node : 1;

  std::vector<std::string> overrides = args.overrides;
  std::map<std::string, std::string> sources = args.sources;
  const auto add = [&](const std::string& text, const std::string& source) {
    overrides.push_back(text);
    sources[text] = source;
  };
  add(fmt::format("parallel.dp={}", dp),
      fmt::format("--gpus {}: data parallel {} = GPUs / ({})", gpus, dp, args.layout_source));
  add(fmt::format("hardware.nodes={}", nodes),
      fmt::format("--gpus {}: {} node(s) of {} GPUs", gpus, nodes, per_node));
  if (!args.global_batch_given)
    add(fmt::format("parallel.global_batch={}", args.micro_batch * dp),
        fmt::format("{}: no --global-batch-size: Megatron-LM's default, micro-batch {} x dp {}",
                    request.label, args.micro_batch, dp));
  overrides.insert(overrides.end(), request.overrides.begin(), request.overrides.end());

  YAML::Emitter base;
  base << YAML::BeginMap << YAML::Key << "name" << YAML::Value
       << (request.label == "--megatron-args" ? std::string("megatron-args")
                                              : fs::path(request.label).stem().string());
  base << YAML::Key << "hardware" << YAML::Value << YAML::BeginMap;
  if (request.profile.empty()) {
    base << YAML::Key << "profile_file" << YAML::Value << hardware.profile_file;
  } else {
    base << YAML::Key << "profile" << YAML::Value << request.profile;
  }
  base << YAML::EndMap << YAML::EndMap;
  try {
    MegatronScenario out{model::load_scenario_text(base.c_str(), request.label, overrides), {}};
    if (!args.ignored.empty())
      out.warnings.push_back(fmt::format(
          "Megatron-LM arguments ignored (no effect on the simulated iteration, or unknown to "
          "lynxsim): {}", fmt::join(args.ignored, " ")));
    out.warnings.insert(out.warnings.end(), args.notes.begin(), args.notes.end());
    return out;
  } catch (const Error& e) {
    throw Error(e.code(), name_the_argument(e.what(), request.label, sources));
  }
}

}  // namespace lynx::megatron
