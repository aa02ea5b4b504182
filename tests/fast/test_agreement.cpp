// Fast mode against exact mode on the committed agreement sets (drawn once by
// generate_configs.py), configs.txt (NVLink clusters) and configs-pcie.txt (PCIe clusters,
// links shared between GPUs), and the hand-written context-parallel set configs-cp.txt: every iteration time within 1% (PCIe: 0.75%), peak memory equal for none /
// full / selective plans and within kFastModeMemoryBound (runner/planning.hpp) for overlapped
// (lynx) plans, and the two modes rank the configurations alike (Kendall tau >= 0.98).
// Configurations run the default pipeline exchange (blocking for 1f1b), except the PCIe set,
// checked with overlapped sends: fast mode does not model the contention between the TP
// collectives of two stages sharing a PCIe node, which blocking exchanges run in lockstep (its
// tp 4 pp 8 row is 1.05% off with them; BENCHMARKS.md reports the set both ways).
// fast_bench reports the distributions.
#include "runner/mode_agreement.hpp"
#include "runner/planning.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// `check_memory` false: peak memory is reported, not checked (the sharded set, see there).
/// `extra`: overrides appended to every configuration.
void check_set(const std::string& file, double time_bound, std::size_t at_least, bool check_memory = true,
               const std::string& extra = "") {
  const auto configs = read_agreement_set(std::string(LYNXSIM_SOURCE_DIR) + "/tests/fast/" + file);
  REQUIRE(configs.size() >= at_least);
  std::vector<double> exact, fast;
  int failures = 0;
  for (const std::string& config : configs) {
    const ModeComparison c = compare_modes(config + extra);
    exact.push_back(c.exact.iteration_time_s);
    fast.push_back(c.fast.iteration_time_s);
    const bool time_ok = std::abs(c.time_error()) <= time_bound;
    const bool memory_ok =
        !check_memory || (c.overlapped ? c.memory_error() <= kFastModeMemoryBound : c.memory_equal());
    const bool oom_ok = !check_memory || c.overlapped || c.exact.oom == c.fast.oom;
    if (!check_memory)
      MESSAGE(fmt::format("{}: time {:+.3f}% memory {:+.4f}% (not checked)", config, 100 * c.time_error(), 100 * c.memory_error()));
    if (!time_ok || !memory_ok || !oom_ok) {
      ++failures;
      MESSAGE(fmt::format("{}: time {:+.3f}% memory {:+.4f}% oom {}/{}", config, 100 * c.time_error(),
                          100 * c.memory_error(), c.exact.oom, c.fast.oom));
    }
  }
  CHECK(failures == 0);
  const double tau = kendall_tau(exact, fast);
  MESSAGE(fmt::format("{}: Kendall tau {:.4f} over {} configurations", file, tau, configs.size()));
  CHECK(tau >= 0.98);
}

}  // namespace

TEST_CASE("fast mode agrees with exact mode within 1% on the committed NVLink set") {
  check_set("configs.txt", 0.01, 200);
}

TEST_CASE("fast mode agrees with exact mode within 0.75% on the committed PCIe set (memory and ranking as on NVLink)") {
  check_set("configs-pcie.txt", 0.0075, 110, true, " parallel.pipeline_exchange=overlapped");
}

TEST_CASE("fast mode agrees with exact mode within 1% on the committed context-parallel set") {
  check_set("configs-cp.txt", 0.01, 10);
}

TEST_CASE("fast mode agrees with exact mode within 1% on the committed sharded set (ZeRO-1/2/3, hybrid)") {
  // Iteration time only: a step simulated alone frees its unsharded gradients when its own
  // reduce-scatters end, while in the iteration they may still be in flight when the next
  // step peaks (slow reductions, e.g. across nodes), so fast mode's peak can be lower with
  // sharding gradients / full (a known gap: docs/scenario.md, "Sharded data parallelism").
  check_set("configs-sharded.txt", 0.01, 10, /*check_memory=*/false);
}

TEST_CASE("fast mode agrees with exact mode within 1% with Megatron's TP-comm and parameter-gather overlaps") {
  const std::string base = "model.preset=gpt-2.7b hardware.profile=dgx-a100-80gb hardware.nodes=1 ";
  for (const std::string& config : {
           base + "parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.sequence_parallel=true parallel.tp_comm_overlap=true "
                  "parallel.micro_batch=1 parallel.global_batch=8 recompute.strategy=full",
           base + "parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.sequence_parallel=true parallel.tp_comm_overlap=true "
                  "parallel.micro_batch=2 parallel.global_batch=8 recompute.strategy=selective",
           base + "parallel.tp=8 parallel.pp=1 parallel.dp=1 parallel.sequence_parallel=true parallel.tp_comm_overlap=true "
                  "parallel.tp_comm_overlap_chunks=2 parallel.micro_batch=1 parallel.global_batch=4 recompute.strategy=lynx-heu",
           base + "parallel.tp=2 parallel.pp=2 parallel.dp=2 parallel.sequence_parallel=true parallel.tp_comm_overlap=true "
                  "parallel.distributed_optimizer=true parallel.overlap_param_gather=true parallel.micro_batch=1 "
                  "parallel.global_batch=8 recompute.strategy=full",
           base + "parallel.tp=2 parallel.pp=2 parallel.dp=2 parallel.distributed_optimizer=true "
                  "parallel.overlap_param_gather=true parallel.schedule=interleaved parallel.virtual_stages=2 "
                  "parallel.micro_batch=1 parallel.global_batch=8 recompute.strategy=selective"}) {
    CAPTURE(config);
    const ModeComparison c = compare_modes(config);
    CAPTURE(c.time_error());
    CHECK(std::abs(c.time_error()) <= 0.01);
    CHECK((c.overlapped ? c.memory_error() <= kFastModeMemoryBound : c.memory_equal()));
  }
}

