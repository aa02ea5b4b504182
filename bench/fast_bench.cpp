// Fast mode: its agreement with exact mode over the committed sets (tests/fast/configs*.txt) and
// its rate on a sweep of GPT-22B layouts on 64 GPUs, cold (empty step cache) and warm (every
// step cached), one process, one thread. Run from the repository root:
//   build/bench/fast_bench [--skip-agreement | --agreement SET_FILE [--all] | --timeline "CONFIG"]
// (--agreement: only that set's agreement, no rate; --all: also every configuration's signed error,
// in the set's order; --timeline: one configuration (a line of a set) run in both modes, its
// iteration times and fast mode's composed steps per stage, to compare with exact mode's
// `lynxsim run ... --trace`: tools/trace_steps.py TRACE.json --compare FAST.txt).
// FAST_BENCH_SET=key=value adds one override to every point of the rate sweep (e.g.
// parallel.pipeline_exchange=overlapped, against the default's blocking 1F1B exchanges).
#include "common/clock.hpp"
#include "common/statistics.hpp"
#include "common/text.hpp"
#include "fast/compose.hpp"
#include "fast/step_cache.hpp"
#include "model/workload.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/mode_agreement.hpp"
#include "runner/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace lynx;

namespace {

/// `extra`: overrides appended to every configuration of the set.
void agreement(const std::string& file, bool all = false, const std::string& extra = "") {
  const auto configs = runner::read_agreement_set(file);
  std::vector<double> errors, exact, fast;
  std::vector<std::pair<double, std::string>> worst;
  double exact_s = 0, fast_s = 0;
  int memory_unequal = 0;
  double lynx_memory = 0;
  for (const std::string& c : configs) {
    const runner::ModeComparison m = runner::compare_modes(c + extra);
    errors.push_back(std::abs(m.time_error()));
    exact.push_back(m.exact.iteration_time_s);
    fast.push_back(m.fast.iteration_time_s);
    worst.push_back({m.time_error(), c});
    if (all) fmt::print("  {:+.4f}%  {}\n", 100 * m.time_error(), c);
    exact_s += m.exact_seconds;
    fast_s += m.fast_seconds;
    if (!m.overlapped && !m.memory_equal()) ++memory_unequal;
    if (m.overlapped) lynx_memory = std::max(lynx_memory, m.memory_error());
  }
  std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return std::abs(a.first) > std::abs(b.first); });
  fmt::print("agreement over {} configurations ({}{})\n", configs.size(), file, extra);
  const auto above = [&](double bound) { return std::count_if(errors.begin(), errors.end(), [&](double e) { return e > bound; }); };
  fmt::print("  |iteration time error|: median {:.4f}%  p95 {:.4f}%  max {:.4f}%  above 0.5% / 0.7% / 1%: {} / {} / {}\n",
             100 * median(errors), 100 * percentile(errors, 95.0), 100 * *std::max_element(errors.begin(), errors.end()),
             above(0.005), above(0.007), above(0.01));
  fmt::print("  Kendall tau {:.4f}; none/full/selective peak memory unequal: {}; lynx max memory error {:.6f}%\n",
             runner::kendall_tau(exact, fast), memory_unequal, 100 * lynx_memory);
  fmt::print("  wall: exact {:.2f} s, fast {:.2f} s (cold cache, incl. scenario loading)\n", exact_s, fast_s);
  fmt::print("  worst:\n");
  for (size_t i = 0; i < std::min<size_t>(12, worst.size()); ++i)
    fmt::print("    {:+.3f}%  {}\n", 100 * worst[i].first, worst[i].second);
}

/// One configuration in both modes (fast mode on exact mode's plan, as compare_modes), and the
/// steps fast mode composed: per stage, each step's start, compute end, length and send (ms),
/// the delay charged for other stages' sends ("foreign") and all the composition added to the
/// profile ("delta"); "p" marks a step timed beside its predecessor's communication.
void timeline(const std::string& config) {
  std::vector<std::string> overrides;
  for (const auto& word : split(config, ' '))
    if (!trim(word).empty()) overrides.emplace_back(trim(word));
  overrides.emplace_back("sim.mode=exact");
  const runner::SimRun exact = runner::simulate(model::default_scenario(overrides));
  overrides.back() = "sim.mode=fast";
  const model::ResolvedScenario resolved = model::default_scenario(overrides);
  const Scenario& sc = resolved.scenario();
  const model::Workload workload = model::gpt_workload(sc.model, sc.parallel);
  const fast::FastResult f = fast::simulate_fast(sc, exact.plan, workload, fast::StepCache::shared(), false, true);
  const double exact_s = exact.result.iteration_time_s, fast_s = ps_to_s(f.makespan_ps);
  fmt::print("exact {:.6f} s, fast {:.6f} s ({:+.3f}%)\n", exact_s, fast_s, 100 * (fast_s / exact_s - 1));
  const auto ms = [](TimePs t) { return static_cast<double>(t) * 1e-9; };
  for (size_t s = 0; s < f.timeline.size(); ++s) {
    fmt::print("stage{}\n", s);
    for (const fast::FastStep& t : f.timeline[s]) {
      fmt::print("  mb{} c{} {}  start {:9.3f} end {:9.3f} len {:7.3f}  foreign {:6.3f} delta {:6.3f}{}", t.micro_batch,
                 t.chunk, t.forward ? 'F' : 'B', ms(t.start_ps), ms(t.compute_end_ps), ms(t.compute_end_ps - t.start_ps),
                 ms(t.foreign_ps), ms(t.delta_ps), t.beside_previous ? " p" : "  ");
      if (t.send_start_ps >= 0)
        fmt::print("  send {:9.3f}-{:9.3f} ({:.3f})", ms(t.send_start_ps), ms(t.send_end_ps), ms(t.send_end_ps - t.send_start_ps));
      fmt::print("\n");
    }
  }
}

