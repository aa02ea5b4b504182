// Sharded data parallelism (parallel.sharding, parallel.shard_group): static memory per level
// against the hand formulas, bytes each level moves per GPU against the ZeRO paper's counts,
// the transient gathered parameters in the simulated peak, prefetch hiding (or not) the
// per-layer all-gathers, per-micro-batch reductions, hybrid sharding and the scenario errors.
#include "common/error.hpp"
#include "hw_models/topology.hpp"
#include "model/resolved_scenario.hpp"
#include "model/sharding.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "schedule/overlap_windows.hpp"
#include "schedule/program_builder.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// GPT 1.3B-like small model (h 1024, 4 layers) on one DGX A100 node, pp 1, tp 1: every dp
/// collective's size is a multiple of the shard counts used below.
std::vector<std::string> small(const std::string& sharding, int dp, int micro_batches) {
  return {"model.preset=gpt-1.3b",
          "model.layers=4",
          "model.hidden=1024",
          "model.heads=16",
          "model.seq_len=512",
          "model.vocab=51200",
          "parallel.tp=1",
          "parallel.pp=1",
          "parallel.dp=" + std::to_string(dp),
          "parallel.micro_batch=1",
          "parallel.global_batch=" + std::to_string(dp * micro_batches),
          "parallel.sharding=" + sharding,
          "hardware.profile=dgx-a100-80gb",
          "hardware.nodes=1",
          "sim.exploit_symmetry=false",
          "recompute.strategy=none"};
}

/// Parameters per GPU of the one stage (pp 1).
std::uint64_t stage_params(const Scenario& sc) {
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  return w.layer_params * static_cast<std::uint64_t>(sc.model.layers) + w.embedding_params + w.head_params;
}

