#include "live/buffer_ledger.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace lynx::live {

BufferLedger::BufferLedger(std::int64_t static_bytes, std::size_t num_tags)
    : num_tags_(num_tags), current_bytes_(static_bytes), peak_bytes_(static_bytes) {
  timeline_.emplace_back(0.0, static_bytes);
}

void BufferLedger::add(sim::TagId tag, std::int64_t bytes, void* handle, double at_s) {
  LYNX_CHECK(tag < num_tags_ && bytes > 0, "allocation of {} bytes under tag {}", bytes, tag);
  const std::lock_guard<std::mutex> lock(mutex_);
  live_[{tag, bytes}].push_back(handle);
  current_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, current_bytes_);
  timeline_.emplace_back(at_s, current_bytes_);
}

void* BufferLedger::take(sim::TagId tag, std::int64_t bytes, double at_s) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find({tag, bytes});
  if (it == live_.end() || it->second.empty())
    fail(ErrorCode::kInternal, "live mode frees {} bytes of memory tag {} that were never allocated", bytes, tag);
  void* handle = it->second.back();
  it->second.pop_back();
  current_bytes_ -= bytes;
  timeline_.emplace_back(at_s, current_bytes_);
  return handle;
}

std::int64_t BufferLedger::current_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return current_bytes_;
}

std::int64_t BufferLedger::peak_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_;
}

std::vector<std::pair<double, std::int64_t>> BufferLedger::timeline() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return timeline_;
}

std::vector<void*> BufferLedger::held() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<void*> out;
  for (const auto& [key, handles] : live_) out.insert(out.end(), handles.begin(), handles.end());
  return out;
}

}  // namespace lynx::live
