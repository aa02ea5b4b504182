// End-to-end checks of mixture-of-experts training: the all-to-all on the engine's links
// against hand-computed times (one node, across nodes), the expert-parallel dispatch and
// combine and the expert-data-parallel gradient reduction in the simulated program, static
// memory per GPU exact, and exact and fast mode agreeing on MoE layouts.
#include "hw_models/collectives.hpp"
#include "hw_models/rounding.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/mode_agreement.hpp"
#include "runner/simulate.hpp"
#include "tests/common/engine_collective.hpp"
#include "tests/hw_models/hw_fixtures.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

TEST_CASE("all-to-all on the engine: one node, every GPU's NVLink carries (n-1) shares") {
  const HardwareSpec hw = test::nvswitch_cluster(1);
  const hw_models::Topology topo(hw);
  for (int n : {2, 4, 8}) {
    CAPTURE(n);
    std::vector<hw_models::Rank> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    const std::uint64_t bytes_per_pair = 1ull << 24;
    const auto phases = hw_models::plan_collective(topo, hw, hw_models::Collective::kAllToAll, hw_models::Algorithm::kRing,
                                                   ranks, bytes_per_pair * static_cast<std::uint64_t>(n));
    REQUIRE(phases.size() == 1);
    CHECK(phases[0].flows.size() == static_cast<std::size_t>(n * (n - 1)));
    CHECK(phases[0].latency_ps == 0);  // one step: each flow pays its path latency
    // Each GPU's uplink to the NVSwitch and its downlink each carry n−1 flows of one share,
    // fair-shared: all end together after (n−1)·share / bandwidth, plus the two-hop latency.
    const TimePs expected = transfer_time_ps((n - 1) * bytes_per_pair, hw.nvlink.bw_bytes_per_s) +
                            topo.path_latency_ps(0, 1);
    CHECK(test::engine_collective_ps(topo, phases, ranks) == expected);
  }
}

TEST_CASE("all-to-all on the engine: across nodes the rail NICs carry the remote shares") {
  const HardwareSpec hw = test::nvswitch_cluster(2);
  const hw_models::Topology topo(hw);
  const std::uint64_t share = 1ull << 24;
  SUBCASE("one GPU per node: one NIC flow each way") {
    const std::vector<hw_models::Rank> ranks{0, 8};
    const auto phases = hw_models::plan_collective(topo, hw, hw_models::Collective::kAllToAll,
                                                   hw_models::Algorithm::kRing, ranks, 2 * share);
    const TimePs expected = transfer_time_ps(share, hw.nic.bw_bytes_per_s) + topo.path_latency_ps(0, 8);
    CHECK(test::engine_collective_ps(topo, phases, ranks) == expected);
  }
  SUBCASE("two GPUs per node: each NIC carries two remote shares, NVLink one local") {
    const std::vector<hw_models::Rank> ranks{0, 1, 8, 9};
    const auto phases = hw_models::plan_collective(topo, hw, hw_models::Collective::kAllToAll,
                                                   hw_models::Algorithm::kRing, ranks, 4 * share);
    // GPU 0's rail NIC sends its shares for GPUs 8 and 9; GPU 8's NIC receives from 0 and 1.
    // The NIC (25 GB/s) is the slowest link on those paths (PCIe 32 GB/s carries the same two).
    const TimePs remote = transfer_time_ps(2 * share, hw.nic.bw_bytes_per_s) + topo.path_latency_ps(0, 8);
    const TimePs local = transfer_time_ps(share, hw.nvlink.bw_bytes_per_s) + topo.path_latency_ps(0, 1);
    CHECK(remote > local);
    CHECK(test::engine_collective_ps(topo, phases, ranks) == std::max(remote, local));
  }
}

