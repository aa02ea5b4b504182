// Fast mode's composition where it must be exact: a single stage, a pipeline whose sends take
// no time (1F1B and GPipe); --trace refused; determinism.
#include "common/error.hpp"
#include "fast/compose.hpp"
#include "fast/step_cache.hpp"
#include "fast/step_profile.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "strategies/recompute_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

using namespace lynx;
using namespace lynx::runner;

namespace {

SimResult run(std::vector<std::string> overrides, const std::string& mode) {
  overrides.push_back("sim.mode=" + mode);
  return simulate(model::default_scenario(overrides)).result;
}

/// A GPT on one node without tensor parallelism: the only communication is pipeline sends.
std::vector<std::string> no_tp(int pp, int micro_batches, const std::string& schedule) {
  return {"model.preset=gpt-1.3b", "parallel.tp=1", "parallel.pp=" + std::to_string(pp), "parallel.dp=1",
          "parallel.micro_batch=1", "parallel.global_batch=" + std::to_string(micro_batches),
          "parallel.schedule=" + schedule, "hardware.nodes=1", "recompute.strategy=none"};
}

/// A fast-mode run on shared (PCIe) links, its step cache with the channels added, and the
/// profile of one step of it (stage `stage`'s first).
struct SharedLinkStep {
  explicit SharedLinkStep(std::vector<std::string> overrides, int stage)
      : resolved(with_fast_mode(std::move(overrides))),
        run(simulate(resolved)),
        workload(model::gpt_workload(resolved.scenario().model, resolved.scenario().parallel)),
        context(*cache.context(resolved.scenario())) {
    const Scenario& sc = resolved.scenario();
    REQUIRE_FALSE(context.links_private);
    cache.add_channels(context, sc, workload);
    fast::StepKey key;
    key.stage = key.virtual_stage = stage;
    step = &cache.get(context, key, fast::PlanKey(run.plan), sc, run.plan, workload);
  }
  static model::ResolvedScenario with_fast_mode(std::vector<std::string> overrides) {
    overrides.push_back("sim.mode=fast");
    return model::default_scenario(overrides);
  }
  model::ResolvedScenario resolved;
  SimRun run;
  model::Workload workload;
  fast::StepCache cache;
  fast::StepCache::Context& context;
  const fast::StepProfile* step = nullptr;
};

}  // namespace

TEST_CASE("one stage without communication: fast mode equals exact mode to the picosecond") {
  for (const char* strategy : {"none", "full", "selective"}) {
    auto o = no_tp(1, 4, "1f1b");
    o.push_back(std::string("recompute.strategy=") + strategy);
    const SimResult e = run(o, "exact"), f = run(o, "fast");
    CHECK(f.iteration_time_s == e.iteration_time_s);
    CHECK(f.stages[0].peak_memory_bytes == e.stages[0].peak_memory_bytes);
    CHECK(f.executed_flops == doctest::Approx(e.executed_flops).epsilon(1e-12));
    CHECK(f.stages[0].compute_s == doctest::Approx(e.stages[0].compute_s).epsilon(1e-9));
  }
}

TEST_CASE("a pipeline whose sends take no time: fast mode equals exact mode") {
  // Without TP, links of no latency and near-infinite bandwidth, nothing but the schedule
  // couples the steps: the composition is the critical path over the schedule's order.
  // Blocking exchanges (Megatron's _communicate) add their rendezvous and synchronize to it.
  const int p = 4, m = 8;
  std::map<std::pair<std::string, std::string>, double> exact_s;
  for (const char* exchange : {"overlapped", "blocking"})
    for (const auto& [schedule, chunks] : {std::pair<std::string, int>{"1f1b", 1}, {"gpipe", 1}, {"interleaved", 2}}) {
      CAPTURE(exchange);
      CAPTURE(schedule);
      auto o = no_tp(p, m, schedule);
      o.push_back("model.layers=8");
      o.push_back("parallel.virtual_stages=" + std::to_string(chunks));
      o.push_back(std::string("parallel.pipeline_exchange=") + exchange);
      o.push_back("hardware.node.nvlink.latency=0s");
      o.push_back("hardware.node.nvlink.bw=1000000TB/s");
      const SimResult f = run(o, "fast");
      const SimResult e = run(o, "exact");
      CHECK(f.iteration_time_s == doctest::Approx(e.iteration_time_s).epsilon(1e-6));
      exact_s[{exchange, schedule}] = e.iteration_time_s;
    }
  // With free sends the rendezvous still delays the interleaved schedule (a stage's exchange
  // waits for its neighbour's), so the blocking runs above are not the overlapped ones again.
  CHECK(exact_s[{"blocking", "interleaved"}] > exact_s[{"overlapped", "interleaved"}]);
}

