#include "search/best_search.hpp"

#include "common/bytes.hpp"
#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/progress.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "scenarios/scenario_loader.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "search/bounds.hpp"
#include "strategies/milp_planner.hpp"
#include "sweep/ordered_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <thread>

namespace lynx::search {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// A candidate read, checked and bounded (phase 1). Its scenario is not kept (tens of
/// thousands would not fit in memory at cluster scale): a simulated one is read again.
struct Prepared {
  enum class Kind { kInvalid, kMemoryPruned, kReady } kind = Kind::kInvalid;
  std::string message;                      ///< kInvalid: the loader's message
  ErrorCode code = ErrorCode::kInternal;    ///< kInvalid: its code
  double time_bound_s = 0;
};

/// A fast-mode run (phase 2); empty when the compute bound pruned it first.
struct Ranked {
  bool pruned = false;
  bool oom = false;
  double time_s = 0;
};

int thread_count(int asked) {
  if (asked > 0) return asked;
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

std::vector<std::uint64_t> iota_items(std::size_t n) {
  std::vector<std::uint64_t> items(n);
  for (std::size_t i = 0; i < n; ++i) items[i] = i;
  return items;
}

/// The fullest GPU's peak bytes.
std::int64_t peak_bytes(const runner::SimResult& r) {
  std::int64_t most = 0;
  for (const runner::StageBreakdown& s : r.stages) most = std::max(most, s.peak_memory_bytes);
  return most;
}

/// Fastest first; equal times by candidate order (the documented tie-break).
bool faster(double a_s, std::uint64_t a_index, double b_s, std::uint64_t b_index) {
  return a_s != b_s ? a_s < b_s : a_index < b_index;
}

/// Whether some tp · pp · dp = `n` layout (the GPUs of one context-parallel rank) passes the
/// loader's divisibility rules: heads by tp, layers by pp · v, the global batch by
/// micro-batch · dp.
bool layout_divides(const SearchSpace& space, int n, const ModelSpec& model, int global_batch) {
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp != 0 || model.heads % tp != 0) continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp != 0) continue;
      const int dp = n / tp / pp;
      const bool batch = std::any_of(space.micro_batches.begin(), space.micro_batches.end(), [&](int mb) {
        return static_cast<std::int64_t>(global_batch) % (static_cast<std::int64_t>(mb) * dp) == 0;
      });
      const bool layers = std::any_of(space.virtual_stages.begin(), space.virtual_stages.end(), [&](int v) {
        return (v == 1 || pp > 1) && model.layers % (static_cast<std::int64_t>(pp) * v) == 0;
      });
      if (batch && layers) return true;
    }
  }
  return false;
}

/// Whether some layout of the space (each cp, tp · pp · dp = gpus / cp) divides the model. When
/// none does, no candidate is valid; found by arithmetic on the divisors of `gpus` alone.
bool some_layout_divides(const SearchSpace& space, const ModelSpec& model, int global_batch) {
  const std::vector<int> cps = space.context_parallel.empty() ? std::vector<int>{1} : space.context_parallel;
  for (int cp : cps)
    if (cp >= 1 && space.gpus % cp == 0 && layout_divides(space, space.gpus / cp, model, global_batch)) return true;
  return false;
}

}  // namespace

