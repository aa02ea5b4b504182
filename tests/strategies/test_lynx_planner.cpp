// Lynx planners end to end: memory budget respected in simulation, never slower than Megatron's
// full / selective recomputation, heuristic = MILP = brute force on a small stage, overlapped
// recomputes end before their consumers, and a symmetric pipeline partitions uniformly.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "schedule/program_builder.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/lynx_planner.hpp"
#include "strategies/milp_planner.hpp"
#include "strategies/planning_problem.hpp"
#include "tests/schedule/synthetic.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <functional>
#include <limits>

using namespace lynx;
using namespace lynx::runner;
using namespace lynx::strategies;

namespace {

/// GPT 2.7B on one DGX A100 node, tp 4 × pp 2, with a 24 GiB budget: the "none" plan does not
/// fit, so recomputation is needed.
Scenario tight_gpt(RecomputeKind strategy, bool sp = false) {
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.preset = "gpt-2.7b";
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = 4;
  sc.parallel.pp = 2;
  sc.parallel.sequence_parallel = sp;
  sc.parallel.micro_batch = 4;
  sc.parallel.global_batch = 32;
  sc.hardware.memory_bytes = 24ull << 30;
  sc.recompute.strategy = strategy;
  return sc;
}

SimResult run(const Scenario& sc) { return simulate(model::resolve_scenario(sc, sc.name)).result; }

}  // namespace

TEST_CASE("the tight configuration needs recomputation") {
  CHECK(run(tight_gpt(RecomputeKind::kNone)).oom);
  CHECK_FALSE(run(tight_gpt(RecomputeKind::kFull)).oom);
}

TEST_CASE("planned plans fit the memory budget in simulation and are never slower than full or selective") {
  for (bool sp : {false, true}) {
    const SimResult full = run(tight_gpt(RecomputeKind::kFull, sp));
    const SimResult selective = run(tight_gpt(RecomputeKind::kSelective, sp));
    double best_megatron = std::numeric_limits<double>::infinity();
    for (const SimResult* r : {&full, &selective})
      if (!r->oom) best_megatron = std::min(best_megatron, r->iteration_time_s);
    REQUIRE(best_megatron < std::numeric_limits<double>::infinity());
    for (RecomputeKind k : {RecomputeKind::kLynxHeu, RecomputeKind::kLynxOpt, RecomputeKind::kCheckmate}) {
      CAPTURE(recompute_kind_name(k));
      CAPTURE(sp);
      const SimResult r = run(tight_gpt(k, sp));
      CHECK_FALSE(r.oom);
      for (const auto& st : r.stages) CHECK(st.peak_memory_bytes <= (24ll << 30));
      CHECK(r.iteration_time_s <= best_megatron);
    }
  }
}

TEST_CASE("lynx-heu equals lynx-opt and the brute-force optimum on a small stage") {
  // A real stage problem (options and costs from the 2.7B workload), cut to 3 layers so all
  // assignments can be enumerated; budgets from roomy to impossible.
  const Scenario sc =
      model::resolve_scenario(tight_gpt(RecomputeKind::kLynxHeu), "tight_gpt").scenario();
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  StageProblem p;
  p.layers = 3;
  p.in_flight = 2;
  p.option_sets = {layer_options(sc, topo, w.layer, true)};
  p.window_ps = {400'000'000, 400'000'000, 150'000'000};  // inner 400 us, top 150 us
  const std::int64_t full = p.option_sets[0][0].kept_bytes;
  for (double fraction : {8.0, 6.0, 4.0, 3.0, 2.5, 0.1}) {
    p.budget_bytes = static_cast<std::int64_t>(fraction * static_cast<double>(full));
    CAPTURE(fraction);
    // Brute force over every assignment.
    const int n = static_cast<int>(p.option_sets[0].size());
    TimePs best = std::numeric_limits<TimePs>::max();
    std::vector<int> a(3);
    for (a[0] = 0; a[0] < n; ++a[0])
      for (a[1] = 0; a[1] < n; ++a[1])
        for (a[2] = 0; a[2] < n; ++a[2]) {
          const StageSolution s = evaluate(p, a);
          if (s.feasible) best = std::min(best, s.exposed_ps);
        }
    const StageSolution heu = solve_stage_heuristic(p);
    const StageSolution opt = solve_stage_milp(p, {});
    if (best == std::numeric_limits<TimePs>::max()) {  // nothing fits: both must say so
      CHECK_FALSE(heu.feasible);
      CHECK_FALSE(opt.feasible);
      continue;
    }
    CHECK(heu.feasible);
    CHECK(opt.feasible);
    CHECK(heu.exposed_ps == best);
    CHECK(opt.exposed_ps == best);
  }
}

