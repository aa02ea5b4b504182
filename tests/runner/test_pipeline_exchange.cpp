// Pipeline transfers as Megatron makes them: blocking exchanges (parallel.pipeline_exchange
// blocking: batch_isend_irecv, wait, torch.cuda.synchronize()) and Megatron-LM's scatter-gather
// of pipeline tensors over tensor-parallel ranks (parallel.pipeline_scatter_gather).
#include "fast/compose.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "schedule/program_builder.hpp"
#include "strategies/recompute_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// GPT-1.3B on one DGX A100 node, micro-batch 1, without data parallelism.
std::string yaml(int tp, int pp, int micro_batches, const std::string& schedule = "1f1b", int chunks = 1) {
  return "model: {preset: gpt-1.3b}\n"
         "parallel: {tp: " + std::to_string(tp) + ", pp: " + std::to_string(pp) +
         ", micro_batch: 1, global_batch: " + std::to_string(micro_batches) + ", schedule: " + schedule +
         ", virtual_stages: " + std::to_string(chunks) + "}\n"
         "hardware: {profile: dgx-a100-80gb, nodes: 1}\n";
}

SimRun run(const std::string& text, std::vector<std::string> sets) {
  SimOptions options;
  options.keep_trace_data = true;
  return simulate(model::load_scenario_text(text, "exchange.yaml", sets), options);
}

/// The first simulated GPU of pipeline stage `stage`.
sim::GpuId first_gpu(const SimRun& r, int stage) {
  for (std::size_t g = 0; g < r.built.gpu_stage.size(); ++g)
    if (r.built.gpu_stage[g] == stage) return static_cast<sim::GpuId>(g);
  FAIL("no GPU of stage " << stage);
  return 0;
}

/// The one task of `name` with instance `label` on the first GPU of pipeline stage `stage`.
sim::TaskId find_task(const SimRun& r, int stage, const std::string& name, const std::string& label) {
  const sim::Program& prog = r.built.program;
  const sim::GpuId gpu = first_gpu(r, stage);
  sim::TaskId found = -1;
  for (std::size_t t = 0; t < prog.tasks.size(); ++t) {
    const sim::Task& task = prog.tasks[t];
    if (task.gpu != gpu || prog.names[task.name] != name || prog.instances[task.instance] != label) continue;
    REQUIRE(found < 0);
    found = static_cast<sim::TaskId>(t);
  }
  REQUIRE(found >= 0);
  return found;
}

/// When stage `stage`'s compute stream finished the tasks of micro-batch `mb` (labels "mbN." and
/// its layers' "mbN.L…."): after its backward, the last of them.
TimePs micro_batch_compute_end(const SimRun& r, int stage, int mb) {
  const sim::Program& prog = r.built.program;
  const std::string prefix = "mb" + std::to_string(mb) + ".";
  TimePs end = -1;
  for (std::size_t t = 0; t < prog.tasks.size(); ++t) {
    const sim::Task& task = prog.tasks[t];
    if (task.gpu != first_gpu(r, stage) || task.stream != schedule::kCompute) continue;
    if (prog.instances[task.instance].rfind(prefix, 0) == 0) end = std::max(end, r.exec.task_end_ps[t]);
  }
  return end;
}

}  // namespace

TEST_CASE("blocking exchange: a send waits for its receiver to reach the exchange that receives it") {
  // pp 2, two micro-batches, 1F1B. Stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1. Stage 0 sends
  // F1's activation in the exchange after F1; stage 1 receives it in the exchange after B0.
  const SimRun overlapped = run(yaml(1, 2, 2), {"parallel.pipeline_exchange=overlapped"});
  const SimRun blocking = run(yaml(1, 2, 2), {"parallel.pipeline_exchange=blocking"});
  for (const SimRun* r : {&overlapped, &blocking}) {
    const sim::TaskId send = find_task(*r, 0, "send_activation", "mb1.");
    const TimePs send_start = r->exec.task_start_ps[static_cast<std::size_t>(send)];
    const TimePs receiver_busy_until = micro_batch_compute_end(*r, 1, 0);
    if (r == &overlapped) {
      CHECK(send_start < receiver_busy_until);  // sent while stage 1 still runs B0
    } else {
      CHECK(send_start >= receiver_busy_until);
    }
  }
  CHECK(blocking.result.iteration_time_s > overlapped.result.iteration_time_s);
}

TEST_CASE("blocking exchange: the next step starts when the exchange's transfers are done") {
  // Stage 0's F1 follows the exchange that sends F0's activation (stage 1 posted its receive at
  // the start): with blocking exchanges F1 starts when that send ends, otherwise when F0 ends.
  const SimRun overlapped = run(yaml(1, 2, 2), {"parallel.pipeline_exchange=overlapped"});
  const SimRun blocking = run(yaml(1, 2, 2), {"parallel.pipeline_exchange=blocking"});
  for (const SimRun* r : {&overlapped, &blocking}) {
    const TimePs send_end = r->exec.task_end_ps[static_cast<std::size_t>(find_task(*r, 0, "send_activation", "mb0."))];
    const TimePs f1_start = r->exec.task_start_ps[static_cast<std::size_t>(find_task(*r, 0, "forward", "mb1."))];
    if (r == &overlapped) {
      CHECK(f1_start < send_end);
    } else {
      CHECK(f1_start == send_end);
    }
  }
}