/// Data bytes GPU 0 sends in dp-category collectives over one iteration, by task name.
std::map<std::string, std::uint64_t> dp_bytes_sent(const model::ResolvedScenario& resolved) {
  const Scenario& sc = resolved.scenario();
  const SimRun run = simulate(resolved);
  const hw_models::Topology topo(sc.hardware);
  const schedule::BuiltProgram built =
      schedule::build_program(sc, run.plan, topo, model::gpt_workload(sc.model, sc.parallel));
  std::map<std::string, std::uint64_t> out;
  for (const sim::Task& t : built.program.tasks) {
    if (t.gpu != 0 || t.category != sim::Category::kDpComm) continue;
    for (std::uint32_t f = t.first_flow; f < t.first_flow + t.num_flows; ++f) {
      const sim::Flow& flow = built.program.flows[f];
      out[built.program.names[t.name]] += flow.payload_bytes > 0 ? flow.payload_bytes : flow.bytes;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("sharding: static bytes per parameter are the ZeRO formulas of each level") {
  // dp 4, fp32 main gradients (g = 4): none 2 + 4 + 12 = 18; optimizer 6 + 12/4 = 9;
  // gradients 2 + (4 + 12)/4 = 6; full (2 + 4 + 12)/4 = 4.5 bytes per parameter.
  for (const auto& [level, per_param] :
       {std::pair{"none", 18.0}, {"optimizer", 9.0}, {"gradients", 6.0}, {"full", 4.5}}) {
    CAPTURE(level);
    const model::ResolvedScenario resolved = model::default_scenario(small(level, 4, 1));
    const Scenario& sc = resolved.scenario();
    const std::uint64_t params = stage_params(sc);
    const std::int64_t want = static_cast<std::int64_t>(per_param * static_cast<double>(params)) +
                              static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes);
    CHECK(model::static_bytes(sc, params) == want);
    const SimRun run = simulate(resolved);
    CHECK(run.result.stages[0].static_memory_bytes == want);
  }
  // 16-bit gradients (g = 2): full (2 + 2 + 12)/4 = 4; distributed_optimizer is optimizer.
  auto with = [](std::vector<std::string> o, const std::string& extra) {
    o.push_back(extra);
    return o;
  };
  const model::ResolvedScenario half = model::default_scenario(with(small("full", 4, 1), "parallel.fp32_main_grads=false"));
  CHECK(model::static_bytes(half.scenario(), 1000) == 4000 + static_cast<std::int64_t>(half.scenario().hardware.memory_reserve_bytes));
  const model::ResolvedScenario alias = model::default_scenario(with(small("none", 4, 1), "parallel.distributed_optimizer=true"));
  CHECK(model::sharding_level(alias.scenario().parallel) == Sharding::kOptimizer);
  CHECK(model::static_bytes(alias.scenario(), 1000) == 9000 + static_cast<std::int64_t>(alias.scenario().hardware.memory_reserve_bytes));
}

TEST_CASE("sharding: bytes moved per GPU per iteration (ZeRO-1 2x, ZeRO-3 3x the parameter bytes)") {
  // 16-bit gradients, so that gradient and parameter bytes are equal (2 per parameter, P):
  // a ring all-reduce sends 2 (d-1)/d of its buffer, a reduce-scatter or all-gather (d-1)/d.
  // Per iteration of m micro-batches: none 2P, optimizer P + P, gradients m P + P, full
  // m (P + P + P): two all-gathers (forward, backward) and a reduce-scatter per micro-batch.
  const int dp = 4, m = 2;
  for (const char* level : {"none", "optimizer", "gradients", "full"}) {
    CAPTURE(level);
    auto overrides = small(level, dp, m);
    overrides.push_back("parallel.fp32_main_grads=false");
    const model::ResolvedScenario resolved = model::default_scenario(overrides);
    const std::uint64_t param_bytes = 2 * stage_params(resolved.scenario());
    const std::uint64_t share = param_bytes / dp * (dp - 1);  // (d-1)/d of the parameter bytes
    const auto sent = dp_bytes_sent(resolved);
    std::uint64_t total = 0;
    for (const auto& [name, bytes] : sent) total += bytes;
    const std::string l = level;
    if (l == "none") {
      CHECK(sent.at("dp_allreduce") == 2 * share);
    } else if (l == "optimizer") {
      CHECK(sent.at("dp_reducescatter") == share);
      CHECK(sent.at("dp_param_allgather") == share);
    } else if (l == "gradients") {
      CHECK(sent.at("dp_reducescatter") == m * share);
      CHECK(sent.at("dp_param_allgather") == share);
    } else {
      CHECK(sent.at("fsdp_param_allgather") == 2 * m * share);
      CHECK(sent.at("dp_reducescatter") == m * share);
      CHECK(sent.count("dp_param_allgather") == 0);
    }
    const std::uint64_t per_micro_batch = l == "full" ? 3 : l == "gradients" ? 1 : 0;
    CHECK(total == (l == "full" ? 0 : l == "gradients" ? 1 : 2) * share + per_micro_batch * m * share);
  }
}

TEST_CASE("sharding: hybrid (shard_group node) shards in the node and all-reduces the shard across nodes") {
  // dp 16 on two DGX H100 nodes, tp 1: shard groups of 8, 2 replicas. Static bytes use 8;
  // each reduce-scatter in the node is followed by an all-reduce of its 1/8 across the nodes.
  auto overrides = small("full", 16, 1);
  for (auto& o : overrides)
    if (o == "hardware.nodes=1") o = "hardware.nodes=2";
  overrides.push_back("parallel.shard_group=node");
  overrides.push_back("parallel.fp32_main_grads=false");
  const model::ResolvedScenario resolved = model::default_scenario(overrides);
  const Scenario& sc = resolved.scenario();
  CHECK(model::shard_group_size(sc.parallel, sc.hardware.gpus_per_node) == 8);
  CHECK(model::shard_replicas(sc.parallel, sc.hardware.gpus_per_node) == 2);
  const std::uint64_t params = stage_params(sc);
  CHECK(model::static_bytes(sc, params) ==
        static_cast<std::int64_t>(16.0 / 8 * static_cast<double>(params)) + static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes));
  const auto sent = dp_bytes_sent(resolved);
  const std::uint64_t param_bytes = 2 * params;
  CHECK(sent.at("fsdp_param_allgather") == 2 * (param_bytes / 8 * 7));
  CHECK(sent.at("dp_reducescatter") == param_bytes / 8 * 7);
  // The replica all-reduce of two ranks sends its buffer (1/8 of the gradients) once: 2 (2-1)/2.
  CHECK(sent.at("dp_replica_allreduce") == param_bytes / 8);
}

TEST_CASE("sharding with context parallelism: the shard group spans dp · cp") {
  // dp 2 × cp 2 hold copies of the same parameters (Megatron-Core's data-parallel-with-cp
  // group): full sharding over 4 ranks, (2 + 2 + 12)/4 = 4 bytes per parameter with 16-bit
  // gradients, and each per-layer all-gather sends 3/4 of the layer's bytes.
  auto overrides = small("full", 2, 2);
  for (auto& o : overrides)
    if (o == "model.seq_len=512") o = "model.seq_len=1024";
  overrides.push_back("parallel.cp=2");
  overrides.push_back("model.flash_attention=true");
  overrides.push_back("parallel.fp32_main_grads=false");
  const model::ResolvedScenario resolved = model::default_scenario(overrides);
  const Scenario& sc = resolved.scenario();
  CHECK(model::shard_group_size(sc.parallel, sc.hardware.gpus_per_node) == 4);
  const std::uint64_t params = stage_params(sc);
  CHECK(model::static_bytes(sc, params) ==
        4 * static_cast<std::int64_t>(params) + static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes));
  const auto sent = dp_bytes_sent(resolved);
  const std::uint64_t share = 2 * params / 4 * 3;
  CHECK(sent.at("fsdp_param_allgather") == 2 * 2 * share);  // forward + backward, 2 micro-batches
  CHECK(sent.at("dp_reducescatter") == 2 * share);
  // Hybrid with tp 4 on one 8-GPU node: a node holds 2 of the 4 dp · cp ranks (the cp pair),
  // so the shard group is 2 and the shard is all-reduced across the 2 replicas.
  auto hybrid = overrides;
  hybrid.push_back("parallel.tp=4");
  hybrid.push_back("parallel.shard_group=node");
  for (auto& o : hybrid)
    if (o == "hardware.nodes=1") o = "hardware.nodes=2";
  const model::ResolvedScenario h = model::default_scenario(hybrid);
  CHECK(model::shard_group_size(h.scenario().parallel, 8) == 2);
  CHECK(model::shard_replicas(h.scenario().parallel, 8) == 2);
}

