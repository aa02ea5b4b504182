// Lynx on more schedules (issue 13 §3): interleaved 1F1B with the recomputation-aware
// partition, and ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024) with every
// recompute strategy — runs, determinism, memory against 1F1B, the windows Lynx sees, and
// fast mode's refusal.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <tuple>

using namespace lynx;
using namespace lynx::runner;

namespace {

constexpr RecomputeKind kEveryStrategy[] = {RecomputeKind::kNone,     RecomputeKind::kFull,
                                            RecomputeKind::kSelective, RecomputeKind::kCheckmate,
                                            RecomputeKind::kLynxHeu,  RecomputeKind::kLynxOpt};

bool is_planner(RecomputeKind k) {
  return k == RecomputeKind::kLynxHeu || k == RecomputeKind::kLynxOpt || k == RecomputeKind::kCheckmate;
}

/// A small GPT (8 layers, h 1024, s 1024) on one DGX A100 node, tp 2.
Scenario small_gpt(ScheduleKind schedule, int pp, int chunks, int micro_batches, RecomputeKind strategy) {
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.layers = 8;
  sc.model.hidden = 1024;
  sc.model.heads = 16;
  sc.model.seq_len = 1024;
  sc.model.vocab = 51200;
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = 2;
  sc.parallel.pp = pp;
  sc.parallel.micro_batch = 2;
  sc.parallel.global_batch = 2 * micro_batches;
  sc.parallel.schedule = schedule;
  sc.parallel.virtual_stages = chunks;
  sc.recompute.strategy = strategy;
  return sc;
}

SimRun run(const Scenario& sc, const SimOptions& options = {}) {
  return simulate(model::resolve_scenario(sc, "test_schedules"), options);
}

/// Memory such that keeping everything does not fit: static memory plus `fraction` of the
/// largest activation peak of the keep-everything run.
std::uint64_t tight_memory(Scenario sc, double fraction) {
  sc.recompute.strategy = RecomputeKind::kNone;
  const SimResult none = run(sc).result;
  std::int64_t most = 0;
  for (const StageBreakdown& s : none.stages)
    most = std::max(most, s.static_memory_bytes +
                              static_cast<std::int64_t>(fraction * static_cast<double>(s.peak_memory_bytes - s.static_memory_bytes)));
  return static_cast<std::uint64_t>(most);
}

/// `base` with strategy k, run twice: it runs, and the event stream is the same both times.
SimResult run_twice(Scenario sc, RecomputeKind k) {
  sc.recompute.strategy = k;
  const SimResult r = run(sc).result;
  CHECK(r.iteration_time_s > 0);
  CHECK(run(sc).result.event_fingerprint == r.event_fingerprint);
  return r;
}

}  // namespace

TEST_CASE("interleaved 1F1B with the balanced partition runs every recompute strategy") {
  Scenario base = small_gpt(ScheduleKind::kInterleaved, 2, 2, 4, RecomputeKind::kNone);
  base.recompute.partition = PartitionKind::kBalanced;
  base.hardware.memory_bytes = tight_memory(base, 0.6);
  const model::Workload workload = model::gpt_workload(model::resolve_scenario(base, "x").scenario().model, base.parallel);
  for (RecomputeKind k : kEveryStrategy) {
    CAPTURE(recompute_kind_name(k));
    const SimResult r = run_twice(base, k);
    const auto& layers = r.layers_per_stage;
    REQUIRE(layers.size() == 4);
    int total = 0;
    for (int n : layers) total += n;
    CHECK(total == 8);
    // Every chunk of a GPU holds the same layers (chunk c of GPU k is virtual stage c·pp + k).
    CHECK(layers[0] == layers[2]);
    CHECK(layers[1] == layers[3]);
    if (k == RecomputeKind::kNone) CHECK(r.oom);  // the budget needs recomputation
    if (is_planner(k)) CHECK_FALSE(r.oom);
    // Static memory per stage follows its own chunks' layers (plus embedding / head).
    for (int s = 0; s < 2; ++s) {
      std::uint64_t params = 0;
      for (int c = 0; c < 2; ++c) {
        const int vs = c * 2 + s;
        params += workload.layer_params * static_cast<std::uint64_t>(layers[static_cast<size_t>(vs)]);
        if (vs == 0) params += workload.embedding_params;
        if (vs == 3) params += workload.head_params;
      }
      CHECK(r.stages[static_cast<size_t>(s)].static_memory_bytes == model::static_bytes(base, params));
      if (!r.oom) CHECK(r.stages[static_cast<size_t>(s)].peak_memory_bytes <= static_cast<std::int64_t>(base.hardware.memory_bytes));
    }
  }
}

