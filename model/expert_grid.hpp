#pragma once
/// Megatron-Core's expert rank grid: how the GPUs of one pipeline stage are re-divided into
/// expert-tensor-parallel, expert-parallel and expert-data-parallel groups for the MoE layers.
#include "scenarios/scenario.hpp"

#include <vector>

namespace lynx::model {

/// The expert groups of one GPU, as ranks inside its pipeline stage. A stage's tp · dp · cp GPUs
/// are numbered as schedule::global_rank does (stage rank = tp_rank + tp · replica, replica =
/// dp_rank · cp + cp_rank); the MoE layers number the same GPUs stage rank = etp_rank + etp ·
/// (ep_rank + ep · edp_rank).
struct ExpertGroups {
  std::vector<int> etp;  ///< the expert-tensor-parallel group: etp consecutive stage ranks
  std::vector<int> ep;   ///< the expert-parallel group: ep stage ranks, etp apart
  std::vector<int> edp;  ///< the expert-data-parallel group: edp stage ranks, etp · ep apart
  int etp_index = 0;     ///< which etp group of the stage, 0 ≤ · < tp·dp·cp / etp
  int ep_index = 0;      ///< which ep group of the stage: edp_rank · etp + etp_rank
  int edp_index = 0;     ///< which edp group of the stage: etp_rank · ep + ep_rank
};

/// GPUs holding the same experts, over which their gradients are reduced: tp · dp · cp / (etp ·
/// ep) (check_layout makes etp · ep divide tp · dp · cp).
int expert_data_parallel_size(const ParallelSpec& p);

/// The expert groups of the GPU at `stage_rank` (0 ≤ stage_rank < tp · dp · cp).
ExpertGroups expert_groups(const ParallelSpec& p, int stage_rank);

}  // namespace lynx::model