BestOutcome run_best(const BestRequest& request) {
  const WallClock::time_point start = WallClock::now();
  if (request.top < 1) fail(ErrorCode::kInvalidOption, "--top {}: expected at least 1 plan", request.top);
  const int gpus = request.space.gpus;
  if (gpus < 1) fail(ErrorCode::kInvalidOption, "--gpus {}: expected a whole number of GPUs >= 1", gpus);
  const std::string label = request.scenario_path.empty() ? "<yaml>" : request.scenario_path;
  const std::string base_text = request.scenario_path.empty()
                                    ? request.scenario_text
                                    : read_text_file(request.scenario_path, "scenario file");
  // The base must read on its own (an unknown key is the search's error, not a candidate's);
  // enough nodes for N GPUs are added when the base's cluster is smaller.
  const ParsedScenario parsed(base_text, label);  // every candidate is read from it
  const UnresolvedScenario base = parsed.read(request.overrides);
  std::vector<std::string> common = request.overrides;
  const int per_node = base.scenario.hardware.gpus_per_node;
  if (static_cast<std::int64_t>(base.scenario.hardware.nodes) * per_node < gpus)
    common.push_back(fmt::format("hardware.nodes={}", (gpus + per_node - 1) / per_node));
  common.push_back("sim.mode=fast");
  // The base's layout is only a starting point: a candidate without context parallelism has
  // cp 1 (Candidate::overrides writes parallel.cp only when > 1).
  common.push_back("parallel.cp=1");

  BestOutcome out;
  out.scenario = base.scenario.name;
  out.gpus = gpus;
  out.profile = base.scenario.hardware.profile;
  out.threads = thread_count(request.threads);
  // Checkmate's and lynx-opt's MILPs: on several threads, solved in child processes at once.
  const strategies::ParallelMilpSolves parallel_milp(out.threads);
  SearchSpace space = request.space;
  if (space.context_parallel.empty())
    space.context_parallel = default_context_parallel(gpus, base.scenario.model.seq_len);
  try {  // a MoE base: ep is searched too (a base that does not resolve is reported below)
    space.num_experts = model::resolve_model(base.scenario.model).moe.num_experts;
  } catch (const Error&) {
  }
  space.expert_tp = base.scenario.parallel.etp;
  const std::vector<Candidate> candidates = enumerate_candidates(space);
  out.considered = candidates.size();
  const bool bar = request.progress && is_terminal(stderr);
  /// Candidate i's scenario, read and checked by the loader (in fast mode).
  auto read_candidate = [&](std::uint64_t i) {
    std::vector<std::string> sets = common;
    for (std::string& o : candidates[i].overrides()) sets.push_back(std::move(o));
    return model::resolve_scenario(parsed.read(sets));
  };
  if (!candidates.empty()) {
    // Refused by arithmetic before reading any candidate when no layout divides the model.
    std::optional<ModelSpec> model;
    try {
      model = model::resolve_model(base.scenario.model);
    } catch (const Error&) {
      // the candidates' loader reports it
    }
    if (model && !some_layout_divides(space, *model, base.scenario.parallel.global_batch)) {
      std::string message;
      try {
        read_candidate(0);
      } catch (const Error& e) {
        message = e.what();
      }
      fail(ErrorCode::kNoValidLayout, "best: no layout of {} GPUs is valid for this scenario: no tp dividing model.heads "
           "({}) leaves pp · v dividing model.layers ({}) and micro-batch · dp dividing parallel.global_batch ({}); the "
           "first candidate ({}) fails with: {}", gpus, model->heads, model->layers,
           base.scenario.parallel.global_batch, candidates[0].layout_text() + ", " + candidates[0].strategy, message);
    }
  }

  // Phase 1: read, check and bound every candidate.
  std::vector<Prepared> prepared(candidates.size());
  {
    sweep::OrderedPool<Prepared> pool(iota_items(candidates.size()), out.threads, [&](std::uint64_t i) {
      Prepared p;
      std::optional<model::ResolvedScenario> resolved;
      try {
        resolved.emplace(read_candidate(i));
        // The schedule's own rules (interleaving needs micro-batches a multiple of pp).
        const ParallelSpec& par = resolved->scenario().parallel;
        schedule::pipeline_order(par.schedule, par.pp, static_cast<int>(micro_batches_per_pipeline(par)),
                                 par.virtual_stages);
      } catch (const Error& e) {
        p.message = e.what();
        p.code = e.code();
        return p;
      }
      const Scenario& sc = resolved->scenario();
      if (!request.exhaustive &&
          memory_lower_bound_bytes(sc) > static_cast<std::int64_t>(sc.hardware.memory_bytes)) {
        p.kind = Prepared::Kind::kMemoryPruned;
        return p;
      }
      p.kind = Prepared::Kind::kReady;
      p.time_bound_s = request.exhaustive ? 0.0 : compute_lower_bound_s(sc);
      return p;
    });
    ProgressBar progress(candidates.size(), "best: checking", bar);
    sweep::SkipReasons reasons;
    for (std::size_t n = 0; pool.has_next(); ++n) {
      auto [i, p] = pool.next();
      if (p.kind == Prepared::Kind::kInvalid) {
        ++out.invalid;
        reasons.add(p.code, p.message, i,
                    [&] { return candidates[i].layout_text() + ", " + candidates[i].strategy; });
      } else if (p.kind == Prepared::Kind::kMemoryPruned) {
        ++out.memory_pruned;
      }
      prepared[i] = std::move(p);
      progress.update(n + 1);
    }
    progress.finish();
    out.invalid_reasons = reasons.sorted();
  }
  if (out.invalid == candidates.size()) {
    if (out.invalid_reasons.empty()) fail(ErrorCode::kNoValidLayout, "best: the search space is empty");
    fail(ErrorCode::kNoValidLayout, "best: no layout of {} GPUs is valid for this scenario; the first candidate ({}) fails "
         "with: {}", gpus, out.invalid_reasons.front().first_values,
         out.invalid_reasons.front().first_message);
  }
  out.prepare_seconds = seconds_since(start);

  // Phase 2: fast mode, in ascending order of the compute bound, so once a bound reaches the
  // K-th best time found so far (with the confirmation margin) every later one does too.
  std::vector<std::uint64_t> order;
  std::vector<double> bound(prepared.size(), 0);
  for (std::size_t i = 0; i < prepared.size(); ++i)
    if (prepared[i].kind == Prepared::Kind::kReady) {
      order.push_back(i);
      bound[i] = prepared[i].time_bound_s;
    }
  const std::size_t k = static_cast<std::size_t>(request.top);
  // The threshold workers see is taken from results consumed in order, a prefix of the order;
  // it is never below the one the consumer applies, so a worker skips only what the consumer
  // prunes anyway: the outcome does not depend on timing.
  std::atomic<double> threshold{kInfinity};
  double consumer_threshold = kInfinity;
  std::vector<double> best_times;  // the K fastest fitting times so far, ascending
  std::vector<std::pair<double, std::uint64_t>> fits;  // (fast time, index), fitting runs
  std::vector<double> fast_time(prepared.size(), -1);  // simulated candidates' fast times
  // Three passes. (1) Keeping everything (strategy none). (2) The other strategies, except on
  // configurations where keeping everything fits: recomputing there cannot be faster, and the
  // plan would be the same (counted as "same as none"). (3) Checkmate, whose MILP is solved
  // only for candidates that can still reach the top K: ranked by the larger of the compute
  // bound and the fast time of the same configuration without recomputation (checkmate
  // overlaps nothing, so it is never faster than keeping everything).
  auto rank_pass = [&](std::vector<std::uint64_t> items, const char* what) {
    std::stable_sort(items.begin(), items.end(), [&](std::uint64_t a, std::uint64_t b) { return bound[a] < bound[b]; });
    sweep::OrderedPool<Ranked> pool(items, out.threads, [&](std::uint64_t i) {
      Ranked r;
      if (bound[i] >= threshold.load()) {
        r.pruned = true;
        return r;
      }
      const runner::SimRun run = runner::simulate(read_candidate(i));
      r.oom = run.result.oom;
      r.time_s = run.result.iteration_time_s;
      return r;
    });
    ProgressBar progress(items.size(), what, bar);
    std::size_t n = 0;
    while (pool.has_next()) {
      auto [i, r] = pool.next();
      ++n;
      if (bound[i] >= consumer_threshold) {
        // Sorted by the bound: this one and every later one are pruned.
        out.compute_pruned += items.size() - (n - 1);
        break;
      }
      LYNX_CHECK(!r.pruned, "candidate {} pruned by a threshold below the consumer's", i);
      ++out.simulated;
      ++out.simulated_by_strategy[candidates[i].strategy];
      fast_time[i] = r.time_s;
      if (r.oom) {
        ++out.oom;
      } else {
        fits.emplace_back(r.time_s, i);
        best_times.insert(std::upper_bound(best_times.begin(), best_times.end(), r.time_s), r.time_s);
        if (best_times.size() > k) best_times.pop_back();
        if (best_times.size() == k && !request.exhaustive) {
          consumer_threshold = best_times.back() * (1 + request.confirm_margin);
          threshold.store(consumer_threshold);
        }
      }
      progress.update(n);
    }
    progress.finish();
  };
  const auto& names = request.space.strategies;
  const std::size_t none_pos = static_cast<std::size_t>(std::find(names.begin(), names.end(), "none") - names.begin());
  const bool has_none = none_pos < names.size();
  /// The same configuration's none candidate (strategies vary fastest in the candidate order).
  auto none_of = [&](std::uint64_t i) {
    const std::size_t pos = static_cast<std::size_t>(
        std::find(names.begin(), names.end(), candidates[i].strategy) - names.begin());
    return i - pos + none_pos;
  };
  std::vector<std::uint64_t> keep_all, others, checkmate;
  for (std::uint64_t i : order) {
    if (candidates[i].strategy == "none") keep_all.push_back(i);
    else if (candidates[i].strategy == "checkmate") checkmate.push_back(i);
    else others.push_back(i);
  }
  const WallClock::time_point rank_start = WallClock::now();
  rank_pass(keep_all, "best: ranking without recomputation (fast mode)");
  std::vector<bool> fitting(prepared.size(), false);
  for (const auto& [time_s, i] : fits) fitting[i] = true;
  auto drop_same_as_none = [&](std::vector<std::uint64_t>& items) {
    if (!has_none) return;
    std::erase_if(items, [&](std::uint64_t i) {
      const bool same = fitting[none_of(i)];
      if (same) ++out.same_as_none;
      return same;
    });
  };
  // Recomputation only adds kernels to a configuration's run without it (on the compute
  // stream, or beside it where they slow it): no strategy is faster than keeping everything, so
  // the fast time of the configuration's none run bounds the others' too (whether or not it
  // fit: memory never changes timing).
  auto raise_to_none = [&](const std::vector<std::uint64_t>& items) {
    if (!has_none || request.exhaustive) return;
    for (std::uint64_t i : items)
      if (fast_time[none_of(i)] >= 0) bound[i] = std::max(bound[i], fast_time[none_of(i)]);
  };
  drop_same_as_none(others);
  raise_to_none(others);
  rank_pass(others, "best: ranking with recomputation (fast mode)");
  drop_same_as_none(checkmate);
  raise_to_none(checkmate);
  rank_pass(checkmate, "best: ranking checkmate (fast mode)");
  out.rank_seconds = seconds_since(rank_start);
  if (fits.empty())
    fail(ErrorCode::kNothingFits, "best: no plan fits in GPU memory on {} GPUs ({} candidates out of memory, {} pruned by "
         "the memory bound, {} invalid)", gpus, out.oom, out.memory_pruned, out.invalid);

  // Phase 3: exact mode for the K fastest, and those within the margin of the K-th (≤ 3·K).
  std::sort(fits.begin(), fits.end(), [](const auto& a, const auto& b) { return faster(a.first, a.second, b.first, b.second); });
  const double kth = fits[std::min(k, fits.size()) - 1].first;
  std::vector<std::uint64_t> confirm;  // positions in fits
  for (std::size_t j = 0; j < fits.size() && j < 3 * k; ++j)
    if (j < k || fits[j].first <= kth * (1 + request.confirm_margin)) confirm.push_back(j);
  const WallClock::time_point confirm_start = WallClock::now();
  std::vector<RankedPlan> confirmed;
  std::uint64_t exact_oom = 0;
  {
    sweep::OrderedPool<std::optional<runner::SimRun>> pool(confirm, out.threads, [&](std::uint64_t j) {
      Scenario sc = read_candidate(fits[j].second).scenario();
      sc.sim.mode = SimMode::kExact;
      return std::optional<runner::SimRun>(runner::simulate(model::resolve_scenario(sc, label)));
    }, 1);
    ProgressBar progress(confirm.size(), "best: confirming (exact mode)", bar);
    std::size_t n = 0;
    while (pool.has_next()) {
      auto [j, run] = pool.next();
      ++out.confirmed;
      progress.update(++n);
      if (run->result.oom) {
        ++out.oom;
        ++exact_oom;
        continue;
      }
      RankedPlan plan;
      plan.index = fits[j].second;
      plan.candidate = candidates[plan.index];
      plan.fast_time_s = fits[j].first;
      plan.headroom_gib = to_gib(static_cast<std::int64_t>(run->result.scenario.hardware.memory_bytes) -
                                 peak_bytes(run->result));
      plan.exact = std::move(*run);
      confirmed.push_back(std::move(plan));
    }
    progress.finish();
  }
  out.confirm_seconds = seconds_since(confirm_start);
  if (confirmed.empty()) fail(ErrorCode::kNothingFits, "best: every plan fast mode ranked first is out of memory in exact mode");
  std::sort(confirmed.begin(), confirmed.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return faster(a.exact.result.iteration_time_s, a.index, b.exact.result.iteration_time_s, b.index);
  });
  if (confirmed.size() > k) confirmed.resize(k);
  out.top = std::move(confirmed);
  out.slower = fits.size() - exact_oom - out.top.size();
  out.seconds = seconds_since(start);
  return out;
}

