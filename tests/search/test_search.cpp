// search/: the best-plan search against brute force (every candidate of a small space in
// exact mode, no pruning), the bounds against every simulated run, determinism across thread
// counts, and bad inputs as clean errors.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "search/best_search.hpp"
#include "search/bounds.hpp"
#include "search/search_space.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>

using namespace lynx;
using namespace lynx::search;
using lynx::test::error_of;

namespace {

/// A small model on one 8-GPU node with little memory: some layouts cannot fit at all, some
/// fit only with recomputation.
constexpr const char* kBase = R"(name: small
model:
  layers: 8
  hidden: 1024
  heads: 16
  seq_len: 2048
  vocab: 8192
parallel:
  tp: 1
  pp: 1
  dp: 1
  micro_batch: 1
  global_batch: 16
hardware:
  profile: dgx-a100-80gb
  gpu:
    memory: 2GiB
    reserve: 1GiB
)";

BestRequest small_request(int threads) {
  BestRequest r;
  r.scenario_text = kBase;
  r.space.gpus = 8;
  r.space.micro_batches = {1, 2};
  r.space.virtual_stages = {1, 2};
  r.space.sharding = {Sharding::kNone, Sharding::kOptimizer};
  r.space.flash_attention = {false};
  r.top = 4;
  r.threads = threads;
  return r;
}

/// A request for `scenario_text` on `gpus` GPUs over one point of every axis but the layout:
/// micro-batch 1, no interleaving, no sharding, flash attention, strategy none, one thread.
BestRequest layout_request(const char* scenario_text, int gpus) {
  BestRequest r;
  r.scenario_text = scenario_text;
  r.space.gpus = gpus;
  r.space.micro_batches = {1};
  r.space.virtual_stages = {1};
  r.space.sharding = {Sharding::kNone};
  r.space.flash_attention = {true};
  r.space.strategies = {"none"};
  r.threads = 1;
  return r;
}

struct Brute {
  std::uint64_t index = 0;
  double time_s = 0;
};

}  // namespace

TEST_CASE("best equals brute force on a small space, the bounds hold for every run") {
  const BestRequest request = small_request(2);
  const std::vector<Candidate> candidates = enumerate_candidates(request.space);
  std::vector<Brute> fits;
  std::vector<bool> none_fits(candidates.size(), false);
  int valid = 0, oom = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    std::vector<std::string> sets;
    for (const std::string& o : candidates[i].overrides()) sets.push_back(o);
    std::optional<model::ResolvedScenario> sc;
    try {
      sc.emplace(model::load_scenario_text(kBase, "<small>", sets));
    } catch (const Error&) {
      continue;
    }
    ++valid;
    const runner::SimResult r = runner::simulate(*sc).result;
    std::int64_t peak = 0;
    for (const auto& s : r.stages) peak = std::max(peak, s.peak_memory_bytes);
    CAPTURE(candidates[i].layout_text());
    CAPTURE(candidates[i].strategy);
    CHECK(memory_lower_bound_bytes(sc->scenario()) <= peak);
    CHECK(compute_lower_bound_s(sc->scenario()) <= r.iteration_time_s);
    if (r.oom) {
      ++oom;
    } else {
      // A strategy on a configuration that fits without recomputation is the same plan as
      // none (best does not run it); strategies vary fastest, none first.
      const std::size_t none = i - static_cast<std::size_t>(std::find(request.space.strategies.begin(),
                                                                    request.space.strategies.end(),
                                                                    candidates[i].strategy) -
                                                          request.space.strategies.begin());
      if (candidates[i].strategy == "none") none_fits[i] = true;
      if (candidates[i].strategy == "none" || !none_fits[none]) fits.push_back({i, r.iteration_time_s});
    }
  }
  REQUIRE(valid > 0);
  CHECK(oom > 0);  // the space has plans that do not fit, and
  REQUIRE(fits.size() > 4);  // plans that do
  std::sort(fits.begin(), fits.end(), [](const Brute& a, const Brute& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.index < b.index;
  });

  const BestOutcome best = run_best(request);
  REQUIRE(best.top.size() == 4);
  for (std::size_t r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(best.top[r].index == fits[r].index);
    CHECK(best.top[r].exact.result.iteration_time_s == fits[r].time_s);
  }
  CHECK(best.considered == candidates.size());
  CHECK(best.invalid == candidates.size() - static_cast<std::size_t>(valid));
  CHECK(best.invalid + best.memory_pruned + best.compute_pruned + best.same_as_none + best.simulated ==
        best.considered);
  CHECK(best.memory_pruned > 0);
  CHECK(best.oom + best.slower + best.top.size() == best.simulated);
}

