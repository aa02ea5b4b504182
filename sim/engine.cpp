#include "sim/engine.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace lynx::sim {

std::uint32_t Engine::new_slot() {
  if (slot_count_ >= kMaxSlots) fail(ErrorCode::kWorkTooLarge, "event engine: more than {} events pending at once", kMaxSlots);
  // The node first, then the handler chunk: if the chunk's allocation throws, the node past
  // slot_count_ is harmless (the next call reuses it).
  if (nodes_.size() == slot_count_) nodes_.emplace_back();
  if (chunks_.size() * kChunkSize == slot_count_) chunks_.push_back(std::make_unique<Slot[]>(kChunkSize));
  const std::uint32_t index = slot_count_++;
  release_slot(index);
  return index;
}

void Engine::fail_sequence_exhausted() {
  fail(ErrorCode::kWorkTooLarge, "event engine: more than {} events scheduled in one run", kMaxSequence);
}

namespace {
constexpr std::uint64_t kMinBuckets = 64;
constexpr std::uint64_t kMaxBuckets = std::uint64_t{1} << 16;
constexpr int kMaxBucketShift = 40;  // 1.1 s buckets; with 2^16 of them the span stays < 2^63 ps
constexpr int kFinerBuckets = 4;     // buckets 2^4 times narrower than two to four mean gaps
}  // namespace

// Inline into cancel and requeue: one call fewer per cancelled or re-armed event.
[[gnu::always_inline]] inline void Engine::ring_unlink(std::uint32_t slot) {
  Node* nodes = nodes_.data();
  const Node& node = nodes[slot];
  const std::uint32_t bucket_index = static_cast<std::uint32_t>(node.time_ps >> bucket_shift_) & ring_mask_;
  Bucket& bucket = buckets_[bucket_index];
  (node.prev == kNoNode ? bucket.head : nodes[node.prev].next) = node.next;
  (node.next == kNoNode ? bucket.tail : nodes[node.next].prev) = node.prev;
  if (bucket.head == kNoNode) clear_occupied(bucket_index);
  --ring_count_;
}

inline std::uint32_t Engine::next_occupied(std::uint32_t bucket) const {
  const std::uint32_t last_word = ring_mask_ >> 6;
  std::uint32_t word = bucket >> 6;
  std::uint64_t bits = occupied_[word] & (~std::uint64_t{0} << (bucket & 63));
  while (bits == 0) {  // wraps round to the bits before `bucket`: the ring's end
    word = word == last_word ? 0 : word + 1;
    bits = occupied_[word];
  }
  return (word << 6) | static_cast<std::uint32_t>(std::countr_zero(bits));
}

void Engine::requeue(std::uint32_t slot, const Entry& entry) {
  const std::uint32_t position = nodes_[slot].position;
  if (position == kInRing) {
    ring_unlink(slot);
    push(entry);
  } else {
    move_entry(position, entry);
  }
}

