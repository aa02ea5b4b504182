// The event engine when an allocation fails: retune_ring's rebuild of the ring must lose no
// event (sim/engine.cpp allocates everything first and keeps the ring's shape if it cannot),
// and a reschedule that cannot grow the heap must change nothing.
// This executable replaces the global operator new, so that a test can make the k-th
// allocation from now on throw std::bad_alloc; it holds no other test (the replacement would
// be in force for them too).
#include "sim/engine.hpp"

#include "tests/split_mix.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace {
/// Allocations left before one fails; negative: none fails.
long g_allocations_before_failure = -1;
long g_failed_allocations = 0;

void count_allocation() {
  if (g_allocations_before_failure < 0) return;
  if (g_allocations_before_failure-- == 0) {
    ++g_failed_allocations;
    throw std::bad_alloc();
  }
}
}  // namespace

void* operator new(std::size_t size) {
  count_allocation();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t align) {
  count_allocation();
  const std::size_t a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
// The array forms too: libstdc++'s forward to the ones above, but a sanitizer's runtime
// replaces each form itself (under ASan the engine's aligned new[] skipped the counter).
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new[](std::size_t size, std::align_val_t align) { return ::operator new(size, align); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using lynx::TimePs;
using lynx::sim::Engine;

/// A hold model: each fired event records its label and, while the budget lasts, schedules
/// one more after a random delay, so the pending count stays where it was set.
struct Hold {
  Engine engine;
  std::vector<int> fired;
  lynx::test::SplitMix rng{12345};
  std::uint64_t budget = 0;
  int next_label = 0;

  void schedule() {
    const int label = next_label++;
    engine.schedule_after(static_cast<TimePs>(1 + rng.next() % 1000), [this, label] {
      fired.push_back(label);
      if (budget > 0) {
        --budget;
        schedule();
      }
    });
  }
};

/// Runs the hold model through a change of pending count (64 -> 3000) that makes the ring
/// rebuild; allocation `fail_at` from the start of that phase throws (-1: none). Returns the
/// labels in the order they fired; `failures` counts the allocations that threw.
std::vector<int> run_hold(long fail_at, long& failures, std::uint64_t& fingerprint) {
  Hold hold;
  hold.fired.reserve(40000);  // the handlers must not allocate while a failure is armed
  // Room for everything the armed phase needs but the ring's rebuild: 4000 free slots, and a
  // heap of capacity >= 4000 (the events go there: the ring has no shape yet), all cancelled.
  std::vector<lynx::sim::EventId> far;
  for (int i = 0; i < 4000; ++i) far.push_back(hold.engine.schedule_at(TimePs{1} << 50, [] {}));
  for (const lynx::sim::EventId id : far) REQUIRE(hold.engine.cancel(id));
  // 64 pending: the ring takes that shape.
  hold.budget = UINT64_MAX;
  for (int i = 0; i < 64; ++i) hold.schedule();
  hold.engine.run_until(hold.engine.now() + 20'000);
  REQUIRE(hold.engine.pending() == 64);
  REQUIRE(hold.engine.pending_in_ring() > 0);
  // 3000 pending: the next retune (within 256 events) rebuilds the ring with more buckets.
  while (hold.engine.pending() < 3000) hold.schedule();
  hold.budget = 20000;
  g_failed_allocations = 0;
  g_allocations_before_failure = fail_at;
  bool threw = false;
  try {
    hold.engine.run_until(hold.engine.now() + 2'000'000);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  g_allocations_before_failure = -1;
  failures = g_failed_allocations;
  CHECK_FALSE(threw);
  hold.budget = 0;
  hold.engine.run();
  CHECK(hold.engine.empty());
  fingerprint = hold.engine.fingerprint().value();
  return hold.fired;
}

}  // namespace

TEST_CASE("engine: an allocation failing in the ring's rebuild loses no event and keeps the order") {
  long failures = 0;
  std::uint64_t expected_fingerprint = 0;
  const std::vector<int> expected = run_hold(-1, failures, expected_fingerprint);
  CHECK(failures == 0);
  REQUIRE(expected.size() > 20000);
  // The rebuild allocates the new buckets, their bitmap and the copy of the ring; each of
  // these failing in turn (then the next retune rebuilds) must give the same run.
  for (long fail_at = 0; fail_at < 3; ++fail_at) {
    CAPTURE(fail_at);
    std::uint64_t fingerprint = 0;
    const std::vector<int> fired = run_hold(fail_at, failures, fingerprint);
    CHECK(failures == 1);  // the failure happened (in the rebuild: nothing else allocates)
    CHECK(fired == expected);
    CHECK(fingerprint == expected_fingerprint);
  }
}

namespace {
/// Re-schedules itself while the budget lasts.
struct Chain {
  Engine* engine;
  int* budget;
  void operator()() const {
    if ((*budget)-- > 0) engine->schedule_after(100, *this);
  }
};
}  // namespace

TEST_CASE("engine: reschedule that cannot grow the heap changes nothing") {
  // Moving a ring member past the ring's span puts it in the heap; where the heap is full and
  // its growth fails, the event must stay as it was (its id valid, at its old time).
  Engine engine;
  int budget = 600;
  for (int i = 0; i < 8; ++i) engine.schedule_at(i, Chain{&engine, &budget});
  engine.run();  // 600+ events with 8 pending: the ring is tuned, the heap stays small
  std::vector<lynx::sim::EventId> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(engine.schedule_after(1 + i, [] {}));
  REQUIRE(engine.pending_in_ring() == 100);
  bool threw = false;
  for (std::size_t i = 0; i < ids.size() && !threw; ++i) {
    const std::uint64_t pending = engine.pending();
    const std::uint64_t in_ring = engine.pending_in_ring();
    g_failed_allocations = 0;
    g_allocations_before_failure = 0;  // the next allocation fails (a heap growth)
    try {
      ids[i] = engine.reschedule(ids[i], TimePs{1} << 50, [] {});
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    g_allocations_before_failure = -1;
    CHECK(engine.pending() == pending);
    if (threw) {
      CHECK(g_failed_allocations == 1);
      CHECK(engine.pending_in_ring() == in_ring);  // still in the ring, under its old id
      CHECK(engine.cancel(ids[i]));
    }
  }
  CHECK(threw);  // the heap filled up, so one reschedule had to grow it
  engine.run();
  CHECK(engine.empty());
}
