// schedule::detail::Builder: context parallelism's ring attention (parallel.cp > 1) — the
// attention core as cp blocks on the compute stream, each waiting for the key/value block the
// previous ring step brought over the cp stream (model/gpt_context_parallel.cpp says whose
// implementation this follows).
#include "schedule/builder.hpp"

namespace lynx::schedule::detail {

sim::TaskId Builder::emit_ring_shift(std::uint64_t bytes, std::uint32_t name, sim::Category category,
                                     sim::TaskId after, sim::TaskId also_after) {
  // The replica index is dp_rank · cp + cp_rank (global_rank): the next rank of the ring.
  const hw_models::Rank next = cp_ranks_[static_cast<size_t>((dp_rank_ % p_.cp + 1) % p_.cp)];
  return emit_collective(kCp, category, hw_models::Collective::kSendRecv, {rank_, next}, cp_communicator(), bytes,
                         name, {after, also_after});
}

sim::TaskId Builder::emit_ring_forward(const OpWithTimes& o, TaskArgs args, sim::TaskId after,
                                       std::int64_t saved_bytes,
                                       const std::function<void(sim::TaskId, sim::TaskId)>& on_wait) {
  const int steps = o.op.cp_steps;
  const std::uint32_t shift_name = intern_name(o.op.name + "_cp_kv");
  const model::Op block_op = model::ring_attention_block(o.op);
  args.work_ps = o.block.fwd_ps;
  args.flops = block_op.fwd_flops;
  args.kernels = block_op.fwd_kernels;
  sim::TaskId arrived = -1;  // the transfer that brought this step's key/value block
  sim::TaskId block = -1;
  for (int j = 0; j < steps; ++j) {
    // Step j sends the block it holds on while it computes with it (the last block stays).
    const sim::TaskId next = j + 1 < steps ? emit_ring_shift(o.op.cp_kv_block_bytes, shift_name,
                                                             sim::Category::kCpComm, j == 0 ? after : arrived)
                                           : -1;
    if (j > 0) on_wait(arrived, block);
    block = add_task(args, {j == 0 ? after : arrived});
    if (j == 0) add_mem(block, saved_bytes, tag_of(o.op.group), false);
    arrived = next;
  }
  return block;
}

sim::TaskId Builder::emit_ring_backward(const OpWithTimes& o, TaskArgs args, sim::TaskId after,
                                        const std::function<void(sim::TaskId, sim::TaskId)>& on_wait) {
  const int steps = o.op.cp_steps;
  const std::uint32_t kv_name = intern_name(o.op.name + "_cp_kv_bwd");
  const std::uint32_t dkv_name = intern_name(o.op.name + "_cp_dkv");
  const model::Op block_op = model::ring_attention_block(o.op);
  args.work_ps = o.block.dgrad_ps;
  args.flops = block_op.bwd_dgrad_flops;
  args.kernels = block_op.bwd_dgrad_kernels;
  sim::TaskId kv_arrived = -1;   // this step's key/value block
  sim::TaskId dkv_arrived = -1;  // the previous rank's partial gradient of that block
  sim::TaskId block = -1;
  for (int j = 0; j < steps; ++j) {
    const sim::TaskId kv_next = j + 1 < steps ? emit_ring_shift(o.op.cp_kv_block_bytes, kv_name, sim::Category::kCpComm,
                                                                j == 0 ? after : kv_arrived)
                                              : -1;
    if (j > 0) on_wait(kv_arrived, block);
    block = add_task(args, {j == 0 ? after : kv_arrived});
    // The block's key/value gradient moves on to the next rank once this rank's part is added
    // to the partial gradient the previous rank sent (an addition left out of the time); after
    // the last step it reaches the block's owner.
    dkv_arrived = emit_ring_shift(o.op.cp_kv_block_bytes, dkv_name, sim::Category::kCpComm, block, dkv_arrived);
    kv_arrived = kv_next;
  }
  TaskArgs done;
  done.kind = sim::TaskKind::kMarker;
  done.name = intern_name(o.op.name + "_cp_dkv_home");
  on_wait(dkv_arrived, block);
  return add_task(done, {dkv_arrived});
}

}  // namespace lynx::schedule::detail
