#pragma once
/// The discrete-event engine: a priority queue of typed handlers ordered by (time, insertion
/// sequence), so equal-time events run first-in first-out and every run is bit-identical.
/// An Engine is a plain value: no globals, several engines in one process are independent.
#include "sim/fingerprint.hpp"
#include "sim/inline_function.hpp"
#include "sim/time.hpp"

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace lynx::sim {

/// Names one scheduled event; stays unique after the event fired or was cancelled
/// (the slot's generation moves on), so a stale id is harmless.
struct EventId {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;  ///< 0 never names an event: a default EventId cancels nothing
  friend bool operator==(EventId, EventId) = default;
};

/// A pending event as a queue snapshot lists it (Engine::pending_events).
struct PendingEvent {
  TimePs time_ps = 0;
  std::uint64_t sequence = 0;  ///< insertion order: equal-time events run in this order
  EventId id;
};

/// Event queue and clock. Handlers are `void()` callables; captures up to 48 bytes are stored
/// without heap allocation.
class Engine {
 public:
  /// Bytes a handler's captures may take before it is stored on the heap.
  static constexpr std::size_t kInlineHandlerBytes = 48;
  using Handler = InlineFunction<void(), kInlineHandlerBytes>;

  Engine() = default;
  Engine(Engine&&) noexcept = default;
  Engine& operator=(Engine&&) noexcept = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() = default;

  /// Schedules `handler` at absolute time `time_ps` (>= now(), else lynx::Error).
  template <typename H>
  EventId schedule_at(TimePs time_ps, H&& handler) {
    if (time_ps < now_ps_) [[unlikely]] fail_in_past(time_ps);
    return schedule(time_ps, std::forward<H>(handler));
  }

  /// Schedules `handler` at now() + delay_ps (delay_ps >= 0, overflow-checked).
  template <typename H>
  EventId schedule_after(TimePs delay_ps, H&& handler) {
    // One comparison for both errors: a negative delay is a huge unsigned one.
    if (static_cast<std::uint64_t>(delay_ps) > static_cast<std::uint64_t>(INT64_MAX - now_ps_)) [[unlikely]] {
      fail_delay(delay_ps);
    }
    return schedule(now_ps_ + delay_ps, std::forward<H>(handler));
  }

  /// Cancels a pending event: it will not run. False if it already ran or was cancelled.
  bool cancel(EventId id);

  /// Exactly `cancel(id)` then `schedule_at(time_ps, handler)` (same slot, generation and
  /// sequence, so the same run order and the same returned id), but a pending event keeps its
  /// slot and handler storage, and a heap entry is moved in place: one sift instead of a
  /// removal and an insertion.
  template <typename H>
  EventId reschedule(EventId id, TimePs time_ps, H&& handler) {
    using D = std::decay_t<H>;
    // In place only where nothing can throw half-way (an inline, nothrow-constructed handler).
    constexpr bool in_place = Handler::template stores_inline<D> && std::is_nothrow_constructible_v<D, H&&>;
    if (!in_place || !is_pending(id) || time_ps < now_ps_ || next_sequence_ > kMaxSequence) [[unlikely]] {
      cancel(id);
      return schedule_at(time_ps, std::forward<H>(handler));
    }
    // The requeue may move a ring member to the heap: room first, before anything changes.
    if (heap_size_ == heap_capacity_) [[unlikely]] heap_reserve(heap_size_ + 1);
    Node& node = nodes_[id.slot];
    node.generation = next_generation(node.generation);
    handler_at(id.slot).template emplace<D>(std::forward<H>(handler));
    requeue(id.slot, {static_cast<std::uint64_t>(time_ps), (next_sequence_++ << kSlotBits) | id.slot});
    return {id.slot, nodes_[id.slot].generation};
  }

  /// Runs events until none is pending.
  void run();

  /// Runs every event with time <= limit_ps, then advances now() to limit_ps (if later).
  /// Returns true if events are still pending (beyond the limit), false if the queue is empty.
  bool run_until(TimePs limit_ps);

  /// Current simulated time: the time of the event running or last run.
  TimePs now() const { return now_ps_; }
  /// Number of events that ran (cancelled ones are not counted).
  std::uint64_t events_processed() const { return events_processed_; }
  /// True when no event is pending.
  bool empty() const { return pending() == 0; }
  /// Number of pending (scheduled, not cancelled, not yet run) events.
  std::uint64_t pending() const { return ring_count_ + heap_size_; }
  /// Every pending event, in the order they will run ((time, sequence)).
  std::vector<PendingEvent> pending_events() const;
  /// Hash of the (time, sequence) of every event that ran, in order.
  const Fingerprint& fingerprint() const { return fingerprint_; }
  /// How many pending events sit in the near-future ring rather than the heap (for tests and
  /// benchmarks: the order does not depend on it).
  std::uint64_t pending_in_ring() const { return ring_count_; }

 private:
  // Two structures hold the pending events; the next event is the earlier of their fronts.
  //
  // The ring (a calendar queue) holds events of the near future: bucket b covers a
  // 2^bucket_shift_ ps slice of time, the buckets in turn cover [ring_start_ps_, + span), and
  // each bucket is a list sorted by (time, sequence), linked through the slots. A new event
  // almost always goes to the end of its bucket's list (its sequence is the largest yet), and
  // the next event is the head of the first non-empty bucket, found in a bitmap of the
  // occupied buckets: O(1) both, where a heap pays log(pending) levels. The bucket width and
  // count follow the run (retune_ring): buckets of an eighth to a quarter of the mean gap
  // between events, so most hold 0 or 1 and the branches on them are predictable, and 32
  // buckets per pending event (fewer, and wider, where that would pass 2^16 buckets).
  //
  // The heap takes every event the ring does not: beyond its span, before its start (after
  // run_until), or where the sorted insertion would walk more than a few nodes back. A heap
  // entry is 16 bytes: the time, then (sequence << kSlotBits | slot). Compared as one
  // 128-bit number it orders by (time, sequence); four siblings share one 64-byte cache line.
  // Each slot knows its entry's position (heap index, or kInRing), so cancel() removes the
  // entry at once (a re-armed completion leaves nothing stale behind to pop).
  static constexpr int kSlotBits = 24;  // up to 16.7M events pending at once
  static constexpr std::uint64_t kMaxSlots = std::uint64_t{1} << kSlotBits;
  static constexpr std::uint64_t kMaxSequence = (std::uint64_t{1} << (64 - kSlotBits)) - 1;  // 1.1e12 events
  static constexpr std::uint32_t kNotQueued = UINT32_MAX;  ///< position of a slot without a pending event
  static constexpr std::uint32_t kInRing = UINT32_MAX - 1;  ///< position of a slot whose event is in the ring
  static constexpr std::uint32_t kNoNode = UINT32_MAX;      ///< end of a bucket list

  struct alignas(16) Entry {
    std::uint64_t time_ps;
    std::uint64_t key;  ///< sequence << kSlotBits | slot
  };
  /// Everything the queue keeps per slot but the handler, in one 32-byte record (two to a
  /// cache line): a ring member's entry and its neighbours in its bucket's list, where the
  /// entry sits, and the generation. A free slot links to the next free one through `next`.
  struct Node {
    std::uint64_t time_ps = 0;            ///< a ring member's entry (a heap entry has its own copy)
    std::uint64_t key = 0;
    std::uint32_t next = kNoNode;         ///< ring: the next in its bucket; free: the next free slot
    std::uint32_t prev = kNoNode;         ///< ring: the previous in its bucket
    std::uint32_t position = kNotQueued;  ///< index of its entry in the heap, or kInRing
    std::uint32_t generation = 1;         ///< bumped when the event runs or is cancelled; never 0
  };
  static_assert(sizeof(Node) == 32);
  /// A bucket's sorted list: its first and last slot, or kNoNode.
  struct Bucket {
    std::uint32_t head = kNoNode;
    std::uint32_t tail = kNoNode;
  };
  struct Slot {
    Handler handler;
  };
  static constexpr std::uint32_t kChunkBits = 10;  // slab chunks of 1024 handlers: stable addresses
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;

  /// Events between two retune_ring calls at least (the first measures the mean gap between
  /// events over them).
  static constexpr std::uint64_t kMinRetuneEvents = 256;
  /// How far back from a bucket's end an insertion may walk before the event goes to the heap.
  static constexpr int kMaxRingWalk = 4;
  static bool before(const Entry& a, const Entry& b) {
    return ((static_cast<UInt128>(a.time_ps) << 64) | a.key) < ((static_cast<UInt128>(b.time_ps) << 64) | b.key);
  }
  static std::uint32_t slot_of(const Entry& e) { return static_cast<std::uint32_t>(e.key & (kMaxSlots - 1)); }
  static std::uint64_t sequence_of(const Entry& e) { return e.key >> kSlotBits; }
  static std::uint32_t next_generation(std::uint32_t generation) {
    return generation == UINT32_MAX ? 1 : generation + 1;
  }
  Handler& handler_at(std::uint32_t index) { return chunks_[index >> kChunkBits][index & (kChunkSize - 1)].handler; }
  /// Adds a slot (and its handler storage) and puts it on the free list; returns its index.
  std::uint32_t new_slot();
  /// Puts slot `index` (no longer queued, its handler empty) on the free list: last in, first out.
  void release_slot(std::uint32_t index) {
    nodes_[index].next = free_head_;
    free_head_ = index;
  }
  Entry* heap() { return heap_storage_.get() + kHeapPad; }
  /// Writes `entry` at heap index `index` and records the position in its slot.
  void place(std::size_t index, const Entry& entry) {
    heap()[index] = entry;
    nodes_[slot_of(entry)].position = static_cast<std::uint32_t>(index);
  }
  /// Queues `entry` (its slot holds no queued entry): in the ring if it fits, else the heap.
  /// Its sequence must be larger than every ring member's in its bucket (true for a new
  /// sequence, and for retune_ring's reinsertion in order). Throws only where the heap must
  /// grow, and then changes nothing.
  void push(const Entry& entry);
  void heap_push(const Entry& entry);
  /// Makes room for `size` heap entries (throws std::bad_alloc, changing nothing, if it cannot).
  void heap_reserve(std::size_t size);
  /// Gives slot `slot`, which holds a queued entry, the new `entry` (same slot).
  void requeue(std::uint32_t slot, const Entry& entry);
  /// Appends `entry` to its bucket's sorted list; false (nothing changed) if it belongs
  /// outside the ring's span or deeper than a few nodes from the list's end.
  bool ring_insert(const Entry& entry);
  /// Removes ring member `slot` from its bucket's list.
  void ring_unlink(std::uint32_t slot);
  void set_occupied(std::uint32_t bucket) { occupied_[bucket >> 6] |= std::uint64_t{1} << (bucket & 63); }
  void clear_occupied(std::uint32_t bucket) { occupied_[bucket >> 6] &= ~(std::uint64_t{1} << (bucket & 63)); }
  /// The first non-empty bucket from `bucket` on, in ring order (the ring holds a member).
  std::uint32_t next_occupied(std::uint32_t bucket) const;
  /// Picks the bucket width and count from the events since the last retune and rebuilds
  /// the ring if they changed enough (the order of events does not depend on it).
  void retune_ring();
  /// Moves `moving` up from the hole at `index` to its place.
  void sift_up(std::size_t index, Entry moving);
  /// Fills the hole at `index` with `moving`, which is not before the hole's parent: the hole
  /// walks down along the smallest children, then `moving` rises to its place (size unchanged).
  void sift_down(std::size_t index, Entry moving);
  /// Removes the entry at heap index `index`.
  void remove_at(std::size_t index);
  /// Replaces the entry at heap index `index` by `entry` (of the same slot).
  void move_entry(std::size_t index, const Entry& entry);
  /// Whether `id` names a pending event (cancel + schedule would then reuse its slot: the
  /// free list is last in, first out).
  bool is_pending(EventId id) const {
    return id.slot < slot_count_ && nodes_[id.slot].generation == id.generation && nodes_[id.slot].position != kNotQueued;
  }
  /// Runs the next live event if its time is <= limit_ps; false if there is none.
  bool fire_next(TimePs limit_ps);
  /// schedule_at without the check of `time_ps` (>= now()).
  template <typename H>
  EventId schedule(TimePs time_ps, H&& handler) {
    if (next_sequence_ > kMaxSequence) [[unlikely]] fail_sequence_exhausted();
    const std::uint32_t slot_index = free_head_ != kNoNode ? free_head_ : new_slot();
    // The slot leaves the free list only once nothing can throw: a throwing handler
    // constructor or heap growth leaves the engine as it was.
    const std::uint32_t next_free = nodes_[slot_index].next;
    Handler& slot_handler = handler_at(slot_index);
    try {
      slot_handler.template emplace_into_empty<std::decay_t<H>>(std::forward<H>(handler));
      push({static_cast<std::uint64_t>(time_ps), (next_sequence_ << kSlotBits) | slot_index});
    } catch (...) {
      slot_handler.reset();
      throw;
    }
    free_head_ = next_free;
    ++next_sequence_;
    return {slot_index, nodes_[slot_index].generation};
  }
  [[noreturn]] void fail_delay(TimePs delay_ps) const;
  [[noreturn]] void fail_in_past(TimePs time_ps) const;
  [[noreturn]] static void fail_sequence_exhausted();

  struct AlignedDelete {
    void operator()(Entry* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  /// Element 0 sits kHeapPad entries into a 64-byte aligned block, so the children of any
  /// node (4i+1 .. 4i+4) fill exactly one cache line.
  static constexpr std::size_t kHeapPad = 3;
  std::unique_ptr<Entry[], AlignedDelete> heap_storage_;
  std::size_t heap_size_ = 0;
  std::size_t heap_capacity_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<std::uint64_t> occupied_;  ///< bit b: bucket b is not empty (the ring's bitmap)
  std::vector<Node> nodes_;          ///< per slot
  std::vector<Entry> ring_scratch_;  ///< retune_ring's copy of the ring, kept for its capacity
  std::uint64_t ring_start_ps_ = 0;         ///< start of bucket ring_cursor_, a multiple of its width
  std::uint64_t ring_span_ps_ = 0;          ///< buckets x width
  std::uint32_t ring_cursor_ = 0;           ///< the bucket of ring_start_ps_
  std::uint32_t ring_mask_ = 0;             ///< buckets - 1 (a power of two)
  int bucket_shift_ = 0;                    ///< log2 of the bucket width in ps
  std::uint64_t ring_count_ = 0;
  std::uint64_t retune_interval_ = kMinRetuneEvents;  ///< events from the last retune to the next
  std::uint64_t retune_countdown_ = kMinRetuneEvents;  ///< events left until the next retune
  TimePs retune_start_ps_ = 0;                           ///< now() at the last retune
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::uint32_t free_head_ = kNoNode;  ///< first free slot, or kNoNode
  std::uint32_t slot_count_ = 0;
  TimePs now_ps_ = 0;
  std::uint64_t next_sequence_ = 0;
  std::uint64_t events_processed_ = 0;
  Fingerprint fingerprint_;
};

// Inline: schedule_at, in the caller's code, runs them for every event.
inline void Engine::push(const Entry& entry) {
  if (!ring_insert(entry)) heap_push(entry);
}

inline bool Engine::ring_insert(const Entry& entry) {
  if (ring_count_ == 0) {  // no member pins the start: move it to now
    ring_start_ps_ = (static_cast<std::uint64_t>(now_ps_) >> bucket_shift_) << bucket_shift_;
    ring_cursor_ = static_cast<std::uint32_t>(ring_start_ps_ >> bucket_shift_) & ring_mask_;
  }
  // One unsigned comparison: a time before the start wraps to more than the span (< 2^63).
  if (entry.time_ps - ring_start_ps_ >= ring_span_ps_) return false;
  const std::uint32_t bucket_index = static_cast<std::uint32_t>(entry.time_ps >> bucket_shift_) & ring_mask_;
  Bucket& bucket = buckets_[bucket_index];
  Node* nodes = nodes_.data();
  const std::uint32_t slot = slot_of(entry);
  Node& node = nodes[slot];
  // Times alone order it against the members: its sequence is the largest (see push).
  const std::uint32_t tail = bucket.tail;
  if (tail == kNoNode) {  // the first in its bucket
    set_occupied(bucket_index);
    bucket.head = slot;
    bucket.tail = slot;
    node.next = kNoNode;
    node.prev = kNoNode;
  } else if (nodes[tail].time_ps <= entry.time_ps) {  // usually: it goes last
    nodes[tail].next = slot;
    bucket.tail = slot;
    node.next = kNoNode;
    node.prev = tail;
  } else {  // walk back over the later ones
    std::uint32_t after = nodes[tail].prev;
    for (int walked = 1; after != kNoNode && nodes[after].time_ps > entry.time_ps; ++walked) {
      if (walked == kMaxRingWalk) return false;  // (an event deep in its bucket: rare)
      after = nodes[after].prev;
    }
    const std::uint32_t next = after == kNoNode ? bucket.head : nodes[after].next;
    (after == kNoNode ? bucket.head : nodes[after].next) = slot;
    nodes[next].prev = slot;  // next is a member: the tail at least is later
    node.next = next;
    node.prev = after;
  }
  node.time_ps = entry.time_ps;
  node.key = entry.key;
  node.position = kInRing;
  ++ring_count_;
  return true;
}

}  // namespace lynx::sim