TEST_CASE("sharding: scenario errors name the key") {
  auto message_of = [](std::vector<std::string> overrides) -> std::string {
    try {
      model::default_scenario(overrides);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto with = [](std::vector<std::string> o, std::vector<std::string> extra) {
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  };
  CHECK(message_of(with(small("fsdp", 4, 1), {})).find("'fsdp' is not one of: none, optimizer, gradients, full") != std::string::npos);
  CHECK(message_of(with(small("none", 4, 1), {"parallel.shard_group=node"})).find("key 'parallel.shard_group'") != std::string::npos);
  CHECK(message_of(with(small("full", 4, 1), {"parallel.overlap_param_gather=true"})).find("key 'parallel.overlap_param_gather'") !=
        std::string::npos);
  CHECK(message_of(with(small("gradients", 4, 1), {"parallel.dp_overlap=end"})).find("key 'parallel.dp_overlap'") != std::string::npos);
  CHECK(message_of(with(small("full", 4, 1), {"parallel.schedule=zb-h1"})).find("key 'parallel.schedule'") != std::string::npos);
  CHECK(message_of(with(small("full", 4, 1), {"recompute.strategy=full", "recompute.num_layers=2"}))
            .find("key 'recompute.num_layers'") != std::string::npos);
  // tp 3 does not divide a node's 8 GPUs: node shard groups cannot tile dp.
  CHECK(message_of(with(small("full", 2, 1), {"parallel.tp=3", "parallel.shard_group=node", "model.heads=12", "model.hidden=1536"}))
            .find("parallel.shard_group node needs each node to hold whole shard groups") != std::string::npos);
  CHECK(message_of(with(small("full", 4, 1), {})).empty());
}

namespace {

/// Full sharding on one node, dp 8, 4 micro-batches, 4 layers. Per GPU 0: the compute
/// stream's idle time waiting on FSDP all-gathers of the inner layers (L1-L3, whose
/// predecessor unit is a layer: the embedding's short compute cannot hide layer 0's), their
/// all-gathers' total time, and every all-gather's count.
struct GatherExposure {
  TimePs inner_exposed_ps = 0;
  TimePs inner_gather_ps = 0;
  int gathers = 0, inner_gathers = 0;
  double iteration_s = 0;
};

bool inner_layer(const std::string& instance) {
  return instance.find("L1.") != std::string::npos || instance.find("L2.") != std::string::npos ||
         instance.find("L3.") != std::string::npos;
}

GatherExposure gather_exposure(const std::string& nvlink_bw) {
  // Sequences of 2048 in micro-batches of 4: a layer computes for about a millisecond, its
  // 25 MB all-gather takes about a tenth of that at NVLink speed.
  auto overrides = small("full", 8, 4);
  overrides.push_back("model.seq_len=2048");
  overrides.push_back("parallel.micro_batch=4");
  overrides.push_back("parallel.global_batch=128");
  overrides.push_back("hardware.node.nvlink.bw=" + nvlink_bw);
  const model::ResolvedScenario resolved = model::default_scenario(overrides);
  SimOptions options;
  options.keep_trace_data = true;
  const SimRun run = simulate(resolved, options);
  const sim::Program& prog = run.built.program;
  REQUIRE(run.exec.task_end_ps.size() == prog.tasks.size());
  GatherExposure out;
  out.iteration_s = run.result.iteration_time_s;
  const auto is_gather = [&](std::size_t t) { return prog.names[prog.tasks[t].name] == "fsdp_param_allgather"; };
  const auto inner = [&](std::size_t t) { return inner_layer(prog.instances[prog.tasks[t].instance]); };
  for (std::size_t t = 0; t < prog.tasks.size(); ++t) {
    if (prog.tasks[t].gpu != 0 || !is_gather(t)) continue;
    ++out.gathers;
    if (!inner(t)) continue;
    ++out.inner_gathers;
    out.inner_gather_ps += run.exec.task_end_ps[t] - run.exec.task_start_ps[t];
  }
  const auto gaps = schedule::compute_stream_gaps(prog, run.exec, run.built.machine.gpus.size());
  for (const schedule::IdleGap& gap : gaps[0])
    if (gap.gate >= 0 && is_gather(static_cast<std::size_t>(gap.gate)) && inner(static_cast<std::size_t>(gap.gate)))
      out.inner_exposed_ps += gap.end_ps - gap.start_ps;
  return out;
}

}  // namespace

TEST_CASE("sharding full: prefetch hides the per-layer all-gathers on fast links, not on slow ones") {
  // Units per micro-batch: forward embedding, 4 layers, head; backward the same: 12; 4
  // micro-batches: 48 all-gathers, 24 of them of the inner layers (3 layers, 2 passes).
  const GatherExposure fast = gather_exposure("300GB/s");
  const GatherExposure slow = gather_exposure("2GB/s");
  CHECK(fast.gathers == 48);
  CHECK(slow.gathers == 48);
  CHECK(fast.inner_gathers == 24);
  MESSAGE("inner layers' all-gathers: fast links " << fast.inner_exposed_ps << " ps exposed of " << fast.inner_gather_ps
                                                   << " ps; slow links " << slow.inner_exposed_ps << " ps of "
                                                   << slow.inner_gather_ps << " ps");
  // Fast links: each inner layer's all-gather, issued while the unit before it computes,
  // has ended when that unit ends.
  CHECK(fast.inner_gather_ps > 0);
  CHECK(fast.inner_exposed_ps == 0);
  // Slow links: the all-gathers are longer than the compute they overlap; most of their time
  // is exposed.
  CHECK(slow.inner_exposed_ps > slow.inner_gather_ps / 2);
  CHECK(slow.iteration_s > fast.iteration_s);
}

TEST_CASE("sharding full: the peak holds two gathered units (current and prefetched) on top of the activations") {
  // Same plan, same activations: full vs optimizer differ in the peak by the transient
  // gathered parameters and unsharded gradients at the peak's instant. With one micro-batch
  // the activation peak is at the end of the forward pass, where the head is gathered for its
  // backward, and the top layer is prefetched: 2 bytes x (head + layer) parameters (the head's
  // gradients are produced after its backward starts freeing the logits).
  const model::ResolvedScenario full = model::default_scenario(small("full", 4, 1));
  const model::ResolvedScenario zero1 = model::default_scenario(small("optimizer", 4, 1));
  const SimRun a = simulate(full), b = simulate(zero1);
  const model::Workload w = model::gpt_workload(full.scenario().model, full.scenario().parallel);
  const std::int64_t transient_a = a.result.stages[0].peak_memory_bytes - a.result.stages[0].static_memory_bytes;
  const std::int64_t transient_b = b.result.stages[0].peak_memory_bytes - b.result.stages[0].static_memory_bytes;
  MESSAGE("activation peak full " << transient_a << ", optimizer " << transient_b << "; layer params " << w.layer_params
                                  << ", head " << w.head_params << ", embedding " << w.embedding_params);
  CHECK(transient_a - transient_b == static_cast<std::int64_t>(2 * (w.layer_params + w.head_params)));
}
