#include "live/host_backend.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "live/buffer_ledger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace lynx::live {

namespace {

/// A waiting op gives up after this long: a broken stream fails with a message, never hangs.
constexpr auto kWaitLimit = std::chrono::seconds(120);
/// Upper bound of the per-thread work buffer (a memory pass per op).
constexpr std::size_t kMaxWorkBytes = 4 << 20;

/// Host buffers standing for the activations: malloc'd at the scaled size and touched.
class HostAllocator {
 public:
  explicit HostAllocator(double scale) : scale_(scale) {}
  void* allocate(std::int64_t bytes) const {
    const auto size = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(bytes) * scale_));
    void* p = std::malloc(size);
    if (p == nullptr) fail(ErrorCode::kSystemFailure, "host backend: out of host memory allocating {} bytes", size);
    std::memset(p, 0x5a, size);
    return p;
  }
  static void release(void* p) { std::free(p); }

 private:
  double scale_;
};

/// Applies an op's memory effects at its start (at_end false) or end on the rank's ledger.
void apply_effects(const LiveOp& op, bool at_end, BufferLedger& ledger, const HostAllocator& alloc, double now_s) {
  for (const sim::MemEffect& e : op.mem) {
    if (e.at_end != at_end) continue;
    if (e.bytes > 0) {
      ledger.add(e.tag, e.bytes, alloc.allocate(e.bytes), now_s);
    } else {
      HostAllocator::release(ledger.take(e.tag, -e.bytes, now_s));
    }
  }
}

/// The op's stand-in work: one pass over its scaled bytes of the thread's work buffer.
void host_work(const LiveOp& op, std::vector<unsigned char>& buffer, double scale) {
  if (op.launch == LaunchKind::kNone || buffer.empty()) return;
  const auto bytes = std::min(buffer.size(), static_cast<std::size_t>(static_cast<double>(op.bytes) * scale));
  for (std::size_t i = 0; i < bytes; i += 64) buffer[i] = static_cast<unsigned char>(buffer[i] + 1);
}

std::vector<std::unique_ptr<BufferLedger>> make_ledgers(const OpStream& ops) {
  std::vector<std::unique_ptr<BufferLedger>> ledgers;
  for (std::int64_t s : ops.static_bytes) ledgers.push_back(std::make_unique<BufferLedger>(s, ops.tags.size()));
  return ledgers;
}

/// Times and sequence numbers of every op, none started yet.
Measured unstarted(const OpStream& ops) {
  Measured m;
  const std::size_t n = ops.ops.size();
  m.op_start_s.assign(n, 0);
  m.op_end_s.assign(n, 0);
  m.op_start_seq.assign(n, -1);
  m.op_end_seq.assign(n, -1);
  return m;
}

void finish(Measured& m, const std::vector<std::unique_ptr<BufferLedger>>& ledgers) {
  for (const auto& ledger : ledgers) {
    for (void* p : ledger->held()) HostAllocator::release(p);
    m.peak_bytes.push_back(ledger->peak_bytes());
    m.memory_timeline.push_back(ledger->timeline());
  }
  double first = 0, last = 0;
  for (std::size_t i = 0; i < m.op_start_s.size(); ++i) {
    first = i == 0 ? m.op_start_s[i] : std::min(first, m.op_start_s[i]);
    last = std::max(last, m.op_end_s[i]);
  }
  m.iteration_s = last - first;
}

}  // namespace

std::string HostBackend::device() const {
  return fmt::format("host CPU ({} hardware threads), sizes x {:g}", std::thread::hardware_concurrency(),
                     options_.size_scale);
}

void HostBackend::prepare(const OpStream& ops) {
  LYNX_CHECK(options_.size_scale > 0 && options_.size_scale <= 1, "size_scale {}", options_.size_scale);
  if (options_.simulator_order && ops.sim.exec.event_order.size() != 2 * ops.num_tasks)
    fail(ErrorCode::kInternal, "host backend: the simulator's event order has {} entries for {} tasks", ops.sim.exec.event_order.size(),
         ops.num_tasks);
}

Measured HostBackend::run_iteration(const OpStream& ops) {
  return options_.simulator_order ? run_simulator_order(ops) : run_threads(ops);
}