TEST_CASE("blocking exchange: schedules run to the end, and fast-forward skips periods without changing the result") {
  for (const auto& [schedule, chunks] : {std::pair<std::string, int>{"1f1b", 1}, {"interleaved", 2}, {"gpipe", 1}}) {
    CAPTURE(schedule);
    const std::string text = yaml(2, 4, 16, schedule, chunks);
    const SimRun on = run(text, {"parallel.pipeline_exchange=blocking", "sim.fast_forward=true"});
    const SimRun off = run(text, {"parallel.pipeline_exchange=blocking", "sim.fast_forward=false"});
    const SimRun overlapped = run(text, {"parallel.pipeline_exchange=overlapped"});
    CHECK(on.result.iteration_time_s == off.result.iteration_time_s);
    CHECK(on.result.iteration_time_s >= overlapped.result.iteration_time_s);
    // Same input, same bytes out.
    CHECK(run(text, {"parallel.pipeline_exchange=blocking"}).result.event_fingerprint == on.result.event_fingerprint);
  }
}

TEST_CASE("blocking exchange: the default follows Megatron-Core, zb-h1 refuses it naming the key") {
  const auto blocks = [](const std::string& text, std::vector<std::string> sets) {
    return blocking_exchange(model::load_scenario_text(text, "x.yaml", sets).scenario().parallel);
  };
  CHECK(blocks(yaml(2, 2, 8), {}));                       // 1F1B: Megatron-Core's batch_p2p_sync
  CHECK_FALSE(blocks(yaml(2, 2, 8, "interleaved", 2), {}));  // its default --overlap-p2p-communication
  CHECK_FALSE(blocks(yaml(2, 2, 8, "gpipe"), {}));
  CHECK_FALSE(blocks(yaml(2, 1, 8), {"parallel.pipeline_exchange=blocking"}));  // nothing to exchange
  CHECK(blocks(yaml(2, 2, 8, "interleaved", 2), {"parallel.pipeline_exchange=blocking"}));
  CHECK_FALSE(blocks(yaml(2, 2, 8), {"parallel.pipeline_exchange=overlapped"}));
  CHECK_THROWS_WITH_AS(model::load_scenario_text(yaml(2, 2, 8, "zb-h1"), "x.yaml", {"parallel.pipeline_exchange=blocking"}),
                       doctest::Contains("key 'parallel.pipeline_exchange': parallel.pipeline_exchange blocking is modelled "
                                         "for the schedules gpipe, 1f1b and interleaved"),
                       Error);
}

TEST_CASE("blocking exchange: fast mode agrees with exact mode") {
  // NVLink node, tp 2 x pp 4, and a PCIe server at pp 2 (links shared: other stages' sends and
  // an exchange's two directions share the GPUs' links), every schedule that exchanges.
  const std::string pcie = "hardware.profile=a100-pcie-40gb";
  for (const auto& [schedule, chunks] : {std::pair<std::string, int>{"1f1b", 1}, {"interleaved", 2}, {"gpipe", 1}})
    for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {pcie, "parallel.pp=2", "parallel.global_batch=32"}}) {
      CAPTURE(schedule);
      CAPTURE(extra.size());
      std::vector<std::string> sets = extra;
      sets.push_back("parallel.pipeline_exchange=blocking");
      const double exact = run(yaml(2, 4, 16, schedule, chunks), sets).result.iteration_time_s;
      sets.push_back("sim.mode=fast");
      const double fast =
          simulate(model::load_scenario_text(yaml(2, 4, 16, schedule, chunks), "x.yaml", sets)).result.iteration_time_s;
      CHECK(std::abs(fast - exact) / exact < 0.005);
    }
}

TEST_CASE("blocking exchange: interleaved stages whose forwards are all warm-up exchange after the last one") {
  // Micro-batches = pp: stage 0 runs every forward before its first backward (Megatron-Core's
  // are_all_microbatches_in_warmup), so its last forward's output goes out before that
  // backward's gradient comes in; paired with the backward, as the steady state pairs them,
  // stage 0 would wait for a gradient that needs that output (a cycle).
  const auto order = schedule::pipeline_order(ScheduleKind::kInterleaved, 4, 4, 2);
  CHECK(std::none_of(order[0].begin(), order[0].end(), [](const schedule::PipeStep& s) { return s.paired; }));
  CHECK(std::count_if(order[3].begin(), order[3].end(), [](const schedule::PipeStep& s) { return s.paired; }) == 4);
  const std::string text = yaml(2, 4, 4, "interleaved", 2);
  const double exact = run(text, {"parallel.pipeline_exchange=blocking"}).result.iteration_time_s;
  const double fast = simulate(model::load_scenario_text(text, "x.yaml", {"parallel.pipeline_exchange=blocking", "sim.mode=fast"}))
                          .result.iteration_time_s;
  CHECK(exact > run(text, {"parallel.pipeline_exchange=overlapped"}).result.iteration_time_s);
  CHECK(std::abs(fast - exact) / exact < 0.005);
}

