#pragma once
/// Fast mode's cache of step profiles: a step simulated once is reused by every configuration
/// whose program for it is the same (same hardware, model shape, layout, stage, decisions and
/// step context), e.g. across micro-batch counts, schedules and sweeps of one process.
#include "fast/step_profile.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace lynx::fast {

/// What a step's program depends on beyond the scenario context (ContextKey).
struct StepKey {
  int stage = 0;
  int virtual_stage = 0;
  bool forward = true;
  bool grads_final = false;
  bool with_tail = false;
  /// Forward: it issues forward-window recomputes for the backward after it. Backward: it is
  /// measured after the forward that issued them (the two built together).
  bool forward_windows = false;
  /// Simulated after the stage's previous step (links shared between GPUs: its send and
  /// collectives share links with this step's), described by the prev_* fields.
  bool after_previous = false;
  bool prev_forward = false, prev_grads_final = false, prev_forward_windows = false;
  /// overlap_param_gather: the chunk's first forward, which waits for the parameter all-gathers
  /// (simulated as issued at its start; fast/compose.cpp credits the head start they had).
  bool param_gathers = false;
  int prev_virtual_stage = 0;
  bool operator==(const StepKey&) const = default;
};

/// A plan's decisions as the text of step-cache keys, made once per simulated plan: its layer
/// split, and each virtual stage's decisions.
struct PlanKey {
  explicit PlanKey(const strategies::RecomputePlan& plan);
  std::string split;
  std::vector<std::string> stages;
};

/// The part of a scenario that step programs depend on: everything but the schedule, the global
/// batch, the recompute request, sim.mode and the scenario's name and file. Compared member by
/// member (defaulted ==), so a field added to the scenario is part of it without more code.
struct ContextKey {
  ModelSpec model;
  ParallelSpec parallel;  ///< schedule and global_batch reset to their defaults
  HardwareSpec hardware;
  SimSpec sim;            ///< mode reset to its default
  explicit ContextKey(const Scenario& sc);
  bool operator==(const ContextKey&) const = default;
};

struct ContextKeyHash {
  std::size_t operator()(const ContextKey& k) const;
};

class StepCache {
 public:
  /// Everything cached for one context: the part of a scenario that step programs depend on
  /// (everything but the schedule, the global batch, the recompute request and sim.mode).
  struct Context {
    std::unique_ptr<hw_models::Topology> topology;  ///< built once: path searches are costly
    bool links_private = false;  ///< Topology::links_private_per_gpu
    std::unordered_map<std::string, std::unique_ptr<StepProfile>> profiles;  ///< by step
    /// Links shared between GPUs: the pipeline's channels (every pair of stages a send goes
    /// between), whose delays each profile measures; channel_of[from · pp + to] indexes them
    /// (-1: no sends between the two). Empty with private links.
    std::vector<Channel> channels;
    std::vector<int> channel_of;
    bool channels_made = false;
  };

  /// The context of `sc` (created on first use; references stay valid until clear()).
  Context& context(const Scenario& sc);
  /// Makes `context`'s channels (links shared between GPUs only) for `sc` and its workload,
  /// once.
  void add_channels(Context& context, const Scenario& sc, const model::Workload& workload);

  /// The profile of `key`'s step under `plan` (`plan_key` its key text) in `context`,
  /// simulated on a miss.
  const StepProfile& get(Context& context, const StepKey& key, const PlanKey& plan_key, const Scenario& sc,
                         const strategies::RecomputePlan& plan, const model::Workload& workload);

  std::size_t misses() const { return misses_; }  ///< steps simulated
  void clear();

  /// The process-wide cache fast mode uses.
  static StepCache& shared();

 private:
  std::mutex mutex_;
  std::unordered_map<ContextKey, std::unique_ptr<Context>, ContextKeyHash> contexts_;
  std::size_t misses_ = 0;
};

}  // namespace lynx::fast
