#include "calibrate/bench_kernels.hpp"

#include "gpu/cublas_gemm.hpp"
#include "gpu/cuda_check.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>

namespace lynx::calibrate {

namespace {

constexpr std::size_t kElementBytes = 2;  // bf16 / fp16
/// A section gives up after this many failures in a row (a sticky CUDA error, say).
constexpr int kMaxConsecutiveFailures = 3;

/// Counts failures of one measurement; throws when they keep coming.
class FailureGuard {
 public:
  explicit FailureGuard(const BenchContext& ctx) : ctx_(ctx) {}
  void success() { consecutive_ = 0; }
  void failure(const std::string& what, const std::exception& e) {
    ctx_.say("  skipped {}: {}", what, e.what());
    if (++consecutive_ >= kMaxConsecutiveFailures)
      fail(ErrorCode::kSystemFailure, "{} failures in a row, last: {}", consecutive_, e.what());
  }

 private:
  const BenchContext& ctx_;
  int consecutive_ = 0;
};

/// A buffer of 16-bit values, refilled with random values whenever it grows.
void reserve_random(DeviceBuffer& buffer, std::size_t elements, gpu::Dtype dtype,
                    std::uint64_t seed, float scale, cudaStream_t stream) {
  if (buffer.reserve(elements * kElementBytes))
    LYNX_CUDA_CHECK(gpu::fill_random(buffer.get(), elements, dtype, seed, scale, stream));
}

using gpu::CublasHandle;

}  // namespace

void run_gemm(cublasHandle_t handle, const GemmShape& s, gpu::Dtype dtype, const void* a,
              const void* b, void* c) {
  gpu::GemmDims d;
  d.m = s.m, d.n = s.n, d.k = s.k, d.batch = s.batch;
  d.transpose_a = s.transpose_a, d.transpose_b = s.transpose_b;
  d.strided = s.kind == model::OpKind::kAttention;
  gpu::row_major_gemm(handle, d, dtype, a, b, c);
}

void bench_launch(const BenchContext& ctx) {
  const CudaStream stream;
  const auto empty = [&] { LYNX_CUDA_CHECK(gpu::launch_empty(stream.get())); };
  const int reps = std::max(ctx.settings.reps, 50);
  for (int i = 0; i < ctx.settings.launch_rows; ++i) {
    // Device time of an empty kernel, fed back to back like every other measurement: the
    // fixed cost the profile's kernel_launch stands for.
    const TimingSummary t = time_on_stream(stream.get(), ctx.settings.warmup, reps, empty);
    ctx.emit(timed_row(MeasurementKind::kLaunch, "empty_kernel", "", t));
    ctx.say("launch: empty kernel {:.2f} us (p10 {:.2f}, p90 {:.2f})", t.median, t.p10, t.p90);
  }
  // For reference: the same kernel paced by the host's launch and event calls.
  const TimingSummary host = time_on_stream(stream.get(), ctx.settings.warmup, reps, empty, 1,
                                            Feed::kHostPaced);
  ctx.emit(timed_row(MeasurementKind::kLaunch, "empty_kernel_host_paced", "", host));
  ctx.say("launch: host-paced empty kernel {:.2f} us (informational, not fitted)", host.median);
}

void bench_gemms(const BenchContext& ctx, const std::vector<GemmShape>& shapes) {
  if (shapes.empty()) return;
  const CudaStream stream;
  const CublasHandle cublas(stream.get());
  std::int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const GemmShape& s : shapes) {
    max_a = std::max(max_a, s.m * s.k * s.batch);
    max_b = std::max(max_b, s.k * s.n * s.batch);
    max_c = std::max(max_c, s.m * s.n * s.batch);
  }
  DeviceBuffer a, b, c;
  FailureGuard guard(ctx);
  for (gpu::Dtype dtype : ctx.settings.dtypes) {
    // Inputs in [−1, 1): random, so the tensor cores see realistic bit patterns.
    a = DeviceBuffer();
    b = DeviceBuffer();
    reserve_random(a, static_cast<std::size_t>(max_a), dtype, 0x5eed0001, 1.0f, stream.get());
    reserve_random(b, static_cast<std::size_t>(max_b), dtype, 0x5eed0002, 1.0f, stream.get());
    c.reserve(static_cast<std::size_t>(max_c) * kElementBytes);
    std::size_t done = 0;
    for (const GemmShape& s : shapes) {
      if (ctx.out_of_time()) {
        ctx.say("gemm {}: time budget spent, {} of {} shapes measured", dtype_name(dtype), done,
                shapes.size());
        break;
      }
      try {
        const TimingSummary t =
            time_on_stream(stream.get(), ctx.settings.warmup, ctx.settings.reps,
                           [&] { run_gemm(cublas.get(), s, dtype, a.get(), b.get(), c.get()); });
        Measurement row =
            timed_row(s.kind == model::OpKind::kAttention ? MeasurementKind::kAttention
                                                          : MeasurementKind::kGemm,
                      s.name + "." + s.layout(), dtype_name(dtype), t);
        row.m = s.m;
        row.n = s.n;
        row.k = s.k;
        row.batch = s.batch;
        row.bytes = s.operand_bytes(static_cast<int>(kElementBytes));
        ctx.emit(row);
        guard.success();
      } catch (const Error& e) {
        guard.failure(s.name, e);
      }
      if (++done % 100 == 0)
        ctx.say("gemm {}: {} / {} shapes", dtype_name(dtype), done, shapes.size());
    }
    ctx.say("gemm {}: {} shapes done", dtype_name(dtype), done);
  }
}

