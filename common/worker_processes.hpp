#pragma once
/// Forked worker processes answering byte requests with one handler: work that a library cannot
/// run on several threads of one process (CBC's solve driver is not reentrant) runs in several
/// processes instead. Linux / POSIX only.
#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lynx {

class WorkerProcesses {
 public:
  using Handler = std::function<std::string(const std::string& request)>;
  /// Forks `count` workers, each answering requests with `handler`. Construct it before the
  /// process starts other threads: a child forked from a multi-threaded process may inherit a
  /// lock another thread held. Workers that cannot be forked are simply not there.
  WorkerProcesses(int count, const Handler& handler);
  /// Closes the workers' sockets (they exit on end of file) and reaps them.
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  /// Workers started.
  int size() const { return static_cast<int>(workers_.size()); }
  /// The handler's reply to `request` from an idle worker (waits for one; safe from several
  /// threads). Nothing when no worker is alive, or when the one asked died or failed (it is not
  /// asked again): the caller then does the work itself.
  std::optional<std::string> call(const std::string& request);

 private:
  struct Worker {
    pid_t pid;
    int socket;  ///< the parent's end of the worker's socket pair
  };
  std::vector<Worker> workers_;
  std::vector<int> idle_;  ///< indices of idle, alive workers
  int alive_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
};

}  // namespace lynx
