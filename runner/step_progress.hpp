#pragma once
/// Progress of one long step of a single run (a search's stage solves, an engine run) on
/// stderr: the bar appears only when enabled, stderr is a terminal and the step has taken more
/// than a second, so short runs, tests and pipes stay quiet.
#include "common/clock.hpp"
#include "common/progress.hpp"

#include <cstddef>
#include <string>

namespace lynx::runner {

class StepProgress {
 public:
  /// `enabled` false: never draws (the caller decided this run shows no progress).
  StepProgress(bool enabled, std::string label);

  /// `done` of `total` units complete.
  void update(std::size_t done, std::size_t total);
  /// Ends the bar's line if one was drawn.
  void finish();

 private:
  bool enabled_;
  bool shown_ = false;  ///< the bar has drawn (the step outlasted the quiet second)
  WallClock::time_point start_ = WallClock::now();
  ProgressBar bar_;
};

}  // namespace lynx::runner
