#include "sim/engine.hpp"

#include <algorithm>
#include <cstring>

namespace lynx::sim {

std::uint32_t Engine::new_slot() {
  if (slot_count_ >= kMaxSlots) fail(ErrorCode::kWorkTooLarge, "event engine: more than {} events pending at once", kMaxSlots);
  if ((slot_count_ & (kChunkSize - 1)) == 0) chunks_.push_back(std::make_unique<Slot[]>(kChunkSize));
  return slot_count_++;
}

void Engine::fail_sequence_exhausted() {
  fail(ErrorCode::kWorkTooLarge, "event engine: more than {} events scheduled in one run", kMaxSequence);
}

void Engine::push(const Entry& entry) {
  if (heap_size_ == heap_capacity_) {
    const std::size_t capacity = std::max<std::size_t>(64, 2 * heap_capacity_);
    std::unique_ptr<Entry[], AlignedDelete> grown(
        static_cast<Entry*>(::operator new[]((capacity + kHeapPad) * sizeof(Entry), std::align_val_t{64})));
    if (heap_size_ > 0) std::memcpy(grown.get() + kHeapPad, heap(), heap_size_ * sizeof(Entry));
    heap_storage_ = std::move(grown);
    heap_capacity_ = capacity;
  }
  // Sift up with a hole: parents move down until the entry's place is found.
  Entry* h = heap();
  std::size_t index = heap_size_++;
  while (index > 0) {
    const std::size_t parent = (index - 1) >> 2;
    if (!before(entry, h[parent])) break;
    h[index] = h[parent];
    index = parent;
  }
  h[index] = entry;
}

void Engine::pop() {
  const std::size_t size = --heap_size_;
  if (size > 0) replace_root(heap()[size]);
}

void Engine::replace_root(Entry moving) {
  Entry* h = heap();
  const std::size_t size = heap_size_;
  // Bottom-up: walk the hole from the root to a leaf along the smallest children, then sift
  // `moving` up from there. In a simulation it is usually a late event that belongs near the
  // bottom, so this saves the comparison with it on every level.
  std::size_t hole = 0;
  for (;;) {
    const std::size_t first = 4 * hole + 1;
    std::size_t best = first;
    if (first + 4 <= size) {
      // The next level is one of four cache lines; fetch all four while this level compares.
      const std::size_t grandchildren = 4 * first + 1;
      if (grandchildren < size) {
        __builtin_prefetch(h + grandchildren);
        __builtin_prefetch(h + grandchildren + 4);
        __builtin_prefetch(h + grandchildren + 8);
        __builtin_prefetch(h + grandchildren + 12);
      }
      // Branch-free tournament among the four siblings (the winner is unpredictable).
      const std::size_t left = first + static_cast<std::size_t>(before(h[first + 1], h[first]));
      const std::size_t right = first + 2 + static_cast<std::size_t>(before(h[first + 3], h[first + 2]));
      const std::size_t pick_right = std::size_t{0} - static_cast<std::size_t>(before(h[right], h[left]));
      best = left ^ ((left ^ right) & pick_right);
    } else {
      if (first >= size) break;
      for (std::size_t child = first + 1; child < size; ++child) {
        if (before(h[child], h[best])) best = child;
      }
    }
    h[hole] = h[best];
    hole = best;
  }
  while (hole > 0) {
    const std::size_t parent = (hole - 1) >> 2;
    if (!before(moving, h[parent])) break;
    h[hole] = h[parent];
    hole = parent;
  }
  h[hole] = moving;
}

void Engine::sift_down_from(std::size_t index, Entry moving) {
  Entry* h = heap();
  for (;;) {
    const std::size_t first = 4 * index + 1;
    if (first >= heap_size_) break;
    const std::size_t end = std::min(first + 4, heap_size_);
    std::size_t best = first;
    for (std::size_t child = first + 1; child < end; ++child) {
      if (before(h[child], h[best])) best = child;
    }
    if (!before(h[best], moving)) break;
    h[index] = h[best];
    index = best;
  }
  h[index] = moving;
}

void Engine::compact_if_stale() {
  // Cancelled events leave stale heap entries behind; drop them once they dominate the heap.
  const std::size_t stale = heap_size_ - live_events_;
  if (stale <= live_events_ / 2 + 256) return;
  Entry* h = heap();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < heap_size_; ++i) {
    if (!is_stale(h[i])) h[kept++] = h[i];
  }
  heap_size_ = kept;
  if (kept < 2) return;
  for (std::size_t start = (kept - 2) / 4 + 1; start-- > 0;) sift_down_from(start, h[start]);
}