namespace {

/// Llama 2 7B's width as a mixture of 8 experts of 2752 (top-2), 4 layers, on DGX H100 nodes.
std::string moe_config(const std::string& layout) {
  return "model.preset=llama2-7b model.layers=4 model.seq_len=2048 model.flash_attention=true "
         "model.moe.num_experts=8 model.moe.router_topk=2 model.moe.expert_ffn_hidden=2752 "
         "hardware.profile=dgx-h100-80gb " + layout;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

SimRun run(const std::string& config, bool keep = false) {
  SimOptions options;
  options.keep_trace_data = keep;
  return simulate(model::default_scenario(words(config)), options);
}

/// Tasks of the kept program named `name` (on any GPU), and how many flows they carry.
std::pair<int, int> tasks_named(const SimRun& r, const std::string& name) {
  const sim::Program& prog = r.built.program;
  const auto it = std::find(prog.names.begin(), prog.names.end(), name);
  if (it == prog.names.end()) return {0, 0};
  const auto id = static_cast<std::uint32_t>(it - prog.names.begin());
  int tasks = 0, flows = 0;
  for (const sim::Task& t : prog.tasks)
    if (t.name == id) {
      ++tasks;
      flows += static_cast<int>(t.num_flows);
    }
  return {tasks, flows};
}

/// The GPU groups (global ranks, sorted) that ran the collectives named `name` in the kept
/// program: the members of each rendezvous.
std::set<std::vector<int>> groups_named(const SimRun& r, const std::string& name) {
  const sim::Program& prog = r.built.program;
  const auto it = std::find(prog.names.begin(), prog.names.end(), name);
  if (it == prog.names.end()) return {};
  const auto id = static_cast<std::uint32_t>(it - prog.names.begin());
  std::map<std::int32_t, std::vector<int>> members;
  for (const sim::Task& t : prog.tasks)
    if (t.name == id && t.group >= 0) members[t.group].push_back(r.built.gpu_rank[t.gpu]);
  std::set<std::vector<int>> out;
  for (auto& [group, ranks] : members) {
    std::sort(ranks.begin(), ranks.end());
    out.insert(ranks);
  }
  return out;
}

}  // namespace

TEST_CASE("MoE training runs: dispatch and combine on the ep group, expert gradients over dp / ep") {
  // tp 2, ep 2, dp 4 on one node, full simulation (no symmetry): 8 GPUs.
  const SimRun r = run(moe_config("hardware.nodes=1 parallel.pp=1 parallel.tp=2 parallel.sequence_parallel=true parallel.dp=4 "
                                  "parallel.ep=2 parallel.micro_batch=1 parallel.global_batch=8 sim.exploit_symmetry=false"),
                       true);
  REQUIRE(!r.result.oom);
  CHECK(r.result.gpus == 8);
  // 4 layers x 2 micro-batches per GPU, forward and backward, on 8 GPUs; each call sends to
  // the one other member of its ep group.
  const auto [dispatch, dispatch_flows] = tasks_named(r, "ep_dispatch");
  CHECK(dispatch == 8 * 4 * 2);
  CHECK(dispatch_flows == dispatch);
  CHECK(tasks_named(r, "ep_combine").first == 8 * 4 * 2);
  CHECK(tasks_named(r, "ep_dispatch_bwd").first == 8 * 4 * 2);
  CHECK(tasks_named(r, "ep_combine_bwd").first == 8 * 4 * 2);
  // The TP all-gather of the dispatched tokens and its reduce-scatter run on the TP group.
  CHECK(tasks_named(r, "moe_allgather").first == 8 * 4 * 2);
  // Expert gradients: reduced over the 2 expert-data-parallel ranks, dense ones over all 4.
  CHECK(tasks_named(r, "edp_allreduce").first > 0);
  CHECK(tasks_named(r, "dp_allreduce").first > 0);
  // Static memory: 18 bytes per parameter, the GPU holding 4 of 8 experts of each layer.
  const model::ResolvedScenario resolved = model::default_scenario(words(moe_config(
      "hardware.nodes=1 parallel.pp=1 parallel.tp=2 parallel.sequence_parallel=true parallel.dp=4 parallel.ep=2 parallel.micro_batch=1 "
      "parallel.global_batch=8")));
  const model::Workload w = model::gpt_workload(resolved->model, resolved->parallel);
  CHECK(w.layer_expert_params == 4u * 3 * 4096 * 2752 / 2);
  const std::uint64_t params = 4 * w.layer_params + w.embedding_params + w.head_params;
  CHECK(r.result.stages[0].static_memory_bytes ==
        static_cast<std::int64_t>(18 * (params + 4 * w.layer_expert_params) + resolved->hardware.memory_reserve_bytes));
}

TEST_CASE("MoE with tp 2, etp 1, ep 2: the all-to-all spans each TP pair, no expert gather") {
  // tp 2, dp 4 on one node (8 GPUs), etp 1, ep 2, full simulation. Megatron-Core's expert rank
  // order (model/expert_grid.hpp, tests/model/test_moe.cpp) puts each dense TP pair in one ep
  // group and reduces the expert gradients over the 4 GPUs at the same place in every pair.
  const std::string layout = "hardware.nodes=1 parallel.pp=1 parallel.tp=2 parallel.sequence_parallel=true parallel.dp=4 "
                             "parallel.ep=2 parallel.etp=1 parallel.micro_batch=1 parallel.global_batch=8";
  const SimRun r = run(moe_config(layout + " sim.exploit_symmetry=false"), true);
  REQUIRE(!r.result.oom);
  CHECK(r.result.gpus == 8);
  using Groups = std::set<std::vector<int>>;
  const Groups pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  for (const char* name : {"ep_dispatch", "ep_combine", "ep_dispatch_bwd", "ep_combine_bwd"}) {
    CAPTURE(name);
    CHECK(groups_named(r, name) == pairs);
    CHECK(tasks_named(r, name).first == 8 * 4 * 2);  // 4 layers x 2 micro-batches per GPU
  }
  // The dense TP collectives stay on the same pairs; nothing gathers the experts' rows.
  CHECK(groups_named(r, "sp_allgather_attn") == pairs);
  CHECK(tasks_named(r, "moe_allgather").first == 0);
  CHECK(tasks_named(r, "moe_reducescatter").first == 0);
  // Expert gradients over tp · dp / (etp · ep) = 4 GPUs, dense ones over the 4 dp ranks.
  CHECK(groups_named(r, "edp_allreduce") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(groups_named(r, "dp_allreduce") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  // Static memory: 18 bytes per parameter, each GPU holding 4 whole experts of 8 per layer.
  const model::ResolvedScenario resolved = model::default_scenario(words(moe_config(layout)));
  const model::Workload w = model::gpt_workload(resolved->model, resolved->parallel);
  CHECK(w.layer_expert_params == 4u * 3 * 4096 * 2752);
  const std::uint64_t params = 4 * w.layer_params + w.embedding_params + w.head_params;
  CHECK(r.result.stages[0].static_memory_bytes ==
        static_cast<std::int64_t>(18 * (params + 4 * w.layer_expert_params) + resolved->hardware.memory_reserve_bytes));
  // With etp = tp the same layout pairs GPUs 2 apart and gathers over the TP pairs.
  const SimRun same = run(moe_config("hardware.nodes=1 parallel.pp=1 parallel.tp=2 parallel.sequence_parallel=true "
                                     "parallel.dp=4 parallel.ep=2 parallel.micro_batch=1 parallel.global_batch=8 "
                                     "sim.exploit_symmetry=false"),
                          true);
  CHECK(groups_named(same, "ep_dispatch") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(groups_named(same, "moe_allgather") == pairs);
  CHECK(groups_named(same, "edp_allreduce") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // Exploiting symmetry (one simulated GPU per stage) gives the same iteration.
  CHECK(run(moe_config(layout)).result.iteration_time_s == r.result.iteration_time_s);
}

TEST_CASE("MoE with tp 4, etp 2, ep 2: the expert gather runs on GPU pairs inside the TP group") {
  const std::string layout = "hardware.nodes=1 parallel.pp=1 parallel.tp=4 parallel.sequence_parallel=true parallel.dp=2 "
                             "parallel.ep=2 parallel.etp=2 parallel.micro_batch=1 parallel.global_batch=4";
  const SimRun r = run(moe_config(layout + " sim.exploit_symmetry=false"), true);
  REQUIRE(!r.result.oom);
  using Groups = std::set<std::vector<int>>;
  CHECK(groups_named(r, "moe_allgather") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(groups_named(r, "moe_reducescatter_bwd") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(groups_named(r, "ep_dispatch") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(groups_named(r, "edp_allreduce") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(groups_named(r, "sp_allgather_attn") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("MoE with context parallelism: the ep group spans dp · cp, experts sharded over dp · cp / ep") {
  // tp 2, dp 2, cp 2, ep 2 on one node, the distributed optimizer, full simulation: 8 GPUs.
  const std::string layout =
      "hardware.nodes=1 parallel.pp=1 parallel.tp=2 parallel.sequence_parallel=true parallel.dp=2 parallel.cp=2 "
      "parallel.ep=2 parallel.distributed_optimizer=true parallel.micro_batch=1 parallel.global_batch=4";
  const SimRun r = run(moe_config(layout + " sim.exploit_symmetry=false"), true);
  REQUIRE(!r.result.oom);
  CHECK(r.result.gpus == 8);
  // 4 layers x 2 micro-batches per GPU on 8 GPUs, one peer per ep group; ring attention beside.
  const auto [dispatch, dispatch_flows] = tasks_named(r, "ep_dispatch");
  CHECK(dispatch == 8 * 4 * 2);
  CHECK(dispatch_flows == dispatch);
  CHECK(tasks_named(r, "flash_attention_cp_kv").first > 0);
  // Expert gradients over dp · cp / ep = 2 ranks; with the distributed optimizer they are
  // reduce-scattered and the expert shards gathered back over that group.
  CHECK(tasks_named(r, "edp_reducescatter").first > 0);
  CHECK(tasks_named(r, "edp_allreduce").first == 0);
  CHECK(tasks_named(r, "edp_param_allgather").first > 0);
  // Static memory: bf16 weight and fp32 gradient (6 bytes) everywhere, the 12 optimizer bytes
  // over dp · cp = 4 for the dense parameters and over 2 for the experts.
  const model::ResolvedScenario resolved = model::default_scenario(words(moe_config(layout)));
  const model::Workload w = model::gpt_workload(resolved->model, resolved->parallel);
  const std::uint64_t dense = 4 * w.layer_params + w.embedding_params + w.head_params;
  const std::uint64_t experts = 4 * w.layer_expert_params;
  CHECK(r.result.stages[0].static_memory_bytes ==
        static_cast<std::int64_t>(dense * (6 + 12 / 4) + experts * (6 + 12 / 2)) + resolved->hardware.memory_reserve_bytes);
}

TEST_CASE("MoE: expert parallelism cuts the experts' static memory, imbalance slows the step") {
  const std::string base = "hardware.nodes=1 parallel.tp=1 parallel.pp=1 parallel.dp=8 parallel.micro_batch=1 parallel.global_batch=16 ";
  const SimResult ep1 = run(moe_config(base + "parallel.ep=1")).result;
  const SimResult ep2 = run(moe_config(base + "parallel.ep=2")).result;
  const SimResult ep8 = run(moe_config(base + "parallel.ep=8")).result;
  const std::int64_t expert_bytes_per_layer = 18ll * 8 * 3 * 4096 * 2752;  // all 8 experts
  CHECK(ep1.stages[0].static_memory_bytes - ep2.stages[0].static_memory_bytes == 4 * expert_bytes_per_layer / 2);
  CHECK(ep1.stages[0].static_memory_bytes - ep8.stages[0].static_memory_bytes == 4 * expert_bytes_per_layer * 7 / 8);
  // Same model FLOPs whatever the layout.
  CHECK(ep1.model_flops == ep8.model_flops);
  const SimResult skewed = run(moe_config(base + "parallel.ep=8 model.moe.expert_imbalance=2")).result;
  CHECK(skewed.iteration_time_s > ep8.iteration_time_s);
  CHECK(skewed.model_flops == ep8.model_flops);
  CHECK(skewed.stages[0].peak_memory_bytes > ep8.stages[0].peak_memory_bytes);
}

namespace {

/// Tasks of the kept program named `name` in global layer `layer`'s instances, per pipeline stage.
std::vector<int> layer_tasks_per_stage(const SimRun& r, const std::string& name, int layer) {
  const sim::Program& prog = r.built.program;
  std::vector<int> out(static_cast<std::size_t>(r.result.stages.size()), 0);
  const auto it = std::find(prog.names.begin(), prog.names.end(), name);
  if (it == prog.names.end()) return out;
  const auto id = static_cast<std::uint32_t>(it - prog.names.begin());
  const std::string tag = "L" + std::to_string(layer) + ".";
  for (const sim::Task& t : prog.tasks) {
    const std::string& label = prog.instances[t.instance];
    if (t.name == id && label.size() >= tag.size() && label.ends_with("." + tag))
      ++out[static_cast<std::size_t>(r.built.gpu_stage[t.gpu])];
  }
  return out;
}

}  // namespace

TEST_CASE("mixed dense and MoE layers: dense layers run the dense MLP, MoE layers the all-to-alls") {
  // first_dense_layers 1: layer 0 dense, 1–3 MoE; pp 2 puts layers 0, 1 on stage 0 and 2, 3 on
  // stage 1. Experts of 1376 make a dense layer's MLP (11008) twice the local experts' (8 · 1376 / ep 2).
  const std::string layout =
      "model.preset=llama2-7b model.layers=4 model.seq_len=2048 model.flash_attention=true model.moe.num_experts=8 "
      "model.moe.router_topk=2 model.moe.expert_ffn_hidden=1376 model.moe.first_dense_layers=1 "
      "hardware.profile=dgx-h100-80gb hardware.nodes=1 parallel.tp=2 parallel.sequence_parallel=true parallel.pp=2 "
      "parallel.dp=2 parallel.ep=2 parallel.micro_batch=1 parallel.global_batch=8 recompute.strategy=none";
  const SimRun r = run(layout + " sim.exploit_symmetry=false", true);
  REQUIRE(!r.result.oom);
  REQUIRE(r.result.stages.size() == 2);
  // 4 GPUs per stage, 4 micro-batches each: the dense layer's FC1 runs forward once per
  // micro-batch, no dispatch; every MoE layer dispatches once per micro-batch.
  CHECK(layer_tasks_per_stage(r, "fc1_gemm", 0) == std::vector<int>{4 * 4, 0});
  CHECK(layer_tasks_per_stage(r, "ep_dispatch", 0) == std::vector<int>{0, 0});
  CHECK(layer_tasks_per_stage(r, "ep_combine_bwd", 0) == std::vector<int>{0, 0});
  CHECK(layer_tasks_per_stage(r, "ep_dispatch", 1) == std::vector<int>{4 * 4, 0});
  CHECK(layer_tasks_per_stage(r, "fc1_gemm", 1) == std::vector<int>{0, 0});
  for (int layer : {2, 3}) {
    CHECK(layer_tasks_per_stage(r, "ep_dispatch", layer) == std::vector<int>{0, 4 * 4});
    CHECK(layer_tasks_per_stage(r, "ep_combine_bwd", layer) == std::vector<int>{0, 4 * 4});
    CHECK(layer_tasks_per_stage(r, "fc1_gemm", layer) == std::vector<int>{0, 0});
  }
  // Static memory per stage, 18 bytes a parameter (bf16 weight, fp32 gradient, Adam), from the
  // layers each stage holds. Dense layer at tp 2: attention 4·4096²/2 = 33554432, SwiGLU MLP
  // 3·4096·11008/2 = 67633152, two RMSNorms 8192: 101195776. MoE layer: attention, norms and
  // the router 4096·8 = 32768 (33595392); its 4 local experts 4 · 3·4096·1376/2 = 33816576.
  const model::ResolvedScenario resolved = model::default_scenario(words(layout));
  const model::Workload w = model::gpt_workload(resolved->model, resolved->parallel);
  REQUIRE(w.dense_layer_params == 101195776u);
  REQUIRE(w.layer_params == 33595392u);
  REQUIRE(w.layer_expert_params == 33816576u);
  const auto reserve = static_cast<std::int64_t>(resolved->hardware.memory_reserve_bytes);
  CHECK(r.result.stages[0].static_memory_bytes ==
        18 * static_cast<std::int64_t>(101195776u + 33595392u + 33816576u + w.embedding_params) + reserve);
  CHECK(r.result.stages[1].static_memory_bytes ==
        18 * static_cast<std::int64_t>(2 * (33595392u + 33816576u) + w.head_params) + reserve);
  // Fast mode builds its steps with the same builder: the same static memory per stage.
  const SimRun fast = run(layout + " sim.mode=fast");
  CHECK(fast.result.stages[0].static_memory_bytes == r.result.stages[0].static_memory_bytes);
  CHECK(fast.result.stages[1].static_memory_bytes == r.result.stages[1].static_memory_bytes);
}

TEST_CASE("fast mode agrees with exact mode within 1% on the committed MoE set") {
  const auto configs = read_agreement_set(std::string(LYNXSIM_SOURCE_DIR) + "/tests/fast/configs-moe.txt");
  REQUIRE(configs.size() >= 6);
  for (const std::string& config : configs) {
    CAPTURE(config);
    const ModeComparison c = compare_modes(config);
    CAPTURE(c.time_error());
    CHECK(std::abs(c.time_error()) <= 0.01);
    CHECK(c.exact.oom == c.fast.oom);
    CHECK((c.overlapped ? c.memory_error() <= 0.05 : c.memory_equal()));
  }
}
