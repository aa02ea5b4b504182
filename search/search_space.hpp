#pragma once
/// The configurations `lynxsim best` considers: every tp·pp·dp = N layout with the other plan
/// knobs, in one documented order (the search's tie-break key). Each is the base scenario with
/// `--set` overrides, read and checked by the one loader like a sweep point.
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::search {

/// One point of the search space (the plan knobs it sets on the base scenario).
struct Candidate {
  int tp = 1, pp = 1, dp = 1;
  int ep = 1;            ///< expert parallelism (a divisor of dp and of the experts)
  bool moe = false;      ///< the model has experts: parallel.ep is one of the overrides
  int micro_batch = 1;
  int virtual_stages = 1;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool flash_attention = false;
  std::string strategy;  ///< recompute.strategy

  /// The overrides that make this candidate from the base (schedule interleaved iff v > 1).
  std::vector<std::string> overrides() const;
  /// "tp 2 pp 4 dp 8, mb 2, v 2, sp, dist-opt, flash" (what is on only).
  std::string layout_text() const;
};

/// The axes searched (defaults: the space).
struct SearchSpace {
  int gpus = 0;
  std::vector<int> micro_batches = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int> virtual_stages = {1, 2, 3, 4};
  std::vector<bool> sequence_parallel = {false, true};
  std::vector<bool> distributed_optimizer = {false, true};
  std::vector<bool> flash_attention = {false, true};
  std::vector<std::string> strategies = {"none", "full", "selective", "checkmate", "lynx-heu"};
  /// The base model's routed experts (0: dense): ep takes every divisor of dp that divides it.
  int num_experts = 0;
};

/// Every candidate in key order: tp, pp (ascending; dp = N / (tp·pp)), ep (ascending; MoE
/// models only), micro-batch, virtual
/// stages, sp, distributed optimizer, flash attention (off before on), strategy (as listed).
/// Knobs that change nothing are not enumerated twice: sp only with tp > 1, the distributed
/// optimizer only with dp > 1, v > 1 only with pp > 1.
std::vector<Candidate> enumerate_candidates(const SearchSpace& space);

}  // namespace lynx::search