TEST_CASE("ZB-H1 runs every recompute strategy, planners fit and never lose to full or selective") {
  Scenario base = small_gpt(ScheduleKind::kZbH1, 4, 1, 8, RecomputeKind::kNone);
  base.model.layers = 8;
  base.hardware.memory_bytes = tight_memory(base, 0.5);
  double best_megatron = std::numeric_limits<double>::infinity();
  for (RecomputeKind k : kEveryStrategy) {
    CAPTURE(recompute_kind_name(k));
    const SimResult r = run_twice(base, k);
    if (k == RecomputeKind::kNone) CHECK(r.oom);  // the budget needs recomputation
    if (k == RecomputeKind::kFull || k == RecomputeKind::kSelective) {
      if (!r.oom) best_megatron = std::min(best_megatron, r.iteration_time_s);
    }
    if (is_planner(k)) {
      CHECK_FALSE(r.oom);
      for (const StageBreakdown& s : r.stages) CHECK(s.peak_memory_bytes <= static_cast<std::int64_t>(base.hardware.memory_bytes));
      CHECK(r.iteration_time_s <= best_megatron);
    }
  }
  CHECK(best_megatron < std::numeric_limits<double>::infinity());
}

TEST_CASE("ZB-H1 against 1F1B: smaller bubble without TP, activation peak of 1F1B's first stage") {
  for (int tp : {1, 2}) {
    CAPTURE(tp);
    Scenario zb = small_gpt(ScheduleKind::kZbH1, 4, 1, 8, RecomputeKind::kNone);
    zb.parallel.tp = tp;
    Scenario ofob = zb;
    ofob.parallel.schedule = ScheduleKind::kOneFOneB;
    const SimResult a = run(zb).result;
    const SimResult b = run(ofob).result;
    if (tp == 1) CHECK(a.iteration_time_s < b.iteration_time_s);  // no TP collective left exposed
    // Stage k holds p − k micro-batches until B and k more until W; a W set (32·s·b·h/… per
    // layer) is smaller than a full one, so no stage exceeds 1F1B's first stage by more than
    // the output gradients one B pass allocates before it frees (one layer's W bytes).
    const model::Workload w = model::gpt_workload(model::resolve_scenario(zb, "x").scenario().model, zb.parallel);
    std::int64_t layer_w = 0;
    for (const model::Op& op : w.layer) layer_w += schedule::weight_pass_bytes(op).total();
    auto activations = [](const StageBreakdown& s) { return s.peak_memory_bytes - s.static_memory_bytes; };
    std::int64_t most_1f1b = 0;
    for (const StageBreakdown& s : b.stages) most_1f1b = std::max(most_1f1b, activations(s));
    for (size_t k = 0; k < a.stages.size(); ++k) {
      CAPTURE(k);
      CHECK(activations(a.stages[k]) >= activations(b.stages[k]));
      CHECK(activations(a.stages[k]) <= most_1f1b + layer_w);
    }
    CHECK(activations(a.stages[0]) <= activations(b.stages[0]) + layer_w);
  }
}

TEST_CASE("ZB-H1's input-gradient pass exposes the TP all-reduces 1F1B hides behind wgrad: Lynx windows") {
  // NVSwitch: under 1F1B the backward TP all-reduce overlaps the weight-gradient GEMM; ZB-H1's
  // B pass has no wgrad beside it, so the compute stream waits and the windows finder sees it.
  auto inner_windows = [](ScheduleKind kind) {
    Scenario sc = small_gpt(kind, 2, 1, 4, RecomputeKind::kNone);
    sc.model.layers = 8;
    SimOptions keep;
    keep.keep_trace_data = true;
    const SimRun r = run(sc, keep);
    const auto capacity = schedule::measure_window_capacity(r.built, r.exec);
    TimePs sum = 0;
    for (const auto& per_vs : capacity)
      for (size_t i = 0; i + 1 < per_vs.size(); ++i) sum += per_vs[i];  // inner layers
    return sum;
  };
  const TimePs zb = inner_windows(ScheduleKind::kZbH1);
  const TimePs ofob = inner_windows(ScheduleKind::kOneFOneB);
  CHECK(zb > 0);
  CHECK(zb > ofob);
}

