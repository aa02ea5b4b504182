// Idle-gap attribution of schedule::compute_stream_gaps on hand-built programs and timelines:
// which communication a compute-stream gap waited for, and of which kind.
#include "schedule/overlap_windows.hpp"

#include <doctest/doctest.h>

using namespace lynx;
using namespace lynx::schedule;

namespace {

/// A program with its timeline given by hand (compute_stream_gaps reads nothing else).
struct Timeline {
  sim::Program prog;
  sim::ExecResult ex;

  sim::TaskId add(sim::GpuId gpu, Stream stream, sim::Category category, TimePs start, TimePs end,
                  std::initializer_list<sim::TaskId> deps) {
    sim::Task t;
    t.gpu = gpu;
    t.stream = stream;
    t.kind = stream == kCompute ? sim::TaskKind::kKernel : sim::TaskKind::kComm;
    t.category = category;
    t.first_dep = static_cast<std::uint32_t>(prog.deps.size());
    for (sim::TaskId d : deps) prog.deps.push_back(d);
    t.num_deps = static_cast<std::uint32_t>(deps.size());
    prog.tasks.push_back(t);
    ex.task_start_ps.push_back(start);
    ex.task_end_ps.push_back(end);
    ex.makespan_ps = std::max(ex.makespan_ps, end);
    return static_cast<sim::TaskId>(prog.tasks.size() - 1);
  }
};

}  // namespace

TEST_CASE("a gap counts every phase queued before its gate and this GPU's collectives before it") {
  using C = sim::Category;
  Timeline tl;
  const sim::TaskId early_dp = tl.add(0, kDp, C::kDpComm, 0, 5, {});  // ended before the gap
  const sim::TaskId kernel = tl.add(0, kCompute, C::kCompute, 0, 10, {});
  const sim::TaskId tp = tl.add(0, kTp, C::kTpComm, 10, 20, {kernel});
  const sim::TaskId phase1 = tl.add(0, kDp, C::kDpComm, 20, 30, {tp});  // after early_dp
  const sim::TaskId phase2 = tl.add(0, kDp, C::kDpComm, 30, 45, {});    // stream order only
  tl.add(0, kCompute, C::kOptimizer, 45, 50, {kernel, phase2});
  (void)early_dp;
  (void)phase1;
  const auto gaps = compute_stream_gaps(tl.prog, tl.ex, 1);
  REQUIRE(gaps[0].size() == 1);
  const IdleGap& g = gaps[0][0];
  CHECK(g.start_ps == 10);
  CHECK(g.end_ps == 45);
  CHECK(g.gate == phase2);
  CHECK(g.tp_comm_ps == 10);
  CHECK(g.dp_comm_ps == 25);  // both phases, not only the gate
  CHECK(g.comm_in_flight_ps == 35);
  CHECK(g.pp_comm_ps + g.other_comm_ps == 0);
}

TEST_CASE("waiting for another GPU is bubble except the transfer itself") {
  using C = sim::Category;
  Timeline tl;
  tl.add(0, kCompute, C::kCompute, 0, 5, {});
  const sim::TaskId other_tp = tl.add(1, kTp, C::kTpComm, 0, 25, {});  // GPU 1's collective
  const sim::TaskId send = tl.add(1, kPp, C::kPpComm, 25, 40, {other_tp});
  tl.add(0, kCompute, C::kCompute, 40, 50, {send});
  const auto gaps = compute_stream_gaps(tl.prog, tl.ex, 2);
  REQUIRE_FALSE(gaps[0].empty());
  const IdleGap& g = gaps[0][0];
  CHECK(g.gate == send);
  CHECK(g.pp_comm_ps == 15);
  CHECK(g.tp_comm_ps == 0);  // GPU 1's wait, not GPU 0's
  CHECK(g.comm_in_flight_ps == 15);
}

TEST_CASE("every collective the next kernel waits for counts, overlapping time once") {
  using C = sim::Category;
  Timeline tl;
  const sim::TaskId kernel = tl.add(0, kCompute, C::kCompute, 0, 10, {});
  const sim::TaskId tp = tl.add(0, kTp, C::kTpComm, 4, 30, {});  // started inside the kernel
  const sim::TaskId dp = tl.add(0, kDp, C::kDpComm, 12, 40, {kernel});
  tl.add(0, kCompute, C::kCompute, 40, 50, {dp, tp});
  const auto gaps = compute_stream_gaps(tl.prog, tl.ex, 1);
  REQUIRE(gaps[0].size() == 1);
  const IdleGap& g = gaps[0][0];
  CHECK(g.gate == dp);
  CHECK(g.tp_comm_ps == 20);  // 10..30: tp is not the gate, but the kernel waited for it too
  CHECK(g.dp_comm_ps == 10);  // 30..40 (12..30 counted for tp, which started first)
  CHECK(g.comm_in_flight_ps == 30);
}
