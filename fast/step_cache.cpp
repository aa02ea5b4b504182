#include "fast/step_cache.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstdint>
#include <functional>

namespace lynx::fast {

ContextKey::ContextKey(const Scenario& sc)
    : model(sc.model), parallel(sc.parallel), hardware(sc.hardware), sim(sc.sim) {
  parallel.schedule = ParallelSpec{}.schedule;
  parallel.global_batch = ParallelSpec{}.global_batch;
  sim.mode = SimSpec{}.mode;
}

std::size_t ContextKeyHash::operator()(const ContextKey& k) const {
  // The fields sweeps vary most; equal keys hash alike, others rarely collide.
  std::size_t h = std::hash<std::string>{}(k.hardware.profile);
  for (const std::int64_t v : {std::int64_t{k.model.layers}, std::int64_t{k.model.hidden}, std::int64_t{k.model.seq_len},
                               std::int64_t{k.parallel.tp}, std::int64_t{k.parallel.pp}, std::int64_t{k.parallel.dp},
                               std::int64_t{k.parallel.micro_batch}, std::int64_t{k.parallel.virtual_stages},
                               std::int64_t{k.parallel.sequence_parallel}, std::int64_t{k.hardware.nodes}})
    h = h * 1000003 ^ std::hash<std::int64_t>{}(v);
  return h;
}

StepCache::StepCache(std::size_t budget_bytes)
    : budget_bytes_(budget_bytes > 0 ? budget_bytes : std::size_t{512} << 20) {}

std::shared_ptr<StepCache::Context> StepCache::context(const Scenario& sc) {
  ContextKey key(sc);
  const std::int64_t gpus = gpus_used(sc.parallel);
  std::shared_ptr<const hw_models::Topology> topology;
  {
    std::lock_guard lock(mutex_);
    auto it = contexts_.find(key);
    if (it != contexts_.end()) {
      recency_.splice(recency_.begin(), recency_, position_.at(it->second.get()));
      return it->second;
    }
    for (const auto& [made_for, weak] : topologies_)
      if (made_for.second == gpus && made_for.first == sc.hardware && (topology = weak.lock())) break;
  }
  // Built without the lock: a topology of thousands of GPUs takes a while.
  if (!topology) topology = std::make_shared<const hw_models::Topology>(sc.hardware, gpus);
  auto made = std::make_shared<Context>();
  made->topology = topology;
  made->links_private = topology->links_private_per_gpu();
  std::lock_guard lock(mutex_);
  auto [it, inserted] = contexts_.try_emplace(std::move(key), made);
  if (inserted) {
    recency_.push_front(&it->first);
    position_[made.get()] = recency_.begin();
    std::erase_if(topologies_, [](const auto& t) { return t.second.expired(); });
    const bool known = std::any_of(topologies_.begin(), topologies_.end(),
                                   [&](const auto& t) { return t.second.lock() == topology; });
    if (!known) topologies_.push_back({{sc.hardware, gpus}, topology});
  } else {
    recency_.splice(recency_.begin(), recency_, position_.at(it->second.get()));
  }
  return it->second;
}

void StepCache::add_channels(Context& c, const Scenario& sc, const model::Workload& workload) {
  // Every pair of stages pipeline sends go between (forward: to the next stage, backward: to
  // the previous; interleaved also from the last stage to the first and back), with a flow
  // per (dp, tp) rank as exact mode sends them.
  std::lock_guard lock(c.mutex);
  if (c.channels_made || c.links_private) return;
  c.channels_made = true;
  const ParallelSpec& p = sc.parallel;
  c.channel_of.assign(static_cast<size_t>(p.pp * p.pp), -1);
  const auto add = [&](int from, int to) {
    int& index = c.channel_of[static_cast<size_t>(from * p.pp + to)];
    if (from == to || index >= 0) return;
    index = static_cast<int>(c.channels.size());
    Channel& ch = c.channels.emplace_back();
    ch.from_stage = from;
    ch.to_stage = to;
    ch.bytes = workload.boundary_bytes;
    for (int d = 0; d < grad_replicas(p); ++d)  // every dp and cp rank
      for (int t = 0; t < p.tp; ++t)
        ch.flows.emplace_back(schedule::global_rank(p, from, d, t), schedule::global_rank(p, to, d, t));
  };
  for (int s = 0; s < p.pp; ++s) {
    if (s + 1 < p.pp || p.virtual_stages > 1) add(s, (s + 1) % p.pp);
    if (s > 0 || p.virtual_stages > 1) add(s, (s + p.pp - 1) % p.pp);
  }
}

namespace {

void append_int(std::string& out, int v) {
  char buf[16];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

PlanKey::PlanKey(const strategies::RecomputePlan& plan) {
  for (const strategies::StagePlan& s : plan.stages) {
    append_int(split, static_cast<int>(s.layers.size()));
    split += ',';
    std::string& d = stages.emplace_back();
    for (const strategies::LayerDecision& l : s.layers) {
      for (strategies::Action a : l.group) d += static_cast<char>('0' + static_cast<int>(a));
      d += static_cast<char>('a' + static_cast<int>(l.window));
      d += l.rerun_whole_groups ? 'w' : '-';
    }
  }
}

const StepProfile& StepCache::get(Context& context, const StepKey& k, const PlanKey& plan_key, const Scenario& sc,
                                  const strategies::RecomputePlan& plan, const model::Workload& workload) {
  const auto flag = [](bool b) { return b ? '1' : '0'; };
  std::string key = "|";
  key.reserve(32 + plan_key.split.size() + plan_key.stages[static_cast<size_t>(k.virtual_stage)].size());
  append_int(key, k.stage);
  key += ' ';
  append_int(key, k.virtual_stage);
  key += ' ';
  for (bool b : {k.forward, k.grads_final, k.with_tail, k.forward_windows}) key += flag(b);
  key += '|';
  if (k.after_previous) {
    key += "after ";
    append_int(key, k.prev_virtual_stage);
    key += ' ';
    for (bool b : {k.prev_forward, k.prev_grads_final, k.prev_forward_windows}) key += flag(b);
    key += '|';
  }
  if (k.param_gathers) key += "gathers|";
  if (k.next_virtual_stage >= 0) {
    key += k.next_forward ? "next F " : "next B ";
    append_int(key, k.next_virtual_stage);
    key += '|';
  }
  key += plan_key.split;
  key += plan_key.stages[static_cast<size_t>(k.virtual_stage)];
  {
    std::lock_guard lock(context.mutex);
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
  part.has_sharded_following = k.next_virtual_stage >= 0;
  part.sharded_following = {k.next_forward, 0, k.next_virtual_stage / pp};
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
  auto profile = std::make_unique<StepProfile>(measure_step(sc, plan, *context.topology, workload, part, measured, context.channels));
  const std::size_t added = footprint_bytes(*profile) + key.capacity() + sizeof(key);
  const StepProfile* kept = nullptr;
  bool inserted = false;
  {
    std::lock_guard lock(context.mutex);
    auto [it, fresh] = context.profiles.emplace(std::move(key), std::move(profile));
    kept = it->second.get();
    inserted = fresh;
  }
  if (inserted) {
    std::lock_guard lock(mutex_);
    ++misses_;
    if (!context.evicted) {
      context.bytes += added;
      bytes_ += added;
      trim_locked();
    }
  }
  return *kept;
}

void StepCache::trim_locked() {
  // The most recently used context stays, whatever its size (its caller is using it).
  while (bytes_ > budget_bytes_ && recency_.size() > 1) {
    const ContextKey* key = recency_.back();
    recency_.pop_back();
    auto it = contexts_.find(*key);
    Context& c = *it->second;
    c.evicted = true;
    bytes_ -= c.bytes;
    position_.erase(&c);
    contexts_.erase(it);
    ++evictions_;
  }
}

std::size_t StepCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

std::size_t StepCache::evictions() const {
  std::lock_guard lock(mutex_);
  return evictions_;
}

std::size_t StepCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void StepCache::set_budget_bytes(std::size_t budget_bytes) {
  std::lock_guard lock(mutex_);
  budget_bytes_ = budget_bytes;
  trim_locked();
}

void StepCache::clear() {
  std::lock_guard lock(mutex_);
  for (auto& [key, c] : contexts_) c->evicted = true;
  contexts_.clear();
  recency_.clear();
  position_.clear();
  topologies_.clear();
  bytes_ = misses_ = evictions_ = 0;
}

StepCache& StepCache::shared() {
  static StepCache cache([] {
    const char* mib = std::getenv("LYNXSIM_STEP_CACHE_MIB");
    const long long n = mib ? std::atoll(mib) : 0;
    return n > 0 ? static_cast<std::size_t>(n) << 20 : std::size_t{0};
  }());
  return cache;
}

std::size_t footprint_bytes(const StepProfile& p) {
  const auto heap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return sizeof(StepProfile) + heap(p.segments) + heap(p.layer_tp_idle_ps) + heap(p.channel_delay_ps) +
         heap(p.channel_phase_ps) + heap(p.channel_send_delay_ps) + heap(p.channel_idle_send_ps) +
         heap(p.replica_compute_end_ps) + heap(p.replica_channel_delay_ps) + heap(p.replica_send_extra_ps) +
         64;  // the map node and allocator overhead
}

}  // namespace lynx::fast
