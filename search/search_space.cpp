#include "search/search_space.hpp"

#include <fmt/format.h>

namespace lynx::search {

std::vector<std::string> Candidate::overrides() const {
  std::vector<std::string> sets = {
      fmt::format("parallel.tp={}", tp),
      fmt::format("parallel.pp={}", pp),
      fmt::format("parallel.dp={}", dp),
      fmt::format("parallel.micro_batch={}", micro_batch),
      fmt::format("parallel.schedule={}", virtual_stages > 1 ? "interleaved" : "1f1b"),
      fmt::format("parallel.virtual_stages={}", virtual_stages),
      fmt::format("parallel.sequence_parallel={}", sequence_parallel),
      // The candidate's level exactly: the alias would raise none to optimizer.
      "parallel.distributed_optimizer=false",
      fmt::format("parallel.sharding={}", kShardingNames[static_cast<std::size_t>(sharding)]),
      fmt::format("model.flash_attention={}", flash_attention),
      fmt::format("recompute.strategy={}", strategy),
  };
  if (cp > 1) sets.push_back(fmt::format("parallel.cp={}", cp));
  if (moe) sets.push_back(fmt::format("parallel.ep={}", ep));
  return sets;
}

std::string Candidate::layout_text() const {
  std::string out = cp > 1 ? fmt::format("tp {} cp {} pp {} dp {}, mb {}", tp, cp, pp, dp, micro_batch)
                           : fmt::format("tp {} pp {} dp {}, mb {}", tp, pp, dp, micro_batch);
  if (ep > 1) out += fmt::format(", ep {}", ep);
  if (virtual_stages > 1) out += fmt::format(", v {}", virtual_stages);
  if (sequence_parallel) out += ", sp";
  if (sharding == Sharding::kOptimizer) out += ", dist-opt";
  if (sharding == Sharding::kGradients) out += ", zero-2";
  if (sharding == Sharding::kFull) out += ", fsdp";
  if (flash_attention) out += ", flash";
  return out;
}

std::vector<int> default_context_parallel(int gpus, int seq_len) {
  constexpr int kLongSequence = 8192, kMinTokensPerRank = 4096;
  std::vector<int> out = {1};
  if (seq_len < kLongSequence) return out;
  for (int cp = 2; cp <= gpus && seq_len / cp >= kMinTokensPerRank; ++cp)
    if (gpus % cp == 0 && seq_len % (2 * cp) == 0) out.push_back(cp);
  return out;
}

std::vector<Candidate> enumerate_candidates(const SearchSpace& space) {
  std::vector<Candidate> out;
  const std::vector<int> cps = space.context_parallel.empty() ? std::vector<int>{1} : space.context_parallel;
  for (int cp : cps) {
    if (cp < 1 || space.gpus % cp != 0) continue;
    const int ranks = space.gpus / cp;  // GPUs of one context-parallel rank's tp · pp · dp
    for (int tp = 1; tp <= ranks; ++tp) {
      if (ranks % tp != 0) continue;
      for (int pp = 1; pp <= ranks / tp; ++pp) {
        if ((ranks / tp) % pp != 0) continue;
        const int dp = ranks / tp / pp;
        // Expert parallelism over a stage's tp · dp · cp GPUs after expert tensor parallelism
        // (Megatron-Core's etp × ep × expert-dp), dividing the experts.
        const int etp = space.expert_tp > 0 ? space.expert_tp : tp;
        for (int ep = 1; ep <= tp * dp * cp; ++ep) {
          const bool fits = space.num_experts > 0 ? (tp * dp * cp) % (etp * ep) == 0 && space.num_experts % ep == 0
                                                  : ep == 1;
          if (!fits) continue;
          for (int mb : space.micro_batches)
            for (int v : space.virtual_stages) {
              if (v > 1 && pp == 1) continue;
              for (bool sp : space.sequence_parallel) {
                if (sp && tp == 1) continue;
                for (Sharding dopt : space.sharding) {
                  if (dopt != Sharding::kNone && dp * cp == 1) continue;
                  // MoE models shard at most the optimizer (model::check_moe_simulation).
                  if (space.num_experts > 0 && dopt > Sharding::kOptimizer) continue;
                  for (bool flash : space.flash_attention) {
                    if (cp > 1 && !flash) continue;
                    for (const std::string& strategy : space.strategies)
                      out.push_back({tp, pp, dp, ep, space.num_experts > 0, mb, cp, v, sp, dopt, flash, strategy});
                  }
                }
              }
            }
        }
      }
    }
  }
  return out;
}

}  // namespace lynx::search
