// sim::window_cost_ps against the executor: one backward-like window (a collective overlapping a
// weight-gradient GEMM, the idle wait for it, kernels, a second collective issued after them
// and overlapping a GEMM, its idle wait, a kernel, the consumer) run with overlapped recomputes
// of every size, from one that fits the first wait to one that outlasts the whole window.
#include "sim/executor.hpp"
#include "sim/window_cost.hpp"
#include "tests/sim/program_builder.hpp"

#include <doctest/doctest.h>

#include <cstdlib>

using namespace lynx;
using namespace lynx::sim;

namespace {

constexpr TimePs kUs = 1'000'000;
constexpr double kContention = 0.25;

/// Makespan of the window program with an overlapped recompute of `recompute_ps` solo work
/// issued when the weight-gradient GEMM before the first wait ends (none when 0).
TimePs window_makespan(TimePs recompute_ps) {
  test::ProgramBuilder b;
  const GpuId g = b.add_gpu("gpu", {"compute", "tp", "recompute"}, 0, kContention);
  const TaskId dgrad = b.kernel(g, 0, 10 * kUs, "dgrad1");
  const TaskId c1 = b.comm(g, 1, 30 * kUs, "allreduce1", {}, {dgrad});
  const TaskId wgrad = b.kernel(g, 0, 8 * kUs, "wgrad1");     // beside c1: 10 us
  const TaskId k1 = b.kernel(g, 0, 20 * kUs, "kernels", {c1});  // after the idle wait for c1
  const TaskId c2 = b.comm(g, 1, 25 * kUs, "allreduce2", {}, {k1});
  b.kernel(g, 0, 8 * kUs, "wgrad2");                            // beside c2: 10 us
  const TaskId k2 = b.kernel(g, 0, 5 * kUs, "last", {c2});
  std::vector<TaskId> consumer_deps{k2};
  if (recompute_ps > 0) consumer_deps.push_back(b.kernel(g, 2, recompute_ps, "recompute", {wgrad}));
  b.add_task(TaskKind::kMarker, g, 0, 0, "consumer", consumer_deps);
  return execute(b.machine, b.program).makespan_ps;
}

}  // namespace

TEST_CASE("window_cost_ps equals the executor's delay of the compute stream for every recompute size") {
  // The window as the baseline shows it from the end of wgrad1 (t = 20 us): idle while c1 is in
  // flight until 40 us, the kernels until 60 us, wgrad2 beside c2 until 70 us, idle until c2
  // ends at 85 us, the last kernel until 90 us.
  WindowProfile w;
  w.contention_factor = kContention;
  w.segments = {{20 * kUs, false, 1}, {20 * kUs, true, 0}, {10 * kUs, true, 1},
                {15 * kUs, false, 1}, {5 * kUs, true, 0}};
  const TimePs baseline = window_makespan(0);
  REQUIRE(baseline == 90 * kUs);
  // 16 us of work fit the first wait (20 us at 1 / 1.25); beyond it the recompute shares the
  // kernels, then wgrad2 (whose stretching the second wait absorbs), the second wait, the last
  // kernel, and finally runs alone before the consumer.
  for (TimePs work_us : {1, 10, 16, 17, 20, 30, 36, 38, 40, 44, 48, 50, 52, 60, 80}) {
    CAPTURE(work_us);
    const TimePs engine_delay = window_makespan(work_us * kUs) - baseline;
    const TimePs model = window_cost_ps(w, work_us * kUs);
    // The executor rounds each completion time up to a whole picosecond.
    CHECK(std::llabs(model - engine_delay) <= 2);
  }
  CHECK(window_cost_ps(w, 16 * kUs) == 0);
  CHECK(window_cost_ps(w, 20 * kUs) == 4 * kUs);   // 4 us shared with the kernels
  CHECK(window_cost_ps(w, 40 * kUs) == 20 * kUs);  // 20 + 5 stretched, 5 absorbed by the wait
}

TEST_CASE("a window with no stretches (no wait found) costs the whole recompute") {
  CHECK(window_cost_ps({}, 7 * kUs) == 7 * kUs);
  CHECK(window_cost_ps({}, 0) == 0);
}
