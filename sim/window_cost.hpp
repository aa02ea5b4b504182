#pragma once
/// The executor's kernel-sharing rule applied to one overlap window, analytically: what an
/// overlapped recompute costs the compute stream (the planners' per-window model; cross-checked
/// against execute() in tests/sim/window_cost_test.cpp).
#include "sim/time.hpp"

#include <vector>

namespace lynx::sim {

/// One stretch of a window's timeline on the baseline (no recompute running): from the moment
/// an overlapped recompute is issued to the moment its consumer needs it.
struct WindowSegment {
  TimePs duration_ps = 0;
  bool compute_busy = false;  ///< a compute-stream kernel runs (else the compute stream idles)
  int comm = 0;               ///< communication tasks in flight on the GPU
  bool operator==(const WindowSegment&) const = default;
};

/// A window as the engine sees it: the baseline's compute-stream timeline from where an
/// overlapped recompute starts (the end of the kernel before the first wait on a collective, or
/// of the previous step for the pipeline wait) to where its consumer starts.
struct WindowProfile {
  std::vector<WindowSegment> segments;
  double contention_factor = 0;  ///< the GPU's (GpuDesc::contention_factor)
  bool operator==(const WindowProfile&) const = default;
};

/// Compute-stream time an overlapped recompute of `work_ps` solo kernel time costs in `window`,
/// by the executor's kernel rule (sim/executor.hpp: rate 1 / (n_kernels · (1 + c · n_comm))):
/// in an idle stretch it runs alone at 1 / (1 + c · comm); beside a compute kernel both run at
/// half that rate, which stretches the kernel by (1 + c · comm) per ps of recompute work done;
/// an idle stretch ends at a time fixed by what it waits for, so it absorbs the stretching of
/// the kernels that ran while that communication was in flight (comm > 0), not of those before
/// it (the collective is issued after them); work left at the consumer runs alone and the
/// compute stream waits for it. Exact for programs of that shape (tests/sim/window_cost_test.cpp).
TimePs window_cost_ps(const WindowProfile& window, TimePs work_ps);

}  // namespace lynx::sim
