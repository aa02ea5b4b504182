#pragma once
/// The full program a compressed one stands for (Program::omitted_periods > 0): its tasks in
/// full-program ids, each read from the built task it copies, with its dependencies in
/// full-program ids. The executor's results of a compressed program are indexed by these ids,
/// so metrics over every task (the runner's breakdown, schedule::compute_stream_gaps) read the
/// omitted periods through it. For a complete program it is the program itself.
#include "common/error.hpp"
#include "sim/executor.hpp"
#include "sim/program.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lynx::sim {

class FullProgram {
 public:
  /// Consecutive full-program tasks copying consecutive built tasks: full id = built id +
  /// offset, and their dependencies on periodic built tasks move by `periods` periods.
  struct Run {
    TaskId full_first = 0;
    TaskId built_first = 0;
    TaskId count = 0;
    std::int64_t periods = 0;
    /// One of the omitted periods (copies of the built period before the cut): the runs of
    /// a GPU's copies follow each other, copy j of built task t moved j periods on.
    bool copy = false;
  };

  explicit FullProgram(const Program& program) : program_(program) {
    const std::size_t num_tasks = program.tasks.size();
    num_full_ = num_tasks;
    if (program.omitted_periods == 0) {
      runs_.push_back({0, 0, static_cast<TaskId>(num_tasks), 0, false});
      return;
    }
    const std::int64_t m = program.omitted_periods;
    const std::size_t num_gpus = program.period_tasks_per_gpu.size();
    LYNX_CHECK(program.period_cut_per_gpu.size() == num_gpus && program.periodic_from_per_gpu.size() == num_gpus,
               "compressed program without its period cuts");
    // Each GPU's tasks are one id range, in GPU order (the builder's layout; the executor
    // refuses a compressed program without it): the ranges' ends are found by binary search,
    // not by two passes over every task record (26 MB on the GPT-1T step).
    gpus_.assign(num_gpus, Gpu{});
    for (std::size_t g = 0; g < num_gpus; ++g) {
      const auto gpu_id = static_cast<GpuId>(g);
      const auto first = std::partition_point(program.tasks.begin(), program.tasks.end(), [&](const Task& t) { return t.gpu < gpu_id; });
      const auto end = std::partition_point(first, program.tasks.end(), [&](const Task& t) { return t.gpu <= gpu_id; });
      LYNX_CHECK(first < end && first->gpu == gpu_id && (end - 1)->gpu == gpu_id, "compressed program: gpu {} has no task range", g);
      gpus_[g].built_first = static_cast<TaskId>(first - program.tasks.begin());
      gpus_[g].built_end = static_cast<TaskId>(end - program.tasks.begin());
    }
    LYNX_CHECK(num_gpus > 0 && gpus_.back().built_end == static_cast<TaskId>(num_tasks), "compressed program: tasks after the last gpu's");
    std::int64_t offset = 0;
    for (std::size_t g = 0; g < num_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      gpu.period = program.period_tasks_per_gpu[g];
      gpu.cut = program.period_cut_per_gpu[g];
      gpu.periodic_from = program.periodic_from_per_gpu[g];
      LYNX_CHECK(gpu.period > 0 && gpu.cut - gpu.period >= gpu.built_first && gpu.cut <= gpu.built_end &&
                     (g == 0 || gpu.built_first == gpus_[g - 1].built_end),
                 "bad period cut on gpu {}", g);
      gpu.offset = offset;
      gpu.full_first = static_cast<TaskId>(gpu.built_first + offset);
      runs_.push_back({gpu.full_first, gpu.built_first, gpu.cut - gpu.built_first, 0, false});
      for (std::int64_t j = 1; j <= m; ++j)
        runs_.push_back({static_cast<TaskId>(gpu.cut - gpu.period + offset + j * gpu.period), gpu.cut - gpu.period, gpu.period, j, true});
      runs_.push_back({static_cast<TaskId>(gpu.cut + offset + m * gpu.period), gpu.cut, gpu.built_end - gpu.cut, m, false});
      offset += m * gpu.period;
      full_first_.push_back(gpu.full_first);
    }
    num_full_ = num_tasks + static_cast<std::size_t>(offset);
  }

  std::size_t num_tasks() const { return num_full_; }
  const std::vector<Run>& runs() const { return runs_; }
  const Program& built() const { return program_; }

