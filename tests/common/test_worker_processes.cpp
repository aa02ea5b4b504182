// Forked worker processes: replies come from other processes, several at once; a worker that
// fails is not asked again and the caller is told, never left waiting.
#include "common/worker_processes.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace lynx;

namespace {

/// Replies "PID:request reversed"; "exit" makes the worker fail.
std::string reverse_with_pid(const std::string& request) {
  if (request == "exit") throw std::runtime_error("asked to fail");
  return std::to_string(getpid()) + ":" + std::string(request.rbegin(), request.rend());
}

}  // namespace

TEST_CASE("worker processes answer from other processes, on several threads at once") {
  WorkerProcesses workers(2, reverse_with_pid);
  REQUIRE(workers.size() == 2);
  const std::string parent = std::to_string(getpid());
  std::vector<std::string> replies(40);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 40; i += 4) {
        const std::optional<std::string> reply = workers.call("abc" + std::to_string(i));
        replies[static_cast<std::size_t>(i)] = reply ? *reply : "none";
      }
    });
  for (std::thread& t : threads) t.join();
  std::set<std::string> pids;
  for (int i = 0; i < 40; ++i) {
    const std::string& reply = replies[static_cast<std::size_t>(i)];
    const std::size_t colon = reply.find(':');
    REQUIRE(colon != std::string::npos);
    pids.insert(reply.substr(0, colon));
    const std::string sent = "abc" + std::to_string(i);
    CHECK(reply.substr(colon + 1) == std::string(sent.rbegin(), sent.rend()));
  }
  CHECK(pids.count(parent) == 0);
  CHECK(pids.size() == 2);  // four threads kept both workers busy
  // A long request crosses the socket whole.
  const std::string big(3 << 20, 'x');
  const std::optional<std::string> reply = workers.call(big);
  REQUIRE(reply);
  CHECK(reply->size() == big.size() + reply->find(':') + 1);
}

TEST_CASE("a failed worker is not asked again, and with none left the caller is told at once") {
  WorkerProcesses workers(2, reverse_with_pid);
  REQUIRE(workers.size() == 2);
  CHECK(!workers.call("exit"));
  for (int i = 0; i < 3; ++i) {  // the other worker answers
    const std::optional<std::string> reply = workers.call("ok");
    REQUIRE(reply);
    CHECK(reply->substr(reply->find(':') + 1) == "ko");
  }
  CHECK(!workers.call("exit"));
  CHECK(!workers.call("ok"));  // none left: no wait
}
