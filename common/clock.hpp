#pragma once
/// Wall-clock timing of the program's own work (planner search, simulation): never simulated
/// time, which is sim/time.hpp's integer picoseconds.
#include <chrono>

namespace lynx {

using WallClock = std::chrono::steady_clock;

/// Seconds of wall time since `start`.
inline double seconds_since(WallClock::time_point start) {
  return std::chrono::duration<double>(WallClock::now() - start).count();
}

}  // namespace lynx