void Engine::retune_ring() {
  const std::uint64_t fired = retune_interval_;
  const std::uint64_t advanced_ps = static_cast<std::uint64_t>(now_ps_ - retune_start_ps_);
  const std::uint64_t pending_events = pending();
  // The next retune after max(kMinRetuneEvents, 2 x pending) events.
  retune_interval_ = std::max(kMinRetuneEvents, 2 * pending_events);
  retune_countdown_ = retune_interval_;
  retune_start_ps_ = now_ps_;
  // Bucket width: the power of two in (2, 4] mean gaps between consecutive events, and two
  // buckets per pending event, so the span is four to eight mean lifetimes of an event (pending
  // x mean gap): few go to the heap. Then both are refined by 2^kFinerBuckets (as far as the
  // bucket count allows): buckets hold 0 or 1 events, nearly, so a new event seldom lands in
  // an occupied bucket (the branches on it are predictable) and the bitmap finds the next
  // occupied bucket. engine_bench, 64 actors: 3.2 mispredicted branches per event without
  // refining, 1.0 with 2^4 (cachegrind's model).
  const std::uint64_t two_gaps_ps = advanced_ps / std::max<std::uint64_t>(fired, 1) * 2;
  int finer = kFinerBuckets;
  while (finer > 0 && (2 * pending_events << finer) > kMaxBuckets) --finer;
  const int shift = std::min(std::max(static_cast<int>(std::bit_width(two_gaps_ps)) - finer, 0), kMaxBucketShift);
  const std::uint64_t count = std::bit_ceil(std::clamp<std::uint64_t>(2 * pending_events << finer, kMinBuckets, kMaxBuckets));
  const std::uint64_t current = buckets_.size();
  // Rebuilding costs one pass over the ring: only where the shape is off by more than 2x.
  if (current != 0 && current * 2 >= count && current <= count * 2 && std::abs(shift - bucket_shift_) <= 1) return;
  // Everything that can throw comes first (the new buckets, the copy of the ring, room in the
  // heap for what will not fit the new span); if any allocation fails, the ring keeps its
  // shape: the order of events does not depend on it, and no event is lost.
  std::vector<Bucket> buckets;
  std::vector<std::uint64_t> occupied;
  try {
    buckets.resize(count);
    occupied.resize(count / 64);
    ring_scratch_.reserve(ring_count_);
  } catch (const std::bad_alloc&) {
    return;
  }
  // The members in order: bucket by bucket from the cursor (each list is sorted and the
  // buckets' slices of time ascend from there).
  ring_scratch_.clear();
  for (std::uint32_t i = 0, b = ring_cursor_; ring_scratch_.size() < ring_count_ && i <= ring_mask_; ++i, b = (b + 1) & ring_mask_) {
    for (std::uint32_t n = buckets_[b].head; n != kNoNode; n = nodes_[n].next) ring_scratch_.push_back({nodes_[n].time_ps, nodes_[n].key});
  }
  // The new span starts at now's bucket (ring_insert with an empty ring); members past it go
  // to the heap. All are >= now.
  const std::uint64_t start_ps = (static_cast<std::uint64_t>(now_ps_) >> shift) << shift;
  const std::uint64_t span_ps = count << shift;
  const auto past_span = std::partition_point(ring_scratch_.begin(), ring_scratch_.end(),
                                              [&](const Entry& e) { return e.time_ps - start_ps < span_ps; });
  try {
    heap_reserve(heap_size_ + static_cast<std::size_t>(ring_scratch_.end() - past_span));
  } catch (const std::bad_alloc&) {
    return;
  }
  // From here on nothing allocates.
  buckets_.swap(buckets);
  occupied_.swap(occupied);
  ring_mask_ = static_cast<std::uint32_t>(count - 1);
  bucket_shift_ = shift;
  ring_span_ps_ = span_ps;
  ring_count_ = 0;
  for (const Entry& entry : ring_scratch_) push(entry);  // in order: each goes to its bucket's end
}

void Engine::heap_reserve(std::size_t size) {
  if (size <= heap_capacity_) return;
  const std::size_t capacity = std::max<std::size_t>({64, 2 * heap_capacity_, size});
  std::unique_ptr<Entry[], AlignedDelete> grown(
      static_cast<Entry*>(::operator new[]((capacity + kHeapPad) * sizeof(Entry), std::align_val_t{64})));
  if (heap_size_ > 0) std::memcpy(grown.get() + kHeapPad, heap(), heap_size_ * sizeof(Entry));
  heap_storage_ = std::move(grown);
  heap_capacity_ = capacity;
}

void Engine::heap_push(const Entry& entry) {
  heap_reserve(heap_size_ + 1);
  sift_up(heap_size_++, entry);
}

void Engine::sift_up(std::size_t index, Entry moving) {
  // With a hole: parents move down until the entry's place is found.
  Entry* h = heap();
  while (index > 0) {
    const std::size_t parent = (index - 1) >> 2;
    if (!before(moving, h[parent])) break;
    place(index, h[parent]);
    index = parent;
  }
  place(index, moving);
}

namespace {
/// `if_set` where `mask` is all ones, else `if_clear`: a select the compiler keeps branch-free.
std::uint64_t pick(std::uint64_t mask, std::uint64_t if_set, std::uint64_t if_clear) {
  return if_clear ^ ((if_clear ^ if_set) & mask);
}
}  // namespace