TEST_CASE("pruning never drops a top-K plan: the pruned search's top K are the exhaustive search's") {
  // The small model with little memory (most layouts need recomputation; the configurations'
  // times without it bound the rest), and with more (most fit without it).
  for (const bool roomy : {false, true}) {
    CAPTURE(roomy);
    BestRequest pruned = small_request(2);
    if (roomy) pruned.overrides = {"hardware.gpu.memory=4GiB"};
    BestRequest exhaustive = pruned;
    exhaustive.exhaustive = true;
    const BestOutcome a = run_best(pruned), b = run_best(exhaustive);
    REQUIRE(a.top.size() == b.top.size());
    for (std::size_t r = 0; r < a.top.size(); ++r) {
      CAPTURE(r);
      CHECK(a.top[r].index == b.top[r].index);
      CHECK(a.top[r].exact.result.iteration_time_s == b.top[r].exact.result.iteration_time_s);
    }
    CHECK(b.memory_pruned + b.compute_pruned == 0);
    CHECK(a.simulated < b.simulated);  // the bounds did prune
    CHECK(a.invalid == b.invalid);
  }
}

TEST_CASE("best refuses a GPU count no layout divides without reading the candidates") {
  BestRequest r = small_request(1);
  r.space.gpus = 1 << 20;  // 16 heads, 8 layers, batch 16: pp, tp, dp <= 16 each, so < 2^12 GPUs
  const std::string error = error_of([&] { run_best(r); });
  CHECK(error.find("no layout of 1048576 GPUs is valid") != std::string::npos);
  CHECK(error.find("no tp dividing model.heads (16)") != std::string::npos);
}

TEST_CASE("best prints the same bytes for any thread count") {
  const std::string one = best_text(run_best(small_request(1)));
  CHECK(one == best_text(run_best(small_request(3))));
  CHECK(one.find("pruned by the memory bound") != std::string::npos);
}

TEST_CASE("best: bad inputs are clean errors") {
  BestRequest r = small_request(1);
  r.top = 0;
  CHECK(error_of([&] { run_best(r); }).find("--top 0") != std::string::npos);
  r = small_request(1);
  r.space.gpus = 7;  // 16 heads, 8 layers, batch 16: no tp·pp·dp = 7 layout divides them
  const std::string seven = error_of([&] { run_best(r); });
  CHECK(seven.find("no layout of 7 GPUs is valid") != std::string::npos);
  r = small_request(1);
  r.scenario_text = std::string(kBase) + "bogus: 1\n";
  CHECK(error_of([&] { run_best(r); }).find("bogus") != std::string::npos);
}

TEST_CASE("best searches context parallelism: the default cp set, cp only with flash, tp · cp · pp · dp = N") {
  // Default: cp > 1 only from 8192 tokens, each rank keeping at least 4096 tokens, cp dividing N
  // and seq_len divisible by 2·cp.
  CHECK(default_context_parallel(8, 2048) == std::vector<int>{1});
  CHECK(default_context_parallel(8, 4096) == std::vector<int>{1});
  CHECK(default_context_parallel(8, 8192) == std::vector<int>{1, 2});
  CHECK(default_context_parallel(8, 32768) == std::vector<int>{1, 2, 4, 8});
  CHECK(default_context_parallel(12, 32768) == std::vector<int>{1, 2, 4});  // 3, 6: seq_len % 2cp
  SearchSpace space;
  space.gpus = 8;
  space.micro_batches = {1};
  space.virtual_stages = {1};
  space.context_parallel = {1, 2};
  const std::vector<Candidate> all = enumerate_candidates(space);
  std::size_t with_cp = 0;
  for (const Candidate& c : all) {
    CHECK(c.tp * c.cp * c.pp * c.dp == 8);
    if (c.cp == 1) continue;
    ++with_cp;
    CHECK(c.flash_attention);
    const std::vector<std::string> sets = c.overrides();
    CHECK(std::find(sets.begin(), sets.end(), "parallel.cp=2") != sets.end());
    CHECK(c.layout_text().find("cp 2") != std::string::npos);
  }
  CHECK(with_cp > 0);
  // Without the axis, the space is the one it was (no cp key written).
  space.context_parallel = {};
  for (const Candidate& c : enumerate_candidates(space)) {
    CHECK(c.cp == 1);
    const std::vector<std::string> sets = c.overrides();
    CHECK(std::none_of(sets.begin(), sets.end(), [](const std::string& s) { return s.rfind("parallel.cp", 0) == 0; }));
  }
}