TEST_CASE("ZB-H1: fast mode refuses it naming the key, fast-forward has no period to skip") {
  const std::string yaml =
      "model: {preset: gpt-1.3b}\n"
      "parallel: {tp: 2, pp: 2, micro_batch: 2, global_batch: 8, schedule: zb-h1}\n"
      "hardware: {profile: dgx-a100-80gb, nodes: 1}\n";
  CHECK_THROWS_WITH_AS(model::load_scenario_text(yaml, "zb.yaml", {"sim.mode=fast"}),
                       doctest::Contains("key 'sim.mode': parallel.schedule zb-h1 needs sim.mode exact"), Error);
  const auto resolved = model::load_scenario_text(yaml, "zb.yaml", {"sim.fast_forward=true"});
  const auto off = model::load_scenario_text(yaml, "zb.yaml", {"sim.fast_forward=false"});
  const SimResult a = simulate(resolved).result;
  const SimResult b = simulate(off).result;
  CHECK(a.event_fingerprint == b.event_fingerprint);
  CHECK(a.iteration_time_s == b.iteration_time_s);
}

TEST_CASE("task instance labels: each layer span's tasks carry its micro-batch, chunk and layer, each label once") {
  // The builder looks instance ids up by (micro-batch, chunk, layer) and writes a label only
  // the first time; here the labels are rebuilt from the spans and compared with every task's.
  for (const auto& [schedule, chunks, strategy] : {std::tuple{ScheduleKind::kInterleaved, 2, RecomputeKind::kLynxHeu},
                                                   std::tuple{ScheduleKind::kOneFOneB, 1, RecomputeKind::kFull},
                                                   std::tuple{ScheduleKind::kZbH1, 1, RecomputeKind::kSelective}}) {
    CAPTURE(chunks);
    CAPTURE(recompute_kind_name(strategy));
    Scenario sc = small_gpt(schedule, 2, chunks, 4, strategy);
    SimOptions options;
    options.keep_trace_data = true;
    const SimRun r = run(sc, options);
    const sim::Program& prog = r.built.program;
    REQUIRE(!prog.tasks.empty());
    const std::set<std::string> unique(prog.instances.begin(), prog.instances.end());
    CHECK(unique.size() == prog.instances.size());
    CHECK(prog.instances.at(0).empty());
    std::size_t checked = 0;
    for (const auto* spans : {&r.built.layer_forward, &r.built.layer_backward}) {
      REQUIRE(!spans->empty());
      for (const schedule::LayerSpan& span : *spans) {
        const int chunk = span.virtual_stage / sc.parallel.pp;
        const std::string label = chunks > 1 ? fmt::format("mb{}.c{}.L{}.", span.micro_batch, chunk, span.layer)
                                             : fmt::format("mb{}.L{}.", span.micro_batch, span.layer);
        for (sim::TaskId t = span.first_task; t < span.end_task; ++t) {
          // A span may also hold an overlapped recompute its window issued (another layer's,
          // or the next step's: on the recompute stream, with that layer's label).
          const sim::Task& task = prog.tasks[static_cast<size_t>(t)];
          const std::string& got = prog.instances.at(task.instance);
          if (task.stream == schedule::kRecomputeStream) {
            CHECK(got.rfind("mb", 0) == 0);
            continue;
          }
          CHECK(got == label);
          ++checked;
        }
      }
    }
    CHECK(checked > 0);
    // A step's marker and pipeline send carry the step's own label.
    REQUIRE(!r.built.steps.empty());
    for (const schedule::StepSpan& step : r.built.steps) {
      const std::string label = chunks > 1 ? fmt::format("mb{}.c{}.", step.step.micro_batch, step.step.chunk)
                                           : fmt::format("mb{}.", step.step.micro_batch);
      CHECK(prog.instances.at(prog.tasks[static_cast<size_t>(step.marker)].instance) == label);
      if (step.send >= 0) CHECK(prog.instances.at(prog.tasks[static_cast<size_t>(step.send)].instance) == label);
    }
  }
}
