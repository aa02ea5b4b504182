#include "calibrate/workload_shapes.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace lynx;
using namespace lynx::calibrate;

namespace {

/// A small custom GPT: h 64, 4 heads (head size 16), f 256, s 32, V 128.
ModelSpec small_model() {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.ffn_hidden = 256;
  m.seq_len = 32;
  m.vocab = 128;
  return m;
}

using GemmKey =
    std::tuple<bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string>;
GemmKey key(const GemmShape& g) {
  return {g.kind == model::OpKind::kAttention, g.m, g.n, g.k, g.batch, g.layout()};
}

}  // namespace

TEST_CASE("shape derivation: distinct GEMMs of a small model, by hand") {
  ShapeDerivationOptions options;
  options.models = {small_model()};
  options.tp = {2};
  options.micro_batch = {1};
  options.include_sweeps = false;
  const WorkloadShapes shapes = derive_workload_shapes(options);

  // tp 2, b 1: tokens s·b = 32; QKV n = 3h/t = 96; out-proj k = h/t = 32; FC1 n = f/t = 128;
  // LM head n = V/t = 64; attention batch b·a/t = 2 GEMMs of head size 16.
  // Per op (m,n,k): fwd (m,n,k), dA (m,k,n) NN, dB (k,n,m) TN; linear forward NT,
  // attention forward NN.
  //   qkv      fwd (32,96,64) NT   dgrad (32,64,96)   wgrad (64,96,32)
  //   QK^T     fwd (32,32,16)      dA (32,16,32)      dB (16,32,32)        [attention, batch 2]
  //   ·V       fwd (32,16,32)=QK^T's dA, dA (32,32,16)=QK^T's fwd, dB (32,16,32) TN — new
  //   out-proj fwd (32,64,32) NT   dgrad (32,32,64)   wgrad (32,64,32) TN
  //   fc1      fwd (32,128,64) NT  dgrad (32,64,128)  wgrad (64,128,32)
  //   fc2      fwd (32,64,128) NT  dgrad (32,128,64)  wgrad (128,64,32)
  //   lm head  fwd (32,64,64) NT   dgrad (32,64,64)   wgrad (64,64,32)
  // = 15 linear + 4 attention GEMMs.
  const std::vector<GemmKey> expected{
      {false, 32, 96, 64, 1, "NT"},  {false, 32, 64, 96, 1, "NN"},  {false, 64, 96, 32, 1, "TN"},
      {true, 32, 32, 16, 2, "NN"},   {true, 32, 16, 32, 2, "NN"},   {true, 16, 32, 32, 2, "TN"},
      {true, 32, 16, 32, 2, "TN"},   {false, 32, 64, 32, 1, "NT"},  {false, 32, 32, 64, 1, "NN"},
      {false, 32, 64, 32, 1, "TN"},  {false, 32, 128, 64, 1, "NT"}, {false, 32, 64, 128, 1, "NN"},
      {false, 64, 128, 32, 1, "TN"}, {false, 32, 64, 128, 1, "NT"}, {false, 32, 128, 64, 1, "NN"},
      {false, 128, 64, 32, 1, "TN"}, {false, 32, 64, 64, 1, "NT"},  {false, 32, 64, 64, 1, "NN"},
      {false, 64, 64, 32, 1, "TN"},
  };
  REQUIRE(shapes.gemms.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CAPTURE(shapes.gemms[i].name);
    CHECK(key(shapes.gemms[i]) == expected[i]);
  }
  CHECK(shapes.gemms[0].name == "custom-h64-a4:tp2:mb1:qkv_gemm.fwd");
  CHECK(shapes.gemms[6].name == "custom-h64-a4:tp2:mb1:attn_v_matmul.dgrad_b");
  // 2·32·96·64 = 393216 FLOPs; operands 2·(32·64 + 64·96 + 32·96) = 22528 bytes.
  CHECK(shapes.gemms[0].flops() == 393216.0);
  CHECK(shapes.gemms[0].operand_bytes(2) == 22528);
  // Batched: 2 · 2·32·32·16 = 65536 FLOPs.
  CHECK(shapes.gemms[3].flops() == 65536.0);
}

