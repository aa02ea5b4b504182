/// Speed of the event engine and of the executor, one thread (Release build). Each row is the
/// run with the least CPU time (user + sys of the process) of 3: on a shared machine wall time
/// also counts the time other processes held the core.
/// Engine: actors whose handlers capture a few pointers, a time and an int, schedule their
/// follow-up event and keep re-arming a timeout (cancel + schedule), as the executor does with
/// completions. Executor: a synthetic 16-GPU x 4-stream program of ~500k tasks with
/// dependencies, collectives, flows over shared links and memory effects.
#include "sim/engine.hpp"
#include "sim/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using lynx::TimePs;

/// CPU time (user + sys) of the process in seconds: on a shared machine it is steadier than
/// wall time. The benchmark runs one thread, so this is the timed work's own time.
double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

/// Wall (steady_clock) and process CPU time of one timed region.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall_begin = std::chrono::steady_clock::now();
  double cpu_begin = process_cpu_seconds();
  double wall() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_begin).count(); }
  double cpu() const { return process_cpu_seconds() - cpu_begin; }
};
using namespace lynx::sim;

// ---------------------------------------------------------------- engine workload
struct ActorState {
  std::uint64_t rng = 0;
  EventId timeout;
  std::uint64_t ticks = 0;
};

struct World {
  Engine engine;
  std::vector<ActorState> actors;
  std::uint64_t budget = 0;  ///< ticks left to schedule
  std::uint64_t checksum = 0;
  std::uint64_t timeouts_fired = 0;
};

struct Timeout {
  World* world;
  ActorState* actor;
  void operator()() const {
    ++world->timeouts_fired;
    actor->timeout = EventId{};
  }
};

/// A realistic capture: two pointers, a time and an int (plus padding), 32 bytes.
struct Tick {
  World* world;
  ActorState* actor;
  TimePs period_ps;
  int id;
  void operator()() const {
    World& w = *world;
    ActorState& a = *actor;
    w.checksum += static_cast<std::uint64_t>(w.engine.now()) ^ static_cast<std::uint64_t>(id);
    ++a.ticks;
    if (w.budget == 0) return;
    --w.budget;
    a.rng = a.rng * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG (Knuth MMIX)
    const TimePs delay = period_ps / 2 + static_cast<TimePs>((a.rng >> 33) % static_cast<std::uint64_t>(period_ps));
    w.engine.schedule_after(delay, Tick{world, actor, period_ps, id});
    // Every other tick re-arms the actor's timeout: one cancel + one schedule, like a
    // completion rescheduled when a rate changes.
    if ((a.rng >> 20) & 1) {
      w.engine.cancel(a.timeout);
      a.timeout = w.engine.schedule_after(4 * period_ps, Timeout{world, actor});
    }
  }
};

struct EngineRun {
  std::uint64_t events = 0;
  std::uint64_t checksum = 0;
  double seconds = 0;
  double cpu_seconds = 0;
};

EngineRun run_engine_workload(int num_actors, std::uint64_t ticks) {
  World world;
  world.actors.resize(static_cast<std::size_t>(num_actors));
  world.budget = ticks;
  for (int i = 0; i < num_actors; ++i) {
    ActorState& actor = world.actors[static_cast<std::size_t>(i)];
    actor.rng = static_cast<std::uint64_t>(i) * 2654435761ULL + 1;
    const TimePs period = 1000 + 37 * (i % 101);
    world.engine.schedule_at(i, Tick{&world, &actor, period, i});
  }
  const Stopwatch watch;
  world.engine.run();
  const double wall = watch.wall();
  return {world.engine.events_processed(), world.checksum, wall, watch.cpu()};
}

// ---------------------------------------------------------------- executor workload
struct Builder {
  Machine machine;
  Program program;

