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
      fmt::format("parallel.distributed_optimizer={}", distributed_optimizer),
      fmt::format("model.flash_attention={}", flash_attention),
      fmt::format("recompute.strategy={}", strategy),
  };
  if (moe) sets.push_back(fmt::format("parallel.ep={}", ep));
  return sets;
}

std::string Candidate::layout_text() const {
  std::string out = fmt::format("tp {} pp {} dp {}, mb {}", tp, pp, dp, micro_batch);
  if (ep > 1) out += fmt::format(", ep {}", ep);
  if (virtual_stages > 1) out += fmt::format(", v {}", virtual_stages);
  if (sequence_parallel) out += ", sp";
  if (distributed_optimizer) out += ", dist-opt";
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
      for (int ep = 1; ep <= dp; ++ep) {
        if (dp % ep != 0 || (space.num_experts > 0 ? space.num_experts % ep != 0 : ep > 1)) continue;
      for (int mb : space.micro_batches)
        for (int v : space.virtual_stages) {
          if (v > 1 && pp == 1) continue;
          for (bool sp : space.sequence_parallel) {
            if (sp && tp == 1) continue;
            for (bool dopt : space.distributed_optimizer) {
              if (dopt && dp == 1) continue;
              for (bool flash : space.flash_attention)
                for (const std::string& strategy : space.strategies)
                  out.push_back({tp, pp, dp, ep, space.num_experts > 0, mb, v, sp, dopt, flash, strategy});
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace lynx::search