TEST_CASE("shape derivation: memory-bound kernels of a small model, by hand") {
  ShapeDerivationOptions options;
  options.models = {small_model()};
  options.tp = {2};
  options.include_sweeps = false;

  SUBCASE("without sequence parallelism") {
    const WorkloadShapes shapes = derive_workload_shapes(options);
    // ln1/ln2/final LN (32 tokens × h 64); softmax and attention dropout over b·a/t·s = 64
    // rows of s = 32; dropout-residual (32 × 64, also embedding_dropout); bias-GeLU
    // (32 × f/t = 128); embedding gather (32 × 64 from a V/t = 64-row table); cross-entropy
    // (32 × V/t = 64).
    using MemKey = std::tuple<MemoryKernel, std::int64_t, std::int64_t, std::int64_t>;
    const std::vector<MemKey> expected{
        {MemoryKernel::kLayerNorm, 32, 64, 0},       {MemoryKernel::kCausalSoftmax, 64, 32, 0},
        {MemoryKernel::kDropout, 64, 32, 0},         {MemoryKernel::kDropoutResidual, 32, 64, 0},
        {MemoryKernel::kBiasGelu, 32, 128, 0},       {MemoryKernel::kEmbeddingGather, 32, 64, 64},
        {MemoryKernel::kCrossEntropy, 32, 64, 0},
    };
    REQUIRE(shapes.memory_kernels.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const MemoryKernelShape& s = shapes.memory_kernels[i];
      CAPTURE(s.name);
      CHECK(MemKey{s.kernel, s.rows, s.cols, s.table_rows} == expected[i]);
    }
    CHECK(shapes.memory_kernels[1].seq_len == 32);
    CHECK(shapes.memory_kernels[0].name == "custom-h64-a4:tp2:mb1:ln1");
  }
  SUBCASE("sequence parallelism shards the LayerNorm and residual rows") {
    options.sequence_parallel = true;
    const WorkloadShapes shapes = derive_workload_shapes(options);
    REQUIRE(shapes.memory_kernels.size() == 7);
    CHECK(shapes.memory_kernels[0].kernel == MemoryKernel::kLayerNorm);
    CHECK(shapes.memory_kernels[0].rows == 16);  // s·b/t
    CHECK(shapes.memory_kernels[3].kernel == MemoryKernel::kDropoutResidual);
    CHECK(shapes.memory_kernels[3].rows == 16);
    CHECK(shapes.memory_kernels[4].rows == 32);  // GeLU is inside the TP region: all tokens
  }
}

TEST_CASE("memory-bound kernel bytes, by hand") {
  MemoryKernelShape s;
  s.rows = 32;
  s.cols = 64;  // R·C = 2048
  s.kernel = MemoryKernel::kLayerNorm;
  CHECK(memory_kernel_bytes(s, 2) == 8704);  // 2·2·2048 + 2·2·64 + 8·32 = 8192 + 256 + 256
  s.kernel = MemoryKernel::kBiasGelu;
  CHECK(memory_kernel_bytes(s, 2) == 8320);  // 8192 + 2·64
  s.kernel = MemoryKernel::kCausalSoftmax;
  CHECK(memory_kernel_bytes(s, 2) == 8192);
  s.kernel = MemoryKernel::kDropout;
  CHECK(memory_kernel_bytes(s, 2) == 10240);  // 8192 + 2048 mask
  s.kernel = MemoryKernel::kDropoutResidual;
  CHECK(memory_kernel_bytes(s, 2) == 14464);  // 3·2·2048 + 2·64 + 2048
  s.kernel = MemoryKernel::kCrossEntropy;
  CHECK(memory_kernel_bytes(s, 2) == 12672);  // 2·2048 + 4·2048 + 8·32 + 4·32
  s.kernel = MemoryKernel::kEmbeddingGather;
  CHECK(memory_kernel_bytes(s, 2) == 8448);  // 8192 + 8·32
  s.kernel = MemoryKernel::kElementwise;
  CHECK(memory_kernel_bytes(s, 2) == 8192);
}

TEST_CASE("shape derivation: several points, sweeps, skips and errors") {
  ShapeDerivationOptions options;
  options.models = {small_model()};
  options.tp = {1, 3};  // 4 heads do not split over 3 ranks
  options.include_sweeps = false;
  const WorkloadShapes one = derive_workload_shapes(options);
  REQUIRE(one.notes.size() == 1);
  CHECK(one.notes[0].find("skipped custom-h64-a4 tp=3 micro_batch=1") != std::string::npos);
  CHECK_FALSE(one.gemms.empty());

  options.tp = {1};
  options.include_sweeps = true;
  const WorkloadShapes swept = derive_workload_shapes(options);
  // Square GEMMs 256, 512, ..., 8192 (6) and elementwise 2^10, 2^12, ..., 2^28 (10) added.
  CHECK(swept.gemms.size() == one.gemms.size() + 6);
  CHECK(swept.memory_kernels.size() == one.memory_kernels.size() + 10);
  CHECK(swept.gemms.back().m == 8192);
  CHECK(swept.memory_kernels.back().cols == (1 << 28));

  // The same point twice adds nothing new.
  options.models = {small_model(), small_model()};
  options.include_sweeps = false;
  CHECK(derive_workload_shapes(options).gemms.size() == one.gemms.size());

  CHECK_THROWS_AS(preset_model("gpt-0b", 2048), Error);
  options.models = {};
  CHECK_THROWS_AS(derive_workload_shapes(options), Error);
  options.models = {preset_model("gpt-1.3b", 2048)};
  options.tp = {0};
  CHECK_THROWS_AS(derive_workload_shapes(options), Error);
}

TEST_CASE("shape derivation: gpt-1.3b QKV shape at tp 2, micro-batch 4") {
  ShapeDerivationOptions options;
  options.models = {preset_model("gpt-1.3b", 2048)};
  options.tp = {2};
  options.micro_batch = {4};
  options.include_sweeps = false;
  const WorkloadShapes shapes = derive_workload_shapes(options);
  // s·b = 8192 rows, 3h/t = 3·2048/2 = 3072 columns, k = h = 2048.
  REQUIRE_FALSE(shapes.gemms.empty());
  CHECK(shapes.gemms[0].m == 8192);
  CHECK(shapes.gemms[0].n == 3072);
  CHECK(shapes.gemms[0].k == 2048);
  CHECK(shapes.gemms[0].name == "gpt-1.3b:tp2:mb4:qkv_gemm.fwd");
}