  TaskId add(TaskKind kind, GpuId gpu, StreamId stream, TimePs work_ps, Category category, std::uint32_t name,
             std::initializer_list<TaskId> deps, std::initializer_list<std::pair<std::uint64_t, LinkId>> flows,
             std::initializer_list<MemEffect> mem, std::int32_t group = -1) {
    Task task;
    task.gpu = gpu;
    task.stream = stream;
    task.kind = kind;
    task.category = category;
    task.work_ps = work_ps;
    task.name = name;
    task.group = group;
    task.first_dep = static_cast<std::uint32_t>(program.deps.size());
    for (const TaskId dep : deps) {
      if (dep >= 0) program.deps.push_back(dep);
    }
    task.num_deps = static_cast<std::uint32_t>(program.deps.size()) - task.first_dep;
    task.first_flow = static_cast<std::uint32_t>(program.flows.size());
    for (const auto& [bytes, link] : flows) {
      program.flows.push_back({bytes, static_cast<std::uint32_t>(program.path_links.size()), 1});
      program.path_links.push_back(link);
    }
    task.num_flows = static_cast<std::uint32_t>(program.flows.size()) - task.first_flow;
    task.first_mem = static_cast<std::uint32_t>(program.mem.size());
    program.mem.insert(program.mem.end(), mem.begin(), mem.end());
    task.num_mem = static_cast<std::uint32_t>(mem.size());
    program.tasks.push_back(task);
    return static_cast<TaskId>(program.tasks.size() - 1);
  }
};

