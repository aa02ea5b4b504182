// Megatron's micro-batch load (get_batch → tensor_parallel.broadcast_data) in the program: two
// TP broadcasts per micro-batch on the first and last pipeline stage, their bytes, their place
// in the stream, the host's waits in them and the rendezvous of the TP group's host threads.
#include "hw_models/topology.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "schedule/program_builder.hpp"
#include "sim/executor.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// GPT-1.3B at s = 1024, micro-batch 2, four micro-batches, every GPU simulated; the host model
/// on with `host_kernel` > 0 (the broadcasts are emitted with it only).
model::ResolvedScenario load_scenario(int tp, int pp, const std::string& host_kernel = "0s",
                                      const std::string& host_collective = "0s") {
  return model::default_scenario({"model.preset=gpt-1.3b", "model.seq_len=1024", "parallel.tp=" + std::to_string(tp),
                                  "parallel.pp=" + std::to_string(pp), "parallel.dp=1", "parallel.micro_batch=2",
                                  "parallel.global_batch=8", "recompute.strategy=none", "hardware.nodes=1",
                                  "sim.exploit_symmetry=false", "hardware.gpu.host_kernel=" + host_kernel,
                                  "hardware.gpu.host_collective=" + host_collective});
}

struct Built {
  model::ResolvedScenario resolved;
  schedule::BuiltProgram built;
};
Built build(const model::ResolvedScenario& resolved) {
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware);
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const SimRun run = simulate(resolved);
  return {resolved, schedule::build_program(sc, run.plan, topo, w)};
}

std::vector<std::size_t> named(const sim::Program& prog, const std::string& name, sim::GpuId gpu) {
  std::vector<std::size_t> ids;
  for (std::size_t t = 0; t < prog.tasks.size(); ++t)
    if (prog.tasks[t].gpu == gpu && prog.names[prog.tasks[t].name] == name) ids.push_back(t);
  return ids;
}

std::uint64_t flow_payload(const sim::Program& prog, std::size_t task) {
  std::uint64_t bytes = 0;
  const sim::Task& t = prog.tasks[task];
  for (std::uint32_t f = t.first_flow; f < t.first_flow + t.num_flows; ++f)
    bytes += prog.flows[f].payload_bytes > 0 ? prog.flows[f].payload_bytes : prog.flows[f].bytes;
  return bytes;
}

}  // namespace

TEST_CASE("micro-batch load: Megatron's broadcast_data bytes from the micro-batch and sequence") {
  // _MAX_DATA_DIM = 5 int64 sizes of one key; the 'text' key: b × (s + 1) int64 tokens.
  const model::ResolvedScenario r = load_scenario(2, 3);
  const schedule::MicroBatchLoadBytes b = schedule::micro_batch_load_bytes(r.scenario());
  CHECK(b.sizes == 40);
  CHECK(b.data == 2u * 1025u * 8u);
  Scenario other = r.scenario();
  other.parallel.micro_batch = 3;
  other.model.seq_len = 4096;
  CHECK(schedule::micro_batch_load_bytes(other).data == 3u * 4097u * 8u);
  CHECK(schedule::micro_batch_load_bytes(other).sizes == 40);
}

TEST_CASE("micro-batch load: two TP broadcasts per micro-batch on the first and last stage only") {
  const Built b = build(load_scenario(2, 3, "1us"));
  const sim::Program& prog = b.built.program;
  const schedule::MicroBatchLoadBytes bytes = schedule::micro_batch_load_bytes(b.resolved.scenario());
  REQUIRE(b.built.machine.gpus.size() == 6);
  std::map<std::int32_t, int> group_members;
  for (sim::GpuId g = 0; g < 6; ++g) {
    CAPTURE(g);
    const int stage = b.built.gpu_stage[static_cast<std::size_t>(g)];
    const bool loads = stage == 0 || stage == 2;
    const auto sizes = named(prog, "batch_sizes_broadcast", g);
    const auto data = named(prog, "batch_broadcast", g);
    const auto forwards = named(prog, "forward", g);
    REQUIRE(forwards.size() == 4);
    CHECK(sizes.size() == (loads ? 4u : 0u));
    CHECK(data.size() == (loads ? 4u : 0u));
    if (!loads) continue;
    // The chain broadcast from tp rank 0: the root sends the bytes to the other rank, which
    // sends nothing on.
    const bool root = b.built.gpu_rank[static_cast<std::size_t>(g)] % 2 == 0;
    for (std::size_t m = 0; m < 4; ++m) {
      CAPTURE(m);
      for (std::size_t task : {sizes[m], data[m]}) {
        CHECK(prog.tasks[task].stream == schedule::kTp);
        CHECK(prog.tasks[task].category == sim::Category::kTpComm);
        REQUIRE(prog.tasks[task].group >= 0);
        ++group_members[prog.tasks[task].group];
      }
      CHECK(flow_payload(prog, sizes[m]) == (root ? bytes.sizes : 0));
      CHECK(flow_payload(prog, data[m]) == (root ? bytes.data : 0));
      // In the micro-batch's forward, after its marker (the receive on the last stage) and
      // before its first forward op: the sizes, then the data, then a compute-stream marker
      // that everything after waits for.
      CHECK(sizes[m] > forwards[m]);
      CHECK(data[m] > sizes[m]);
      CHECK(prog.instances[prog.tasks[sizes[m]].instance] == "mb" + std::to_string(m) + ".");
      const sim::Task& sized = prog.tasks[sizes[m]];
      REQUIRE(sized.num_deps == 1);
      CHECK(static_cast<std::size_t>(prog.deps[sized.first_dep]) == forwards[m]);
      const sim::Task& d = prog.tasks[data[m]];
      REQUIRE(d.num_deps == 1);
      CHECK(static_cast<std::size_t>(prog.deps[d.first_dep]) == sizes[m]);
      const std::size_t loaded = data[m] + 1;
      CHECK(prog.names[prog.tasks[loaded].name] == "batch_loaded");
      CHECK(prog.tasks[loaded].stream == schedule::kCompute);
      CHECK(static_cast<std::size_t>(prog.deps[prog.tasks[loaded].first_dep]) == data[m]);
    }
  }
  // Each broadcast is one rendezvous of the stage's two tp ranks.
  CHECK(group_members.size() == 2 * 4 * 2);
  for (const auto& [group, members] : group_members) CHECK(members == 2);

  // Without a TP group (tp 1) there is nothing to broadcast.
  const Built single = build(load_scenario(1, 3, "1us"));
  CHECK(named(single.built.program, "batch_sizes_broadcast", 0).empty());
  CHECK(named(single.built.program, "batch_broadcast", 0).empty());
  // Without the host model they are there too (Megatron broadcasts whatever the host does),
  // without the host's waits for them.
  const Built no_host = build(load_scenario(2, 3));
  CHECK(named(no_host.built.program, "batch_sizes_broadcast", 0).size() == named(prog, "batch_sizes_broadcast", 0).size());
  CHECK(named(no_host.built.program, "batch_broadcast", 0).size() == named(prog, "batch_broadcast", 0).size());
  CHECK(no_host.built.program.tasks.size() == b.built.program.tasks.size());
  CHECK(no_host.built.program.host_waits.empty());
}

