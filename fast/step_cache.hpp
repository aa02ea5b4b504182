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

namespace lynx::fast {

/// What a step's program depends on beyond the scenario context (see StepCache::context_key).
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
  int prev_virtual_stage = 0;
};

class StepCache {
 public:
  /// The part of a scenario that step programs depend on (everything but the schedule, the
  /// global batch, the recompute request and sim.mode), as text.
  static std::string context_key(const Scenario& sc);

  /// The profile of `key`'s step under `plan` in context `context`, simulated on a miss.
  const StepProfile& get(const std::string& context, const StepKey& key, const Scenario& sc,
                         const strategies::RecomputePlan& plan, const hw_models::Topology& topo,
                         const model::Workload& workload);

  std::size_t size() const;
  std::size_t misses() const { return misses_; }
  void clear();

  /// The process-wide cache fast mode uses.
  static StepCache& shared();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<StepProfile>> profiles_;
  std::size_t misses_ = 0;
};

}  // namespace lynx::fast