/// 4 nodes x 4 GPUs; streams compute / tp / pp / dp. Per step and GPU: a compute kernel
/// (alloc activations; frees those of 4 steps ago), a TP collective over the node's ring of
/// NVLinks; every 4th step a PP send over the inter-node link; every 8th step a DP flow.
Builder make_program(std::size_t target_tasks) {
  constexpr int kNodes = 4;
  constexpr int kGpusPerNode = 4;
  constexpr int kGpus = kNodes * kGpusPerNode;
  Builder b;
  for (int g = 0; g < kGpus; ++g) {
    b.machine.gpus.push_back({fmt::format("gpu{}", g), {"compute", "tp", "pp", "dp"}, 80ULL << 30, 0.2});
  }
  std::vector<LinkId> nvlink(kGpus), ib(kGpus);
  for (int g = 0; g < kGpus; ++g) {
    b.machine.links.push_back({fmt::format("nvlink{}", g), 300'000'000'000, 700'000});  // 300 GB/s, 0.7 us
    nvlink[static_cast<std::size_t>(g)] = static_cast<LinkId>(b.machine.links.size() - 1);
  }
  for (int n = 0; n < kNodes; ++n) {
    b.machine.links.push_back({fmt::format("ib{}", n), 25'000'000'000, 2'000'000});  // 25 GB/s, 2 us
    for (int i = 0; i < kGpusPerNode; ++i) ib[static_cast<std::size_t>(n * kGpusPerNode + i)] = static_cast<LinkId>(b.machine.links.size() - 1);
  }
  b.program.names = {"fwd", "tp_allreduce", "pp_send", "dp_reduce"};
  b.program.tags = {"act"};
  b.program.static_bytes_per_gpu.assign(kGpus, 10LL << 30);
  std::vector<TaskId> last_tp(kGpus, -1);
  std::vector<std::vector<std::int64_t>> alloc_history(kGpus);
  std::int32_t group = 0;
  for (int step = 0; b.program.tasks.size() < target_tasks; ++step) {
    std::vector<TaskId> compute(kGpus);
    for (int g = 0; g < kGpus; ++g) {
      const std::size_t gi = static_cast<std::size_t>(g);
      const std::int64_t bytes = (64LL << 20) + 4096LL * ((step * 7 + g) % 13);
      std::vector<std::int64_t>& history = alloc_history[gi];
      history.push_back(bytes);
      const TimePs work = 200'000 + 1'000 * ((step + g) % 17);  // ~0.2 us
      if (history.size() > 4) {
        const std::int64_t old = history[history.size() - 5];
        compute[gi] = b.add(TaskKind::kKernel, g, 0, work, Category::kCompute, 0, {last_tp[gi]}, {},
                            {MemEffect{bytes, 0, false}, MemEffect{-old, 0, true}});
      } else {
        compute[gi] = b.add(TaskKind::kKernel, g, 0, work, Category::kCompute, 0, {last_tp[gi]}, {},
                            {MemEffect{bytes, 0, false}});
      }
    }
    for (int n = 0; n < kNodes; ++n, ++group) {
      for (int i = 0; i < kGpusPerNode; ++i) {
        const int g = n * kGpusPerNode + i;
        const std::size_t gi = static_cast<std::size_t>(g);
        last_tp[gi] = b.add(TaskKind::kComm, g, 1, 50'000, Category::kTpComm, 1, {compute[gi]},
                            {{(8ULL << 20) + 512ULL * static_cast<std::uint64_t>(step % 7), nvlink[gi]}}, {}, group);
      }
    }
    if (step % 4 == 0) {
      for (int g = 0; g < kGpus; g += 4) {
        const std::size_t gi = static_cast<std::size_t>(g);
        b.add(TaskKind::kComm, g, 2, 0, Category::kPpComm, 2, {compute[gi]}, {{4ULL << 20, ib[gi]}}, {});
      }
    }
    if (step % 8 == 0) {
      for (int g = 1; g < kGpus; g += 2) {
        const std::size_t gi = static_cast<std::size_t>(g);
        b.add(TaskKind::kComm, g, 3, 0, Category::kDpComm, 3, {compute[gi]}, {{2ULL << 20, ib[gi]}}, {});
      }
    }
  }
  return b;
}

struct ExecRun {
  std::size_t tasks = 0;
  std::uint64_t events = 0;
  TimePs makespan_ps = 0;
  double seconds = 0;
  double cpu_seconds = 0;
};

ExecRun run_executor(const Builder& b) {
  const Stopwatch watch;
  const ExecResult result = execute(b.machine, b.program);
  const double wall = watch.wall();
  return {b.program.tasks.size(), result.events, result.makespan_ps, wall, watch.cpu()};
}

}  // namespace

int main(int argc, char** argv) {
  // Optional arguments: actor counts for the engine rows (default 64 1024 16384); "0" skips the
  // executor row.
  std::vector<int> actor_counts{64, 1024, 16384};
  bool run_executor_row = true;
  if (argc > 1) {
    actor_counts.clear();
    for (int i = 1; i < argc; ++i) {
      const int count = std::atoi(argv[i]);
      if (count > 0) actor_counts.push_back(count);
      if (count == 0) run_executor_row = false;
    }
  }
  constexpr int kRuns = 3;
  fmt::print("cpu_s: user + sys CPU time of the process (CLOCK_PROCESS_CPUTIME_ID); each row is the run with the least\n"
             "cpu_s of {}; events/s and wall_s are wall time of that run, for reference\n", kRuns);
  fmt::print("{:<30} {:>9} {:>8} {:>8} {:>12} {:>12} {:>10}\n", "benchmark (least CPU of 3)", "events",
             "wall_s", "cpu_s", "events/s", "events/cpu_s", "tasks/cpu_s");
  for (const int actors : actor_counts) {
    EngineRun best;
    for (int run = 0; run < kRuns; ++run) {
      const EngineRun r = run_engine_workload(actors, 3'000'000);
      if (run == 0 || r.cpu_seconds < best.cpu_seconds) best = r;
    }
    fmt::print("{:<30} {:>9} {:>8.4f} {:>8.4f} {:>12.0f} {:>12.0f} {:>10}\n", fmt::format("engine, {} actors", actors),
               best.events, best.seconds, best.cpu_seconds, static_cast<double>(best.events) / best.seconds,
               static_cast<double>(best.events) / best.cpu_seconds, "-");
  }
  if (!run_executor_row) return 0;
  const Builder program = make_program(500'000);
  ExecRun best;
  for (int run = 0; run < kRuns; ++run) {
    const ExecRun r = run_executor(program);
    if (run == 0 || r.cpu_seconds < best.cpu_seconds) best = r;
  }
  fmt::print("{:<30} {:>9} {:>8.4f} {:>8.4f} {:>12.0f} {:>12.0f} {:>10.0f}\n",
             fmt::format("executor, {}k tasks", best.tasks / 1000), best.events, best.seconds, best.cpu_seconds,
             static_cast<double>(best.events) / best.seconds, static_cast<double>(best.events) / best.cpu_seconds,
             static_cast<double>(best.tasks) / best.cpu_seconds);
  fmt::print("executor makespan: {:.3f} ms simulated\n", lynx::ps_to_s(best.makespan_ps) * 1e3);
  return 0;
}
