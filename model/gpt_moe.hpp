#pragma once
/// The mixture-of-experts MLP's dimensions and ops for gpt_ops.cpp and gpt_formulas.cpp.
/// Internal to model/.
#include "model/gpt_dims.hpp"

#include <cstdint>
#include <vector>

namespace lynx::model::detail {

/// The MoE dimensions of a layer on one GPU (model.moe resolved against its defaults).
struct MoeDims {
  std::int64_t experts;        ///< routed experts E
  std::int64_t topk;           ///< experts per token k
  std::int64_t expert_ffn;     ///< one routed expert's inner size f_e
  std::int64_t shared_ffn;     ///< shared experts' inner size f_s (0: none)
  std::int64_t ep;             ///< expert-parallel degree
  std::int64_t etp;            ///< expert tensor-parallel degree (expert_tp): shards each expert
  std::int64_t local_experts;  ///< E / ep
  double load;                 ///< busiest rank's rows over the uniform share (imbalance, capped by capacity)
  std::int64_t expert_rows;    ///< rows of this GPU's expert GEMMs: ceil(load · etp · local tokens · k)
};

/// The MoE dimensions of `m` (is_moe) under `p`, `d` = dims_of(m, p).
MoeDims moe_dims_of(const ModelSpec& m, const ParallelSpec& p, const Dims& d);
/// Appends the MoE MLP (router, top-k, permute, dispatch, expert GEMMs, combine, unpermute,
/// shared experts) after LN2: what replaces the dense MLP's ops in an MoE layer.
void append_moe_mlp(const Dims& d, const MoeDims& e, std::vector<Op>& ops);
/// Parameters of an MoE layer's MLP besides the routed experts, per GPU: the router (h·E,
/// replicated over TP) and the shared experts (sharded over TP like a dense MLP; the routed
/// experts shard over etp instead).
std::int64_t moe_dense_part_parameters(const Dims& d, const MoeDims& e);

}  // namespace lynx::model::detail
