#include "runner/step_progress.hpp"

#include <cstdio>

namespace lynx::runner {

namespace {
constexpr double kQuietSeconds = 1.0;  ///< steps shorter than this draw nothing
}  // namespace

StepProgress::StepProgress(bool enabled, std::string label)
    : enabled_(enabled), bar_(0, std::move(label), enabled) {}

void StepProgress::update(std::size_t done, std::size_t total) {
  if (!enabled_ || (!shown_ && seconds_since(start_) < kQuietSeconds)) return;
  shown_ = true;
  bar_.set_total(total);
  bar_.update(done);
}

void StepProgress::finish() {
  if (shown_) bar_.finish();
}

}  // namespace lynx::runner
