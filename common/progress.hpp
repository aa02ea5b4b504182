#pragma once
/// The one progress bar: on a terminal one line on stderr redrawn in place with rate and ETA;
/// otherwise (a log, CI) a plain line at most every few seconds and at the end. Quiet when
/// disabled, so callers need no branches.
#include "common/clock.hpp"

#include <cstddef>
#include <cstdio>
#include <string>

namespace lynx {

/// Whether `stream` is a terminal (progress is drawn in place there, and only there for
/// single runs).
bool is_terminal(std::FILE* stream);

class ProgressBar {
 public:
  /// `total` units of work named `label` (e.g. "figures", "MILP solves"). `enabled` false
  /// prints nothing; `stream` defaults to stderr.
  ProgressBar(std::size_t total, std::string label, bool enabled = true, std::FILE* stream = stderr);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  /// Ends the line if the bar was drawn and not finished.
  ~ProgressBar();

  /// `done` units are complete; `what` names the current item.
  void update(std::size_t done, const std::string& what = "");
  /// For work whose size is learnt after the bar was made (a callback that reports both).
  void set_total(std::size_t total) { total_ = total; }
  /// All units complete: draws the final state once.
  void finish();

 private:
  void draw(const std::string& what);

  std::size_t total_;
  std::size_t done_ = 0;
  std::string label_;
  bool enabled_;
  std::FILE* stream_;
  bool terminal_;
  bool drawn_ = false;
  bool finished_ = false;
  WallClock::time_point start_ = WallClock::now();
  WallClock::time_point last_draw_{};
};

}  // namespace lynx
