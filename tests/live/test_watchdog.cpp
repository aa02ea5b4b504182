// Live mode's watchdog on the host backend: a rank that never arrives at a collective or a
// transfer (the test hook) stops the run within the limit with one error naming the rank,
// the op and its communicator; a normal run with the limits on is not stopped. And the
// refusal of plans live mode would run otherwise, with the flag that runs them as bf16.
#include "live/host_backend.hpp"
#include "live/live_command.hpp"
#include "live/op_stream.hpp"
#include "live/watchdog.hpp"
#include "tests/error_of.hpp"
#include "tests/live/live_small.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>

namespace lynx::live {
namespace {

OpStream stream_for(const std::string& strategy, int tp, int pp, std::vector<std::string> extra = {}) {
  return build_op_stream(test::plan_of(test::simulate_kept(test::small_scenario(strategy, tp, pp, 1, std::move(extra)))),
                         "plan.yaml");
}

/// The error of one host iteration of `ops` under `limits` with rank `rank` stalled at its
/// `index`-th communication op (E903, the watchdog's code, required).
std::string stalled_run(const OpStream& ops, WatchdogLimits limits, int rank, int index) {
  HostOptions options;
  options.limits = limits;
  options.stall = {true, false, rank, index};
  HostBackend host(options);
  host.prepare(ops);
  try {
    (void)host.run_iteration(ops);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kSystemFailure);
    return e.what();
  }
  FAIL("the stalled run ended normally");
  return {};
}

/// The op of `rank` in the same collective group as op `i`.
std::size_t peer_op(const OpStream& ops, std::size_t i, int rank) {
  const std::int32_t group = ops.sim.built.program.tasks[i].group;
  for (std::size_t j = 0; j < ops.num_tasks; ++j)
    if (ops.sim.built.program.tasks[j].group == group && ops.ops[j].rank == rank) return j;
  FAIL("no op of rank " << rank << " in the group");
  return 0;
}

TEST_CASE("watchdog: a rank that never arrives at a collective stops its peer within --timeout-op") {
  const OpStream ops = stream_for("selective", 2, 1);  // ranks 0 and 1, one TP group
  const TestStall stall{true, false, 1, 0};
  const int stalled = stalled_op(ops, stall);
  REQUIRE(stalled >= 0);
  REQUIRE(ops.ops[static_cast<std::size_t>(stalled)].launch == LaunchKind::kCollective);
  const std::size_t waiting = peer_op(ops, static_cast<std::size_t>(stalled), 0);
  CHECK(communicator_label(ops, waiting) == "tp[0,1]");
  // The op limit fires, not the iteration's (30 s): rank 0 names the op, the communicator
  // and the rank that never came.
  const std::string error = stalled_run(ops, {1, 0.3, 30}, 1, 0);
  CHECK(error == fmt::format("live: watchdog: rank 0 ({}) waited 0.3 s (--timeout-op) in op '{}' on communicator tp[0,1]; "
                             "rank 1 never arrived",
                             ops.gpu_names[0], ops.ops[waiting].label));
  // A later collective: the K-th of the rank's communication ops.
  const int later = stalled_op(ops, {true, false, 1, 5});
  REQUIRE(later > stalled);
  CHECK(stalled_run(ops, {1, 0.3, 30}, 1, 5).find(fmt::format(
            "in op '{}' on communicator tp[0,1]; rank 1 never arrived", ops.ops[peer_op(ops, static_cast<std::size_t>(later), 0)].label)) !=
        std::string::npos);
}

TEST_CASE("watchdog: a pipeline send that never comes stops its receiver, naming the pair") {
  const OpStream ops = stream_for("selective", 1, 2);  // ranks 0 and 1, pipeline transfers only
  // Rank 0's first send (stage 0 to stage 1): its index among rank 0's communication ops.
  int index = 0, send = -1;
  for (int i : ops.rank_ops[0]) {
    const LiveOp& op = ops.ops[static_cast<std::size_t>(i)];
    if (!is_communication(op)) continue;
    if (op.launch == LaunchKind::kSend) {
      send = i;
      break;
    }
    ++index;
  }
  REQUIRE(send >= 0);
  const LiveOp& sent = ops.ops[static_cast<std::size_t>(send)];
  const LiveOp& recv = ops.ops[static_cast<std::size_t>(sent.match)];
  // Receives are posted at the iteration's start and their clock runs from there: the first to
  // give up is rank 1's receive of the stalled activation or rank 0's receive of the gradient
  // that can never come back (both at 0.3 s); either names its pair and the sender.
  const std::string error = stalled_run(ops, {1, 0.3, 30}, 0, index);
  const std::string activation =
      fmt::format("live: watchdog: rank 1 ({}) waited 0.3 s (--timeout-op) in op '{}' on communicator pp 0->1; rank 0 never sent '{}'",
                  ops.gpu_names[1], recv.label, sent.label);
  const std::string gradient = fmt::format(
      "live: watchdog: rank 0 ({}) waited 0.3 s (--timeout-op) in op 'recv mb0.send_gradient' on communicator pp 1->0; rank 1 never "
      "sent 'mb0.send_gradient'",
      ops.gpu_names[0]);
  CHECK_MESSAGE((error == activation || error == gradient), error);
}

TEST_CASE("watchdog: the iteration limit stops a run whose op limit is longer") {
  const OpStream ops = stream_for("selective", 2, 1);
  const std::string error = stalled_run(ops, {1, 30, 0.3}, 1, 0);
  CHECK(error.find("the iteration's limit reached (--timeout-iteration 0.3)") != std::string::npos);
  CHECK(error.find("live: watchdog: rank ") == 0);
}

TEST_CASE("watchdog: a normal run with the limits on is not stopped") {
  const OpStream ops = stream_for("lynx-heu", 2, 2);
  HostOptions options;
  options.limits = {1, 2, 20};
  HostBackend host(options);
  host.prepare(ops);
  for (int iteration = 0; iteration < 2; ++iteration) {
    const Measured m = host.run_iteration(ops);
    for (std::size_t i = 0; i < ops.ops.size(); ++i) REQUIRE(m.op_end_seq[i] >= 0);
  }
}

TEST_CASE("watchdog options: --timeout sets every limit, an explicit one wins, and the test hook variable parses") {
  LiveOptions o;
  REQUIRE(parse_live_options({"plan.yaml", "--timeout", "5", "--timeout-op", "0.25"}, o));
  CHECK(o.limits.comm_init_s == 5);
  CHECK(o.limits.op_s == 0.25);
  CHECK(o.limits.iteration_s == 5);
  LiveOptions defaults;
  REQUIRE(parse_live_options({"plan.yaml"}, defaults));
  CHECK(defaults.limits.comm_init_s == 120);
  CHECK(defaults.limits.op_s == 60);
  CHECK(defaults.limits.iteration_s == 600);
  CHECK(lynx::test::error_of([] {
          LiveOptions bad;
          (void)parse_live_options({"plan.yaml", "--timeout-iteration", "0"}, bad);
        }).find("--timeout-iteration 0: expected seconds > 0") != std::string::npos);
  ::setenv("LYNXSIM_LIVE_TEST_STALL", "init:3:2", 1);
  const TestStall init = test_stall_from_env();
  CHECK((init.enabled && init.at_init && init.rank == 3 && init.index == 2));
  ::setenv("LYNXSIM_LIVE_TEST_STALL", "op:3", 1);
  CHECK(lynx::test::error_of([] { (void)test_stall_from_env(); }).find("expected op:RANK:K or init:RANK:K") != std::string::npos);
  ::unsetenv("LYNXSIM_LIVE_TEST_STALL");
  CHECK(!test_stall_from_env().enabled);
}

TEST_CASE("live refuses FP8 and TP-comm-overlap plans unless asked to run them as bf16, unchunked") {
  const strategies::PlanFile fp8 = test::plan_of(test::simulate_kept(test::small_scenario(
      "selective", 2, 1, 1, {"model.gemm_precision=fp8", "hardware.profile=dgx-h100-80gb"})));
  CHECK(lynx::test::error_of([&] { (void)build_op_stream(fp8, "plan.yaml"); }).find("--run-as-bf16-unchunked") != std::string::npos);
  const OpStream as_bf16 = build_op_stream(fp8, "plan.yaml", {}, true);
  CHECK(as_bf16.runs_as == std::vector<std::string>{"model.gemm_precision=bf16"});
  CHECK(as_bf16.scenario.model.gemm_precision == GemmPrecision::kBf16);
  CHECK(runs_as_note(as_bf16).find("run as bf16 without chunked TP-comm overlap") == 0);
  // The prediction is of what runs: bf16 GEMMs take longer than the plan's FP8 ones.
  const runner::SimRun planned = test::simulate_kept(test::small_scenario(
      "selective", 2, 1, 1, {"model.gemm_precision=fp8", "hardware.profile=dgx-h100-80gb", "sim.exploit_symmetry=false",
                             "sim.mode=exact"}));
  CHECK(as_bf16.predicted_iteration_ps > planned.exec.makespan_ps);

  const strategies::PlanFile overlap = test::plan_of(test::simulate_kept(test::small_scenario(
      "selective", 2, 1, 1, {"parallel.sequence_parallel=true", "parallel.tp_comm_overlap=true"})));
  CHECK(lynx::test::code_of([&] { (void)build_op_stream(overlap, "plan.yaml"); }) == ErrorCode::kNotModelled);
  const OpStream unchunked = build_op_stream(overlap, "plan.yaml", {}, true);
  CHECK(unchunked.runs_as == std::vector<std::string>{"parallel.tp_comm_overlap=false"});
  CHECK(!unchunked.scenario.parallel.tp_comm_overlap);
  CHECK(runs_as_note(stream_for("selective", 2, 1)).empty());
}

}  // namespace
}  // namespace lynx::live
