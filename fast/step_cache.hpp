#pragma once
/// Fast mode's cache of step profiles: a step simulated once is reused by every configuration
/// whose program for it is the same (same hardware, model shape, layout, stage, decisions and
/// step context), e.g. across micro-batch counts, schedules and sweeps of one process.
#include "fast/step_profile.hpp"

#include <cstddef>
#include <cstdint>
#include <list>
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
  /// Full sharding: the step after this one (its first unit is prefetched during this one's
  /// last); next_virtual_stage -1: none, or parameters not sharded.
  bool next_forward = false;
  int next_virtual_stage = -1;
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

/// Thread-safe: no lock is held while a topology is built or a step simulated (two threads
/// missing the same step both simulate it, deterministically, and the first to insert wins),
/// so results do not depend on the thread count. Bounded: when the estimated bytes of the
/// cached contexts exceed the budget, the least recently used contexts are dropped (a context
/// in use stays alive until its users let it go; a later use simulates its steps again).
class StepCache {
 public:
  /// Everything cached for one context: the part of a scenario that step programs depend on
  /// (everything but the schedule, the global batch, the recompute request and sim.mode).
  struct Context {
    /// Built once per (hardware, GPUs used) and shared by every context of the cache that has
    /// them: path searches are costly.
    std::shared_ptr<const hw_models::Topology> topology;
    bool links_private = false;  ///< Topology::links_private_per_gpu
    /// Links shared between GPUs: the pipeline's channels (every pair of stages a send goes
    /// between), whose delays each profile measures; channel_of[from · pp + to] indexes them
    /// (-1: no sends between the two). Empty with private links.
    std::vector<Channel> channels;
    std::vector<int> channel_of;
    bool channels_made = false;

   private:
    friend class StepCache;
    std::mutex mutex;  ///< guards profiles and the channels
    std::unordered_map<std::string, std::unique_ptr<StepProfile>> profiles;  ///< by step
    std::size_t bytes = 0;  ///< estimated footprint of its profiles (under the cache's lock)
    bool evicted = false;   ///< dropped from the cache (under the cache's lock)
  };

  /// `budget_bytes`: the estimated bytes of step profiles kept (0: the default, 512 MiB, or
  /// the LYNXSIM_STEP_CACHE_MIB environment variable's MiB for the shared cache).
  explicit StepCache(std::size_t budget_bytes = 0);

  /// The context of `sc` (created on first use); the caller keeps it alive while it uses it.
  std::shared_ptr<Context> context(const Scenario& sc);
  /// Makes `context`'s channels (links shared between GPUs only) for `sc` and its workload,
  /// once.
  void add_channels(Context& context, const Scenario& sc, const model::Workload& workload);

  /// The profile of `key`'s step under `plan` (`plan_key` its key text) in `context`,
  /// simulated on a miss (valid while `context` lives).
  const StepProfile& get(Context& context, const StepKey& key, const PlanKey& plan_key, const Scenario& sc,
                         const strategies::RecomputePlan& plan, const model::Workload& workload);

  std::size_t misses() const;       ///< steps simulated and inserted
  std::size_t evictions() const;    ///< contexts dropped for the budget
  std::size_t bytes() const;        ///< estimated bytes of the profiles kept
  std::size_t budget_bytes() const { return budget_bytes_; }
  void set_budget_bytes(std::size_t budget_bytes);
  void clear();

  /// The process-wide cache fast mode uses.
  static StepCache& shared();

 private:
  /// Drops least recently used contexts until the budget holds (the lock held).
  void trim_locked();

  mutable std::mutex mutex_;  ///< guards the maps, the recency list and the counters
  std::size_t budget_bytes_;
  std::unordered_map<ContextKey, std::shared_ptr<Context>, ContextKeyHash> contexts_;
  std::list<const ContextKey*> recency_;  ///< most recently used first
  std::unordered_map<const Context*, std::list<const ContextKey*>::iterator> position_;
  std::vector<std::pair<std::pair<HardwareSpec, std::int64_t>, std::weak_ptr<const hw_models::Topology>>> topologies_;
  std::size_t bytes_ = 0, misses_ = 0, evictions_ = 0;
};

/// Estimated heap and inline bytes of a profile (what the cache's budget counts).
std::size_t footprint_bytes(const StepProfile& profile);

}  // namespace lynx::fast
