// Simulation benchmark: CPU time, wall time, events/s and peak RSS of whole simulated
// iterations (the reference configurations, exact mode), and planner times on the
// paper experiment. Every repeat of a configuration runs in a forked child, so its peak RSS is
// its own and CPU time is not inflated by what ran before; the table gives medians.
// Run from the repository root: build/bench/sim_bench [repeats] [steps|planning]. Numbers go
// to BENCHMARKS.md (with the load average printed first).
#include "common/statistics.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace {

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Case {
  const char* label;
  const char* file;
  std::vector<std::string> overrides;
};

/// What one child measured (sent back through a pipe as raw bytes).
struct Sample {
  double cpu_s = 0;
  double wall_s = 0;
  double iteration_s = 0;
  std::uint64_t events = 0;
  std::uint64_t tasks = 0;
  double peak_rss_mib = 0;  ///< filled by the parent from wait4
  bool ok = false;
};

/// Loads and simulates `c` once in a forked child: load + build + execute + metrics.
Sample run_in_child(const Case& c) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Sample s;
    const auto wall_start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    const auto sc = lynx::model::load_scenario_file(c.file, c.overrides);
    const lynx::runner::SimResult r = lynx::runner::simulate(sc).result;
    s.cpu_s = process_cpu_seconds() - cpu_start;
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    s.iteration_s = r.iteration_time_s;
    s.events = r.events;
    s.tasks = r.tasks;
    s.ok = true;
    if (write(fds[1], &s, sizeof s) != static_cast<ssize_t>(sizeof s)) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  Sample s;
  const ssize_t got = read(fds[0], &s, sizeof s);
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (got != static_cast<ssize_t>(sizeof s) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) s.ok = false;
  s.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  return s;
}

void big_steps(int repeats) {
  const std::vector<Case> cases = {
      {"GPT-22B, 8 GPUs (tp 8, SP, selective, 8 mb of 4)", "scenarios/examples/gpt22b-selective.yaml", {}},
      {"GPT-22B, 64 GPUs (tp 8, pp 8, SP, selective, 128 mb)",
       "scenarios/examples/gpt22b-selective.yaml",
       {"hardware.nodes=8", "parallel.pp=8", "parallel.micro_batch=1", "parallel.global_batch=128"}},
      {"GPT-175B, 1024 GPUs (tp 8, pp 16, dp 8, 192 mb)", "scenarios/examples/gpt175b-1024gpu.yaml", {}},
      {"GPT-175B shape, 64 GPUs, no symmetry reduction",
       "scenarios/examples/gpt175b-1024gpu.yaml",
       {"sim.exploit_symmetry=false", "hardware.nodes=4", "parallel.dp=1", "parallel.pp=4",
        "parallel.global_batch=64", "model.layers=16"}},
      // Korthikanti et al. 2022 Table 3's 1T row: tp 8, pp 64, 512 GPUs, global batch 512 of
      // micro-batch 1, full recomputation (the baseline, without sequence parallelism).
      {"GPT-1T, 512 GPUs (tp 8, pp 64, 512 mb, full)",
       "scenarios/examples/gpt175b-1024gpu.yaml",
       {"model.preset=gpt-1t", "parallel.pp=64", "parallel.dp=1", "hardware.nodes=64",
        "parallel.global_batch=512", "parallel.sequence_parallel=false", "recompute.strategy=full"}},
  };
  fmt::print("{:<56} {:>8} {:>8} {:>8} {:>10} {:>9} {:>12} {:>9}\n", "scenario (median of runs)", "cpu s",
             "wall s", "RSS MiB", "events", "tasks", "events/cpu s", "sim s");
  for (const Case& c : cases) {
    std::vector<double> cpu, wall, rss;
    Sample last;
    for (int r = 0; r < repeats; ++r) {
      last = run_in_child(c);
      if (!last.ok) {
        fmt::print("{:<56} failed\n", c.label);
        break;
      }
      cpu.push_back(last.cpu_s);
      wall.push_back(last.wall_s);
      rss.push_back(last.peak_rss_mib);
    }
    if (!last.ok) continue;
    const double cpu_s = lynx::median(cpu);
    fmt::print("{:<56} {:>8.3f} {:>8.3f} {:>8.0f} {:>10} {:>9} {:>12.3e} {:>9.3f}\n", c.label, cpu_s,
               lynx::median(wall), lynx::median(rss), last.events, last.tasks,
               static_cast<double>(last.events) / cpu_s, last.iteration_s);
  }
  fmt::print("\n");
}

// Planning time per paper configuration: the planner's decisions (search), the whole of
// planning (window-measuring baseline + search + every engine confirmation / comparison, the
// reported run included) and the engine runs it took. The MILP's solve speed is measured here,
// not asserted in tests.
void planning() {
  fmt::print("{:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>5} {:>5} {:>13} {:>13}\n", "paper scenario",
             "heu ms", "heu eng", "heu all", "opt ms", "opt eng", "opt all", "heu n", "opt n", "heu tokens/s",
             "opt tokens/s");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator("scenarios/paper")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    lynx::runner::SimResult r[2];
    const char* strategies[2] = {lynx::recompute_kind_name(lynx::RecomputeKind::kLynxHeu),
                                 lynx::recompute_kind_name(lynx::RecomputeKind::kLynxOpt)};
    for (int k = 0; k < 2; ++k)
      r[k] = lynx::runner::simulate(lynx::model::load_scenario_file(
                                        f.string(), {std::string("recompute.strategy=") + strategies[k]}))
                 .result;
    auto engine_ms = [](const lynx::runner::SimResult& x) { return (x.baseline_seconds + x.confirm_seconds) * 1e3; };
    auto all_ms = [&](const lynx::runner::SimResult& x) { return x.search_seconds * 1e3 + engine_ms(x); };
    fmt::print("{:<22} {:>9.3f} {:>9.1f} {:>9.1f} {:>9.3f} {:>9.1f} {:>9.1f} {:>5} {:>5} {:>13.1f} {:>13.1f}\n",
               f.stem().string(), r[0].search_seconds * 1e3, engine_ms(r[0]), all_ms(r[0]),
               r[1].search_seconds * 1e3, engine_ms(r[1]), all_ms(r[1]), r[0].engine_runs, r[1].engine_runs,
               r[0].tokens_per_s, r[1].tokens_per_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string only = argc > 2 ? argv[2] : "";
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) fmt::print("load average before: {:.2f} {:.2f} {:.2f}\n\n", load[0], load[1], load[2]);
  if (only.empty() || only == "steps") big_steps(repeats);
  if (only.empty() || only == "planning") planning();
  if (getloadavg(load, 3) == 3) fmt::print("\nload average after: {:.2f} {:.2f} {:.2f}\n", load[0], load[1], load[2]);
  return 0;
}
