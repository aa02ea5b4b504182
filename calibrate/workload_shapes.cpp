#include "calibrate/workload_shapes.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <tuple>

namespace lynx::calibrate {

namespace {

std::uint64_t u64(std::int64_t v) {
  LYNX_CHECK(v >= 0, "negative size {}", v);
  return static_cast<std::uint64_t>(v);
}

/// Model dimensions of one (model, tp, micro-batch) point, as the kernels see them.
struct Dims {
  std::int64_t s, b, h, a, f, v, t;
  std::int64_t tokens;        ///< s·b
  std::int64_t local_tokens;  ///< s·b/t with sequence parallelism, else s·b
};

bool same_gemm(const GemmShape& x, const GemmShape& y) {
  return std::tie(x.kind, x.m, x.n, x.k, x.batch, x.transpose_a, x.transpose_b) ==
         std::tie(y.kind, y.m, y.n, y.k, y.batch, y.transpose_a, y.transpose_b);
}

bool same_memory_kernel(const MemoryKernelShape& x, const MemoryKernelShape& y) {
  return std::tie(x.kernel, x.rows, x.cols, x.table_rows, x.seq_len) ==
         std::tie(y.kernel, y.rows, y.cols, y.table_rows, y.seq_len);
}

void add_gemm(WorkloadShapes& out, GemmShape shape) {
  for (const GemmShape& existing : out.gemms)
    if (same_gemm(existing, shape)) return;
  out.gemms.push_back(std::move(shape));
}

void add_memory_kernel(WorkloadShapes& out, MemoryKernelShape shape) {
  for (const MemoryKernelShape& existing : out.memory_kernels)
    if (same_memory_kernel(existing, shape)) return;
  out.memory_kernels.push_back(std::move(shape));
}

/// Forward, dA and dB GEMMs of one op (see derive_workload_shapes).
void add_gemm_passes(WorkloadShapes& out, const model::Op& op, const std::string& prefix) {
  const bool attention = op.kind == model::OpKind::kAttention;
  const std::int64_t m = op.gemm_m, n = op.gemm_n, k = op.gemm_k;
  GemmShape fwd{op.kind, m, n, k, op.gemm_batch, false, !attention, prefix + op.name + ".fwd"};
  GemmShape grad_a{op.kind, m, k, n, op.gemm_batch, false, false,
                   prefix + op.name + (attention ? ".dgrad_a" : ".dgrad")};
  GemmShape grad_b{op.kind, k, n, m, op.gemm_batch, true, false,
                   prefix + op.name + (attention ? ".dgrad_b" : ".wgrad")};
  add_gemm(out, std::move(fwd));
  add_gemm(out, std::move(grad_a));
  add_gemm(out, std::move(grad_b));
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Our kernel and tensor shape for a memory-bound op of the workload.
MemoryKernelShape memory_kernel_for(const model::Op& op, const Dims& d, const std::string& prefix) {
  MemoryKernelShape shape;
  shape.name = prefix + op.name;
  const std::string_view name = op.name;
  const std::int64_t heads_local = d.a / d.t;
  if (name == "ln1" || name == "ln2" || ends_with(name, "layernorm")) {
    shape.kernel = MemoryKernel::kLayerNorm;
    shape.rows = d.local_tokens;
    shape.cols = d.h;
  } else if (name == "gelu") {
    shape.kernel = MemoryKernel::kBiasGelu;
    shape.rows = d.tokens;
    shape.cols = d.f / d.t;
  } else if (name == "softmax") {
    shape.kernel = MemoryKernel::kCausalSoftmax;
    shape.rows = d.b * heads_local * d.s;
    shape.cols = d.s;
    shape.seq_len = d.s;
  } else if (name == "attn_dropout") {
    shape.kernel = MemoryKernel::kDropout;
    shape.rows = d.b * heads_local * d.s;
    shape.cols = d.s;
  } else if (ends_with(name, "dropout_residual") || name == "embedding_dropout") {
    shape.kernel = MemoryKernel::kDropoutResidual;
    shape.rows = d.local_tokens;
    shape.cols = d.h;
  } else if (name == "cross_entropy") {
    shape.kernel = MemoryKernel::kCrossEntropy;
    shape.rows = d.tokens;
    shape.cols = d.v / d.t;
  } else if (name == "embedding_lookup") {
    shape.kernel = MemoryKernel::kEmbeddingGather;
    shape.rows = d.tokens;
    shape.cols = d.h;
    shape.table_rows = d.v / d.t;
  } else {
    // Unrecognised: a plain stream moving the op's forward bytes (read half, write half, 2
    // bytes per element).
    shape.kernel = MemoryKernel::kElementwise;
    shape.rows = 1;
    shape.cols = std::max<std::int64_t>(1, static_cast<std::int64_t>(op.fwd_bytes / 4.0));
  }
  return shape;
}

void add_point(WorkloadShapes& out, const ModelSpec& m, int tp, int micro_batch,
               const ShapeDerivationOptions& options, bool& flash_noted) {
  const std::string preset =
      m.preset.empty() ? fmt::format("custom-h{}-a{}", m.hidden, m.heads) : m.preset;
  ParallelSpec p;
  p.tp = tp;
  p.micro_batch = micro_batch;
  p.sequence_parallel = options.sequence_parallel;

  std::vector<model::Op> ops;
  try {
    ops = model::layer_ops(m, p);
    const std::vector<model::Op> embedding = model::embedding_ops(m, p);
    const std::vector<model::Op> head = model::head_ops(m, p);
    ops.insert(ops.end(), embedding.begin(), embedding.end());
    ops.insert(ops.end(), head.begin(), head.end());
  } catch (const Error& e) {
    out.notes.push_back(fmt::format("skipped {} tp={} micro_batch={}: {}", preset, tp,
                                    micro_batch, e.what()));
    return;
  }

  Dims d{};
  d.s = m.seq_len;
  d.b = micro_batch;
  d.h = m.hidden;
  d.a = m.heads;
  d.f = m.ffn_hidden;
  d.v = m.vocab;
  d.t = tp;
  d.tokens = d.s * d.b;
  d.local_tokens = (options.sequence_parallel && tp > 1) ? d.tokens / d.t : d.tokens;

  const std::string prefix = fmt::format("{}:tp{}:mb{}:", preset, tp, micro_batch);
  for (const model::Op& op : ops) {
    switch (op.kind) {
      case model::OpKind::kGemm:
        if (op.gemm_m > 0 && op.gemm_n > 0 && op.gemm_k > 0) add_gemm_passes(out, op, prefix);
        break;
      case model::OpKind::kAttention:
        if (op.name == "flash_attention") {
          if (!flash_noted)
            out.notes.push_back("flash_attention is a fused kernel, not a batched GEMM: not "
                                "benchmarked (the attention curve comes from unfused shapes)");
          flash_noted = true;
        } else if (op.gemm_m > 0 && op.gemm_n > 0 && op.gemm_k > 0) {
          add_gemm_passes(out, op, prefix);
        }
        break;
      case model::OpKind::kMemoryBound:
        if (op.fwd_bytes > 0) add_memory_kernel(out, memory_kernel_for(op, d, prefix));
        break;
      case model::OpKind::kCollective:
        break;  // collectives are swept over sizes by the NCCL benchmark
    }
  }
}

}  // namespace

ModelSpec preset_model(const std::string& preset, int seq_len) {
  ModelSpec spec;
  spec.preset = preset;
  spec.seq_len = seq_len;
  return model::resolve_model(spec);
}

double GemmShape::flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(batch);
}

std::uint64_t GemmShape::operand_bytes(int element_bytes) const {
  return u64(element_bytes) * u64(batch) * (u64(m) * u64(k) + u64(k) * u64(n) + u64(m) * u64(n));
}

std::string GemmShape::layout() const {
  return std::string(transpose_a ? "T" : "N") + (transpose_b ? "T" : "N");
}

std::string_view to_string(MemoryKernel kernel) {
  switch (kernel) {
    case MemoryKernel::kLayerNorm: return "layernorm";
    case MemoryKernel::kBiasGelu: return "bias_gelu";
    case MemoryKernel::kCausalSoftmax: return "causal_softmax";
    case MemoryKernel::kDropout: return "dropout";
    case MemoryKernel::kDropoutResidual: return "dropout_residual";
    case MemoryKernel::kCrossEntropy: return "cross_entropy";
    case MemoryKernel::kEmbeddingGather: return "embedding_gather";
    case MemoryKernel::kElementwise: return "elementwise";
  }
  LYNX_CHECK(false, "unknown MemoryKernel {}", static_cast<int>(kernel));
  return {};
}

std::uint64_t memory_kernel_bytes(const MemoryKernelShape& shape, int element_bytes) {
  const std::uint64_t r = u64(shape.rows), c = u64(shape.cols), e = u64(element_bytes);
  const std::uint64_t rc = r * c;
  constexpr std::uint64_t kFp32 = 4, kMask = 1, kTokenId = 8;
  switch (shape.kernel) {
    case MemoryKernel::kLayerNorm: return 2 * e * rc + 2 * e * c + 2 * kFp32 * r;
    case MemoryKernel::kBiasGelu: return 2 * e * rc + e * c;
    case MemoryKernel::kCausalSoftmax: return 2 * e * rc;
    case MemoryKernel::kDropout: return 2 * e * rc + kMask * rc;
    case MemoryKernel::kDropoutResidual: return 3 * e * rc + e * c + kMask * rc;
    case MemoryKernel::kCrossEntropy: return e * rc + kFp32 * rc + kTokenId * r + kFp32 * r;
    case MemoryKernel::kEmbeddingGather: return 2 * e * rc + kTokenId * r;
    case MemoryKernel::kElementwise: return 2 * e * rc;
  }
  LYNX_CHECK(false, "unknown MemoryKernel {}", static_cast<int>(shape.kernel));
  return 0;
}

WorkloadShapes derive_workload_shapes(const ShapeDerivationOptions& options) {
  if (options.models.empty()) fail(ErrorCode::kInvalidOption, "shape derivation: no model given");
  if (options.tp.empty()) fail(ErrorCode::kInvalidOption, "shape derivation: no tensor-parallel degree given");
  if (options.micro_batch.empty()) fail(ErrorCode::kInvalidOption, "shape derivation: no micro-batch size given");
  for (int tp : options.tp)
    if (tp < 1) fail(ErrorCode::kInvalidOption, "shape derivation: tensor-parallel degree must be >= 1, got {}", tp);
  for (int b : options.micro_batch)
    if (b < 1) fail(ErrorCode::kInvalidOption, "shape derivation: micro-batch size must be >= 1, got {}", b);

  WorkloadShapes out;
  bool flash_noted = false;
  for (const ModelSpec& spec : options.models)
    for (int tp : options.tp)
      for (int micro_batch : options.micro_batch)
        add_point(out, spec, tp, micro_batch, options, flash_noted);

  if (options.include_sweeps) {
    // Square GEMMs from 256 (launch-bound on any recent GPU) to 8192 (near peak).
    for (std::int64_t size = 256; size <= 8192; size *= 2)
      add_gemm(out, GemmShape{model::OpKind::kGemm, size, size, size, 1, false, false,
                              fmt::format("sweep:square_gemm_{}", size)});
    // Elementwise streams of 2^10 .. 2^28 elements (4 KiB .. 1 GiB moved at 2 bytes each).
    for (std::int64_t elements = 1 << 10; elements <= (std::int64_t{1} << 28); elements *= 4)
      add_memory_kernel(out, MemoryKernelShape{MemoryKernel::kElementwise, 1, elements, 0, 0,
                                               fmt::format("sweep:elementwise_{}", elements)});
  }
  return out;
}

}  // namespace lynx::calibrate
