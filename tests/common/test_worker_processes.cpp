// Forked worker processes: replies come from other processes, several at once; a worker that
// fails is not asked again and the caller is told, never left waiting.
#include "common/worker_processes.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace lynx;

namespace {

/// Replies "PID:request reversed"; "exit" makes the worker fail; "hold:PATH" creates PATH.started,
/// then waits (at most 30 s) until PATH.go exists: the test's way to keep one worker busy.
std::string reverse_with_pid(const std::string& request) {
  if (request == "exit") throw std::runtime_error("asked to fail");
  if (request.rfind("hold:", 0) == 0) {
    const std::string path = request.substr(5);
    std::ofstream(path + ".started").put('x');
    for (int i = 0; i < 3000 && !std::filesystem::exists(path + ".go"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::to_string(getpid()) + ":" + std::string(request.rbegin(), request.rend());
}

std::string pid_of(const std::string& reply) { return reply.substr(0, reply.find(':')); }

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
  // While one worker is held busy, a call is answered by the other one, at once.
  const std::string path = (std::filesystem::temp_directory_path() / ("lynxsim-worker-test-" + parent)).string();
  std::optional<std::string> held;
  std::thread holder([&] { held = workers.call("hold:" + path); });
  while (!std::filesystem::exists(path + ".started")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::optional<std::string> other = workers.call("x");
  std::ofstream(path + ".go").put('x');
  holder.join();
  std::filesystem::remove(path + ".started");
  std::filesystem::remove(path + ".go");
  REQUIRE(held);
  REQUIRE(other);
  CHECK(pid_of(*held) != pid_of(*other));
  CHECK(pid_of(*other) != parent);
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
