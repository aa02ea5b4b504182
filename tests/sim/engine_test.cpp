#include "sim/engine.hpp"

#include "tests/split_mix.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

using lynx::TimePs;
using lynx::sim::Engine;
using lynx::sim::EventId;
using lynx::sim::Fingerprint;
using lynx::sim::InlineFunction;

TEST_CASE("engine runs events in time order and advances the clock") {
  Engine engine;
  std::vector<std::pair<int, TimePs>> log;
  engine.schedule_at(30, [&] { log.emplace_back(3, engine.now()); });
  engine.schedule_at(10, [&] { log.emplace_back(1, engine.now()); });
  engine.schedule_at(20, [&] { log.emplace_back(2, engine.now()); });
  CHECK(engine.pending() == 3);
  engine.run();
  REQUIRE(log.size() == 3);
  CHECK(log[0] == std::pair<int, TimePs>{1, 10});
  CHECK(log[1] == std::pair<int, TimePs>{2, 20});
  CHECK(log[2] == std::pair<int, TimePs>{3, 30});
  CHECK(engine.now() == 30);
  CHECK(engine.events_processed() == 3);
  CHECK(engine.empty());
}

TEST_CASE("engine runs equal-time events first-in first-out") {
  Engine engine;
  std::vector<int> order;
  // 1000 events at one time, interleaved with later ones scheduled in between.
  for (int i = 0; i < 1000; ++i) {
    engine.schedule_at(5, [&order, i] { order.push_back(i); });
    engine.schedule_at(7, [&order, i] { order.push_back(10'000 + i); });
  }
  SUBCASE("in insertion order") {
    engine.run();
    REQUIRE(order.size() == 2000);
    for (int i = 0; i < 1000; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    for (int i = 0; i < 1000; ++i) CHECK(order[static_cast<std::size_t>(1000 + i)] == 10'000 + i);
  }
  SUBCASE("an event scheduled now, from a handler, runs after those already queued for now") {
    Engine small;
    std::vector<int> seen;
    small.schedule_at(5, [&] {
      seen.push_back(1);
      small.schedule_after(0, [&] { seen.push_back(3); });
    });
    small.schedule_at(5, [&] { seen.push_back(2); });
    small.run();
    CHECK(seen == std::vector<int>{1, 2, 3});
  }
}

TEST_CASE("engine cancellation") {
  Engine engine;
  int ran = 0;
  const EventId a = engine.schedule_at(10, [&] { ran += 1; });
  const EventId b = engine.schedule_at(20, [&] { ran += 10; });
  const EventId c = engine.schedule_at(30, [&] { ran += 100; });
  CHECK(engine.cancel(b));
  CHECK_FALSE(engine.cancel(b));  // twice: false
  CHECK(engine.pending() == 2);
  CHECK_FALSE(engine.cancel(EventId{}));  // a default id names nothing
  engine.run_until(15);
  CHECK(ran == 1);
  CHECK_FALSE(engine.cancel(a));  // already ran
  // The freed slot of b may be reused; the old id must still not cancel the new event.
  const EventId d = engine.schedule_at(25, [&] { ran += 1000; });
  CHECK_FALSE(engine.cancel(b));
  engine.run();
  CHECK(ran == 1 + 100 + 1000);
  CHECK(engine.events_processed() == 3);
  CHECK_FALSE(engine.cancel(c));
  CHECK_FALSE(engine.cancel(d));

  SUBCASE("a handler can cancel a later event and not itself") {
    Engine e2;
    int hits = 0;
    EventId later{};
    EventId self{};
    self = e2.schedule_at(1, [&] {
      ++hits;
      CHECK(e2.cancel(later));
      CHECK_FALSE(e2.cancel(self));  // it is running: already fired
    });
    later = e2.schedule_at(2, [&] { hits += 100; });
    e2.run();
    CHECK(hits == 1);
  }
  SUBCASE("mass cancellation keeps order (stale entries are compacted)") {
    Engine e3;
    std::vector<TimePs> fired;
    std::vector<EventId> ids;
    for (int i = 0; i < 20'000; ++i) {
      const TimePs t = (i * 7919) % 20'000;  // a permutation of 0..19999
      ids.push_back(e3.schedule_at(t, [&fired, &e3] { fired.push_back(e3.now()); }));
    }
    for (int i = 0; i < 20'000; ++i) {
      if (i % 20 != 0) CHECK(e3.cancel(ids[static_cast<std::size_t>(i)]));
    }
    CHECK(e3.pending() == 1000);
    e3.run();
    REQUIRE(fired.size() == 1000);
    for (std::size_t i = 1; i < fired.size(); ++i) CHECK(fired[i - 1] < fired[i]);
  }
}

TEST_CASE("engine rejects scheduling in the past") {
  Engine engine;
  engine.schedule_at(100, [] {});
  engine.run();
  CHECK(engine.now() == 100);
  CHECK_THROWS_AS(engine.schedule_at(99, [] {}), lynx::Error);
  CHECK_THROWS_AS(engine.schedule_after(-1, [] {}), lynx::Error);
  CHECK_NOTHROW(engine.schedule_at(100, [] {}));
  CHECK_THROWS_AS(engine.schedule_after(INT64_MAX, [] {}), lynx::Error);  // overflow is checked
}

TEST_CASE("engine run_until stops at the limit and reports pending events") {
  Engine engine;
  std::vector<TimePs> fired;
  for (const TimePs t : {10, 20, 30}) engine.schedule_at(t, [&] { fired.push_back(engine.now()); });
  CHECK(engine.run_until(20));  // 30 still pending
  CHECK(fired == std::vector<TimePs>{10, 20});
  CHECK(engine.now() == 20);
  CHECK(engine.run_until(25));
  CHECK(engine.now() == 25);
  CHECK_FALSE(engine.run_until(1000));
  CHECK(engine.now() == 1000);
  CHECK(fired == std::vector<TimePs>{10, 20, 30});
}

TEST_CASE("two engines in one process run independently, interleaved") {
  Engine first;
  Engine second;
  std::vector<std::string> log;
  // Each handler re-schedules itself on its own engine: first every 3 ps, second every 5 ps.
  struct Ticker {
    Engine* engine;
    std::vector<std::string>* log;
    std::string label;
    TimePs period;
    int left;
    void operator()() {
      log->push_back(label + std::to_string(engine->now()));
      if (--left > 0) engine->schedule_after(period, Ticker{*this});
    }
  };
  first.schedule_at(3, Ticker{&first, &log, "a", 3, 3});
  second.schedule_at(5, Ticker{&second, &log, "b", 5, 3});
  for (TimePs limit = 1; limit <= 20; ++limit) {
    first.run_until(limit);
    second.run_until(limit);
  }
  // a at 3, 6, 9; b at 5, 10, 15 — merged by time because we stepped both to each limit.
  CHECK(log == std::vector<std::string>{"a3", "b5", "a6", "a9", "b10", "b15"});
  CHECK(first.events_processed() == 3);
  CHECK(second.events_processed() == 3);
  CHECK(first.now() == 20);
  CHECK(second.now() == 20);
}

TEST_CASE("engine handlers with large and non-trivial captures") {
  using Small = std::array<std::int64_t, 6>;   // 48 bytes: inline
  using Large = std::array<std::int64_t, 16>;  // 128 bytes: heap fallback
  CHECK(Engine::Handler::stores_inline<Small>);
  CHECK_FALSE(Engine::Handler::stores_inline<Large>);

  Engine engine;
  std::int64_t sum = 0;
  Large large{};
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<std::int64_t>(i + 1);
  engine.schedule_at(1, [large, &sum] {
    for (const std::int64_t v : large) sum += v;
  });
  Small small{1, 2, 3, 4, 5, 6};
  engine.schedule_at(2, [small, &sum] { sum += small[5] * 1000; });
  auto shared = std::make_shared<int>(7);
  const EventId cancelled = engine.schedule_at(3, [shared, &sum] { sum += *shared; });
  engine.schedule_at(4, [text = std::string(100, 'x'), &sum] { sum += static_cast<std::int64_t>(text.size()) * 100000; });
  CHECK(shared.use_count() == 2);
  CHECK(engine.cancel(cancelled));
  CHECK(shared.use_count() == 1);  // the cancelled handler was destroyed
  engine.run();
  // 1 + ... + 16 = 136; 6 * 1000; 100 * 100000
  CHECK(sum == 136 + 6000 + 10'000'000);

  SUBCASE("InlineFunction moves keep the callable") {
    auto counter = std::make_shared<int>(0);
    InlineFunction<void()> f([counter] { ++*counter; });
    InlineFunction<void()> g(std::move(f));
    CHECK_FALSE(static_cast<bool>(f));  // NOLINT: moved-from is empty by contract
    g();
    InlineFunction<void()> h;
    h = std::move(g);
    h();
    CHECK(*counter == 2);
    CHECK(counter.use_count() == 2);
    h.reset();
    CHECK(counter.use_count() == 1);
  }
}

TEST_CASE("fingerprint: equal for the same event stream, different when times or order differ") {
  auto run = [](std::vector<TimePs> times) {
    Engine e;
    for (TimePs t : times) e.schedule_at(t, [] {});
    e.run();
    return e.fingerprint().value();
  };
  CHECK(run({1, 2, 3}) == run({1, 2, 3}));
  CHECK(run({1, 2, 3}) != run({1, 2, 4}));  // a time moved
  CHECK(run({1, 1, 2}) != run({1, 2, 2}));  // same count, other times
  // Scheduling order changes the sequence numbers that fire at each time.
  CHECK(run({2, 1}) != run({1, 2}));
  Fingerprint f;
  CHECK(f.hex().size() == 16);
  f.add(1);
  CHECK(f.hex() != Fingerprint{}.hex());
}

TEST_CASE("engine order matches a sorted reference under random schedules, cancels and run_until") {
  // The queue's order must be exactly (time, sequence): checked against a plain sorted list on
  // random workloads with many equal times, far-future events, cancellations (also of the next
  // event), events scheduled now from handlers, and run_until limits that stop before pending
  // events (after which earlier times may be scheduled again).
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Engine engine;
    struct Pending {
      TimePs time;
      std::uint64_t sequence;
      EventId id;
      int label;
    };
    std::vector<Pending> reference;  // what should be pending, in any order
    std::vector<int> fired;
    std::vector<int> expected;
    lynx::test::SplitMix rng{seed};
    auto next = [&rng](std::uint64_t bound) { return rng.next() % bound; };
    std::uint64_t sequence = 0;
    int label = 0;
    auto schedule = [&](TimePs at) {
      const int l = label++;
      const EventId id = engine.schedule_at(at, [&fired, l] { fired.push_back(l); });
      reference.push_back({at, sequence++, id, l});
    };
    auto random_time = [&]() -> TimePs {
      const std::uint64_t kind = next(10);
      const TimePs now = engine.now();
      if (kind < 3) return now;                                             // now: ties
      if (kind < 6) return now + static_cast<TimePs>(next(4));              // near ties
      if (kind < 9) return now + static_cast<TimePs>(next(1000));
      return now + static_cast<TimePs>(next(std::uint64_t{1} << 40));       // far future
    };
    for (int round = 0; round < 300; ++round) {
      const std::uint64_t count = next(8);
      for (std::uint64_t i = 0; i < count; ++i) schedule(random_time());
      if (!reference.empty() && next(3) == 0) {  // cancel a random pending event
        const std::size_t victim = next(reference.size());
        CHECK(engine.cancel(reference[victim].id));
        reference.erase(reference.begin() + static_cast<std::ptrdiff_t>(victim));
      }
      // Run up to a limit: the reference says which events run, and in which order.
      std::sort(reference.begin(), reference.end(), [](const Pending& a, const Pending& b) {
        return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
      });
      const TimePs limit = engine.now() + static_cast<TimePs>(next(3) == 0 ? 0 : next(2000));
      std::size_t runs = 0;
      while (runs < reference.size() && reference[runs].time <= limit) expected.push_back(reference[runs++].label);
      reference.erase(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(runs));
      engine.run_until(limit);
      REQUIRE(fired == expected);
      REQUIRE(engine.pending() == reference.size());
      const std::vector<lynx::sim::PendingEvent> listed = engine.pending_events();
      REQUIRE(listed.size() == reference.size());
      for (std::size_t i = 0; i < listed.size(); ++i) {
        CHECK(listed[i].time_ps == reference[i].time);
        CHECK(listed[i].id == reference[i].id);
      }
    }
    std::sort(reference.begin(), reference.end(), [](const Pending& a, const Pending& b) {
      return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
    });
    for (const Pending& p : reference) expected.push_back(p.label);
    engine.run();
    CHECK(fired == expected);
    CHECK(engine.empty());
  }
}

TEST_CASE("engine reschedule is cancel + schedule_at: same ids, same order") {
  // Two engines driven alike: one re-arms with cancel + schedule_at, the other with reschedule
  // (in place when the event is pending; also given ids that ran, were cancelled or are empty).
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Engine plain;
    Engine moved;
    std::vector<int> fired_plain;
    std::vector<int> fired_moved;
    std::vector<EventId> ids_plain;
    std::vector<EventId> ids_moved;
    lynx::test::SplitMix rng{seed * 7919};
    auto next = [&rng](std::uint64_t bound) { return rng.next() % bound; };
    int label = 0;
    for (int round = 0; round < 400; ++round) {
      const TimePs now = plain.now();
      REQUIRE(moved.now() == now);
      const TimePs at = now + static_cast<TimePs>(next(5) == 0 ? 0 : next(500));
      const int l = label++;
      if (!ids_plain.empty() && next(2) == 0) {
        const std::size_t k = next(ids_plain.size());
        plain.cancel(ids_plain[k]);
        ids_plain[k] = plain.schedule_at(at, [&fired_plain, l] { fired_plain.push_back(l); });
        ids_moved[k] = moved.reschedule(ids_moved[k], at, [&fired_moved, l] { fired_moved.push_back(l); });
        CHECK(ids_plain[k] == ids_moved[k]);
      } else {
        ids_plain.push_back(plain.schedule_at(at, [&fired_plain, l] { fired_plain.push_back(l); }));
        ids_moved.push_back(moved.schedule_at(at, [&fired_moved, l] { fired_moved.push_back(l); }));
        CHECK(ids_plain.back() == ids_moved.back());
      }
      if (next(4) == 0) {
        const TimePs limit = now + static_cast<TimePs>(next(300));
        plain.run_until(limit);
        moved.run_until(limit);
        REQUIRE(fired_plain == fired_moved);
      }
    }
    plain.run();
    moved.run();
    CHECK(fired_plain == fired_moved);
    CHECK(plain.fingerprint().value() == moved.fingerprint().value());
    CHECK(plain.events_processed() == moved.events_processed());
  }
}

TEST_CASE("engine ring and heap together: the order of a sorted reference across retunes, cancels and reschedules") {
  // The near-future ring and the heap hold the pending events together (sim/engine.hpp). A
  // hold model (a target number pending, each fired event replaced) through phases that change
  // the pending count and the time scale, so the ring is rebuilt with other bucket widths and
  // counts, events move between ring and heap by reschedule, and cancels hit both. Delays mix
  // ties (0), near events, events past the ring's span and far-future ones; run_until limits
  // between events leave the clock behind the ring's cursor.
  struct Phase {
    std::uint64_t pending;
    std::uint64_t delay_ps;  // typical delay
  };
  const std::vector<Phase> phases{{64, 3000}, {2000, 3000}, {64, 40}, {300, 5'000'000}, {20, 1}, {500, 3000}};
  std::uint64_t most_in_ring = 0;
  std::uint64_t most_in_heap = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Engine engine;
    struct Live {
      TimePs time;
      std::uint64_t sequence;
      EventId id;
    };
    std::map<int, Live> live;                                 // label -> what is pending
    std::set<std::tuple<TimePs, std::uint64_t, int>> order;   // (time, sequence, label)
    std::vector<int> labels;                                  // live labels, for random picks
    std::vector<int> fired;
    std::vector<int> expected;
    lynx::test::SplitMix rng{seed * 104729};
    auto next = [&rng](std::uint64_t bound) { return rng.next() % bound; };
    std::uint64_t sequence = 0;
    int next_label = 0;
    auto delay = [&](std::uint64_t typical) -> TimePs {
      const std::uint64_t kind = next(20);
      if (kind < 3) return 0;                                                          // ties with now
      if (kind < 17) return static_cast<TimePs>(next(2 * typical + 1));                // near
      if (kind < 19) return static_cast<TimePs>(8 * typical + next(8 * typical + 1));  // past the span
      return static_cast<TimePs>(next(std::uint64_t{1} << 40));                        // far future
    };
    auto forget = [&](int label) {
      const Live& l = live.at(label);
      order.erase({l.time, l.sequence, label});
      live.erase(label);
      labels.erase(std::find(labels.begin(), labels.end(), label));
    };
    auto schedule = [&](TimePs at) {
      const int label = next_label++;
      const EventId id = engine.schedule_at(at, [&fired, label] { fired.push_back(label); });
      live[label] = {at, sequence, id};
      order.insert({at, sequence++, label});
      labels.push_back(label);
    };
    for (const Phase& phase : phases) {
      for (int step = 0; step < 3000; ++step) {
        while (live.size() < phase.pending) schedule(engine.now() + delay(phase.delay_ps));
        const std::uint64_t op = next(10);
        if (op < 2) {  // cancel a random pending event (ring or heap)
          const int label = labels[next(labels.size())];
          CHECK(engine.cancel(live.at(label).id));
          forget(label);
        } else if (op < 4) {  // reschedule one: it may move ring -> heap, heap -> ring or stay
          const int label = labels[next(labels.size())];
          const EventId old = live.at(label).id;
          forget(label);
          const TimePs at = engine.now() + delay(phase.delay_ps);
          const int moved = next_label++;
          const EventId id = engine.reschedule(old, at, [&fired, moved] { fired.push_back(moved); });
          CHECK(id.slot == old.slot);
          live[moved] = {at, sequence, id};
          order.insert({at, sequence++, moved});
          labels.push_back(moved);
        }
        // Run to the next event's time, or to a limit between events (or before the next one).
        TimePs limit = std::get<0>(*order.begin());
        if (next(8) == 0) limit = engine.now() + static_cast<TimePs>(next(phase.delay_ps + 1));
        while (!order.empty() && std::get<0>(*order.begin()) <= limit) {
          const int label = std::get<2>(*order.begin());
          expected.push_back(label);
          order.erase(order.begin());
          live.erase(label);
          labels.erase(std::find(labels.begin(), labels.end(), label));
        }
        engine.run_until(limit);
        REQUIRE(fired.size() == expected.size());
        REQUIRE(fired.back() == expected.back());
        REQUIRE(engine.pending() == live.size());
        most_in_ring = std::max(most_in_ring, engine.pending_in_ring());
        most_in_heap = std::max(most_in_heap, engine.pending() - engine.pending_in_ring());
        if (step % 500 == 0) {
          const std::vector<lynx::sim::PendingEvent> listed = engine.pending_events();
          REQUIRE(listed.size() == order.size());
          std::size_t i = 0;
          for (const auto& [time, seq, label] : order) {
            CHECK(listed[i].time_ps == time);
            CHECK(listed[i].sequence == seq);
            CHECK(listed[i].id == live.at(label).id);
            ++i;
          }
        }
      }
    }
    for (const auto& [time, seq, label] : order) expected.push_back(label);
    engine.run();
    CHECK(fired == expected);
    CHECK(engine.empty());
    CHECK(engine.pending_in_ring() == 0);
  }
  // Both structures were used: the test checked the ring's path, not only the heap's.
  CHECK(most_in_ring > 1000);
  CHECK(most_in_heap > 100);
}