void bench_memory_kernels(const BenchContext& ctx, const std::vector<MemoryKernelShape>& shapes) {
  if (shapes.empty()) return;
  const CudaStream stream;
  const cudaStream_t s = stream.get();
  FailureGuard guard(ctx);
  for (gpu::Dtype dtype : ctx.settings.dtypes) {
    // Buffers grow to the largest shape seen; inputs are refilled with random values when
    // they grow, so every kernel reads random data.
    DeviceBuffer x, residual, y, mask, vec_a, vec_b, fp32_rows, fp32_rows2, fp32_big, ids, table;
    std::size_t done = 0;
    for (const MemoryKernelShape& shape : shapes) {
      if (ctx.out_of_time()) {
        ctx.say("memory-bound {}: time budget spent, {} of {} shapes measured", dtype_name(dtype),
                done, shapes.size());
        break;
      }
      try {
        const auto rows = static_cast<std::size_t>(shape.rows);
        const auto cols = static_cast<std::size_t>(shape.cols);
        const std::size_t count = rows * cols;
        std::function<void()> launch;
        switch (shape.kernel) {
          case MemoryKernel::kLayerNorm:
            reserve_random(x, count, dtype, 11, 1.0f, s);
            reserve_random(vec_a, cols, dtype, 12, 1.0f, s);
            reserve_random(vec_b, cols, dtype, 13, 1.0f, s);
            y.reserve(count * kElementBytes);
            fp32_rows.reserve(rows * sizeof(float));
            fp32_rows2.reserve(rows * sizeof(float));
            launch = [&] {
              LYNX_CUDA_CHECK(gpu::layernorm(x.get(), vec_a.get(), vec_b.get(), y.get(),
                                             fp32_rows.as<float>(), fp32_rows2.as<float>(),
                                             shape.rows, shape.cols, dtype, s));
            };
            break;
          case MemoryKernel::kBiasGelu:
            reserve_random(x, count, dtype, 21, 2.0f, s);
            reserve_random(vec_a, cols, dtype, 22, 0.1f, s);
            y.reserve(count * kElementBytes);
            launch = [&] {
              LYNX_CUDA_CHECK(gpu::bias_gelu(x.get(), vec_a.get(), y.get(), shape.rows, shape.cols,
                                             dtype, s));
            };
            break;
          case MemoryKernel::kCausalSoftmax:
            reserve_random(x, count, dtype, 31, 4.0f, s);
            y.reserve(count * kElementBytes);
            launch = [&] {
              // Scale 1/sqrt(head size 128) — the value only changes the math, not the traffic.
              LYNX_CUDA_CHECK(gpu::causal_softmax(x.get(), y.get(), shape.rows, shape.cols,
                                                  shape.seq_len, 0.08838834764f, dtype, s));
            };
            break;
          case MemoryKernel::kDropout:
            reserve_random(x, count, dtype, 41, 1.0f, s);
            y.reserve(count * kElementBytes);
            mask.reserve(count);
            launch = [&] {
              // Keep probability 0.9: Megatron's default attention dropout is 0.1.
              LYNX_CUDA_CHECK(gpu::dropout(x.get(), y.get(), mask.as<std::uint8_t>(), count, 0.9f,
                                           0x0d0d, dtype, s));
            };
            break;
          case MemoryKernel::kDropoutResidual:
            reserve_random(x, count, dtype, 51, 1.0f, s);
            reserve_random(residual, count, dtype, 52, 1.0f, s);
            reserve_random(vec_a, cols, dtype, 53, 0.1f, s);
            y.reserve(count * kElementBytes);
            mask.reserve(count);
            launch = [&] {
              // Keep probability 0.9: Megatron's default hidden dropout is 0.1.
              LYNX_CUDA_CHECK(gpu::dropout_residual(x.get(), vec_a.get(), residual.get(), y.get(),
                                                    mask.as<std::uint8_t>(), shape.rows,
                                                    shape.cols, 0.9f, 0x0e0e, dtype, s));
            };
            break;
          case MemoryKernel::kCrossEntropy:
            reserve_random(x, count, dtype, 61, 4.0f, s);
            fp32_big.reserve(count * sizeof(float));
            fp32_rows.reserve(rows * sizeof(float));
            ids.reserve(rows * sizeof(std::int64_t));
            LYNX_CUDA_CHECK(gpu::fill_random_ids(ids.as<std::int64_t>(), rows, shape.cols, 62, s));
            launch = [&] {
              LYNX_CUDA_CHECK(gpu::cross_entropy(x.get(), ids.as<std::int64_t>(),
                                                 fp32_big.as<float>(), fp32_rows.as<float>(),
                                                 shape.rows, shape.cols, dtype, s));
            };
            break;
          case MemoryKernel::kEmbeddingGather:
            reserve_random(table, static_cast<std::size_t>(shape.table_rows) * cols, dtype, 71,
                           1.0f, s);
            y.reserve(count * kElementBytes);
            ids.reserve(rows * sizeof(std::int64_t));
            LYNX_CUDA_CHECK(
                gpu::fill_random_ids(ids.as<std::int64_t>(), rows, shape.table_rows, 72, s));
            launch = [&] {
              LYNX_CUDA_CHECK(gpu::embedding_gather(ids.as<std::int64_t>(), table.get(), y.get(),
                                                    shape.rows, shape.cols, dtype, s));
            };
            break;
          case MemoryKernel::kElementwise:
            reserve_random(x, count, dtype, 81, 1.0f, s);
            y.reserve(count * kElementBytes);
            launch = [&] {
              LYNX_CUDA_CHECK(gpu::scale_copy(x.get(), y.get(), count, 0.5f, dtype, s));
            };
            break;
        }
        const TimingSummary t = time_on_stream(s, ctx.settings.warmup, ctx.settings.reps, launch);
        Measurement row = timed_row(MeasurementKind::kMemoryBound,
                                    std::string(to_string(shape.kernel)) + ":" + shape.name,
                                    dtype_name(dtype), t);
        row.m = shape.rows;
        row.n = shape.cols;
        row.bytes = memory_kernel_bytes(shape, static_cast<int>(kElementBytes));
        ctx.emit(row);
        guard.success();
      } catch (const Error& e) {
        guard.failure(shape.name, e);
      }
      ++done;
    }
    ctx.say("memory-bound {}: {} shapes done", dtype_name(dtype), done);
  }
}

}  // namespace lynx::calibrate
