// CUDA kernels per op (the host model's unit, docs/host.md): the documented table against the
// code, the fused-softmax availability rule, the variants, and apex's multi-tensor launches.
#include "model/gpt.hpp"
#include "model/workload.hpp"

#include "tests/model/op_helpers.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::model;
using lynx::test::find_op;

namespace {

ModelSpec gpt(int layers = 24, int hidden = 1024, int heads = 16, int seq = 1024) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.seq_len = seq;
  return resolve_model(m);
}

ParallelSpec parallel(int tp, int micro_batch) {
  ParallelSpec p;
  p.tp = tp;
  p.micro_batch = micro_batch;
  return p;
}

struct Counts {
  int fwd = 0, dgrad = 0, wgrad = 0;
};

Counts sum_kernels(const std::vector<Op>& ops) {
  Counts c;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kCollective) continue;
    c.fwd += op.fwd_kernels;
    c.dgrad += op.bwd_dgrad_kernels;
    c.wgrad += op.bwd_wgrad_kernels;
  }
  return c;
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream in(row);
  std::string cell;
  std::getline(in, cell, '|');  // before the first '|'
  while (std::getline(in, cell, '|')) {
    const auto b = cell.find_first_not_of(' ');
    const auto e = cell.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

TEST_CASE("host kernel table: docs/host.md lists every layer op with the code's kernel counts") {
  std::ifstream file(std::string(LYNXSIM_SOURCE_DIR) + "/docs/host.md");
  REQUIRE(file.good());
  std::string line;
  bool in_table = false;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(file, line)) {
    if (line.find("<!-- BEGIN kernel table -->") != std::string::npos) in_table = true;
    else if (line.find("<!-- END kernel table -->") != std::string::npos) in_table = false;
    else if (in_table && line.rfind("| ", 0) == 0 && line.rfind("| op ", 0) != 0) rows.push_back(cells(line));
  }
  // The documented configuration: GPT, tp 2, micro-batch 4, s 1024, 16 heads, no flash.
  const std::vector<Op> ops = layer_ops(gpt(), parallel(2, 4));
  std::vector<std::string> kernel_ops;
  for (const Op& op : ops)
    if (op.kind != OpKind::kCollective) kernel_ops.push_back(op.name);
  REQUIRE(rows.size() == kernel_ops.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(rows[i][0]);
    REQUIRE(rows[i].size() >= 4);
    CHECK(rows[i][0] == kernel_ops[i]);
    const Op& op = find_op(ops, kernel_ops[i]);
    CHECK(rows[i][1] == std::to_string(op.fwd_kernels));
    CHECK(rows[i][2] == std::to_string(op.bwd_dgrad_kernels));
    CHECK(rows[i][3] == std::to_string(op.bwd_wgrad_kernels));
  }
  // The totals the text gives: 15 forward, 28 backward.
  const Counts c = sum_kernels(ops);
  CHECK(c.fwd == 15);
  CHECK(c.dgrad + c.wgrad == 28);
}

TEST_CASE("kernels: Megatron's fused softmax needs micro-batch x local heads divisible by 4") {
  // 16 heads: tp 8 leaves 2 per GPU, so micro-batch 1 and 3 fall back to PyTorch's softmax.
  CHECK(find_op(layer_ops(gpt(), parallel(8, 1)), "softmax").fwd_kernels == 5);
  CHECK(find_op(layer_ops(gpt(), parallel(8, 1)), "softmax").bwd_dgrad_kernels == 5);
  CHECK(find_op(layer_ops(gpt(), parallel(8, 2)), "softmax").fwd_kernels == 1);
  CHECK(find_op(layer_ops(gpt(), parallel(4, 1)), "softmax").fwd_kernels == 1);
  CHECK(find_op(layer_ops(gpt(), parallel(8, 3)), "softmax").fwd_kernels == 5);
  // Sequence beyond the kernel's 4096, or not divisible by 4.
  CHECK(find_op(layer_ops(gpt(24, 1024, 16, 8192), parallel(1, 4)), "softmax").fwd_kernels == 5);
  CHECK(find_op(layer_ops(gpt(24, 1024, 16, 1022), parallel(1, 4)), "softmax").fwd_kernels == 5);
  CHECK(find_op(layer_ops(gpt(24, 1024, 16, 4096), parallel(1, 4)), "softmax").fwd_kernels == 1);
}

