#pragma once
/// The configurations `lynxsim best` considers: every tp·pp·dp = N layout with the other plan
/// knobs, in one documented order (the search's tie-break key). Each is the base scenario with
/// `--set` overrides, read and checked by the one loader like a sweep point.
#include "scenarios/scenario.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::search {

/// One point of the search space (the plan knobs it sets on the base scenario).
struct Candidate {
  int tp = 1, pp = 1, dp = 1;
  int ep = 1;            ///< expert parallelism (etp · ep divides tp · dp · cp; ep divides the experts)
  bool moe = false;      ///< the model has experts: parallel.ep is one of the overrides
  int micro_batch = 1;
  int cp = 1;  ///< context-parallel degree (written into the scenario only when > 1)
  int virtual_stages = 1;
  bool sequence_parallel = false;
  Sharding sharding = Sharding::kNone;  ///< parallel.sharding (distributed_optimizer set false)
  bool flash_attention = false;
  std::string strategy;  ///< recompute.strategy

  /// The overrides that make this candidate from the base (schedule interleaved iff v > 1).
  std::vector<std::string> overrides() const;
  /// "tp 2 pp 4 dp 8, mb 2, v 2, sp, dist-opt, flash" (what is on only; sharding gradients and
  /// full read "zero-2", "fsdp").
  std::string layout_text() const;
};

/// The axes searched (defaults: the space).
struct SearchSpace {
  int gpus = 0;
  std::vector<int> micro_batches = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int> virtual_stages = {1, 2, 3, 4};
  std::vector<bool> sequence_parallel = {false, true};
  std::vector<Sharding> sharding = {Sharding::kNone, Sharding::kOptimizer, Sharding::kFull};
  std::vector<bool> flash_attention = {false, true};
  std::vector<std::string> strategies = {"none", "full", "selective", "checkmate", "lynx-heu"};
  /// Context-parallel degrees; empty: default_context_parallel of the scenario's seq_len.
  std::vector<int> context_parallel;
  /// The base model's routed experts (0: dense): ep takes every value that divides them with
  /// etp · ep dividing tp · dp · cp (with etp = tp: every divisor of dp · cp).
  int num_experts = 0;
  /// The base's parallel.etp, kept on every candidate: 0 follows each candidate's tp, a set
  /// value stays fixed (etp is not searched).
  int expert_tp = 0;
};

/// The context-parallel degrees searched by default: 1, and with seq_len >= 8192 every cp > 1
/// dividing `gpus` with seq_len divisible by 2·cp and at least 4096 tokens per rank (shorter
/// sequences gain nothing from splitting: their activations fit, and ring blocks get small).
std::vector<int> default_context_parallel(int gpus, int seq_len);

/// Every candidate in key order: cp, tp, pp (ascending; dp = N / (tp·cp·pp)), ep (ascending;
/// MoE models only; none where a fixed etp does not divide tp · dp · cp), micro-batch, virtual stages, sp, sharding (as listed), flash attention (off
/// before on), strategy (as listed). Knobs that change nothing are not enumerated twice: sp only
/// with tp > 1, sharding other than none only with dp·cp > 1, v > 1 only with pp > 1, cp > 1
/// only with flash attention (context parallelism needs it); MoE models shard at most the
/// optimizer.
std::vector<Candidate> enumerate_candidates(const SearchSpace& space);

}  // namespace lynx::search