TEST_CASE("fast mode agrees with exact mode within 1% with the host model on (GPU-bound and host-bound)") {
  // Host costs from small (GPU-bound: the host runs ahead) to large (host-bound: every task
  // waits for its issue), over pipelines, data parallelism, recompute plans and schedules.
  const std::string a100 = "hardware.profile=dgx-a100-80gb hardware.nodes=1 ";
  // The third: most host time in the GEMM calls (gpu.host_gemm), as the vTrain fit has it.
  const std::vector<std::string> hosts = {"hardware.gpu.host_kernel=5us hardware.gpu.host_collective=10us",
                                          "hardware.gpu.host_kernel=70us hardware.gpu.host_collective=20us",
                                          "hardware.gpu.host_kernel=10us hardware.gpu.host_gemm=150us"};
  const std::vector<std::string> layouts = {
      // vTrain-like: small GPT on one node, 16-bit gradients, all-reduce at the end.
      "model.layers=12 model.hidden=1024 model.heads=16 model.seq_len=1024 parallel.tp=8 parallel.pp=1 parallel.dp=1 "
      "parallel.micro_batch=1 parallel.global_batch=8 parallel.fp32_main_grads=false recompute.strategy=none",
      "model.layers=16 model.hidden=2048 model.heads=16 model.seq_len=1024 parallel.tp=2 parallel.pp=2 parallel.dp=2 "
      "parallel.micro_batch=2 parallel.global_batch=16 parallel.dp_overlap=end recompute.strategy=none",
      "model.preset=gpt-1.3b parallel.tp=1 parallel.pp=4 parallel.dp=2 parallel.micro_batch=1 parallel.global_batch=16 "
      "recompute.strategy=full",
      "model.preset=gpt-2.7b parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.micro_batch=1 parallel.global_batch=8 "
      "recompute.strategy=lynx-heu",
      "model.preset=gpt-2.7b parallel.tp=2 parallel.pp=2 parallel.dp=2 parallel.schedule=interleaved "
      "parallel.virtual_stages=2 parallel.micro_batch=1 parallel.global_batch=8 recompute.strategy=selective",
      "model.preset=gpt-2.7b parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.sequence_parallel=true "
      "parallel.distributed_optimizer=true parallel.micro_batch=2 parallel.global_batch=8 recompute.strategy=selective"};
  for (const std::string& host : hosts)
    for (const std::string& layout : layouts) {
      const std::string config = a100 + layout + " " + host;
      CAPTURE(config);
      const ModeComparison c = compare_modes(config);
      CAPTURE(c.time_error());
      CHECK(std::abs(c.time_error()) <= 0.01);
      CHECK((c.overlapped ? c.memory_error() <= kFastModeMemoryBound : c.memory_equal()));
    }
}

TEST_CASE("fast mode: the host model slows a host-bound run as exact mode does") {
  // Not trivially equal: without the host model fast mode is far faster than exact here.
  const std::string config =
      "hardware.profile=dgx-a100-80gb hardware.nodes=1 model.layers=12 model.hidden=1024 model.heads=16 "
      "model.seq_len=1024 parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.micro_batch=1 parallel.global_batch=8 "
      "recompute.strategy=none hardware.gpu.host_kernel=100us hardware.gpu.host_collective=20us";
  const ModeComparison with_host = compare_modes(config);
  const ModeComparison without = compare_modes(
      "hardware.profile=dgx-a100-80gb hardware.nodes=1 model.layers=12 model.hidden=1024 model.heads=16 "
      "model.seq_len=1024 parallel.tp=4 parallel.pp=2 parallel.dp=1 parallel.micro_batch=1 parallel.global_batch=8 "
      "recompute.strategy=none");
  CHECK(with_host.exact.iteration_time_s > 2 * without.exact.iteration_time_s);
  CHECK(std::abs(with_host.time_error()) <= 0.01);
}

TEST_CASE("fast mode agrees with exact mode within 1% on the micro-batch load (its TP broadcasts, the receive wait)") {
  // pp 3 at tp 2 and 4: the first and last stage broadcast each micro-batch's sizes and data
  // over the TP group, the host waiting for the sizes; the last stage's load waits for the
  // activation's receive. GPU-bound and host-bound hosts, every GPU simulated and one per stage.
  const std::string base = "hardware.profile=dgx-a100-80gb hardware.nodes=2 model.preset=gpt-1.3b parallel.pp=3 "
                           "parallel.dp=1 parallel.micro_batch=2 parallel.global_batch=16 recompute.strategy=none ";
  for (const std::string tp : {"parallel.tp=2", "parallel.tp=4"})
    for (const std::string host : {"hardware.gpu.host_kernel=5us hardware.gpu.host_collective=10us",
                                   "hardware.gpu.host_kernel=70us hardware.gpu.host_collective=20us"})
      for (const std::string symmetry : {"sim.exploit_symmetry=true", "sim.exploit_symmetry=false"}) {
        const std::string config = base + tp + " " + host + " " + symmetry;
        CAPTURE(config);
        const ModeComparison c = compare_modes(config);
        CAPTURE(c.time_error());
        CHECK(std::abs(c.time_error()) <= 0.01);
        CHECK(c.memory_equal());
      }
}