TEST_CASE("an overlapped recompute ends before the backward that consumes it starts") {
  // PCIe nodes: the backward TP all-reduces outlast the weight-gradient GEMMs they overlap, so
  // lynx-heu hides recomputation in backward windows. NVLink 13B: the exposed forward TP
  // all-reduces of the preceding forward step are used (fwd-tp windows).
  for (const char* name : {"pcie-gpt-2.7b", "nvlink-gpt-13b"}) {
    CAPTURE(name);
    const auto sc = model::load_scenario_file(
        std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/" + name + ".yaml", {"recompute.strategy=lynx-heu"});
    SimOptions opt;
    opt.keep_trace_data = true;
    const SimRun r = simulate(sc, opt);
    CHECK_FALSE(r.result.oom);
    const auto& prog = r.built.program;
    int overlapped_layers = 0;
    int before_their_step = 0;  // recomputes that ran before the backward step even began
    for (const schedule::LayerSpan& span : r.built.layer_backward) {
      const std::string prefix = fmt::format("mb{}.L{}.re.", span.micro_batch, span.layer);
      bool any = false;
      for (size_t t = 0; t < prog.tasks.size(); ++t) {
        const auto& task = prog.tasks[t];
        if (task.gpu != span.gpu || task.stream != schedule::kRecomputeStream) continue;
        if (sim::task_label(prog, static_cast<sim::TaskId>(t)).rfind(prefix, 0) != 0) continue;
        any = true;
        CHECK(r.exec.task_end_ps[t] <= r.exec.task_start_ps[static_cast<size_t>(span.first_task)]);
        if (r.exec.task_end_ps[t] <= r.exec.task_start_ps[static_cast<size_t>(span.step_marker)]) ++before_their_step;
      }
      overlapped_layers += any ? 1 : 0;
    }
    CHECK(overlapped_layers > 0);  // the plan does overlap something
    if (std::string(name) == "nvlink-gpt-13b") CHECK(before_their_step > 0);
  }
}

TEST_CASE("recomputation-aware partitioning gives the uniform split when stages are symmetric") {
  // GPipe holds every micro-batch on every stage and the synthetic layer has no embedding or
  // head: with equal windows all stages are identical, so the balanced partition must be the
  // uniform one.
  Scenario sc = test::synthetic_scenario(4, 8, 1, ScheduleKind::kGpipe);
  sc.model.layers = 16;
  sc.recompute.strategy = RecomputeKind::kLynxHeu;
  sc.recompute.partition = PartitionKind::kBalanced;
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = test::synthetic_workload();
  PlanningInputs in;
  StageWindows windows;
  windows.inner_ps = 100'000;
  windows.top_ps = 200'000;
  in.windows.assign(4, windows);
  in.in_flight_chunks.assign(4, 8);
  const LynxPlanner planner(sc, topo, w, in);
  const SearchResult out = planner.search(std::vector<std::int64_t>(4, 0));
  REQUIRE(out.plan.stages.size() == 4);
  for (const auto& stage : out.plan.stages) CHECK(stage.layers.size() == 4);
}

TEST_CASE("min-max partition equals brute force over every contiguous split") {
  // Stage k costs n·(3 + k) + (stage 0 has an extra 5); stage 2 cannot hold more than 3 layers.
  const auto cost = [](int k, int /*first*/, int n) -> TimePs {
    if (k == 2 && n > 3) return kInfeasiblePs;
    return n * (3 + k) + (k == 0 ? 5 : 0);
  };
  const int layers = 10, stages = 3;
  TimePs best = kInfeasiblePs;
  for (int a = 1; a <= layers - 2; ++a)
    for (int b = 1; a + b <= layers - 1; ++b) {
      const int c = layers - a - b;
      best = std::min(best, std::max({cost(0, 0, a), cost(1, a, b), cost(2, a + b, c)}));
    }
  const std::vector<int> split = min_max_partition(layers, stages, cost);
  REQUIRE(split.size() == 3);
  CHECK(split[0] + split[1] + split[2] == layers);
  CHECK(std::max({cost(0, 0, split[0]), cost(1, split[0], split[1]), cost(2, split[0] + split[1], split[2])}) == best);
  // Hand check: (4, 3, 3) → max(17, 12, 15) = 17; (3, 4, 3) → max(14, 16, 15) = 16 is optimal.
  CHECK(best == 16);
  // Every split infeasible → empty.
  CHECK(min_max_partition(4, 2, [](int, int, int) { return kInfeasiblePs; }).empty());
}

TEST_CASE("a forward-window recompute costs its window share only in the steps that have the window") {
  // 1F1B cool-down backward steps follow no forward step: there the recompute starts at its
  // consumer and costs all its work; exposed_ps averages over the stage's backward steps.
  StageProblem p;
  p.layers = 1;
  p.window_ps = {0};
  p.fwd_window_ps = {0};
  LayerOption o;
  o.overlapped = true;
  o.overlapped_work_ps = 10'000'000;
  o.decision.window = Window::kFwdTpComm;
  sim::WindowProfile w;  // a 20 us idle wait: 10 us of work fit it
  w.segments = {{20'000'000, false, 1}};
  p.window_profile = {sim::WindowProfile{}};
  p.fwd_window_profile = {w};
  CHECK(exposed_ps(p, 0, o) == 0);  // no step counts given: every step has the window
  p.fwd_window_steps = {3};
  p.micro_batches = 4;
  CHECK(exposed_ps(p, 0, o) == 2'500'000);  // one step in four pays the 10 us
  LayerOption bwd = o;
  bwd.decision.window = Window::kBwdTpComm;
  CHECK(exposed_ps(p, 0, bwd) == 10'000'000);  // the backward window (empty here) is not averaged
}

TEST_CASE("interleaved balanced partition: equal chunks per GPU, the min-max split of the partition's objective") {
  // pp 4 × v 2, 16 synthetic layers (3 us, 1 MB each), an LM head of 18 us (all passes) on
  // the last GPU, interleaved in-flight counts (11, 9, 7, 5 chunks) and a 16 MB budget, so
  // early GPUs must recompute (on demand: no windows) what they hold beyond it.
  Scenario sc = test::synthetic_scenario(4, 8, 2, ScheduleKind::kInterleaved);
  sc.model.layers = 16;
  sc.hardware.memory_bytes = 16'000'000;
  sc.recompute.strategy = RecomputeKind::kLynxHeu;
  sc.recompute.partition = PartitionKind::kBalanced;
  const hw_models::Topology topo(sc.hardware);
  model::Workload w = test::synthetic_workload();
  model::Op head = w.layer[0];
  head.name = "head";
  head.group = model::OpGroup::kLayerInput;
  head.saved_bytes = 0;
  head.fwd_flops = head.bwd_dgrad_flops = head.bwd_wgrad_flops = 6e9;  // 6 us each
  w.head = {head};
  PlanningInputs in;
  in.windows.assign(8, StageWindows{});
  in.in_flight_chunks = {11, 9, 7, 5};
  const LynxPlanner planner(sc, topo, w, in);
  const std::vector<std::int64_t> cut(4, 0);
  const SearchResult out = planner.search(cut);
  REQUIRE(out.plan.stages.size() == 8);
  std::vector<int> per_gpu(4);
  int total = 0;
  for (int k = 0; k < 4; ++k) {
    per_gpu[static_cast<size_t>(k)] = static_cast<int>(out.plan.stages[static_cast<size_t>(k)].layers.size());
    CHECK(out.plan.stages[static_cast<size_t>(4 + k)].layers.size() == out.plan.stages[static_cast<size_t>(k)].layers.size());
    total += 2 * per_gpu[static_cast<size_t>(k)];
  }
  CHECK(total == 16);
  for (size_t vs = 1; vs < 8; ++vs)
    CHECK(out.plan.stages[vs].first_layer ==
          out.plan.stages[vs - 1].first_layer + static_cast<int>(out.plan.stages[vs - 1].layers.size()));
  CHECK(per_gpu[3] == 1);  // the GPU with the head gets the fewest layers
  // Brute force over every split of the 8 layer rows: none has a smaller slowest GPU.
  auto slowest = [&](const std::vector<int>& split) {
    TimePs worst = 0;
    for (int k = 0, first_row = 0; k < 4; first_row += split[static_cast<size_t>(k++)])
      worst = std::max(worst, planner.partition_stage_time_ps(k, first_row, split[static_cast<size_t>(k)], 0));
    return worst;
  };
  TimePs best = kInfeasiblePs;
  for (int a = 1; a <= 5; ++a)
    for (int b = 1; a + b <= 6; ++b)
      for (int c = 1; a + b + c <= 7; ++c) best = std::min(best, slowest({a, b, c, 8 - a - b - c}));
  CHECK(best < kInfeasiblePs);
  CHECK(slowest(per_gpu) == best);
  CHECK(slowest({2, 2, 2, 2}) > best);  // the uniform split is strictly worse here
  // Each stage's budget counts its own chunks' layers (memory accounting per stage).
  for (int k = 0; k < 4; ++k) CHECK(out.problems[static_cast<size_t>(k)].layers == 2 * per_gpu[static_cast<size_t>(k)]);
}

TEST_CASE("context parallelism: the attention core's recompute needs the ring, so it is never overlapped") {
  // tp 1: no TP collective, so without context parallelism every drop may be overlapped; with
  // cp 2 a recompute that re-runs the ring attention is on demand only, at cp blocks' time.
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.layers = 2;
  sc.model.hidden = 1024;
  sc.model.heads = 16;
  sc.model.seq_len = 8192;
  sc.model.vocab = 51200;
  sc.model.flash_attention = true;
  sc.parallel = ParallelSpec{};
  sc.parallel.global_batch = 1;
  for (int cp : {1, 2}) {
    CAPTURE(cp);
    sc.parallel.cp = cp;
    const Scenario resolved = model::resolve_scenario(sc, "cp").scenario();
    const hw_models::Topology topo(resolved.hardware, gpus_used(resolved.parallel));
    const model::Workload w = model::gpt_workload(resolved.model, resolved.parallel);
    bool core_overlapped = false, mlp_overlapped = false;
    for (const LayerOption& o : layer_options(resolved, topo, w.layer, true)) {
      if (!o.overlapped) continue;
      core_overlapped = core_overlapped || o.decision.action(model::OpGroup::kAttnCore) != Action::kKeep;
      mlp_overlapped = mlp_overlapped || o.decision.action(model::OpGroup::kMlp) != Action::kKeep;
    }
    CHECK(core_overlapped == (cp == 1));
    CHECK(mlp_overlapped);
  }
}
