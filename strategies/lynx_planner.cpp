#include "strategies/lynx_planner.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "hw_models/collectives.hpp"
#include "hw_models/compute_model.hpp"
#include "model/expert_grid.hpp"
#include "strategies/milp_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>

namespace lynx::strategies {
namespace {

using hw_models::op_times;
using hw_models::OpTimes;
using model::OpGroup;
using model::Workload;

/// The groups a plan may drop; the layer input always stays (every strategy keeps it).
constexpr std::array<OpGroup, 5> kDroppable = {OpGroup::kPost, OpGroup::kAttnProjInput,
                                               OpGroup::kAttnCore, OpGroup::kMlp, OpGroup::kMoeAct};

/// The droppable groups some op of `layer` belongs to (moe_act is empty in a dense layer, and
/// dropping an empty group would only repeat an option), in kDroppable order.
std::vector<OpGroup> droppable_groups(const std::vector<model::Op>& layer) {
  std::vector<OpGroup> out;
  for (OpGroup g : kDroppable)
    if (std::any_of(layer.begin(), layer.end(), [&](const model::Op& op) { return op.group == g; })) out.push_back(g);
  return out;
}

}  // namespace

std::vector<LayerOption> layer_options(const Scenario& sc, const hw_models::Topology& topo,
                                       const std::vector<model::Op>& layer, bool allow_overlap) {
  std::vector<hw_models::Rank> tp_ranks;
  for (int r = 0; r < sc.parallel.tp; ++r) tp_ranks.push_back(r);
  // The expert groups of the first GPU (the first stage's ranks are the global ones).
  const model::ExpertGroups expert = model::expert_groups(sc.parallel, 0);
  const std::vector<hw_models::Rank> ep_ranks(expert.ep.begin(), expert.ep.end());
  const std::vector<hw_models::Rank> etp_ranks(expert.etp.begin(), expert.etp.end());
  std::int64_t total_saved = 0;
  for (const auto& op : layer) total_saved += static_cast<std::int64_t>(op.saved_bytes);

  const std::vector<OpGroup> droppable = droppable_groups(layer);
  std::vector<LayerOption> options;
  for (unsigned mask = 0; mask < (1u << droppable.size()); ++mask) {
    LayerDecision d;
    std::string dropped_label;
    for (size_t g = 0; g < droppable.size(); ++g) {
      if (!(mask & (1u << g))) continue;
      d.group[static_cast<size_t>(droppable[g])] = Action::kRecompute;
      const char* label = model::op_group_name(droppable[g]);
      dropped_label += dropped_label.empty() ? label : fmt::format(",{}", label);
    }
    std::int64_t dropped = 0;
    for (const auto& op : layer)
      if (d.action(op.group) != Action::kKeep) dropped += static_cast<std::int64_t>(op.saved_bytes);
    TimePs kernels_ps = 0;
    TimePs comm_ps = 0;
    bool needs_comm = false;
    for (int i : recompute_ops(layer, d)) {
      const model::Op& op = layer[static_cast<size_t>(i)];
      if (op.kind != model::OpKind::kCollective && op.cp_steps > 1) {
        // Ring attention (context parallelism): cp blocks, each after the key/value block the
        // ring brings; on an idle ring a transfer shows beyond its block's time. It needs the
        // ring, so it is recomputed on demand only.
        const TimePs block_ps = op_times(sc.hardware, model::ring_attention_block(op)).fwd_ps;
        const TimePs shift_ps = hw_models::idle_collective_time_ps(
            topo, hw_models::plan_collective(topo, sc.hardware, hw_models::Collective::kSendRecv,
                                             hw_models::Algorithm::kRing, {0, sc.parallel.tp}, op.cp_kv_block_bytes));
        kernels_ps += op.cp_steps * block_ps;
        comm_ps += (op.cp_steps - 1) * std::max<TimePs>(0, shift_ps - block_ps);
        needs_comm = true;
      } else if (op.kind != model::OpKind::kCollective) {
        kernels_ps += op_times(sc.hardware, op).fwd_ps;
      } else if (model::communicates(op, sc.parallel)) {
        const auto& ranks = op.comm_group == model::CommGroup::kEp    ? ep_ranks
                            : op.comm_group == model::CommGroup::kEtp ? etp_ranks
                                                                      : tp_ranks;
        comm_ps += hw_models::idle_collective_time_ps(
            topo, hw_models::plan_collective(topo, sc.hardware, hw_models::to_collective(op.collective),
                                      hw_models::Algorithm::kRing, ranks, op.collective_bytes));
        needs_comm = true;
      }
    }
    LayerOption demand;
    demand.decision = d;
    demand.kept_bytes = total_saved - dropped;
    demand.transient_bytes = dropped;
    demand.recompute_ps = kernels_ps + comm_ps;
    demand.label = mask == 0 ? "keep" : fmt::format("drop{{{}}}", dropped_label);
    options.push_back(demand);
    // Overlapped: only communication-free recomputes (a window is communication already);
    // slowed by the contention of the collective it hides behind, and its tensors live from
    // the window in the layer above until this layer's backward: two layers' worth at once.
    if (allow_overlap && mask != 0 && !needs_comm) {
      LayerOption overlap = demand;
      for (auto& a : overlap.decision.group)
        if (a == Action::kRecompute) a = Action::kOverlap;
      overlap.overlapped = true;
      overlap.recompute_ps = 0;
      overlap.overlapped_ps = static_cast<TimePs>(
          static_cast<double>(kernels_ps) * (1.0 + sc.hardware.contention_factor) + 0.5);
      overlap.overlapped_work_ps = kernels_ps;
      overlap.transient_bytes = 2 * dropped;
      overlap.label = demand.label + "@overlap";
      options.push_back(overlap);
      // The same recompute hidden in the forward step before this backward (1F1B steady
      // state): its tensors are held from that forward until consumed, for every such layer.
      LayerOption forward = overlap;
      forward.decision.window = Window::kFwdTpComm;
      forward.transient_bytes = 0;
      forward.held_bytes = dropped;
      forward.label = demand.label + "@fwd-overlap";
      options.push_back(forward);
    }
  }
  return options;
}

StageSolution solve_stage_heuristic(const StageProblem& p) {
  const auto start = WallClock::now();
  LYNX_CHECK(p.layers >= 1 && !p.option_sets.empty(), "empty stage problem");
  // The kind of layer the stage holds most of is searched as below; every other kind's layers
  // share one policy, tried in every combination (a mixed model's few dense layers).
  std::vector<int> layers_of_set(p.option_sets.size(), 0);
  for (int l = 0; l < p.layers; ++l) layers_of_set[static_cast<size_t>(p.set_of(l))]++;
  const int main_set = static_cast<int>(std::max_element(layers_of_set.begin(), layers_of_set.end()) -
                                        layers_of_set.begin());
  std::vector<int> minor_sets;
  for (size_t set = 0; set < layers_of_set.size(); ++set)
    if (layers_of_set[set] > 0 && static_cast<int>(set) != main_set) minor_sets.push_back(static_cast<int>(set));

  // Of the main kind's layers, those with the most common window are the identical inner
  // layers; the others (each chunk's top layer) form the second structure.
  // A layer's class: the first layer with the same windows (capacities and timelines).
  auto same_windows = [&](int a, int b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    auto same = [&](const auto& v) { return v.size() <= std::max(ua, ub) || v[ua] == v[ub]; };
    return same(p.window_ps) && same(p.fwd_window_ps) && same(p.window_profile) &&
           same(p.fwd_window_profile) && same(p.fwd_window_steps);
  };
  std::vector<int> class_of(static_cast<size_t>(p.layers));
  std::map<int, int> count;
  for (int l = 0; l < p.layers; ++l) {
    if (p.set_of(l) != main_set) continue;
    int c = 0;
    while (!same_windows(c, l)) ++c;  // stops at l at the latest
    class_of[static_cast<size_t>(l)] = c;
    count[c]++;
  }
  const int inner_class =
      std::max_element(count.begin(), count.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  std::vector<int> inner, other;
  for (int l = 0; l < p.layers; ++l)
    if (p.set_of(l) == main_set) (class_of[static_cast<size_t>(l)] == inner_class ? inner : other).push_back(l);
  const auto n_inner = static_cast<std::int64_t>(inner.size());
  const std::vector<LayerOption>& options = p.option_sets[static_cast<size_t>(main_set)];
  const int n_options = static_cast<int>(options.size());
  std::vector<TimePs> exposed_inner(options.size(), 0), exposed_other(options.size(), 0), work(options.size());
  for (size_t o = 0; o < options.size(); ++o) {
    if (!inner.empty()) exposed_inner[o] = exposed_ps(p, inner.front(), options[o]);
    for (int l : other) exposed_other[o] += exposed_ps(p, l, options[o]);
    work[o] = recompute_work_ps(options[o]);
  }

  // The minor kinds' policies: one option index per minor set. minor_of(l): layer l's minor set
  // (index into minor_sets), or -1 for the main kind.
  auto minor_of = [&](int l) {
    const auto at = std::find(minor_sets.begin(), minor_sets.end(), p.set_of(l));
    return at == minor_sets.end() ? -1 : static_cast<int>(at - minor_sets.begin());
  };
  struct Minor {
    TimePs time = 0, work = 0;
    std::int64_t kept = 0, transient = 0;
  };
  auto minor_cost = [&](const std::vector<int>& choice) {
    Minor m;
    for (int l = 0; l < p.layers; ++l) {
      if (minor_of(l) < 0) continue;
      const LayerOption& o = p.option(l, choice[static_cast<size_t>(minor_of(l))]);
      m.time += exposed_ps(p, l, o);
      m.work += recompute_work_ps(o);
      m.kept += o.kept_bytes;
      m.transient = std::max(m.transient, o.transient_bytes);
    }
    return m;
  };

  // Ties on exposed time go to the plan that recomputes least, then to the one using least
  // memory.
  struct Best {
    TimePs time = std::numeric_limits<TimePs>::max();
    TimePs work = std::numeric_limits<TimePs>::max();
    std::int64_t memory = std::numeric_limits<std::int64_t>::max();
    int b = 0, a = 0, a2 = 0;
    std::int64_t j = 0;
    std::vector<int> minor;
  } best;
  std::vector<int> minor_choice(minor_sets.size(), 0);
  for (bool more = true; more;) {
    const Minor m = minor_cost(minor_choice);
    for (int b = 0; b < n_options; ++b) {
      const LayerOption& ob = options[static_cast<size_t>(b)];
      if (other.empty() && b > 0) break;  // no second structure: B is irrelevant
      const TimePs time_other = exposed_other[static_cast<size_t>(b)] + m.time;
      const std::int64_t kept_other = static_cast<std::int64_t>(other.size()) * ob.kept_bytes + m.kept;
      for (int a = 0; a < n_options; ++a) {
        const LayerOption& oa = options[static_cast<size_t>(a)];
        const TimePs ea = exposed_inner[static_cast<size_t>(a)];
        for (int a2 = 0; a2 < n_options; ++a2) {
          const LayerOption& oa2 = options[static_cast<size_t>(a2)];
          const TimePs ea2 = exposed_inner[static_cast<size_t>(a2)];
          // A is the faster policy of the pair; give it as many inner layers as memory allows.
          if (ea > ea2 || (a != a2 && oa.kept_bytes <= oa2.kept_bytes && ea == ea2)) continue;
          const std::int64_t transient = std::max(
              {other.empty() ? 0 : ob.transient_bytes, oa.transient_bytes, oa2.transient_bytes, m.transient});
          const std::int64_t room = p.budget_bytes - transient -
                                    p.in_flight * (kept_other + n_inner * oa2.kept_bytes);
          if (room < 0) continue;
          const std::int64_t per_layer = p.in_flight * (oa.kept_bytes - oa2.kept_bytes);
          const std::int64_t j = per_layer <= 0 ? n_inner : std::min(n_inner, room / per_layer);
          const TimePs time = time_other + j * ea + (n_inner - j) * ea2;
          const TimePs w = static_cast<TimePs>(other.size()) * work[static_cast<size_t>(b)] + m.work +
                           j * work[static_cast<size_t>(a)] + (n_inner - j) * work[static_cast<size_t>(a2)];
          const std::int64_t memory =
              p.in_flight * (kept_other + j * oa.kept_bytes + (n_inner - j) * oa2.kept_bytes) + transient;
          if (std::tie(time, w, memory) < std::tie(best.time, best.work, best.memory))
            best = {time, w, memory, b, a, a2, j, minor_choice};
        }
      }
    }
    // Next combination of the minor kinds' options (odometer order).
    more = false;
    for (size_t k = 0; k < minor_sets.size() && !more; ++k) {
      const auto size = static_cast<int>(p.option_sets[static_cast<size_t>(minor_sets[k])].size());
      more = ++minor_choice[k] < size;
      if (!more) minor_choice[k] = 0;
    }
  }
  std::vector<int> assignment(static_cast<size_t>(p.layers), 0);
  if (best.time == std::numeric_limits<TimePs>::max()) {
    // Nothing fits: every kind's least memory (the plan will be reported OOM).
    std::vector<int> least(p.option_sets.size(), 0);
    for (size_t set = 0; set < p.option_sets.size(); ++set)
      for (size_t o = 1; o < p.option_sets[set].size(); ++o) {
        const auto& x = p.option_sets[set][o];
        const auto& y = p.option_sets[set][static_cast<size_t>(least[set])];
        if (x.kept_bytes * p.in_flight + x.transient_bytes < y.kept_bytes * p.in_flight + y.transient_bytes)
          least[set] = static_cast<int>(o);
      }
    for (int l = 0; l < p.layers; ++l) assignment[static_cast<size_t>(l)] = least[static_cast<size_t>(p.set_of(l))];
  } else {
    for (int l = 0; l < p.layers; ++l)
      if (minor_of(l) >= 0) assignment[static_cast<size_t>(l)] = best.minor[static_cast<size_t>(minor_of(l))];
    for (int l : other) assignment[static_cast<size_t>(l)] = best.b;
    for (size_t i = 0; i < inner.size(); ++i)
      assignment[static_cast<size_t>(inner[i])] = static_cast<std::int64_t>(i) < best.j ? best.a : best.a2;
  }
  StageSolution s = evaluate(p, assignment);
  s.solve_seconds = seconds_since(start);
  s.status = s.feasible ? "heuristic" : "infeasible";
  return s;
}

std::vector<int> min_max_partition(int layers, int stages,
                                   const std::function<TimePs(int stage, int first, int layers)>& stage_time) {
  LYNX_CHECK(stages >= 1 && layers >= stages, "{} layers over {} stages", layers, stages);
  const auto L = static_cast<size_t>(layers);
  // best[k][i]: the slowest of stages 0..k-1 when they hold the first i layers.
  std::vector<std::vector<TimePs>> best(static_cast<size_t>(stages + 1), std::vector<TimePs>(L + 1, kInfeasiblePs));
  std::vector<std::vector<int>> choice(best.size(), std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  const int even = layers / stages;
  for (int k = 0; k < stages; ++k) {
    const int most = layers - (stages - k - 1);  // leave one layer for every later stage
    for (int i = k + 1; i <= most; ++i) {
      auto& slot = best[static_cast<size_t>(k + 1)][static_cast<size_t>(i)];
      auto& picked = choice[static_cast<size_t>(k + 1)][static_cast<size_t>(i)];
      for (int n = 1; n <= i - k; ++n) {
        const TimePs prev = best[static_cast<size_t>(k)][static_cast<size_t>(i - n)];
        if (prev >= kInfeasiblePs) continue;
        const TimePs t = std::max(prev, stage_time(k, i - n, n));
        if (t >= kInfeasiblePs) continue;
        if (t < slot || (t == slot && std::abs(n - even) < std::abs(picked - even))) {
          slot = t;
          picked = n;
        }
      }
    }
  }
  if (best[static_cast<size_t>(stages)][L] >= kInfeasiblePs) return {};
  std::vector<int> per_stage(static_cast<size_t>(stages));
  for (int k = stages, i = layers; k > 0; --k) {
    per_stage[static_cast<size_t>(k - 1)] = choice[static_cast<size_t>(k)][static_cast<size_t>(i)];
    i -= per_stage[static_cast<size_t>(k - 1)];
  }
  return per_stage;
}

std::vector<StageWindows> stage_windows(const std::vector<std::vector<TimePs>>& capacity,
                                        const std::vector<TimePs>& forward, int virtual_stages) {
  std::vector<StageWindows> windows(static_cast<size_t>(virtual_stages));
  for (size_t vs = 0; vs < capacity.size() && vs < windows.size(); ++vs) {
    const auto& c = capacity[vs];
    if (c.empty()) continue;
    windows[vs].top_ps = c.back();
    std::vector<TimePs> inner(c.begin(), c.end() - 1);
    if (inner.empty()) inner.push_back(c.back());
    std::nth_element(inner.begin(), inner.begin() + static_cast<std::ptrdiff_t>(inner.size() / 2), inner.end());
    windows[vs].inner_ps = inner[inner.size() / 2];
  }
  for (size_t vs = 0; vs < forward.size() && vs < windows.size(); ++vs) windows[vs].forward_ps = forward[vs];
  return windows;
}

LynxPlanner::LynxPlanner(const Scenario& sc, const hw_models::Topology& topo, const Workload& w,
                         PlanningInputs inputs)
    : sc_(sc), p_(sc.parallel), w_(w), inputs_(std::move(inputs)) {
  const RecomputeKind k = sc.recompute.strategy;
  if (k != RecomputeKind::kLynxHeu && k != RecomputeKind::kLynxOpt && k != RecomputeKind::kCheckmate)
    fail(ErrorCode::kInternal, "internal: LynxPlanner for strategy '{}'", recompute_kind_name(k));
  micro_batches_ = p_.global_batch / (p_.micro_batch * p_.dp);
  chunks_ = p_.virtual_stages;
  virtual_stages_ = p_.pp * chunks_;
  LYNX_CHECK(static_cast<int>(inputs_.windows.size()) == virtual_stages_ &&
                 static_cast<int>(inputs_.in_flight_chunks.size()) == p_.pp,
             "planning inputs for {} virtual stages and {} stages", inputs_.windows.size(),
             inputs_.in_flight_chunks.size());
  auto all_passes = [&](const model::Op& op) {
    const OpTimes t = op_times(sc.hardware, op);
    return t.fwd_ps + t.dgrad_ps + t.wgrad_ps;
  };
  // Set 0: the workload's `layer`; set 1: a mixed model's dense layers.
  std::vector<const std::vector<model::Op>*> kinds = {&w.layer};
  if (!w.dense_layer.empty()) kinds.push_back(&w.dense_layer);
  for (const std::vector<model::Op>* ops : kinds) {
    option_sets_.push_back(layer_options(sc, topo, *ops, k != RecomputeKind::kCheckmate));
    TimePs& layer_ps = layer_ps_of_set_.emplace_back(0);
    for (const auto& op : *ops) layer_ps += all_passes(op);
  }
  for (const auto& op : w.embedding) embedding_saved_ += static_cast<std::int64_t>(op.saved_bytes);
  for (const auto& op : w.head) head_saved_ += static_cast<std::int64_t>(op.saved_bytes);
  for (const auto& op : w.embedding) embedding_ps_ += all_passes(op);
  for (const auto& op : w.head) head_ps_ += all_passes(op);
}

int LynxPlanner::option_set_of(int global_layer) const { return w_.is_dense_layer(global_layer) ? 1 : 0; }

int LynxPlanner::in_flight(int stage) const {
  return (inputs_.in_flight_chunks[static_cast<size_t>(stage)] + chunks_ - 1) / chunks_;
}

/// The stage problem for GPU `stage` holding layers_per_vs[c·pp + stage] layers per chunk,
/// chunk c's from global layer first_layer_of_vs[c·pp + stage] on.
StageProblem LynxPlanner::problem(int stage, const std::vector<int>& layers_per_vs,
                                  const std::vector<int>& first_layer_of_vs, std::int64_t cut) const {
  StageProblem pr;
  pr.stage = stage;
  pr.in_flight = in_flight(stage);
  pr.option_sets = option_sets_;
  for (auto& set : pr.option_sets)
    for (LayerOption& o : set)  // held bytes as kept bytes of this stage
      o.kept_bytes += (o.held_bytes + pr.in_flight - 1) / pr.in_flight;
  std::uint64_t params = 0, expert_params = 0;
  std::int64_t extras = 0;
  for (int c = 0; c < chunks_; ++c) {
    const int vs = c * p_.pp + stage;
    const int n = layers_per_vs[static_cast<size_t>(vs)];
    const int first = first_layer_of_vs[static_cast<size_t>(vs)];
    const model::LayerParams layer_params = w_.params_of_layers(first, n);
    params += layer_params.params;
    expert_params += layer_params.expert_params;
    for (int l = first; l < first + n; ++l) pr.set_of_layer.push_back(option_set_of(l));
    if (vs == 0) {
      params += w_.embedding_params;
      extras += embedding_saved_;
    }
    if (vs == virtual_stages_ - 1) {
      params += w_.head_params;
      extras += head_saved_;
    }
    const StageWindows& win = inputs_.windows[static_cast<size_t>(vs)];
    for (int l = 0; l < n; ++l) {
      pr.window_ps.push_back(l + 1 == n ? win.top_ps : win.inner_ps);
      pr.fwd_window_ps.push_back(win.forward_ps);
      if (win.profiled) {
        pr.window_profile.push_back(l + 1 == n ? win.top_profile : win.inner_profile);
        pr.fwd_window_profile.push_back(win.forward_profile);
      }
      if (static_cast<size_t>(vs) < inputs_.forward_windowed_steps.size())
        pr.fwd_window_steps.push_back(inputs_.forward_windowed_steps[static_cast<size_t>(vs)]);
    }
    pr.layers += n;
  }
  if (!pr.fwd_window_steps.empty()) pr.micro_batches = micro_batches_;
  const std::int64_t weight_pending =
      static_cast<size_t>(stage) < inputs_.weight_pending.size() ? inputs_.weight_pending[static_cast<size_t>(stage)] : 0;
  pr.budget_bytes = static_cast<std::int64_t>(sc_.hardware.memory_bytes) -
                    model::static_bytes(sc_, params, expert_params) - pr.in_flight * extras -
                    weight_pending * pr.layers * inputs_.weight_pass_bytes_per_layer - cut;
  return pr;
}

StageSolution LynxPlanner::solve(const StageProblem& pr) const {
  if (sc_.recompute.strategy == RecomputeKind::kLynxHeu) return solve_stage_heuristic(pr);
  MilpOptions o;
  o.allow_overlap = sc_.recompute.strategy != RecomputeKind::kCheckmate;
  o.node_limit = sc_.recompute.solver_node_limit;
  return solve_stage_milp(pr, o);
}

/// Layers per virtual stage (chunk c of GPU k: c·pp + k) when every chunk of GPU k holds
/// per_gpu[k] layers.
std::vector<int> LynxPlanner::per_virtual_stage(const std::vector<int>& per_gpu) const {
  return strategies::per_virtual_stage(per_gpu, chunks_);
}

TimePs LynxPlanner::partition_stage_time_ps(int k, int first_row, int n, std::int64_t cut) const {
  std::vector<int> per_gpu(static_cast<size_t>(p_.pp), 0);
  per_gpu[static_cast<size_t>(k)] = n;
  std::vector<int> first_layer_of_vs(static_cast<size_t>(virtual_stages_), 0);
  for (int c = 0; c < chunks_; ++c)
    first_layer_of_vs[static_cast<size_t>(c * p_.pp + k)] = c * (sc_.model.layers / chunks_) + first_row;
  const StageProblem pr = problem(k, per_virtual_stage(per_gpu), first_layer_of_vs, cut);
  const StageSolution s = solve_stage_heuristic(pr);
  if (!s.feasible) return kInfeasiblePs;
  TimePs layers_ps = 0;
  for (int l = 0; l < pr.layers; ++l)
    layers_ps += layer_ps_of_set_[static_cast<size_t>(pr.set_of(l))] + inputs_.tp_exposed_per_layer_ps;
  return layers_ps + (k == 0 ? embedding_ps_ : 0) + (k == p_.pp - 1 ? head_ps_ : 0) + s.exposed_ps;
}

/// Recomputation-aware partition: minimise the slowest GPU's time per micro-batch
/// (partition_stage_time_ps: early 1F1B stages hold more micro-batches, so must recompute
/// more) by dynamic programming over contiguous splits. With interleaving (v chunks per GPU)
/// every chunk of GPU k holds the same n_k layers, as Megatron's chunks do: the split is of
/// layers / v "layer rows" over the pp GPUs, and GPU k's time and budget cover all its chunks.
std::vector<int> LynxPlanner::balanced_partition(const std::vector<std::int64_t>& cut) const {
  LYNX_CHECK(sc_.model.layers % chunks_ == 0, "{} layers over {} chunks per GPU", sc_.model.layers, chunks_);
  const int rows = sc_.model.layers / chunks_;
  // A stage's time depends on its first row only through the kinds of its layers.
  std::map<std::tuple<int, int, std::vector<int>>, TimePs> time_of;
  const std::vector<int> split = min_max_partition(rows, p_.pp, [&](int k, int first_row, int n) {
    std::vector<int> sets;
    for (int c = 0; c < chunks_; ++c)
      for (int row = first_row; row < first_row + n; ++row) sets.push_back(option_set_of(c * rows + row));
    auto [at, added] = time_of.try_emplace({k, n, std::move(sets)}, 0);
    if (added) at->second = partition_stage_time_ps(k, first_row, n, cut[static_cast<size_t>(k)]);
    return at->second;
  });
  if (split.empty()) return uniform_partition(sc_.model.layers, virtual_stages_);  // nothing fits anyway
  return per_virtual_stage(split);
}

RecomputePlan LynxPlanner::materialize(const std::vector<int>& layers_per_vs,
                                       const std::vector<StageSolution>& solutions) const {
  RecomputePlan plan;
  plan.strategy = recompute_kind_name(sc_.recompute.strategy);
  int first = 0;
  for (int vs = 0; vs < virtual_stages_; ++vs) {
    StagePlan sp;
    sp.first_layer = first;
    first += layers_per_vs[static_cast<size_t>(vs)];
    plan.stages.push_back(sp);
  }
  for (int k = 0; k < p_.pp; ++k) {
    const StageSolution& s = solutions[static_cast<size_t>(k)];
    size_t i = 0;
    for (int c = 0; c < chunks_; ++c) {
      const int vs = c * p_.pp + k;
      const int n = layers_per_vs[static_cast<size_t>(vs)];
      for (int l = 0; l < n; ++l, ++i) {
        const int global = plan.stages[static_cast<size_t>(vs)].first_layer + l;
        LayerDecision d = option_sets_[static_cast<size_t>(option_set_of(global))]
                              [static_cast<size_t>(s.option_of_layer[i])].decision;
        if (d.overlapped() && d.window != Window::kFwdTpComm) {
          const bool top = l + 1 == n;
          d.window = top && vs != virtual_stages_ - 1 ? Window::kPpRecvWait : Window::kBwdTpComm;
        }
        plan.stages[static_cast<size_t>(vs)].layers.push_back(d);
      }
    }
  }
  return plan;
}

SearchResult LynxPlanner::search(const std::vector<std::int64_t>& cut, const SolveProgress& progress) const {
  std::vector<int> layers_per_vs = stage_partition(sc_.model.layers, p_);
  if (sc_.recompute.partition == PartitionKind::kBalanced) layers_per_vs = balanced_partition(cut);
  std::vector<int> first_layer_of_vs;
  for (int vs = 0, first = 0; vs < virtual_stages_; first += layers_per_vs[static_cast<size_t>(vs++)])
    first_layer_of_vs.push_back(first);
  SearchResult out;
  for (int k = 0; k < p_.pp; ++k) {
    out.problems.push_back(problem(k, layers_per_vs, first_layer_of_vs, cut[static_cast<size_t>(k)]));
    out.solutions.push_back(solve(out.problems.back()));
    if (progress) progress(k + 1, p_.pp);
  }
  out.plan = materialize(layers_per_vs, out.solutions);
  return out;
}

bool LynxPlanner::tighten_budgets(const SearchResult& searched, const std::vector<int>& gpu_stage,
                                  const std::vector<std::int64_t>& peak_bytes,
                                  std::vector<std::int64_t>& cut) const {
  bool grew = false;
  for (size_t g = 0; g < gpu_stage.size(); ++g) {
    const std::int64_t over = peak_bytes[g] - static_cast<std::int64_t>(sc_.hardware.memory_bytes);
    const auto k = static_cast<size_t>(gpu_stage[g]);
    if (over > 0 && searched.solutions[k].feasible) {
      cut[k] += over;
      grew = true;
    }
  }
  return grew;
}

RecomputePlan LynxPlanner::solve_restricted(const SearchResult& searched,
                                            const std::function<bool(const LayerOption&)>& allowed,
                                            const SolveProgress& progress) const {
  std::vector<StageSolution> solutions;
  for (const StageProblem& pr : searched.problems) {
    StageProblem restricted = pr;
    std::vector<std::vector<int>> index_of(pr.option_sets.size());
    for (size_t set = 0; set < pr.option_sets.size(); ++set) {
      restricted.option_sets[set].clear();
      for (size_t o = 0; o < pr.option_sets[set].size(); ++o)
        if (allowed(pr.option_sets[set][o])) {
          restricted.option_sets[set].push_back(pr.option_sets[set][o]);
          index_of[set].push_back(static_cast<int>(o));
        }
    }
    StageSolution sol = solve(restricted);
    for (int l = 0; l < pr.layers; ++l) {
      int& o = sol.option_of_layer[static_cast<size_t>(l)];
      o = index_of[static_cast<size_t>(pr.set_of(l))][static_cast<size_t>(o)];
    }
    solutions.push_back(std::move(sol));
    if (progress) progress(static_cast<int>(solutions.size()), static_cast<int>(searched.problems.size()));
  }
  std::vector<int> layers_per_vs;
  for (const StagePlan& sp : searched.plan.stages) layers_per_vs.push_back(static_cast<int>(sp.layers.size()));
  return materialize(layers_per_vs, solutions);
}

std::vector<RecomputePlan> LynxPlanner::alternatives(const SearchResult& searched,
                                                     const SolveProgress& progress) const {
  std::vector<RecomputePlan> out;
  // Lynx's decision space contains narrower ones: when the engine finds the best plan without
  // forward windows, or without any overlap, faster (a window estimate was optimistic), keep it.
  if (sc_.recompute.strategy != RecomputeKind::kCheckmate) {
    out.push_back(solve_restricted(
        searched, [](const LayerOption& o) { return o.decision.window != Window::kFwdTpComm; }, progress));
    out.back().strategy = "no-forward-windows";
    out.push_back(solve_restricted(searched, [](const LayerOption& o) { return !o.overlapped; }, progress));
    out.back().strategy = "no-overlap";
  }
  // The planners can always fall back to Megatron's strategies.
  const auto split = stage_partition(sc_.model.layers, p_);
  for (RecomputeKind megatron : {RecomputeKind::kSelective, RecomputeKind::kFull}) {
    RecomputeSpec spec;
    spec.strategy = megatron;
    out.push_back(plan_fixed_strategy(spec, split));
  }
  return out;
}

}  // namespace lynx::strategies
