#pragma once
/// The activation allocator's bookkeeping on one GPU rank, shared by every backend: the plan's
/// allocations (tag, bytes) with the backend's buffer handle each, the frees that return them,
/// and bytes in use / peak (static bytes included), exactly as sim::MemoryTracker counts them.
#include "sim/program.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace lynx::live {

class BufferLedger {
 public:
  /// `static_bytes` are in use from the start (weights, gradients, optimizer state, reserve).
  BufferLedger(std::int64_t static_bytes, std::size_t num_tags);

  /// Records an allocation of `bytes` under `tag` held by `handle`; at_s: when (timeline).
  void add(sim::TagId tag, std::int64_t bytes, void* handle, double at_s);
  /// Returns the handle of a live allocation of `bytes` under `tag` (the latest such) and
  /// removes it; throws lynx::Error naming the tag when there is none (a free the plan never
  /// allocated).
  void* take(sim::TagId tag, std::int64_t bytes, double at_s);

  std::int64_t current_bytes() const;
  std::int64_t peak_bytes() const;
  /// (seconds, bytes in use) after every change, in order.
  std::vector<std::pair<double, std::int64_t>> timeline() const;
  /// Every handle still held (to release at the end of an iteration).
  std::vector<void*> held() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<sim::TagId, std::int64_t>, std::vector<void*>> live_;
  std::size_t num_tags_;
  std::int64_t current_bytes_;
  std::int64_t peak_bytes_;
  std::vector<std::pair<double, std::int64_t>> timeline_;
};

}  // namespace lynx::live
