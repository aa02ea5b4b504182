#include "sim/memory_tracker.hpp"

#include <doctest/doctest.h>

using lynx::sim::MemoryTracker;

TEST_CASE("memory tracker: current, peak and per-tag balances") {
  MemoryTracker tracker(/*static_bytes=*/100, /*capacity_bytes=*/0, /*num_tags=*/2);
  CHECK(tracker.current_bytes() == 100);
  CHECK(tracker.peak_bytes() == 100);
  tracker.alloc(0, 50, 10);   // 150
  tracker.alloc(1, 70, 20);   // 220
  tracker.free(0, 50, 30);    // 170
  tracker.alloc(0, 20, 40);   // 190
  CHECK(tracker.current_bytes() == 190);
  CHECK(tracker.peak_bytes() == 220);
  CHECK(tracker.tag_bytes(0) == 20);
  CHECK(tracker.tag_bytes(1) == 70);
  CHECK_FALSE(tracker.oom());  // capacity 0: no limit
  CHECK(tracker.first_oom_ps() == -1);
}

TEST_CASE("memory tracker: OOM is recorded at the first excess, not thrown") {
  MemoryTracker tracker(200, 1000, 1);
  tracker.alloc(0, 800, 5);  // 1000: at capacity, not above
  CHECK_FALSE(tracker.oom());
  tracker.alloc(0, 1, 7);    // 1001 > 1000
  CHECK(tracker.oom());
  CHECK(tracker.first_oom_ps() == 7);
  tracker.free(0, 801, 9);   // back to 200
  tracker.alloc(0, 900, 11); // 1100: a second excess keeps the first time
  CHECK(tracker.first_oom_ps() == 7);
  CHECK(tracker.peak_bytes() == 1100);
  CHECK(tracker.capacity_bytes() == 1000);
}

TEST_CASE("memory tracker: static bytes above capacity are an OOM at time 0") {
  MemoryTracker tracker(2000, 1000, 1);
  CHECK(tracker.oom());
  CHECK(tracker.first_oom_ps() == 0);
}

TEST_CASE("memory tracker: a negative tag balance or a bad tag throws") {
  MemoryTracker tracker(0, 0, 2);
  tracker.alloc(0, 10, 1);
  CHECK_THROWS_AS(tracker.free(0, 11, 2), lynx::Error);
  CHECK_THROWS_AS(tracker.free(1, 1, 2), lynx::Error);  // tag 1 holds nothing (tag 0's bytes don't count)
  CHECK_THROWS_AS(tracker.alloc(2, 1, 2), lynx::Error);
  CHECK(tracker.tag_bytes(0) == 10);  // failed frees changed nothing
  CHECK(tracker.current_bytes() == 10);
  CHECK_THROWS_AS(MemoryTracker(-1, 0, 1), lynx::Error);
}
