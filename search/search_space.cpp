#include "search/search_space.hpp"

#include <fmt/format.h>

namespace lynx::search {

std::vector<std::string> Candidate::overrides() const {
  return {
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
}

std::string Candidate::layout_text() const {
  std::string out = fmt::format("tp {} pp {} dp {}, mb {}", tp, pp, dp, micro_batch);
  if (virtual_stages > 1) out += fmt::format(", v {}", virtual_stages);
  if (sequence_parallel) out += ", sp";
  if (sharding == Sharding::kOptimizer) out += ", dist-opt";
  if (sharding == Sharding::kGradients) out += ", zero-2";
  if (sharding == Sharding::kFull) out += ", fsdp";
  if (flash_attention) out += ", flash";
  return out;
}

std::vector<Candidate> enumerate_candidates(const SearchSpace& space) {
  std::vector<Candidate> out;
  for (int tp = 1; tp <= space.gpus; ++tp) {
    if (space.gpus % tp != 0) continue;
    for (int pp = 1; pp <= space.gpus / tp; ++pp) {
      if ((space.gpus / tp) % pp != 0) continue;
      const int dp = space.gpus / tp / pp;
      for (int mb : space.micro_batches)
        for (int v : space.virtual_stages) {
          if (v > 1 && pp == 1) continue;
          for (bool sp : space.sequence_parallel) {
            if (sp && tp == 1) continue;
            for (Sharding dopt : space.sharding) {
              if (dopt != Sharding::kNone && dp == 1) continue;
              for (bool flash : space.flash_attention)
                for (const std::string& strategy : space.strategies)
                  out.push_back({tp, pp, dp, mb, v, sp, dopt, flash, strategy});
            }
          }
        }
    }
  }
  return out;
}

}  // namespace lynx::search