void Engine::sift_down(std::size_t index, Entry moving) {
  Entry* h = heap();
  const std::size_t size = heap_size_;
  const std::size_t start = index;
  // Bottom-up: walk the hole to a leaf along the smallest children, then sift `moving` up from
  // there. In a simulation it is usually a late event that belongs near the bottom, so this
  // saves the comparison with it on every level.
  std::size_t hole = index;
  for (;;) {
    const std::size_t first = 4 * hole + 1;
    if (first + 4 > size) break;
    // The next level is one of four cache lines; fetch all four while this level compares.
    const std::size_t grandchildren = 4 * first + 1;
    if (grandchildren < size) {
      __builtin_prefetch(h + grandchildren);
      __builtin_prefetch(h + grandchildren + 4);
      __builtin_prefetch(h + grandchildren + 8);
      __builtin_prefetch(h + grandchildren + 12);
    }
    // Branch-free tournament among the four siblings (the winner is unpredictable). The
    // winners are selected as values (mask arithmetic), not re-loaded by index: each level is
    // one load of the siblings, two comparisons deep.
    const Entry* c = h + first;
    const std::uint64_t take1 = 0 - std::uint64_t{before(c[1], c[0])};  // all ones or zero
    const std::uint64_t take3 = 0 - std::uint64_t{before(c[3], c[2])};
    const Entry left{pick(take1, c[1].time_ps, c[0].time_ps), pick(take1, c[1].key, c[0].key)};
    const Entry right{pick(take3, c[3].time_ps, c[2].time_ps), pick(take3, c[3].key, c[2].key)};
    const std::uint64_t take_right = 0 - std::uint64_t{before(right, left)};
    const Entry best{pick(take_right, right.time_ps, left.time_ps), pick(take_right, right.key, left.key)};
    const std::size_t best_index = first + pick(take_right, 2 + (take3 & 1), take1 & 1);
    place(hole, best);
    hole = best_index;
  }
  // At most one partial level is left (its children would lie past the end).
  const std::size_t first = 4 * hole + 1;
  if (first < size) {
    std::size_t best = first;
    for (std::size_t child = first + 1; child < size; ++child) {
      if (before(h[child], h[best])) best = child;
    }
    place(hole, h[best]);
    hole = best;
  }
  // `moving` is not before the parent of `start`, so it stops at `start` or below.
  while (hole > start) {
    const std::size_t parent = (hole - 1) >> 2;
    if (!before(moving, h[parent])) break;
    place(hole, h[parent]);
    hole = parent;
  }
  place(hole, moving);
}

void Engine::remove_at(std::size_t index) {
  const std::size_t last = --heap_size_;
  if (index == last) return;
  move_entry(index, heap()[last]);
}

void Engine::move_entry(std::size_t index, const Entry& entry) {
  if (index > 0 && before(entry, heap()[(index - 1) >> 2])) {
    sift_up(index, entry);
  } else {
    sift_down(index, entry);
  }
}

bool Engine::cancel(EventId id) {
  // A default id (generation 0) matches no slot: generations are never 0.
  if (id.slot >= slot_count_) return false;
  Node& node = nodes_[id.slot];
  if (node.generation != id.generation || node.position == kNotQueued) return false;  // ran, or cancelled
  node.generation = next_generation(node.generation);
  const std::uint32_t position = node.position;
  node.position = kNotQueued;
  if (position == kInRing) {
    ring_unlink(id.slot);
  } else {
    remove_at(position);
  }
  handler_at(id.slot).reset();
  release_slot(id.slot);
  return true;
}

std::vector<PendingEvent> Engine::pending_events() const {
  std::vector<PendingEvent> out;
  out.reserve(pending());
  auto add = [&](const Entry& e) {
    const std::uint32_t slot_index = slot_of(e);
    out.push_back({static_cast<TimePs>(e.time_ps), sequence_of(e), {slot_index, nodes_[slot_index].generation}});
  };
  const Entry* h = heap_storage_.get() + kHeapPad;
  for (std::size_t i = 0; i < heap_size_; ++i) add(h[i]);
  for (std::uint32_t slot = 0; slot < slot_count_; ++slot) {
    if (nodes_[slot].position == kInRing) add({nodes_[slot].time_ps, nodes_[slot].key});
  }
  std::sort(out.begin(), out.end(), [](const PendingEvent& a, const PendingEvent& b) {
    return a.time_ps != b.time_ps ? a.time_ps < b.time_ps : a.sequence < b.sequence;
  });
  return out;
}

