// Simulation benchmark: wall time, events/s and peak RSS of whole simulated iterations (the
// issue's reference configurations), and planner search times on the paper experiment.
// Run from the repository root: build/bench/sim_bench [repeats]. Numbers go to BENCHMARKS.md.
#include "model/gpt.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  struct Case {
    const char* file;
    std::vector<std::string> overrides;
  };
  const std::vector<Case> cases = {
      {"scenarios/examples/gpt22b-selective.yaml", {}},
      {"scenarios/examples/gpt175b-1024gpu.yaml", {}},
      {"scenarios/examples/gpt175b-1024gpu.yaml", {"sim.exploit_symmetry=false", "hardware.nodes=4", "parallel.dp=1", "parallel.pp=4", "parallel.global_batch=64", "model.layers=16"}},
  };
  fmt::print("{:<48} {:>9} {:>10} {:>10} {:>12} {:>9}\n", "scenario", "wall s", "events", "tasks",
             "events/s", "sim s");
  for (const Case& c : cases) {
    double best = 1e30;
    lynx::SimResult last;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const auto sc = lynx::model::load_scenario_file(c.file, c.overrides);
      last = lynx::simulate(sc).result;
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const std::string label = fmt::format("{}{}", std::filesystem::path(c.file).stem().string(),
                                          c.overrides.empty() ? "" : " (full, 64 GPUs)");
    fmt::print("{:<48} {:>9.3f} {:>10} {:>10} {:>12.3e} {:>9.3f}\n", label, best, last.events,
               last.tasks, static_cast<double>(last.events) / best, last.iteration_time_s);
  }
  fmt::print("peak RSS after the runs above: {:.0f} MiB\n\n", peak_rss_mib());

  // Planner search time per paper configuration (the search only: the window-measuring
  // baseline and the engine confirmations are simulation, reported separately by `plan`).
  fmt::print("{:<22} {:>14} {:>14} {:>16} {:>16}\n", "paper scenario", "lynx-heu ms", "lynx-opt ms",
             "heu tokens/s", "opt tokens/s");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator("scenarios/paper")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    double ms[2] = {0, 0};
    double tokens[2] = {0, 0};
    const char* strategies[2] = {"lynx-heu", "lynx-opt"};
    for (int k = 0; k < 2; ++k) {
      const auto sc =
          lynx::model::load_scenario_file(f.string(), {std::string("recompute.strategy=") + strategies[k]});
      const lynx::SimResult r = lynx::simulate(sc).result;
      ms[k] = r.search_seconds * 1e3;
      tokens[k] = r.tokens_per_s;
    }
    fmt::print("{:<22} {:>14.3f} {:>14.3f} {:>16.1f} {:>16.1f}\n", f.stem().string(), ms[0], ms[1],
               tokens[0], tokens[1]);
  }
  return 0;
}
