#include "sim/memory_tracker.hpp"

namespace lynx::sim {

MemoryTracker::MemoryTracker(std::int64_t static_bytes, std::uint64_t capacity_bytes, std::size_t num_tags)
    : tag_bytes_(num_tags, 0), current_bytes_(static_bytes), peak_bytes_(static_bytes), capacity_bytes_(capacity_bytes) {
  if (static_bytes < 0) fail(ErrorCode::kInternal, "negative static memory: {} bytes", static_bytes);
  note_usage(0);
}

std::int64_t MemoryTracker::tag_bytes(TagId tag) const {
  if (tag >= tag_bytes_.size()) fail(ErrorCode::kInternal, "memory tag {} out of range ({} tags)", tag, tag_bytes_.size());
  return tag_bytes_[tag];
}

void MemoryTracker::apply(std::int64_t bytes, TagId tag, TimePs now_ps) {
  if (tag >= tag_bytes_.size()) fail(ErrorCode::kInternal, "memory tag {} out of range ({} tags)", tag, tag_bytes_.size());
  std::int64_t& balance = tag_bytes_[tag];
  std::int64_t new_balance = 0;
  std::int64_t new_current = 0;
  if (__builtin_add_overflow(balance, bytes, &new_balance) ||
      __builtin_add_overflow(current_bytes_, bytes, &new_current)) {
    fail(ErrorCode::kValueOverflow, "memory counter overflow on tag {}: {} + {} bytes", tag, balance, bytes);
  }
  if (new_balance < 0) {
    fail(ErrorCode::kInternal, "memory tag {} would go negative at {} ps: holds {} bytes, change {} bytes", tag, now_ps, balance, bytes);
  }
  balance = new_balance;
  current_bytes_ = new_current;
  if (current_bytes_ > peak_bytes_) peak_bytes_ = current_bytes_;
  note_usage(now_ps);
}

void MemoryTracker::note_usage(TimePs now_ps) {
  if (first_oom_ps_ < 0 && capacity_bytes_ != 0 && current_bytes_ > 0 &&
      static_cast<std::uint64_t>(current_bytes_) > capacity_bytes_) {
    first_oom_ps_ = now_ps;
  }
}

}  // namespace lynx::sim