void rate() {
  // Every layout of GPT-22B on 64 A100 (8 nodes) with 128 micro-batches per pipeline.
  std::vector<model::ResolvedScenario> sweep;
  for (int tp : {1, 2, 4, 8})
    for (int pp : {1, 2, 4, 8, 16}) {
      if (64 % (tp * pp) != 0) continue;
      const int dp = 64 / (tp * pp);
      for (const char* schedule : {"1f1b", "gpipe", "interleaved"})
        for (const char* strategy : {"none", "full", "selective"}) {
          if (std::strcmp(schedule, "interleaved") == 0 && (pp == 1 || 48 % (2 * pp) != 0)) continue;
          sweep.push_back(model::default_scenario(
              {"model.preset=gpt-22b", "hardware.profile=dgx-a100-80gb", "hardware.nodes=8",
               fmt::format("parallel.tp={}", tp), fmt::format("parallel.pp={}", pp),
               fmt::format("parallel.dp={}", dp), "parallel.micro_batch=1",
               fmt::format("parallel.global_batch={}", 128 * dp), fmt::format("parallel.schedule={}", schedule),
               fmt::format("parallel.virtual_stages={}", std::strcmp(schedule, "interleaved") == 0 ? 2 : 1),
               "parallel.sequence_parallel=true", fmt::format("recompute.strategy={}", strategy),
               "sim.mode=fast", std::getenv("FAST_BENCH_SET") ? std::getenv("FAST_BENCH_SET") : "sim.mode=fast"}));
        }
    }
  fast::StepCache::shared().clear();
  const auto n = static_cast<double>(sweep.size());
  // Wall and process CPU time (the machine may be shared: CPU time is the per-core rate).
  const auto cpu_seconds = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  auto t = WallClock::now();
  double c = cpu_seconds();
  double sum = 0;
  for (const auto& sc : sweep) sum += runner::simulate(sc).result.iteration_time_s;
  const double cold = seconds_since(t), cold_cpu = cpu_seconds() - c;
  const int rounds = 20;
  t = WallClock::now();
  c = cpu_seconds();
  for (int r = 0; r < rounds; ++r)
    for (const auto& sc : sweep) sum += runner::simulate(sc).result.iteration_time_s;
  const double warm = seconds_since(t) / rounds, warm_cpu = (cpu_seconds() - c) / rounds;
  fmt::print("rate, GPT-22B on 64 GPUs, {} layouts x none/full/selective, 128 micro-batches (checksum {:.3f})\n",
             sweep.size(), sum);
  fmt::print("  cold: {:.0f} configurations/s wall, {:.0f} per CPU second ({:.2f} ms CPU each, {} steps simulated)\n",
             n / cold, n / cold_cpu, 1e3 * cold_cpu / n, fast::StepCache::shared().misses());
  fmt::print("  warm: {:.0f} configurations/s wall, {:.0f} per CPU second ({:.1f} us CPU each)\n", n / warm,
             n / warm_cpu, 1e6 * warm_cpu / n);
}

}  // namespace

int main(int argc, char** argv) {
  const bool skip_agreement = argc > 1 && std::strcmp(argv[1], "--skip-agreement") == 0;
  if (argc > 2 && std::strcmp(argv[1], "--timeline") == 0) {
    timeline(argv[2]);
    return 0;
  }
  if (argc > 2 && std::strcmp(argv[1], "--agreement") == 0) {
    agreement(argv[2], argc > 3 && std::strcmp(argv[3], "--all") == 0);
    return 0;
  }
  if (!skip_agreement) {
    agreement("tests/fast/configs.txt");
    agreement("tests/fast/configs-pcie.txt");  // the default exchange (blocking for 1f1b)
    agreement("tests/fast/configs-pcie.txt", false, " parallel.pipeline_exchange=overlapped");  // as ctest checks it
  }
  rate();
  return 0;
}