// Inline into run() and run_until(): one call fewer per event.
[[gnu::always_inline]] inline bool Engine::fire_next(TimePs limit_ps) {
  // The next event: the ring's first or the heap's top, whichever is earlier.
  std::uint32_t ring_head = kNoNode;
  if (ring_count_ > 0) {
    const std::uint64_t heap_time = heap_size_ > 0 ? heap()[0].time_ps : UINT64_MAX;
    ring_head = buckets_[ring_cursor_].head;
    if (ring_head == kNoNode) {
      // Jump to the first non-empty bucket; the buckets between are empty. If the heap's top
      // comes before it, take the top, and move the start no further than the top's bucket (so
      // that events scheduled from now on fit the ring). The heap's top may lie before the
      // start (scheduled after run_until stopped short of the ring's first): never move back.
      const std::uint32_t found = next_occupied(ring_cursor_);
      const std::uint64_t start_ps = ring_start_ps_ + (static_cast<std::uint64_t>((found - ring_cursor_) & ring_mask_) << bucket_shift_);
      if (heap_time < start_ps) [[unlikely]] {
        const std::uint64_t heap_bucket_ps = (heap_time >> bucket_shift_) << bucket_shift_;
        if (heap_bucket_ps > ring_start_ps_) {
          ring_start_ps_ = heap_bucket_ps;
          ring_cursor_ = static_cast<std::uint32_t>(heap_time >> bucket_shift_) & ring_mask_;
        }
      } else {
        ring_start_ps_ = start_ps;
        ring_cursor_ = found;
        ring_head = buckets_[found].head;
      }
    }
    // The heap's top first only if not later (heap_time is UINT64_MAX for an empty heap).
    if (ring_head != kNoNode && heap_time <= nodes_[ring_head].time_ps &&
        before(heap()[0], {nodes_[ring_head].time_ps, nodes_[ring_head].key})) {
      ring_head = kNoNode;
    }
  }
  Entry top;
  Node* nodes = nodes_.data();
  if (ring_head != kNoNode) {
    Node& head = nodes[ring_head];
    top = {head.time_ps, head.key};
    if (static_cast<TimePs>(top.time_ps) > limit_ps) return false;
    const std::uint32_t next = head.next;
    Bucket& bucket = buckets_[ring_cursor_];
    bucket.head = next;
    if (next == kNoNode) {
      bucket.tail = kNoNode;
      clear_occupied(ring_cursor_);
    } else {
      nodes[next].prev = kNoNode;
      // The next event's handler is likely a cache miss: start loading it while this one runs.
      __builtin_prefetch(&handler_at(next));
    }
    --ring_count_;
  } else {
    if (heap_size_ == 0) return false;
    top = heap()[0];
    if (static_cast<TimePs>(top.time_ps) > limit_ps) return false;
    const std::size_t size = --heap_size_;
    if (size > 0) {
      sift_down(0, heap()[size]);
      __builtin_prefetch(&handler_at(slot_of(heap()[0])));
    }
  }
  const std::uint32_t index = slot_of(top);
  Node& node = nodes[index];  // not used after the handler: nodes_ may grow
  node.position = kNotQueued;
  node.generation = next_generation(node.generation);  // from now on cancel(id) is false
  now_ps_ = static_cast<TimePs>(top.time_ps);
  if (--retune_countdown_ == 0) [[unlikely]] retune_ring();
  ++events_processed_;
  fingerprint_.add(top.time_ps);
  fingerprint_.add(sequence_of(top));
  // Frees the slot after the handler returns or throws; the slot is not reusable meanwhile.
  Handler& handler = handler_at(index);  // chunks never move: the reference survives new schedules
  struct Release {
    Engine& engine;
    Handler& handler;
    std::uint32_t index;
    ~Release() {
      handler.reset();
      engine.release_slot(index);
    }
  } release{*this, handler, index};
  handler();
  return true;
}

void Engine::run() {
  while (fire_next(INT64_MAX)) {
  }
}

bool Engine::run_until(TimePs limit_ps) {
  while (fire_next(limit_ps)) {
  }
  now_ps_ = std::max(now_ps_, limit_ps);
  return !empty();
}

void Engine::fail_delay(TimePs delay_ps) const {
  if (delay_ps < 0) fail_in_past(now_ps_ + delay_ps);
  checked_add(now_ps_, delay_ps, kSimulatedClock);  // throws: the sum overflows
  fail(ErrorCode::kInternal, "event engine: delay {} ps from {} ps rejected", delay_ps, now_ps_);
}

void Engine::fail_in_past(TimePs time_ps) const {
  fail(ErrorCode::kInternal, "event scheduled in the past: at {} ps while the clock reads {} ps", time_ps, now_ps_);
}

}  // namespace lynx::sim
