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
  const WatchdogLimits& limits = options_.limits;

  // One queue per (rank, stream), in the rank's issue order.
  std::map<std::pair<int, int>, std::vector<int>> queues;
  for (const auto& list : ops.rank_ops)
    for (int i : list) queues[{ops.ops[static_cast<std::size_t>(i)].rank, ops.ops[static_cast<std::size_t>(i)].stream}].push_back(i);
  const int stalled = stalled_op(ops, options_.stall);  // the test hook's op, or -1
  // Rendezvous: members of one simulator group start together.
  std::map<std::int32_t, std::vector<int>> group_members, arrived;
  for (std::size_t i = 0; i < ops.num_tasks; ++i)
    if (const std::int32_t g = ops.sim.built.program.tasks[i].group; g >= 0) group_members[g].push_back(ops.ops[i].rank);

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> done(n, false);
  std::int64_t seq = 0;
  bool aborted = false;
  std::exception_ptr error;
  const WallClock::time_point started = WallClock::now();
  const auto after = [](WallClock::time_point t, double s) {
    return t + std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(s));
  };
  const WallClock::time_point iteration_deadline = after(started, limits.iteration_s);
  struct Aborted {};  // another thread failed first: this one stops quietly

  // Waits until `ready` or the deadline (the op limit, never past the iteration's); on
  // expiry fails with the watchdog line, `missing` naming who never came.
  const auto wait_until = [&](std::unique_lock<std::mutex>& lock, std::size_t i, WallClock::time_point deadline, bool op_limit,
                              auto ready, auto missing) {
    const WallClock::time_point until = std::min(deadline, iteration_deadline);
    const WallClock::time_point waiting_since = WallClock::now();
    if (!changed.wait_until(lock, until, [&] { return aborted || ready(); })) {
      const bool by_op = op_limit && deadline <= iteration_deadline;
      fail(ErrorCode::kSystemFailure, "{}",
           watchdog_message(ops, i,
                            by_op ? fmt::format("waited {:g} s (--timeout-op)", limits.op_s)
                                  : fmt::format("waited {:.3g} s, the iteration's limit reached (--timeout-iteration {:g})",
                                                seconds_since(waiting_since), limits.iteration_s),
                            missing()));
    }
    if (aborted) throw Aborted{};
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
          wait_until(lock, i, iteration_deadline, false, [&] {
            return std::all_of(op.deps.begin(), op.deps.end(), [&](int d) { return done[static_cast<std::size_t>(d)]; });
          }, [&] {
            std::string pending;
            for (int d : op.deps)
              if (!done[static_cast<std::size_t>(d)]) pending += fmt::format("{}'{}'", pending.empty() ? "" : ", ", ops.ops[static_cast<std::size_t>(d)].label);
            return "waiting for " + pending;
          });
          if (index == stalled)  // the test hook: never arrives; stops when the run is aborted
            wait_until(lock, i, iteration_deadline, false, [] { return false; },
                       [] { return std::string("stalled by LYNXSIM_LIVE_TEST_STALL"); });
          const WallClock::time_point op_deadline = after(WallClock::now(), limits.op_s);
          if (op.launch == LaunchKind::kRecv)
            wait_until(lock, i, op_deadline, true, [&] { return done[static_cast<std::size_t>(op.match)]; }, [&] {
              return fmt::format("rank {} never sent '{}'", op.peer, ops.ops[static_cast<std::size_t>(op.match)].label);
            });
          const std::int32_t group = op.task >= 0 ? ops.sim.built.program.tasks[i].group : -1;
          if (group >= 0) {
            std::vector<int>& here = arrived[group];
            here.push_back(op.rank);
            changed.notify_all();
            const std::vector<int>& members = group_members.at(group);
            wait_until(lock, i, op_deadline, true, [&] { return here.size() == members.size(); }, [&] {
              std::vector<int> missing = members;
              for (int r : here) missing.erase(std::find(missing.begin(), missing.end(), r));
              std::string names;
              for (int r : missing) names += fmt::format("{}{}", names.empty() ? "" : ", ", r);
              return fmt::format("rank{} {} never arrived", missing.size() == 1 ? "" : "s", names);
            });
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
    } catch (const Aborted&) {
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
  if (error) {
    for (const auto& ledger : ledgers)
      for (void* p : ledger->held()) HostAllocator::release(p);
    std::rethrow_exception(error);
  }
  finish(m, ledgers);
  return m;
}

}  // namespace lynx::live
