#include "fast/step_cache.hpp"

#include "scenarios/fields.hpp"

#include <fmt/format.h>

namespace lynx::fast {
namespace {

/// Fields a step's program does not depend on.
bool irrelevant(const std::string& key) {
  return key == "parallel.schedule" || key == "parallel.global_batch" || key == "sim.mode" ||
         key.rfind("recompute.", 0) == 0;
}

}  // namespace

StepCache::Context& StepCache::context(const Scenario& sc) {
  static const std::vector<FieldDesc> table = scenario_field_table();
  std::string key;
  for (const FieldDesc& f : table) {
    if (!f.in_scenario() || irrelevant(f.key)) continue;
    key += f.get(sc);
    key += '\x1f';
  }
  std::lock_guard lock(mutex_);
  auto [it, inserted] = contexts_.try_emplace(std::move(key));
  if (inserted) {
    it->second = std::make_unique<Context>();
    it->second->topology = std::make_unique<hw_models::Topology>(sc.hardware, gpus_used(sc.parallel));
    it->second->links_private = it->second->topology->links_private_per_gpu();
  }
  return *it->second;
}

const StepProfile& StepCache::get(Context& context, const StepKey& k, const Scenario& sc,
                                  const strategies::RecomputePlan& plan, const model::Workload& workload) {
  std::string key;
  fmt::format_to(std::back_inserter(key), "|{} {} {:d}{:d}{:d}{:d}|", k.stage, k.virtual_stage, k.forward,
                 k.grads_final, k.with_tail, k.forward_windows);
  if (k.after_previous)
    fmt::format_to(std::back_inserter(key), "after {} {:d}{:d}{:d}|", k.prev_virtual_stage, k.prev_forward,
                   k.prev_grads_final, k.prev_forward_windows);
  if (k.param_gathers) key += "gathers|";
  for (const strategies::StagePlan& s : plan.stages) fmt::format_to(std::back_inserter(key), "{},", s.layers.size());
  for (const strategies::LayerDecision& d : plan.stages[static_cast<size_t>(k.virtual_stage)].layers) {
    for (strategies::Action a : d.group) key += static_cast<char>('0' + static_cast<int>(a));
    key += static_cast<char>('a' + static_cast<int>(d.window));
    key += d.rerun_whole_groups ? 'w' : '-';
  }
  {
    std::lock_guard lock(mutex_);
    auto it = context.profiles.find(key);
    if (it != context.profiles.end()) return *it->second;
  }
  // Simulated without the lock so that threads missing different steps run in parallel. Two
  // threads missing the same step both simulate it (deterministically, so to the same profile)
  // and the first to insert wins; misses_ counts insertions, so it does not depend on timing.
  const int pp = sc.parallel.pp;
  const int chunk = k.virtual_stage / pp;
  schedule::StageSteps part;
  part.stage = k.stage;
  part.with_tail = k.with_tail;
  part.param_gathers = k.param_gathers;
  std::size_t measured = 0;
  if (k.after_previous) {
    const int prev_chunk = k.prev_virtual_stage / pp;
    part.steps = {{k.prev_forward, 1, prev_chunk}, {k.forward, 0, chunk}};
    part.grads_final = {k.prev_grads_final, k.grads_final};
    part.has_following = k.forward && k.forward_windows;
    part.following = {false, 0, chunk};
    measured = 1;
  } else if (k.forward) {
    part.steps = {{true, 0, chunk}};
    part.grads_final = {false};
    part.has_following = k.forward_windows;
    part.following = {false, 0, chunk};
  } else if (k.forward_windows) {
    part.steps = {{true, 1, chunk}, {false, 0, chunk}};
    part.grads_final = {false, k.grads_final};
    measured = 1;
  } else {
    part.steps = {{false, 0, chunk}};
    part.grads_final = {k.grads_final};
  }
  auto profile = std::make_unique<StepProfile>(measure_step(sc, plan, *context.topology, workload, part, measured));
  std::lock_guard lock(mutex_);
  auto [it, inserted] = context.profiles.emplace(std::move(key), std::move(profile));
  if (inserted) ++misses_;
  return *it->second;
}

void StepCache::clear() {
  std::lock_guard lock(mutex_);
  contexts_.clear();
  misses_ = 0;
}

StepCache& StepCache::shared() {
  static StepCache cache;
  return cache;
}

}  // namespace lynx::fast