TEST_CASE("fast mode refuses --trace with a one-line error") {
  SimOptions options;
  options.keep_trace_data = true;
  auto o = no_tp(2, 4, "1f1b");
  o.push_back("sim.mode=fast");
  CHECK_THROWS_WITH_AS(simulate(model::default_scenario(o), options),
                       doctest::Contains("--trace needs sim.mode exact"), Error);
}

TEST_CASE("fast mode is deterministic and its cache does not change results") {
  auto o = no_tp(2, 4, "1f1b");
  const SimResult a = run(o, "fast");
  fast::StepCache::shared().clear();
  const SimResult b = run(o, "fast");
  CHECK(a.iteration_time_s == b.iteration_time_s);
  CHECK(a.stages[1].peak_memory_bytes == b.stages[1].peak_memory_bytes);
}

TEST_CASE("the step cache keeps to its budget, least recently used context first, results unchanged") {
  const auto composed = [](fast::StepCache& cache, const std::vector<std::string>& sets) {
    const model::ResolvedScenario r = model::default_scenario(sets);
    const Scenario& sc = r.scenario();
    const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
    const strategies::RecomputePlan plan =
        strategies::plan_fixed_strategy(sc.recompute, strategies::stage_partition(sc.model.layers, sc.parallel));
    return fast::simulate_fast(sc, plan, w, cache).makespan_ps;
  };
  const auto a = no_tp(2, 4, "1f1b"), b = no_tp(4, 8, "1f1b");
  fast::StepCache unbounded;
  const TimePs a_ps = composed(unbounded, a), b_ps = composed(unbounded, b);
  CHECK(unbounded.evictions() == 0);
  CHECK(unbounded.bytes() > 0);
  const std::size_t misses = unbounded.misses();
  composed(unbounded, a);
  CHECK(unbounded.misses() == misses);  // every step of a is still there
  // A budget below one context's profiles: each layout evicts the other, which is simulated
  // again, to the same times.
  fast::StepCache tiny(1);
  CHECK(composed(tiny, a) == a_ps);
  CHECK(composed(tiny, b) == b_ps);
  CHECK(tiny.evictions() == 1);
  CHECK(composed(tiny, a) == a_ps);
  CHECK(tiny.evictions() == 2);
  CHECK(tiny.misses() > misses);
  // The budget holds once the context in use is let go: one context kept at a time.
  CHECK(tiny.bytes() < unbounded.bytes());
}

TEST_CASE("lynx-heu in fast mode plans on windows from a fast-mode baseline close to exact mode's") {
  for (const char* profile : {"dgx-a100-80gb", "a100-pcie-40gb"}) {
    std::vector<std::string> o = {"model.preset=gpt-1.3b", std::string("hardware.profile=") + profile,
                                  "hardware.nodes=1", "parallel.tp=2", "parallel.pp=2", "parallel.dp=2",
                                  "parallel.global_batch=16", "recompute.strategy=lynx-heu"};
    auto with_mode = [&](const std::string& mode) {
      auto v = o;
      v.push_back("sim.mode=" + mode);
      return simulate(model::default_scenario(v));
    };
    const SimRun e = with_mode("exact"), f = with_mode("fast");
    REQUIRE(e.planner.windows.size() == f.planner.windows.size());
    for (size_t vs = 0; vs < e.planner.windows.size(); ++vs) {
      CAPTURE(profile);
      CAPTURE(vs);
      const auto& we = e.planner.windows[vs];
      const auto& wf = f.planner.windows[vs];
      CHECK(static_cast<double>(wf.inner_ps) == doctest::Approx(static_cast<double>(we.inner_ps)).epsilon(0.02));
      CHECK(static_cast<double>(wf.top_ps) == doctest::Approx(static_cast<double>(we.top_ps)).epsilon(0.02));
      CHECK(static_cast<double>(wf.forward_ps) == doctest::Approx(static_cast<double>(we.forward_ps)).epsilon(0.02));
    }
    CHECK(f.result.iteration_time_s == doctest::Approx(e.result.iteration_time_s).epsilon(0.01));
    CHECK(f.result.strategy_requested == "lynx-heu");
  }
}