bool Engine::cancel(EventId id) {
  if (id.generation == 0 || id.slot >= slot_count_) return false;
  Slot& slot = slot_at(id.slot);
  if (slot.generation != id.generation || slot.sequence == kNoSequence) return false;  // ran, or cancelled
  slot.generation = next_generation(slot.generation);
  slot.sequence = kNoSequence;  // its heap entry is stale from now on
  slot.handler.reset();
  free_slots_.push_back(id.slot);
  --live_events_;
  compact_if_stale();
  return true;
}

std::vector<PendingEvent> Engine::pending_events() const {
  std::vector<PendingEvent> out;
  out.reserve(live_events_);
  if (heap_size_ == 0) return out;
  const Entry* h = heap_storage_.get() + kHeapPad;
  for (std::size_t i = 0; i < heap_size_; ++i) {
    const std::uint32_t slot_index = slot_of(h[i]);
    const Slot& slot = chunks_[slot_index >> kChunkBits][slot_index & (kChunkSize - 1)];
    if (slot.sequence != sequence_of(h[i])) continue;  // cancelled
    out.push_back({static_cast<TimePs>(h[i].time_ps), slot.sequence, {slot_index, slot.generation}});
  }
  std::sort(out.begin(), out.end(), [](const PendingEvent& a, const PendingEvent& b) {
    return a.time_ps != b.time_ps ? a.time_ps < b.time_ps : a.sequence < b.sequence;
  });
  return out;
}

bool Engine::fire_next(TimePs limit_ps) {
  while (heap_size_ > 0) {
    const Entry top = heap()[0];
    Slot& slot = slot_at(slot_of(top));  // chunks never move: the reference survives new schedules
    if (slot.sequence != sequence_of(top)) {  // cancelled: skip
      pop();
      continue;
    }
    if (static_cast<TimePs>(top.time_ps) > limit_ps) return false;
    pop();
    // The next event's slot is likely a cache miss: start loading it while this handler runs.
    if (heap_size_ > 0) __builtin_prefetch(&slot_at(slot_of(heap()[0])));
    now_ps_ = static_cast<TimePs>(top.time_ps);
    slot.sequence = kNoSequence;
    slot.generation = next_generation(slot.generation);  // from now on cancel(id) is false
    --live_events_;
    ++events_processed_;
    fingerprint_.add(top.time_ps);
    fingerprint_.add(sequence_of(top));
    // Frees the slot after the handler returns or throws; the slot is not reusable meanwhile.
    struct Release {
      Engine& engine;
      Slot& slot;
      std::uint32_t index;
      ~Release() {
        slot.handler.reset();
        engine.free_slots_.push_back(index);
      }
    } release{*this, slot, slot_of(top)};
    slot.handler();
    return true;
  }
  return false;
}

void Engine::run() {
  while (fire_next(INT64_MAX)) {
  }
}

bool Engine::run_until(TimePs limit_ps) {
  while (fire_next(limit_ps)) {
  }
  now_ps_ = std::max(now_ps_, limit_ps);
  return live_events_ > 0;
}

void Engine::fail_in_past(TimePs time_ps) const {
  fail(ErrorCode::kInternal, "event scheduled in the past: at {} ps while the clock reads {} ps", time_ps, now_ps_);
}

}  // namespace lynx::sim