TEST_CASE("best with --cp finds a valid context-parallel plan on a long sequence") {
  BestRequest r = layout_request(R"(name: long
model:
  layers: 4
  hidden: 1024
  heads: 16
  seq_len: 8192
  vocab: 8192
  flash_attention: true
parallel:
  cp: 2
  micro_batch: 1
  global_batch: 4
hardware:
  profile: dgx-a100-80gb
)", 4);
  r.space.sequence_parallel = {false};
  r.space.context_parallel = {1, 2, 4};
  r.top = 20;
  const BestOutcome out = run_best(r);
  // The base's cp 2 is only a starting point: cp 1 candidates are laid out with cp 1.
  CHECK(out.invalid_reasons.empty());
  bool cp_plan = false, plain_plan = false;
  for (const auto& plan : out.top) {
    cp_plan = cp_plan || plan.candidate.cp > 1;
    plain_plan = plain_plan || plan.candidate.cp == 1;
    CHECK(plan.exact.result.scenario.parallel.cp == plan.candidate.cp);
  }
  CHECK(cp_plan);
  CHECK(plain_plan);
}

TEST_CASE("best keeps the base's etp: ep ranges over tp · dp · cp / etp") {
  SearchSpace space;
  space.gpus = 8;
  space.micro_batches = {1};
  space.virtual_stages = {1};
  space.sequence_parallel = {true};
  space.sharding = {Sharding::kNone};
  space.flash_attention = {true};
  space.strategies = {"none"};
  space.num_experts = 8;
  /// The ep values enumerated for the layout tp × pp 1 × dp.
  auto eps = [&](int tp) {
    std::vector<int> out;
    for (const Candidate& c : enumerate_candidates(space))
      if (c.tp == tp && c.pp == 1) out.push_back(c.ep);
    return out;
  };
  // etp 0 (= tp): ep divides dp · cp, as before etp could differ from tp.
  CHECK(eps(2) == std::vector<int>{1, 2, 4});
  CHECK(eps(8) == std::vector<int>{1});
  // etp 1: the tp ranks join the expert-parallel groups.
  space.expert_tp = 1;
  CHECK(eps(2) == std::vector<int>{1, 2, 4, 8});
  CHECK(eps(8) == std::vector<int>{1, 2, 4, 8});
  // etp 2 fixed: etp · ep divides the 8 GPUs whatever tp.
  space.expert_tp = 2;
  CHECK(eps(1).empty());  // sp needs tp > 1: no tp 1 candidate in this space
  CHECK(eps(2) == std::vector<int>{1, 2, 4});
  CHECK(eps(8) == std::vector<int>{1, 2, 4});

  // End to end: a MoE base with etp 1 on 4 GPUs; every plan keeps etp 1, and some use ep 4
  // with tp 2 (ep beyond dp · cp, which only etp < tp allows).
  BestRequest r = layout_request(R"(name: moe
model:
  layers: 2
  hidden: 1024
  heads: 16
  seq_len: 1024
  vocab: 8192
  flash_attention: true
  moe: {num_experts: 4, router_topk: 2, expert_ffn_hidden: 512}
parallel:
  etp: 1
  micro_batch: 1
  global_batch: 8
hardware:
  profile: dgx-a100-80gb
)", 4);
  r.space.sequence_parallel = {true};
  r.top = 100;
  const BestOutcome out = run_best(r);
  CHECK(out.invalid_reasons.empty());
  bool wide_ep = false;
  for (const auto& plan : out.top) {
    CHECK(plan.exact.result.scenario.parallel.etp == 1);
    CHECK(plan.exact.result.scenario.parallel.ep == plan.candidate.ep);
    wide_ep = wide_ep || plan.candidate.ep > plan.candidate.dp * plan.candidate.cp;
  }
  CHECK(wide_ep);
}

TEST_CASE("best with blocking pipeline exchanges: ranked and confirmed with them") {
  BestRequest r = small_request(1);
  r.overrides = {"parallel.pipeline_exchange=blocking"};
  r.top = 20;
  const BestOutcome out = run_best(r);
  // No layout is refused for it.
  CHECK(out.invalid == run_best(small_request(1)).invalid);
  int pipelined = 0, differ = 0;
  for (const RankedPlan& plan : out.top) {
    const Scenario& reported = plan.exact.result.scenario;
    CHECK(reported.parallel.pipeline_exchange == PipelineExchange::kBlocking);
    CHECK(reported.sim.mode == SimMode::kExact);
    if (plan.candidate.pp == 1) continue;
    ++pipelined;
    // Fast mode ranked the blocking exchange it confirms (within its 1% of exact mode).
    CHECK(std::abs(plan.fast_time_s / plan.exact.result.iteration_time_s - 1) < 0.01);
    Scenario overlapped = reported;
    overlapped.parallel.pipeline_exchange = PipelineExchange::kOverlapped;
    if (runner::simulate(model::resolve_scenario(overlapped, "overlapped")).result.iteration_time_s !=
        plan.exact.result.iteration_time_s)
      ++differ;
  }
  CHECK(pipelined > 0);
  CHECK(differ > 0);  // the exchange matters to these plans
}
