#include "common/worker_processes.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace lynx {
namespace {

// Messages are a 64-bit length, then that many bytes. send() with MSG_NOSIGNAL: a dead peer is
// an error return, never SIGPIPE.
bool send_all(int socket, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = send(socket, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool receive_all(int socket, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = recv(socket, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool send_message(int socket, const std::string& message) {
  const std::uint64_t size = message.size();
  return send_all(socket, reinterpret_cast<const char*>(&size), sizeof size) &&
         send_all(socket, message.data(), message.size());
}

std::optional<std::string> receive_message(int socket) {
  std::uint64_t size = 0;
  if (!receive_all(socket, reinterpret_cast<char*>(&size), sizeof size)) return std::nullopt;
  std::string message(size, '\0');
  if (!receive_all(socket, message.data(), message.size())) return std::nullopt;
  return message;
}

/// A worker's life: answer requests until the parent closes the socket; never return.
[[noreturn]] void serve(int socket, const WorkerProcesses::Handler& handler) {
  while (const std::optional<std::string> request = receive_message(socket)) {
    std::string reply;
    try {
      reply = handler(*request);
    } catch (...) {
      _exit(1);  // the parent sees the socket close and does the work itself
    }
    if (!send_message(socket, reply)) break;
  }
  _exit(0);  // without the parent's exit handlers
}

}  // namespace

WorkerProcesses::WorkerProcesses(int count, const Handler& handler) {
  for (int k = 0; k < count; ++k) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) break;
    const pid_t pid = fork();
    if (pid < 0) {
      close(pair[0]);
      close(pair[1]);
      break;
    }
    if (pid == 0) {
      close(pair[0]);
      for (const Worker& w : workers_) close(w.socket);  // the earlier workers' parent ends
      serve(pair[1], handler);
    }
    close(pair[1]);
    workers_.push_back({pid, pair[0]});
    idle_.push_back(k);
    ++alive_;
  }
}

WorkerProcesses::~WorkerProcesses() {
  for (Worker& w : workers_) close(w.socket);
  for (const Worker& w : workers_) {
    int status = 0;
    while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::optional<std::string> WorkerProcesses::call(const std::string& request) {
  int k = -1;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !idle_.empty() || alive_ == 0; });
    if (alive_ == 0) return std::nullopt;
    k = idle_.back();
    idle_.pop_back();
  }
  const Worker& w = workers_[static_cast<std::size_t>(k)];
  std::optional<std::string> reply;
  if (send_message(w.socket, request)) reply = receive_message(w.socket);
  {
    const std::lock_guard lock(mutex_);
    if (reply) idle_.push_back(k);
    else --alive_;  // never asked again
  }
  changed_.notify_all();
  return reply;
}

}  // namespace lynx
