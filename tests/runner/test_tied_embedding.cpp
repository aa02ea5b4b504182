// The tied-embedding gradient all-reduce between the first and last pipeline stage (Megatron-LM's
// embedding group): its bytes and duration against the collective formula, what waits for it,
// its absence for untied models and pp = 1, and fast mode's composition of it.
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "schedule/program_builder.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// A small GPT (h 1024, V 51200) over `nodes` DGX A100 nodes with the alpha-beta collective
/// model at full efficiency and no host stream, so a collective's time has a closed form.
Scenario tied_gpt(int tp, int pp, int nodes) {
  Scenario sc = model::default_scenario().scenario();
  sc.model = ModelSpec{};
  sc.model.layers = 2 * pp;
  sc.model.hidden = 1024;
  sc.model.heads = 16;
  sc.model.seq_len = 512;
  sc.model.vocab = 51200;
  sc.hardware.nodes = nodes;
  sc.hardware.collective_model = CollectiveModel::kAlphaBeta;
  sc.hardware.collective_efficiency = 1.0;
  sc.hardware.host_kernel_ps = 0;
  sc.hardware.host_collective_ps = 0;
  sc.parallel = ParallelSpec{};
  sc.parallel.tp = tp;
  sc.parallel.pp = pp;
  sc.parallel.micro_batch = 1;
  sc.parallel.global_batch = 4;
  sc.recompute.strategy = RecomputeKind::kNone;
  return sc;
}

SimRun run_kept(const Scenario& sc) {
  SimOptions options;
  options.keep_trace_data = true;
  return simulate(model::resolve_scenario(sc, "tied_gpt"), options);
}

struct Span {
  TimePs start = -1, end = -1;
};

/// The task named `name` of each simulated GPU (start -1 when it has none; the first one).
std::vector<Span> named_tasks(const SimRun& run, const std::string& name) {
  const sim::Program& prog = run.built.program;
  std::vector<Span> out(run.built.machine.gpus.size());
  for (std::size_t i = 0; i < prog.tasks.size(); ++i) {
    Span& s = out[static_cast<std::size_t>(prog.tasks[i].gpu)];
    if (prog.names[prog.tasks[i].name] != name || s.start >= 0) continue;
    s = {run.exec.task_start_ps[i], run.exec.task_end_ps[i]};
  }
  return out;
}

/// The first optimizer-step kernel of each simulated GPU.
std::vector<Span> optimizer_starts(const SimRun& run) {
  const sim::Program& prog = run.built.program;
  std::vector<Span> out(run.built.machine.gpus.size());
  for (std::size_t i = 0; i < prog.tasks.size(); ++i) {
    Span& s = out[static_cast<std::size_t>(prog.tasks[i].gpu)];
    if (prog.tasks[i].category != sim::Category::kOptimizer || s.start >= 0) continue;
    s = {run.exec.task_start_ps[i], run.exec.task_end_ps[i]};
  }
  return out;
}

/// Bytes the flows of every task named `name` on GPU `gpu` move.
std::uint64_t named_flow_bytes(const SimRun& run, const std::string& name, std::size_t gpu) {
  const sim::Program& prog = run.built.program;
  std::uint64_t bytes = 0;
  for (const sim::Task& t : prog.tasks) {
    if (static_cast<std::size_t>(t.gpu) != gpu || prog.names[t.name] != name) continue;
    for (std::uint32_t f = t.first_flow; f < t.first_flow + t.num_flows; ++f) bytes += prog.flows[f].bytes;
  }
  return bytes;
}

}  // namespace

