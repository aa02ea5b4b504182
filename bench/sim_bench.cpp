// Simulation benchmark: wall time, events/s and peak RSS of whole simulated iterations (the
// issue's reference configurations), and planner search times on the paper experiment.
// Run from the repository root: build/bench/sim_bench [repeats]. Numbers go to BENCHMARKS.md.
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
    lynx::runner::SimResult last;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const auto sc = lynx::model::load_scenario_file(c.file, c.overrides);
      last = lynx::runner::simulate(sc).result;
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const std::string label = fmt::format("{}{}", std::filesystem::path(c.file).stem().string(),
                                          c.overrides.empty() ? "" : " (full, 64 GPUs)");
    fmt::print("{:<48} {:>9.3f} {:>10} {:>10} {:>12.3e} {:>9.3f}\n", label, best, last.events,
               last.tasks, static_cast<double>(last.events) / best, last.iteration_time_s);
  }
  fmt::print("peak RSS after the runs above: {:.0f} MiB\n\n", peak_rss_mib());

  // Planning time per paper configuration: the planner's decisions (search), the whole of
  // planning (window-measuring baseline + search + every engine confirmation / comparison, the
  // reported run included) and the engine runs it took. The MILP's solve speed is measured
  // here, not asserted in tests.
  fmt::print("{:<22} {:>9} {:>9} {:>9} {:>9} {:>5} {:>5} {:>13} {:>13}\n", "paper scenario", "heu ms",
             "heu all", "opt ms", "opt all", "heu n", "opt n", "heu tokens/s", "opt tokens/s");
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
    auto all_ms = [](const lynx::runner::SimResult& x) {
      return (x.search_seconds + x.baseline_seconds + x.confirm_seconds) * 1e3;
    };
    fmt::print("{:<22} {:>9.3f} {:>9.1f} {:>9.3f} {:>9.1f} {:>5} {:>5} {:>13.1f} {:>13.1f}\n",
               f.stem().string(), r[0].search_seconds * 1e3, all_ms(r[0]), r[1].search_seconds * 1e3,
               all_ms(r[1]), r[0].engine_runs, r[1].engine_runs, r[0].tokens_per_s, r[1].tokens_per_s);
  }
  return 0;
}