  /// Calls f(full id, built task id, periods) for every full-program task, in id order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Run& run : runs_)
      for (TaskId i = 0; i < run.count; ++i) f(run.full_first + i, run.built_first + i, run.periods);
  }

  /// The built task full-program task `x` copies, and by how many periods.
  struct Source {
    TaskId task = 0;
    std::int64_t periods = 0;
    bool copy = false;  ///< in one of the omitted periods (Run::copy)
  };
  Source source(TaskId x) const {
    if (gpus_.empty()) return {x, 0, false};
    const auto after = std::upper_bound(full_first_.begin(), full_first_.end(), x);
    const Gpu& gpu = gpus_[static_cast<std::size_t>(after - full_first_.begin()) - 1];
    const std::int64_t local = x - gpu.full_first, cut = gpu.cut - gpu.built_first;
    const std::int64_t m = program_.omitted_periods;
    if (local < cut) return {static_cast<TaskId>(gpu.built_first + local), 0, false};
    const bool copy = local < cut + m * gpu.period;
    const std::int64_t j = copy ? (local - cut) / gpu.period + 1 : m;
    return {static_cast<TaskId>(gpu.built_first + local - j * gpu.period), j, copy};
  }
  const Task& task(TaskId x) const { return program_.tasks[static_cast<std::size_t>(source(x).task)]; }
  /// Omitted periods (0 for a complete program).
  std::int64_t omitted_periods() const { return gpus_.empty() ? 0 : program_.omitted_periods; }
  /// Full-program task ids one period spans on `gpu` (0 for a complete program).
  TaskId period_tasks(GpuId gpu) const { return gpus_.empty() ? 0 : gpus_[static_cast<std::size_t>(gpu)].period; }

  /// GPU of full-program task `x`.
  GpuId gpu_of(TaskId x) const {
    if (gpus_.empty()) return program_.tasks[static_cast<std::size_t>(x)].gpu;
    return static_cast<GpuId>(std::upper_bound(full_first_.begin(), full_first_.end(), x) - full_first_.begin() - 1);
  }
  /// Full-program task x's start and end in `ex`, the executor's result of this program
  /// (complete; ExecResult::inserted for a compressed one); `gpu`: x's GPU.
  TimePs start_ps(const ExecResult& ex, TaskId x, GpuId gpu) const { return time(ex, ex.task_start_ps, ex.inserted.starts, x, gpu); }
  TimePs end_ps(const ExecResult& ex, TaskId x, GpuId gpu) const { return time(ex, ex.task_end_ps, ex.inserted.ends, x, gpu); }
  TimePs start_ps(const ExecResult& ex, TaskId x) const { return start_ps(ex, x, gpu_of(x)); }
  TimePs end_ps(const ExecResult& ex, TaskId x) const { return end_ps(ex, x, gpu_of(x)); }
  /// Every full-program task's start (end) in `ex`, in id order.
  std::vector<TimePs> starts(const ExecResult& ex) const { return all(ex, true); }
  std::vector<TimePs> ends(const ExecResult& ex) const { return all(ex, false); }

  /// Full-program id of dependency `k` of built task `task` copied `periods` periods on.
  TaskId dep(TaskId task, std::int64_t periods, std::uint32_t k) const {
    return full_id(program_.deps[program_.tasks[static_cast<std::size_t>(task)].first_dep + k], periods);
  }
  /// Full-program id of built task `y` as a dependency (or stream predecessor) of a task copied
  /// `periods` periods on: periodic tasks move with it, the warm-up's do not.
  TaskId full_id(TaskId y, std::int64_t periods) const {
    if (gpus_.empty()) return y;
    const Gpu& gpu = gpus_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(y)].gpu)];
    const std::int64_t moved = y >= gpu.periodic_from ? periods * gpu.period : 0;
    return static_cast<TaskId>(y + gpu.offset + moved);
  }

 private:
  TimePs time(const ExecResult& ex, const std::vector<TimePs>& built, const std::vector<ExecResult::InsertedPeriods::Logged>& logged,
              TaskId x, GpuId g) const {
    if (gpus_.empty()) return built[static_cast<std::size_t>(x)];
    const ExecResult::InsertedPeriods& in = ex.inserted;
    LYNX_CHECK(in.periods == program_.omitted_periods, "results of a compressed program without its omitted periods");
    const Gpu& gpu = gpus_[static_cast<std::size_t>(g)];
    // The built task x is before the omitted periods, written until they were inserted.
    const std::int64_t t = x - gpu.offset;
    if (t < gpu.built_end) {
      const TimePs v = built[static_cast<std::size_t>(t)];
      if (v >= 0 && v <= in.inserted_at_ps) return v;
    }
    // The built task x is after them, written later.
    const std::int64_t after = t - in.periods * gpu.period;
    if (after >= gpu.built_first && after < gpu.built_end) {
      const TimePs v = built[static_cast<std::size_t>(after)];
      if (v > in.inserted_at_ps) return v;
    }
    // A copy of a logged task.
    const ExecResult::InsertedPeriods::Logged& e =
        logged[in.first_residue[static_cast<std::size_t>(g)] + static_cast<std::size_t>((t - gpu.built_first) % gpu.period)];
    if (e.task >= 0) {
      const std::int64_t j = (t - e.task) / gpu.period;
      if (j >= 1 && j <= e.last) return e.time_ps + j * in.period_ps;
    }
    return -1;
  }
  std::vector<TimePs> all(const ExecResult& ex, bool starts) const {
    std::vector<TimePs> out(num_full_);
    for (const Run& run : runs_) {
      if (run.count == 0) continue;
      const GpuId g = program_.tasks[static_cast<std::size_t>(run.built_first)].gpu;
      for (TaskId i = 0; i < run.count; ++i) {
        const TaskId x = run.full_first + i;
        out[static_cast<std::size_t>(x)] = starts ? start_ps(ex, x, g) : end_ps(ex, x, g);
      }
    }
    return out;
  }

  struct Gpu {
    TaskId built_first = 0, built_end = 0, full_first = 0;
    TaskId period = 0, cut = 0, periodic_from = 0;
    std::int64_t offset = 0;  ///< omitted tasks of the GPUs before
  };
  const Program& program_;
  std::vector<Run> runs_;
  std::vector<Gpu> gpus_;  ///< empty for a complete program
  std::vector<TaskId> full_first_;
  std::size_t num_full_ = 0;
};

}  // namespace lynx::sim