Measured HostBackend::run_simulator_order(const OpStream& ops) {
  Measured m = unstarted(ops);
  auto ledgers = make_ledgers(ops);
  const HostAllocator alloc(options_.size_scale);
  std::vector<unsigned char> buffer(kMaxWorkBytes);
  const WallClock::time_point started = WallClock::now();
  std::int64_t seq = 0;
  const auto check_ready = [&](std::size_t i) {
    for (int d : ops.ops[i].deps)
      if (m.op_end_seq[static_cast<std::size_t>(d)] < 0)
        fail(ErrorCode::kInternal, "host backend: '{}' starts before '{}' ended in the simulator's order", ops.ops[i].label,
             ops.ops[static_cast<std::size_t>(d)].label);
  };
  for (const std::int64_t entry : ops.sim.exec.event_order) {
    const auto i = static_cast<std::size_t>(entry >> 1);
    const LiveOp& op = ops.ops[i];
    BufferLedger& ledger = *ledgers[static_cast<std::size_t>(op.rank)];
    const double now = seconds_since(started);
    if ((entry & 1) == 0) {
      check_ready(i);
      m.op_start_s[i] = now;
      m.op_start_seq[i] = seq++;
      apply_effects(op, false, ledger, alloc, now);
      host_work(op, buffer, options_.size_scale);
      if (op.launch == LaunchKind::kSend) {  // its receive runs with it
        const auto r = static_cast<std::size_t>(op.match);
        check_ready(r);
        m.op_start_s[r] = now;
        m.op_start_seq[r] = seq++;
      }
    } else {
      apply_effects(op, true, ledger, alloc, now);
      m.op_end_s[i] = now;
      m.op_end_seq[i] = seq++;
      if (op.launch == LaunchKind::kSend) {
        const auto r = static_cast<std::size_t>(op.match);
        m.op_end_s[r] = now;
        m.op_end_seq[r] = seq++;
      }
    }
  }
  finish(m, ledgers);
  return m;
}

Measured HostBackend::run_threads(const OpStream& ops) {
  const std::size_t n = ops.ops.size();
  Measured m = unstarted(ops);
  auto ledgers = make_ledgers(ops);
  const HostAllocator alloc(options_.size_scale);

  // One queue per (rank, stream), in the rank's issue order.
  std::map<std::pair<int, int>, std::vector<int>> queues;
  for (const auto& list : ops.rank_ops)
    for (int i : list) queues[{ops.ops[static_cast<std::size_t>(i)].rank, ops.ops[static_cast<std::size_t>(i)].stream}].push_back(i);
  // Rendezvous: members of one simulator group start together.
  std::map<std::int32_t, int> group_size;
  for (std::size_t i = 0; i < ops.num_tasks; ++i)
    if (const std::int32_t g = ops.sim.built.program.tasks[i].group; g >= 0) ++group_size[g];
  std::map<std::int32_t, int> arrived;

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> done(n, false);
  std::int64_t seq = 0;
  bool aborted = false;
  std::exception_ptr error;
  const WallClock::time_point started = WallClock::now();

  const auto wait_for = [&](std::unique_lock<std::mutex>& lock, const LiveOp& op, auto ready) {
    if (!changed.wait_for(lock, kWaitLimit, [&] { return aborted || ready(); }))
      fail(ErrorCode::kInternal, "host backend: '{}' on rank {} waited {} s for its dependencies", op.label, op.rank,
           std::chrono::duration_cast<std::chrono::seconds>(kWaitLimit).count());
    if (aborted) throw std::runtime_error("aborted");
  };
  const auto worker = [&](const std::vector<int>& queue) {
    std::vector<unsigned char> buffer(kMaxWorkBytes);
    try {
      for (int index : queue) {
        const auto i = static_cast<std::size_t>(index);
        const LiveOp& op = ops.ops[i];
        BufferLedger& ledger = *ledgers[static_cast<std::size_t>(op.rank)];
        {
          std::unique_lock<std::mutex> lock(mutex);
          wait_for(lock, op, [&] {
            for (int d : op.deps)
              if (!done[static_cast<std::size_t>(d)]) return false;
            return op.launch != LaunchKind::kRecv || done[static_cast<std::size_t>(op.match)];
          });
          const std::int32_t group = op.task >= 0 ? ops.sim.built.program.tasks[i].group : -1;
          if (group >= 0) {
            ++arrived[group];
            changed.notify_all();
            wait_for(lock, op, [&] { return arrived[group] == group_size[group]; });
          }
          m.op_start_seq[i] = seq++;
          m.op_start_s[i] = seconds_since(started);
        }
        apply_effects(op, false, ledger, alloc, m.op_start_s[i]);
        host_work(op, buffer, options_.size_scale);
        const double end = seconds_since(started);
        apply_effects(op, true, ledger, alloc, end);
        {
          const std::lock_guard<std::mutex> lock(mutex);
          m.op_end_s[i] = end;
          m.op_end_seq[i] = seq++;
          done[i] = true;
        }
        changed.notify_all();
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!aborted) error = std::current_exception();
      aborted = true;
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (const auto& [key, queue] : queues) threads.emplace_back(worker, std::cref(queue));
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  finish(m, ledgers);
  return m;
}

}  // namespace lynx::live
