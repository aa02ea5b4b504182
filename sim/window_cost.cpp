#include "sim/window_cost.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::sim {

TimePs window_cost_ps(const WindowProfile& window, TimePs work_ps) {
  // In double ps: every quantity is a few seconds at most, far inside 2^53.
  double left = static_cast<double>(work_ps);  // solo work still to run
  double delay = 0;                            // the compute stream's shift against the baseline
  double absorbable = 0;  // shift gained while the communication the next wait ends with was in flight
  for (const WindowSegment& s : window.segments) {
    const double slow = 1.0 + window.contention_factor * s.comm;
    const auto duration = static_cast<double>(s.duration_ps);
    if (s.compute_busy) {
      if (left <= 0) continue;
      // Sharing: both kernels at 1 / (2 · slow); the kernel's duration / slow of solo work
      // takes twice as long, so the recompute gets up to duration / slow of work done.
      const double done = std::min(left, duration / slow);
      left -= done;
      delay += done * slow;
      if (s.comm > 0) absorbable += done * slow;
    } else {
      const double absorbed = std::min(absorbable, duration);
      delay -= absorbed;
      absorbable = 0;
      if (left > 0) left -= std::min(left, (duration - absorbed) / slow);
    }
  }
  return static_cast<TimePs>(std::llround(delay + std::max(0.0, left)));
}

}  // namespace lynx::sim
