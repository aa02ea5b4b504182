#pragma once
/// A thread pool that computes work(item) for a list of items on several threads and hands the
/// results back in item order, so what is written from them does not depend on the thread
/// count. The work functions share nothing but their (read-only) captures.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace lynx::sweep {

template <typename Result>
class OrderedPool {
 public:
  /// Starts `threads` (>= 1) workers over `items`. At most `lookahead` results wait to be
  /// taken, so memory stays bounded when one item is slow.
  OrderedPool(std::vector<std::uint64_t> items, int threads,
              std::function<Result(std::uint64_t)> work, std::size_t lookahead = 0)
      : items_(std::move(items)), work_(std::move(work)),
        lookahead_(lookahead > 0 ? lookahead : 64 * static_cast<std::size_t>(threads)) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { run(); });
  }
  OrderedPool(const OrderedPool&) = delete;
  OrderedPool& operator=(const OrderedPool&) = delete;
  /// Stops handing out items and joins the workers (results not taken are dropped).
  ~OrderedPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  /// Items not yet taken with next().
  bool has_next() const { return taken_ < items_.size(); }

  /// The next item in order and its result; waits for it. Rethrows the exception its work
  /// threw.
  std::pair<std::uint64_t, Result> next() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ready_.count(taken_) != 0; });
    auto node = ready_.extract(taken_);
    const std::uint64_t item = items_[taken_];
    ++taken_;
    lock.unlock();
    changed_.notify_all();
    if (node.mapped().second) std::rethrow_exception(node.mapped().second);
    return {item, std::move(node.mapped().first)};
  }

 private:
  void run() {
    while (true) {
      std::size_t position = 0;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || handed_ >= items_.size() || handed_ < taken_ + lookahead_; });
        if (stopping_ || handed_ >= items_.size()) return;
        position = handed_++;
      }
      std::pair<Result, std::exception_ptr> outcome;
      try {
        outcome.first = work_(items_[position]);
      } catch (...) {
        outcome.second = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        ready_.emplace(position, std::move(outcome));
      }
      changed_.notify_all();
    }
  }

  const std::vector<std::uint64_t> items_;
  const std::function<Result(std::uint64_t)> work_;
  const std::size_t lookahead_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::size_t, std::pair<Result, std::exception_ptr>> ready_;  ///< by position
  std::size_t handed_ = 0;  ///< positions given to workers
  std::size_t taken_ = 0;   ///< positions returned by next()
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace lynx::sweep
