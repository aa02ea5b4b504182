#pragma once
/// Bytes in use on one GPU: static bytes plus a balance per memory tag; peak and first OOM time.
#include "sim/program.hpp"
#include "sim/time.hpp"

#include <cstdint>
#include <vector>

namespace lynx::sim {

/// Tracks allocations and frees by tag on one GPU. OOM (usage above capacity) is recorded, not
/// thrown: it is a result of a simulation. A tag balance going negative is a malformed program
/// and throws lynx::Error.
class MemoryTracker {
 public:
  /// `static_bytes` are resident from time 0; capacity_bytes == 0 means "no limit".
  MemoryTracker(std::int64_t static_bytes, std::uint64_t capacity_bytes, std::size_t num_tags);

  /// Adds `bytes` (> 0 alloc, < 0 free) to `tag` at time now_ps.
  void apply(std::int64_t bytes, TagId tag, TimePs now_ps);
  /// Allocates `bytes` under `tag` at now_ps.
  void alloc(TagId tag, std::int64_t bytes, TimePs now_ps) { apply(bytes, tag, now_ps); }
  /// Frees `bytes` of `tag` at now_ps.
  void free(TagId tag, std::int64_t bytes, TimePs now_ps) { apply(-bytes, tag, now_ps); }

  /// Bytes in use now (static included).
  std::int64_t current_bytes() const { return current_bytes_; }
  /// Highest current_bytes() seen so far.
  std::int64_t peak_bytes() const { return peak_bytes_; }
  /// Capacity given at construction (0: no limit).
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  /// Bytes held under `tag` now.
  std::int64_t tag_bytes(TagId tag) const;
  /// True once usage exceeded capacity.
  bool oom() const { return first_oom_ps_ >= 0; }
  /// First time usage exceeded capacity, -1 if never.
  TimePs first_oom_ps() const { return first_oom_ps_; }

 private:
  void note_usage(TimePs now_ps);

  std::vector<std::int64_t> tag_bytes_;
  std::int64_t current_bytes_ = 0;
  std::int64_t peak_bytes_ = 0;
  std::uint64_t capacity_bytes_ = 0;
  TimePs first_oom_ps_ = -1;
};

}  // namespace lynx::sim
