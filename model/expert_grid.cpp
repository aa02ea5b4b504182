// model: Megatron-Core's expert rank grid of a pipeline stage.
#include "model/expert_grid.hpp"

namespace lynx::model {

// NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/parallel_state.py
// (initialize_model_parallel): the expert RankGenerator takes tp = expert_tensor_parallel_size,
// ep, dp = world / (etp · ep · pp), cp = 1, in the order of the dense one (default
// tp-cp-ep-dp-pp, pp last), so inside a pipeline stage the expert ranks run etp fastest, then
// ep, then expert dp, over the same GPUs the dense layers number tp-cp-dp.
int expert_data_parallel_size(const ParallelSpec& p) {
  return p.tp * grad_replicas(p) / (expert_tp(p) * p.ep);
}

ExpertGroups expert_groups(const ParallelSpec& p, int stage_rank) {
  const int etp = expert_tp(p), ep = p.ep, edp = expert_data_parallel_size(p);
  const int etp_rank = stage_rank % etp;
  const int ep_rank = stage_rank / etp % ep;
  const int edp_rank = stage_rank / (etp * ep);
  ExpertGroups g;
  for (int i = 0; i < etp; ++i) g.etp.push_back(stage_rank - etp_rank + i);
  for (int i = 0; i < ep; ++i) g.ep.push_back(etp_rank + etp * (i + ep * edp_rank));
  for (int i = 0; i < edp; ++i) g.edp.push_back(etp_rank + etp * (ep_rank + ep * i));
  g.etp_index = stage_rank / etp;
  g.ep_index = edp_rank * etp + etp_rank;
  g.edp_index = etp_rank * ep + ep_rank;
  return g;
}

}  // namespace lynx::model