std::string best_text(const BestOutcome& o) {
  std::string s = fmt::format("best plans for {} on {} GPUs ({}), confirmed in exact mode:\n", o.scenario,
                              o.gpus, o.profile);
  s += fmt::format("{:>4}  {:>12}  {:>6}  {:>8}  {:>10}  {}\n", "rank", "tokens/s", "MFU", "headroom",
                   "iter s", "plan");
  for (std::size_t r = 0; r < o.top.size(); ++r) {
    const RankedPlan& p = o.top[r];
    const runner::SimResult& x = p.exact.result;
    std::string strategy = p.candidate.strategy;
    if (x.strategy != p.candidate.strategy) strategy += fmt::format(" (ran {})", x.strategy);
    s += fmt::format("{:>4}  {:>12.0f}  {:>5.1f}%  {:>4.1f} GiB  {:>10.4f}  {}, {}\n", r + 1, x.tokens_per_s,
                     100 * x.mfu, p.headroom_gib, x.iteration_time_s, p.candidate.layout_text(), strategy);
  }
  s += fmt::format("{} configurations considered: {} invalid layout, {} pruned by the memory bound, {} out "
                   "of memory, {} pruned by the compute bound, {} fit without recomputation (other "
                   "strategies not run), {} slower; {} simulated in fast mode, {} confirmed in exact mode\n",
                   o.considered, o.invalid, o.memory_pruned, o.oom, o.compute_pruned, o.same_as_none, o.slower,
                   o.simulated, o.confirmed);
  if (!o.invalid_reasons.empty()) s += "invalid layouts:\n";
  for (const sweep::SkipReason& r : o.invalid_reasons)
    s += fmt::format("  {} x {} (first: {})\n", r.count, sweep::skip_reason_text(r), r.first_values);
  return s;
}

std::string best_timing_text(const BestOutcome& o) {
  auto rate = [](std::uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  std::string by;
  for (const auto& [strategy, n] : o.simulated_by_strategy) by += fmt::format("{}{} {}", by.empty() ? "" : ", ", strategy, n);
  return fmt::format(
      "best: {:.2f} s on {} thread{}: {} considered ({:.0f}/s, {:.2f} s checking), {} simulated ({:.1f}/s, "
      "{:.2f} s fast mode: {}), {} confirmed ({:.2f}/s, {:.2f} s exact mode)\n",
      o.seconds, o.threads, o.threads == 1 ? "" : "s", o.considered, rate(o.considered, o.seconds),
      o.prepare_seconds, o.simulated, rate(o.simulated, o.rank_seconds), o.rank_seconds, by, o.confirmed,
      rate(o.confirmed, o.confirm_seconds), o.confirm_seconds);
}

}  // namespace lynx::search
