#include "common/progress.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

namespace lynx {
namespace {

/// "1m05s", "12.3s".
std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto whole = static_cast<long long>(seconds);
  return fmt::format("{}m{:02d}s", whole / 60, static_cast<int>(whole % 60));
}

}  // namespace

bool is_terminal(std::FILE* stream) { return isatty(fileno(stream)) != 0; }

ProgressBar::ProgressBar(std::size_t total, std::string label, bool enabled, std::FILE* stream)
    : total_(total), label_(std::move(label)), enabled_(enabled), stream_(stream),
      terminal_(is_terminal(stream)) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && drawn_ && !finished_ && terminal_) std::fputc('\n', stream_);
}

void ProgressBar::update(std::size_t done, const std::string& what) {
  done_ = std::min(done, total_);
  if (!enabled_) return;
  const auto now = WallClock::now();
  // A terminal redraws up to 10 times a second; a log gets a line every 5 s.
  const double interval_s = terminal_ ? 0.1 : 5.0;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < interval_s) return;
  last_draw_ = now;
  draw(what);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  done_ = total_;
  draw("done");
  if (terminal_) std::fputc('\n', stream_);
  finished_ = true;
}

void ProgressBar::draw(const std::string& what) {
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = total_ ? done_ * kWidth / total_ : kWidth;
  const double elapsed = seconds_since(start_);
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  const std::string eta =
      done_ > 0 && done_ < total_ ? " ETA " + format_duration(static_cast<double>(total_ - done_) / rate) : "";
  const std::string line = fmt::format("{} [{}{}] {}/{} {:.1f}/s {}{} {}", label_, std::string(filled, '#'),
                                       std::string(kWidth - filled, '.'), done_, total_, rate,
                                       format_duration(elapsed), eta, what);
  if (terminal_)
    fmt::print(stream_, "\r{:<100.100}", line);
  else
    fmt::print(stream_, "{}\n", line);
  std::fflush(stream_);
  drawn_ = true;
}

}  // namespace lynx