TEST_CASE("a collective spanning nodes: fast mode's breakdown equals exact mode's, no bubble") {
  // Regression (issue 10): the intra reduce-scatter and inter-node ring phases of a
  // hierarchical collective counted as bubble; fast mode measures its steps with the same
  // gap rule, so both modes must put every phase in the communication columns.
  for (const auto& [tp, dp] : {std::pair{1, 16}, std::pair{16, 1}}) {
    CAPTURE(tp);
    const std::vector<std::string> o = {
        "model.preset=gpt-1.3b", "hardware.nodes=2", "parallel.tp=" + std::to_string(tp),
        "parallel.pp=1", "parallel.dp=" + std::to_string(dp), "parallel.micro_batch=2",
        "parallel.global_batch=" + std::to_string(2 * dp), "parallel.dp_overlap=end",
        "recompute.strategy=none"};
    const SimResult e = run(o, "exact"), f = run(o, "fast");
    const StageBreakdown& eb = e.stages.at(0);
    const StageBreakdown& fb = f.stages.at(0);
    CHECK(eb.bubble_s == doctest::Approx(0).epsilon(1e-12));
    CHECK(fb.bubble_s == doctest::Approx(0).epsilon(1e-12));
    CHECK(eb.tp_exposed_s + eb.dp_exposed_s > 0);
    CHECK(fb.tp_exposed_s == doctest::Approx(eb.tp_exposed_s).epsilon(1e-9));
    CHECK(fb.dp_exposed_s == doctest::Approx(eb.dp_exposed_s).epsilon(1e-9));
    CHECK(f.iteration_time_s == doctest::Approx(e.iteration_time_s).epsilon(1e-9));
  }
}

TEST_CASE("the step cache shares a context across schedules, batches and strategies, and no further") {
  fast::StepCache cache;
  const std::vector<std::string> base = {"model.preset=gpt-1.3b", "parallel.tp=2", "parallel.pp=2", "parallel.dp=1",
                                         "hardware.nodes=1"};
  const auto context = [&](std::vector<std::string> extra) {
    std::vector<std::string> sets = base;
    sets.insert(sets.end(), extra.begin(), extra.end());
    return cache.context(model::default_scenario(sets).scenario()).get();
  };
  const auto* reference = context({});
  CHECK(context({"parallel.schedule=gpipe", "parallel.global_batch=16", "recompute.strategy=full",
                 "sim.mode=fast", "name=other"}) == reference);
  // Any field a step program depends on selects another context: a model, layout, hardware
  // (profile-level) or simulation field.
  for (const std::string field : {"model.seq_len=1024", "parallel.micro_batch=4", "parallel.sequence_parallel=true",
                            "hardware.node.nic.bw=10GB/s", "hardware.gpu.contention=0.3", "sim.exploit_symmetry=false"}) {
    CAPTURE(field);
    CHECK(context({field}) != reference);
  }
}

