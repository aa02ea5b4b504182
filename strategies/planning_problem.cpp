#include "strategies/planning_problem.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace lynx::strategies {

TimePs exposed_ps(const StageProblem& p, int layer, const LayerOption& option) {
  if (!option.overlapped) return option.recompute_ps;
  const auto l = static_cast<size_t>(layer);
  const bool forward = option.decision.window == Window::kFwdTpComm;
  const auto& profiles = forward ? p.fwd_window_profile : p.window_profile;
  if (l < profiles.size()) {
    const TimePs in_window = sim::window_cost_ps(profiles[l], option.overlapped_work_ps);
    if (!forward || l >= p.fwd_window_steps.size() || p.micro_batches <= 0) return in_window;
    // Averaged over the backward steps: without a forward window it runs before its consumer.
    const std::int64_t with = p.fwd_window_steps[l], m = p.micro_batches;
    return (with * in_window + (m - with) * sim::window_cost_ps({}, option.overlapped_work_ps) + m / 2) / m;
  }
  const TimePs window = option.decision.window == Window::kFwdTpComm
                            ? (l < p.fwd_window_ps.size() ? p.fwd_window_ps[l] : 0)
                            : p.window_ps[l];
  return std::max<TimePs>(0, option.overlapped_ps - window);
}

TimePs recompute_work_ps(const LayerOption& option) {
  return option.overlapped ? option.overlapped_ps : option.recompute_ps;
}

std::int64_t activation_bytes(const StageProblem& p, const std::vector<int>& option_of_layer) {
  std::int64_t kept = 0;
  std::int64_t transient = 0;
  for (size_t l = 0; l < option_of_layer.size(); ++l) {
    const LayerOption& opt = p.option(static_cast<int>(l), option_of_layer[l]);
    kept += opt.kept_bytes;
    transient = std::max(transient, opt.transient_bytes);
  }
  return p.in_flight * kept + transient;
}

StageSolution evaluate(const StageProblem& p, const std::vector<int>& option_of_layer) {
  LYNX_CHECK(static_cast<int>(option_of_layer.size()) == p.layers, "{} choices for {} layers",
             option_of_layer.size(), p.layers);
  StageSolution s;
  s.option_of_layer = option_of_layer;
  for (int l = 0; l < p.layers; ++l)
    s.exposed_ps += exposed_ps(p, l, p.option(l, option_of_layer[static_cast<size_t>(l)]));
  s.activation_bytes = activation_bytes(p, option_of_layer);
  s.feasible = s.activation_bytes <= p.budget_bytes;
  return s;
}

}  // namespace lynx::strategies