TEST_CASE("tied embeddings, pp > 1: the first and last stage all-reduce V*h/t main gradients before their optimizer step") {
  // tp 2 pp 4 on one node (NVSwitch), and tp 8 pp 2 on two nodes (across the NICs).
  struct Layout {
    int tp, pp, nodes;
  };
  for (const Layout layout : {Layout{2, 4, 1}, Layout{8, 2, 2}}) {
    for (int variant = 0; variant < 3; ++variant) {
      // fp32 main gradients, bf16 ones, and every GPU simulated (a rendezvous group instead of
      // the reduced simulation's dependencies between the two members).
      const bool fp32_grads = variant != 1;
      CAPTURE(layout.tp);
      CAPTURE(layout.pp);
      CAPTURE(variant);
      Scenario sc = tied_gpt(layout.tp, layout.pp, layout.nodes);
      sc.parallel.fp32_main_grads = fp32_grads;
      sc.sim.exploit_symmetry = variant != 2;
      const SimRun run = run_kept(sc);
      const schedule::BuiltProgram& built = run.built;
      const Scenario& rs = sc;
      const std::uint64_t bytes = static_cast<std::uint64_t>(rs.model.vocab) * rs.model.hidden / layout.tp *
                                  (fp32_grads ? 4 : 2);
      const hw_models::Topology topo(rs.hardware);
      const auto ranks = schedule::embedding_group_ranks(rs.parallel, 0, 0);
      REQUIRE(ranks == std::vector<hw_models::Rank>{0, (layout.pp - 1) * layout.tp});
      CHECK((topo.node_of(ranks[0]) == topo.node_of(ranks[1])) == (layout.nodes == 1));
      // A two-rank ring all-reduce: each member sends 2(n-1)/n = 1 buffer to the other in
      // 2(n-1) = 2 steps, each paying the path latency.
      const TimePs expected_ps = transfer_time_ps(bytes, topo.path_bw_bytes_per_s(ranks[0], ranks[1])) +
                                 2 * topo.path_latency_ps(ranks[0], ranks[1]);
      const auto allreduce = named_tasks(run, "embedding_grad_allreduce");
      const auto reduced = named_tasks(run, "grads_reduced");
      const auto optimizer = optimizer_starts(run);
      TimePs both_reduced_ps = 0, both_done_ps = 0;
      for (std::size_t g = 0; g < built.gpu_stage.size(); ++g)
        if (built.gpu_stage[g] == 0 || built.gpu_stage[g] == layout.pp - 1) {
          both_reduced_ps = std::max(both_reduced_ps, reduced[g].end);
          both_done_ps = std::max(both_done_ps, allreduce[g].end);
        }
      for (std::size_t g = 0; g < built.gpu_stage.size(); ++g) {
        const int stage = built.gpu_stage[g];
        CAPTURE(stage);
        if (stage != 0 && stage != layout.pp - 1) {
          CHECK(allreduce[g].start < 0);  // middle stages hold no embedding
          CHECK(optimizer[g].start == reduced[g].end);
          continue;
        }
        CHECK(named_flow_bytes(run, "embedding_grad_allreduce", g) == bytes);
        // Both members start once both have reduced their gradients; the optimizer step of
        // each starts when both have finished.
        CHECK(allreduce[g].start == both_reduced_ps);
        CHECK(allreduce[g].end - allreduce[g].start == expected_ps);
        CHECK(optimizer[g].start == both_done_ps);
      }
    }
  }
}

TEST_CASE("no tied-embedding all-reduce for untied models or pp = 1") {
  Scenario untied = tied_gpt(2, 2, 1);
  untied.model.embeddings = EmbeddingTie::kUntied;
  Scenario one_stage = tied_gpt(2, 1, 1);
  for (const Scenario& sc : {untied, one_stage}) {
    const model::ResolvedScenario resolved = model::resolve_scenario(sc, "tied_gpt");
    CHECK(model::gpt_workload(resolved->model, resolved->parallel).tied_embedding_params == 0);
    const SimRun run = run_kept(sc);
    for (const Span& s : named_tasks(run, "embedding_grad_allreduce")) CHECK(s.start < 0);
  }
  const model::ResolvedScenario tied = model::resolve_scenario(tied_gpt(2, 2, 1), "tied_gpt");
  CHECK(model::gpt_workload(tied->model, tied->parallel).tied_embedding_params == 51200ull * 1024 / 2);
}

TEST_CASE("fast mode composes the tied-embedding all-reduce as exact mode runs it") {
  for (const int nodes : {1, 2}) {
    for (const ScheduleKind schedule : {ScheduleKind::kOneFOneB, ScheduleKind::kGpipe}) {
      CAPTURE(nodes);
      Scenario tied = tied_gpt(nodes == 1 ? 2 : 8, 2, nodes);
      tied.parallel.schedule = schedule;
      tied.parallel.global_batch = 8;
      Scenario untied = tied;
      untied.model.embeddings = EmbeddingTie::kUntied;  // the same parameters, no exchange
      double exact_s[2], fast_s[2], exact_dp_s[2][2], fast_dp_s[2][2];
      for (int t = 0; t < 2; ++t) {
        Scenario sc = t == 0 ? tied : untied;
        for (SimMode mode : {SimMode::kExact, SimMode::kFast}) {
          sc.sim.mode = mode;
          const SimResult r = simulate(model::resolve_scenario(sc, "tied_gpt")).result;
          (mode == SimMode::kExact ? exact_s : fast_s)[t] = r.iteration_time_s;
          for (int s = 0; s < 2; ++s) (mode == SimMode::kExact ? exact_dp_s : fast_dp_s)[t][s] = r.stages[s].dp_exposed_s;
        }
      }
      // The exchange costs time in both modes, and the same time.
      CHECK(exact_s[0] > exact_s[1]);
      CHECK(std::abs(fast_s[0] - exact_s[0]) <= 0.01 * exact_s[0]);
      CHECK(std::abs((fast_s[0] - fast_s[1]) - (exact_s[0] - exact_s[1])) <= 1e-3 * exact_s[0]);
      // Both stages count it as data-parallel communication.
      for (int s = 0; s < 2; ++s) {
        CAPTURE(s);
        const double exact_added = exact_dp_s[0][s] - exact_dp_s[1][s];
        CHECK(exact_added > 0);
        CHECK(fast_dp_s[0][s] - fast_dp_s[1][s] == doctest::Approx(exact_added).epsilon(1e-6));
      }
    }
  }
}