TEST_CASE("micro-batch load: the host waits for the sizes broadcast, so a slower tp rank's host holds the others") {
  // Host model on, far ahead of the GPU (1 µs per kernel, 20 µs per collective call). tp rank
  // 1's host is made 100 ms slower from its second micro-batch's load on (its built issue times
  // shifted, as a slower host thread would issue them). The sizes broadcast is a rendezvous:
  // it starts when the slow rank issues it; tp rank 0's host blocks in sizes_cuda.cpu() until
  // it has ended, and only then issues the data broadcast (20 µs + one kernel of host time),
  // so that broadcast starts exactly that long after the sizes' end (a host running ahead
  // would have issued it long before: it would start at the sizes' end).
  const Built b = build(load_scenario(2, 1, "1us", "20us"));
  const sim::Program& prog = b.built.program;
  REQUIRE(prog.issue_ps.size() == prog.tasks.size());
  const auto sizes0 = named(prog, "batch_sizes_broadcast", 0), sizes1 = named(prog, "batch_sizes_broadcast", 1);
  const auto data0 = named(prog, "batch_broadcast", 0);
  REQUIRE(sizes0.size() == 4);
  REQUIRE(sizes1.size() == 4);
  // The host waits after the sizes broadcast: one per load on each GPU, resuming at the data
  // broadcast's issue.
  int waits_for_sizes = 0;
  TimePs data_call_ps = -1;  // GPU 0's host time to issue its second data broadcast
  for (const sim::Program::HostWait& w : prog.host_waits)
    if (prog.names[prog.tasks[static_cast<std::size_t>(w.until)].name] == "batch_sizes_broadcast") {
      ++waits_for_sizes;
      CHECK(prog.names[prog.tasks[static_cast<std::size_t>(w.resume)].name] == "batch_broadcast");
      if (static_cast<std::size_t>(w.resume) == data0[1]) data_call_ps = prog.issue_ps[data0[1]] - w.host_before_ps;
    }
  CHECK(waits_for_sizes == 2 * 4);
  CHECK(data_call_ps == 21'000'000);

  // The first embedding kernel of GPU 0's second micro-batch: its first compute kernel after
  // that micro-batch's data broadcast.
  std::size_t embedding = data0[1] + 1;
  while (prog.tasks[embedding].gpu != 0 || prog.tasks[embedding].stream != schedule::kCompute ||
         prog.tasks[embedding].kind != sim::TaskKind::kKernel)
    ++embedding;
  const sim::ExecResult base = sim::execute(b.built.machine, prog);

  constexpr TimePs kSlower = 100'000'000'000;  // 100 ms: it issues the load after its GPU is idle
  sim::Program slow = prog;
  for (std::size_t t = sizes1[1]; t < slow.tasks.size(); ++t)
    if (slow.tasks[t].gpu == 1) slow.issue_ps[t] += kSlower;
  for (sim::Program::HostWait& w : slow.host_waits)
    if (slow.tasks[static_cast<std::size_t>(w.resume)].gpu == 1 && static_cast<std::size_t>(w.resume) >= sizes1[1])
      w.host_before_ps += kSlower;
  const sim::ExecResult ex = sim::execute(b.built.machine, slow);
  // (The slow rank's issue is its built time plus the earlier waits' shift: >=.)
  CHECK(ex.task_start_ps[sizes0[1]] >= slow.issue_ps[sizes1[1]]);
  CHECK(ex.task_start_ps[data0[1]] == ex.task_end_ps[sizes0[1]] + data_call_ps);
  CHECK(base.task_start_ps[sizes0[1]] < slow.issue_ps[sizes1[1]]);
  CHECK(ex.task_start_ps[embedding] > base.task_start_ps[embedding]);
}