TEST_CASE("on shared links other stages' sends into a stage slow its steps, its own sends are not charged") {
  // gpt-2.7b tp4 pp8 on 4 PCIe nodes: two stages per node, each stage's TP ring crosses its
  // PCIe switches' host links, which the sends of its neighbours cross too.
  SharedLinkStep setup({"model.preset=gpt-2.7b", "hardware.profile=a100-pcie-40gb", "hardware.nodes=4", "parallel.tp=4",
                        "parallel.pp=8", "parallel.dp=1", "parallel.micro_batch=1", "parallel.global_batch=8",
                        "recompute.strategy=none"},
                       2);
  const Scenario& sc = setup.resolved.scenario();
  fast::StepCache& cache = setup.cache;
  const fast::StepCache::Context& context = setup.context;
  const model::Workload& workload = setup.workload;
  const fast::StepProfile& step = *setup.step;
  REQUIRE(context.channels.size() == 14);  // 7 forward and 7 backward stage pairs
  const auto largest = [&](int from, int to) {
    const int c = context.channel_of[static_cast<size_t>(from * sc.parallel.pp + to)];
    REQUIRE(c >= 0);
    TimePs d = 0;
    for (std::size_t k = 0; k < fast::kChannelPhases; ++k) d = std::max(d, step.channel_delay_ps[c * fast::kChannelPhases + k]);
    return d;
  };
  CHECK(largest(1, 2) > 0);   // its input, from the previous node
  CHECK(largest(3, 4) > 0);   // stage 3's sends to the next node go through a NIC on stage 2's switch
  CHECK(largest(2, 3) == 0);  // its own sends: part of its profiles (after_previous), not charged
  CHECK(largest(5, 6) == 0);  // another node's traffic
  // The last phase: a send that ends with the step's compute (on idle links) reaches its last
  // TP all-reduce and delays it.
  const int input = context.channel_of[static_cast<size_t>(1 * sc.parallel.pp + 2)];
  REQUIRE(step.channel_phase_ps.size() == fast::kChannelPhases);
  CHECK(std::is_sorted(step.channel_phase_ps.begin(), step.channel_phase_ps.end()));
  CHECK(step.channel_phase_ps.back() < step.compute_end_ps);
  CHECK(step.channel_delay_ps[static_cast<size_t>(input) * fast::kChannelPhases + fast::kChannelPhases - 1] > 0);
  // Private links (NVLink): no channels, each stage composed on its own.
  const model::ResolvedScenario dgx = model::default_scenario(
      {"model.preset=gpt-2.7b", "hardware.nodes=4", "parallel.tp=4", "parallel.pp=8", "parallel.dp=1", "parallel.global_batch=8"});
  fast::StepCache::Context& nvlink = *cache.context(dgx.scenario());
  cache.add_channels(nvlink, dgx.scenario(), workload);
  CHECK(nvlink.channels.empty());
}

TEST_CASE("on shared links each data-parallel replica's step is measured, replica 0's as the profile's own") {
  // gpt-1.3b tp1 pp4 dp4 on 2 PCIe nodes: a stage's 4 replicas reach their NICs on different
  // paths (GPU g uses NIC g % 2, some through the host), so they drift apart in exact mode and
  // fast mode replays the composed steps per replica (fast/compose.cpp replica_drift_ps).
  const std::vector<std::string> sets = {"model.preset=gpt-1.3b", "hardware.profile=a100-pcie-40gb", "hardware.nodes=2",
                                         "parallel.tp=1", "parallel.pp=4", "parallel.dp=4", "parallel.micro_batch=1",
                                         "parallel.global_batch=32", "parallel.schedule=interleaved",
                                         "parallel.virtual_stages=2", "recompute.strategy=none"};
  const SharedLinkStep setup(sets, 1);
  const SimRun& fast_run = setup.run;
  const fast::StepProfile& step = *setup.step;
  REQUIRE(step.sends);
  REQUIRE(step.replica_compute_end_ps.size() == 4);
  CHECK(step.replica_compute_end_ps[0] == step.compute_end_ps);
  // Per-replica channel delays: kept only where some replica's differ from replica 0's.
  if (!step.replica_channel_delay_ps.empty()) {
    REQUIRE(step.replica_channel_delay_ps.size() == 4 * step.channel_delay_ps.size());
    for (size_t i = 0; i < step.channel_delay_ps.size(); ++i) CHECK(step.replica_channel_delay_ps[4 * i] == step.channel_delay_ps[i]);
  }
  CHECK(step.replica_send_extra_ps.size() == 4);
  // Held out of the agreement sets (fast mode was +0.27% before the replay).
  const SimResult exact = run(sets, "exact");
  CHECK(std::abs(fast_run.result.iteration_time_s / exact.iteration_time_s - 1) <= 0.01);
}