TEST_CASE("blocking exchange in fast mode: a send waits for its receiver, the next step for the exchange") {
  // As the exact-mode cases above, on fast mode's composed steps: pp 2, two micro-batches.
  const model::ResolvedScenario resolved =
      model::load_scenario_text(yaml(1, 2, 2), "x.yaml", {"parallel.pipeline_exchange=blocking", "sim.mode=fast"});
  const Scenario& sc = resolved.scenario();
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const strategies::RecomputePlan plan =
      strategies::plan_fixed_strategy(sc.recompute, strategies::stage_partition(sc.model.layers, sc.parallel));
  fast::StepCache cache;
  const fast::FastResult r = fast::simulate_fast(sc, plan, w, cache, false, true);
  REQUIRE(r.timeline.size() == 2);
  // Stage 0: F0 F1 B0 B1; stage 1: F0 B0 F1 B1.
  const std::vector<fast::FastStep>& s0 = r.timeline[0];
  const std::vector<fast::FastStep>& s1 = r.timeline[1];
  REQUIRE(s0.size() == 4);
  REQUIRE(s1.size() == 4);
  CHECK(s0[1].start_ps == s0[0].send_end_ps);             // F1 after the exchange sending F0
  CHECK(s0[1].send_start_ps == s1[1].compute_end_ps);     // F1's activation: once stage 1 posts after B0
  CHECK(s1[2].start_ps >= s0[1].send_end_ps);             // stage 1's F1 after receiving it
  CHECK(s0[2].start_ps == std::max(s0[1].send_end_ps, s1[1].send_end_ps));  // B0: both directions done
}

TEST_CASE("scatter-gather: 1/tp of the boundary tensor is sent and the receiver all-gathers it") {
  // GPT-1.3B: s 2048, h 2048; micro-batch 1; 16-bit: 2 * 2048 * 2048 = 8 MiB per boundary tensor.
  const auto workload_of = [](int tp, bool sp, bool scatter) {
    const auto resolved = model::load_scenario_text(yaml(tp, 2, 8), "x.yaml",
                                                    {std::string("parallel.sequence_parallel=") + (sp ? "true" : "false"),
                                                     std::string("parallel.pipeline_scatter_gather=") + (scatter ? "true" : "false")});
    return model::gpt_workload(resolved.scenario().model, resolved.scenario().parallel);
  };
  constexpr std::uint64_t kTensor = 2ull * 2048 * 2048;
  CHECK(workload_of(4, false, false).boundary_bytes == kTensor);
  CHECK(workload_of(4, false, false).boundary_gather_bytes == 0);
  CHECK(workload_of(4, false, true).boundary_bytes == kTensor / 4);
  CHECK(workload_of(4, false, true).boundary_gather_bytes == kTensor);
  CHECK(workload_of(4, true, true).boundary_bytes == kTensor / 4);  // already sharded by SP
  CHECK(workload_of(4, true, true).boundary_gather_bytes == 0);
  CHECK(workload_of(1, false, true).boundary_gather_bytes == 0);

  // Every received tensor is gathered (stage 1's forwards, stage 0's backwards), and the
  // send carries the part.
  const SimRun r = run(yaml(4, 2, 2), {"parallel.pipeline_scatter_gather=true"});
  const sim::Program& prog = r.built.program;
  std::vector<int> gathers_per_stage(2, 0);
  for (std::size_t t = 0; t < prog.tasks.size(); ++t) {
    const sim::Task& task = prog.tasks[t];
    for (int stage : {0, 1})
      if (prog.names[task.name] == "pp_recv_allgather" && task.gpu == first_gpu(r, stage)) ++gathers_per_stage[static_cast<std::size_t>(stage)];
  }
  CHECK(gathers_per_stage[0] > 0);
  CHECK(gathers_per_stage[0] == gathers_per_stage[1]);  // two micro-batches each way, as many phases
  const sim::Task& send = prog.tasks[static_cast<std::size_t>(find_task(r, 0, "send_activation", "mb0."))];
  REQUIRE(send.num_flows == 1);
  CHECK(prog.flows[send.first_flow].bytes == kTensor / 4);
  CHECK(run(yaml(4, 2, 2), {}).result.iteration_time_s != r.result.iteration_time_s);
}

TEST_CASE("scatter-gather: fast mode agrees with exact mode") {
  for (const bool scatter : {false, true}) {
    CAPTURE(scatter);
    const std::vector<std::string> sets = {std::string("parallel.pipeline_scatter_gather=") + (scatter ? "true" : "false")};
    std::vector<std::string> fast_sets = sets;
    fast_sets.push_back("sim.mode=fast");
    const double exact = run(yaml(4, 2, 8), sets).result.iteration_time_s;
    const double fast = simulate(model::load_scenario_text(yaml(4, 2, 8), "x.yaml", fast_sets)).result.iteration_time_s;
    CHECK(std::abs(fast - exact) / exact < 0.01);
  }
}