TEST_CASE("kernels: variants — no biases, flash attention, embedding and head") {
  ModelSpec llama;
  llama.preset = "llama2-7b";
  llama.seq_len = 1024;
  const std::vector<Op> l = layer_ops(resolve_model(llama), parallel(2, 4));
  CHECK(find_op(l, "qkv_gemm").fwd_kernels == 1);  // no bias to add
  CHECK(find_op(l, "qkv_gemm").bwd_wgrad_kernels == 1);
  CHECK(find_op(l, "rotary").fwd_kernels == 2);
  CHECK(find_op(l, "mlp_dropout_residual").bwd_dgrad_kernels == 1);
  CHECK(find_op(l, "swiglu").bwd_dgrad_kernels == 1);
  ModelSpec flash = gpt();
  flash.flash_attention = true;
  const std::vector<Op> f = layer_ops(flash, parallel(2, 4));
  CHECK(find_op(f, "flash_attention").fwd_kernels == 1);
  CHECK(find_op(f, "flash_attention").bwd_dgrad_kernels == 3);
  // The word embedding's mask at tp > 1; its backward is a weight gradient only.
  CHECK(find_op(embedding_ops(gpt(), parallel(1, 4)), "embedding_lookup").fwd_kernels == 1);
  const std::vector<Op> embedding = embedding_ops(gpt(), parallel(2, 4));
  const Op& lookup = find_op(embedding, "embedding_lookup");
  CHECK(lookup.fwd_kernels == 12);
  CHECK(lookup.bwd_dgrad_kernels == 0);
  CHECK(lookup.bwd_wgrad_kernels == 10);
  const std::vector<Op> head = head_ops(gpt(), parallel(2, 4));
  CHECK(find_op(head, "cross_entropy").fwd_kernels == 20);
  CHECK(find_op(head, "lm_head_gemm").bwd_wgrad_kernels == 1);
}

TEST_CASE("kernels: parameter tensors and apex multi_tensor_apply launches") {
  CHECK(layer_parameter_tensors(gpt()) == 12);  // 4 weights, 4 biases, 2 LayerNorms of 2
  ModelSpec llama;
  llama.preset = "llama2-7b";
  CHECK(layer_parameter_tensors(resolve_model(llama)) == 6);  // 4 weights, 2 RMSNorm gains
  CHECK(embedding_parameter_tensors(gpt()) == 2);
  CHECK(embedding_parameter_tensors(resolve_model(llama)) == 1);
  ParallelSpec pp2 = parallel(1, 1);
  pp2.pp = 2;
  CHECK(head_parameter_tensors(gpt(), parallel(1, 1)) == 2);  // tied, one stage: the norm
  CHECK(head_parameter_tensors(gpt(), pp2) == 3);            // + the embedding copy
  // Launch count = max(ceil(T / max_tensors[d]), ceil((ceil(N / 65536) + T) / 320)).
  CHECK(multi_tensor_launches(0, 0, 4) == 0);
  CHECK(multi_tensor_launches(1000, 1, 1) == 1);
  CHECK(multi_tensor_launches(1000, 111, 1) == 2);  // 110 tensors per launch at depth 1
  CHECK(multi_tensor_launches(1000, 37, 4) == 2);   // 36 at depth 4
  CHECK(multi_tensor_launches(1000, 36, 4) == 1);
  // 1e9 elements in 12 tensors: 15259 chunks + 12 → 48 launches of 320 blocks.
  CHECK(multi_tensor_launches(1e9, 12, 4) == 48);
  CHECK(multi_tensor_launches(65536.0 * 320 - 1, 1, 2) == 2);  // 320 chunks + the partial one
  CHECK(multi_tensor_launches(65536.0 * 319, 1, 2) == 1);
}
