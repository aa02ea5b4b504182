// CUDA kernels timed by lynxsim-calibrate and run by live mode: random fill, an empty kernel, and the memory-bound
// kernels of a Megatron-style GPT layer (LayerNorm, bias-GeLU, causal softmax, dropout,
// bias-dropout-residual, vocab cross-entropy, embedding gather) plus plain streams. Math in
// fp32 on 16-bit data; 16-byte vector accesses (8 elements) whenever the row length allows,
// a scalar path otherwise.
#include "gpu/gpu_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace lynx::gpu {

namespace {

constexpr int kThreads = 256;
/// 8 × 16-bit = one 16-byte access.
constexpr int kVec = 8;
/// Grid-stride kernels never launch more blocks than this (enough to fill any GPU many times).
constexpr std::int64_t kMaxBlocks = 1 << 16;

template <typename T>
struct Convert;
template <>
struct Convert<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float v) {
    return __float2bfloat16(v);
  }
};
template <>
struct Convert<__half> {
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_float(float v) { return __float2half(v); }
};

template <typename T>
__device__ __forceinline__ float f32(T v) {
  return Convert<T>::to_float(v);
}
template <typename T>
__device__ __forceinline__ T f16(float v) {
  return Convert<T>::from_float(v);
}

/// V consecutive 16-bit values moved as one access (16 bytes for V = 8).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
/// V consecutive mask bytes.
template <int V>
struct alignas(V) MaskPack {
  std::uint8_t m[V];
};

/// splitmix64 (Steele, Lea, Flood 2014) as a counter-based generator: word i of stream `seed`
/// is mix(seed + (i + 1)·γ) — the same role as Philox in PyTorch's dropout, at one 64-bit
/// mix per 64 random bits.
__device__ __forceinline__ std::uint64_t random64(std::uint64_t seed, std::uint64_t i) {
  constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  std::uint64_t z = seed + (i + 1) * kGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// Uniform in [0, 1) with 24 random bits.
__device__ __forceinline__ float uniform01(std::uint64_t seed, std::uint64_t i) {
  return static_cast<float>(random64(seed, i) >> 40) * (1.0f / 16777216.0f);
}

/// Dropout keep decisions for the V elements of pack p: 16 random bits per element (four
/// elements per 64-bit word), kept when below keep_prob·2^16.
template <int V>
__device__ __forceinline__ void keep_mask(std::uint64_t seed, std::int64_t p,
                                          std::uint32_t threshold16, bool (&keep)[V]) {
  constexpr int kWords = (V + 3) / 4;
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    const std::uint64_t bits = random64(seed, static_cast<std::uint64_t>(p) * kWords + w);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (w * 4 + j < V) keep[w * 4 + j] = ((bits >> (16 * j)) & 0xFFFFu) < threshold16;
  }
}

/// keep_prob as a 16-bit threshold.
std::uint32_t keep_threshold(float keep_prob) {
  return static_cast<std::uint32_t>(std::clamp(keep_prob, 0.0f, 1.0f) * 65536.0f);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum (or max) over the block; every thread gets the result. `scratch` holds 32 floats.
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  const float identity = kMax ? -INFINITY : 0.0f;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : identity;
  if (warp == 0) v = kMax ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();  // scratch may be reused by the next reduction
  return result;
}

int blocks_for(std::int64_t work_items) {
  const std::int64_t blocks = (work_items + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// ---- fills ----------------------------------------------------------------------------------

template <typename T>
__global__ void fill_random_kernel(T* data, std::size_t count, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = f16<T>((2.0f * uniform01(seed, i) - 1.0f) * scale);
}

__global__ void fill_ids_kernel(std::int64_t* ids, std::size_t count, std::int64_t max_id,
                                std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    ids[i] = static_cast<std::int64_t>(random64(seed, i) % static_cast<std::uint64_t>(max_id));
}

__global__ void empty_kernel() {}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(std::uint64_t nanoseconds) {
  const std::uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) __nanosleep(1000);
}

// ---- row kernels (one block per row) --------------------------------------------------------

/// Packs a row holds per thread in registers when the row is short enough (cols <=
/// kThreads·kRowCache·V); longer rows are streamed again for each pass (from L1/L2).
constexpr int kRowCache = 4;

/// The packs of one row as this thread sees them: cached in registers (kCache > 0, loaded
/// once: one HBM read per element however many passes) or re-read per pass (kCache = 0).
template <typename T, int V, int kCache>
struct RowSource {
  const Pack<T, V>* row;
  std::int64_t packs;
  Pack<T, V> cache[kCache > 0 ? kCache : 1];

  __device__ RowSource(const Pack<T, V>* row_in, std::int64_t packs_in)
      : row(row_in), packs(packs_in) {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int c = 0; c < kCache; ++c) {
        const std::int64_t p = threadIdx.x + static_cast<std::int64_t>(c) * blockDim.x;
        if (p < packs) cache[c] = row[p];
      }
    }
  }
  /// f(pack index, pack) for every pack of this thread.
  template <typename F>
  __device__ __forceinline__ void for_each(F&& f) const {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int c = 0; c < kCache; ++c) {
        const std::int64_t p = threadIdx.x + static_cast<std::int64_t>(c) * blockDim.x;
        if (p < packs) f(p, cache[c]);
      }
    } else {
      for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) f(p, row[p]);
    }
  }
};

template <typename T, int V, int kCache>
__global__ void layernorm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                 const T* __restrict__ beta, T* __restrict__ y,
                                 float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                 std::int64_t cols) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const RowSource<T, V, kCache> src(reinterpret_cast<const Pack<T, V>*>(x + row * cols), cols / V);
  Pack<T, V>* yr = reinterpret_cast<Pack<T, V>*>(y + row * cols);
  const Pack<T, V>* g = reinterpret_cast<const Pack<T, V>*>(gamma);
  const Pack<T, V>* b = reinterpret_cast<const Pack<T, V>*>(beta);

  // Two-pass mean and variance (numerically safer than E[x²] − E[x]²).
  float sum = 0.0f;
  src.for_each([&](std::int64_t, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j) sum += f32(in.v[j]);
  });
  const float mean = block_reduce<false>(sum, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  src.for_each([&](std::int64_t, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = f32(in.v[j]) - mean;
      squares += d * d;
    }
  });
  const float variance = block_reduce<false>(squares, scratch) / static_cast<float>(cols);
  const float rstd = rsqrtf(variance + 1e-5f);
  src.for_each([&](std::int64_t p, const Pack<T, V>& in) {
    const Pack<T, V> gp = g[p], bp = b[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j)
      out.v[j] = f16<T>((f32(in.v[j]) - mean) * rstd * f32(gp.v[j]) + f32(bp.v[j]));
    yr[p] = out;
  });
  if (threadIdx.x == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

template <typename T, int V, int kCache>
__global__ void causal_softmax_kernel(const T* __restrict__ x, T* __restrict__ y,
                                      std::int64_t cols, std::int64_t seq_len, float scale) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t query = row % seq_len;  // columns after the query position are masked
  const RowSource<T, V, kCache> src(reinterpret_cast<const Pack<T, V>*>(x + row * cols), cols / V);
  Pack<T, V>* yr = reinterpret_cast<Pack<T, V>*>(y + row * cols);

  float local_max = -INFINITY;
  src.for_each([&](std::int64_t p, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (p * V + j <= query) local_max = fmaxf(local_max, f32(in.v[j]) * scale);
  });
  const float row_max = block_reduce<true>(local_max, scratch);
  float local_sum = 0.0f;
  src.for_each([&](std::int64_t p, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (p * V + j <= query) local_sum += __expf(f32(in.v[j]) * scale - row_max);
  });
  const float inverse_sum = 1.0f / block_reduce<false>(local_sum, scratch);
  src.for_each([&](std::int64_t p, const Pack<T, V>& in) {
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j)
      out.v[j] = f16<T>(p * V + j <= query ? __expf(f32(in.v[j]) * scale - row_max) * inverse_sum
                                           : 0.0f);
    yr[p] = out;
  });
}

template <typename T, int V, int kCache>
__global__ void cross_entropy_kernel(const T* __restrict__ logits,
                                     const std::int64_t* __restrict__ targets,
                                     float* __restrict__ probs, float* __restrict__ loss,
                                     std::int64_t cols) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const RowSource<T, V, kCache> src(reinterpret_cast<const Pack<T, V>*>(logits + row * cols),
                                    cols / V);
  float* pr = probs + row * cols;

  float local_max = -INFINITY;
  src.for_each([&](std::int64_t, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j) local_max = fmaxf(local_max, f32(in.v[j]));
  });
  const float row_max = block_reduce<true>(local_max, scratch);
  float local_sum = 0.0f;
  src.for_each([&](std::int64_t, const Pack<T, V>& in) {
#pragma unroll
    for (int j = 0; j < V; ++j) local_sum += __expf(f32(in.v[j]) - row_max);
  });
  const float sum = block_reduce<false>(local_sum, scratch);
  const float inverse_sum = 1.0f / sum;
  src.for_each([&](std::int64_t p, const Pack<T, V>& in) {
    float out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = __expf(f32(in.v[j]) - row_max) * inverse_sum;
    if constexpr (V % 4 == 0) {
      // 16-byte stores of the fp32 probabilities (rows start 32-byte aligned: cols % 8 == 0).
#pragma unroll
      for (int j = 0; j < V; j += 4)
        *reinterpret_cast<float4*>(pr + p * V + j) =
            make_float4(out[j], out[j + 1], out[j + 2], out[j + 3]);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) pr[p * V + j] = out[j];
    }
  });
  if (threadIdx.x == 0) {
    const std::int64_t target = targets[row] % cols;
    loss[row] = logf(sum) + row_max - f32(logits[row * cols + target]);
  }
}

template <typename T, int V>
__global__ void embedding_gather_kernel(const std::int64_t* __restrict__ ids,
                                        const T* __restrict__ table, T* __restrict__ y,
                                        std::int64_t cols) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t id = ids[row];
  const Pack<T, V>* src = reinterpret_cast<const Pack<T, V>*>(table + id * cols);
  Pack<T, V>* dst = reinterpret_cast<Pack<T, V>*>(y + row * cols);
  for (std::int64_t p = threadIdx.x; p < cols / V; p += blockDim.x) dst[p] = src[p];
}

// ---- flat elementwise kernels (grid-stride over packs) --------------------------------------

template <typename T, int V>
__global__ void bias_gelu_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                 T* __restrict__ y, std::int64_t packs, std::int64_t cols) {
  // tanh approximation: 0.5·v·(1 + tanh(√(2/π)·(v + 0.044715·v³))) (Hendrycks & Gimpel 2016).
  constexpr float kSqrt2OverPi = 0.7978845608f;
  const std::int64_t col_packs = cols / V;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    const Pack<T, V> b = reinterpret_cast<const Pack<T, V>*>(bias)[p % col_packs];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = f32(in.v[j]) + f32(b.v[j]);
      out.v[j] = f16<T>(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v))));
    }
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
  }
}

template <typename T, int V>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y,
                               std::uint8_t* __restrict__ mask, std::int64_t packs,
                               float keep_prob, std::uint32_t threshold16, std::uint64_t seed) {
  const float inverse_keep = 1.0f / keep_prob;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    Pack<T, V> out;
    MaskPack<V> m;
    bool keep[V];
    keep_mask<V>(seed, p, threshold16, keep);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      m.m[j] = keep[j] ? 1 : 0;
      out.v[j] = f16<T>(keep[j] ? f32(in.v[j]) * inverse_keep : 0.0f);
    }
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
    reinterpret_cast<MaskPack<V>*>(mask)[p] = m;
  }
}

template <typename T, int V>
__global__ void dropout_residual_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                        const T* __restrict__ residual, T* __restrict__ y,
                                        std::uint8_t* __restrict__ mask, std::int64_t packs,
                                        std::int64_t cols, float keep_prob,
                                        std::uint32_t threshold16, std::uint64_t seed) {
  const float inverse_keep = 1.0f / keep_prob;
  const std::int64_t col_packs = cols / V;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    const Pack<T, V> res = reinterpret_cast<const Pack<T, V>*>(residual)[p];
    const Pack<T, V> b = reinterpret_cast<const Pack<T, V>*>(bias)[p % col_packs];
    Pack<T, V> out;
    MaskPack<V> m;
    bool keep[V];
    keep_mask<V>(seed, p, threshold16, keep);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      m.m[j] = keep[j] ? 1 : 0;
      const float dropped = keep[j] ? (f32(in.v[j]) + f32(b.v[j])) * inverse_keep : 0.0f;
      out.v[j] = f16<T>(f32(res.v[j]) + dropped);
    }
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
    reinterpret_cast<MaskPack<V>*>(mask)[p] = m;
  }
}

template <typename T, int V>
__global__ void scale_copy_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t packs,
                                  float scale) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = f16<T>(f32(in.v[j]) * scale);
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
  }
}

__global__ void limited_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                    std::size_t words) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// ---- dispatch -------------------------------------------------------------------------------

template <typename T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) with T the CUDA type of `dtype`, then returns the launch status.
template <typename F>
cudaError_t with_type(Dtype dtype, F&& f) {
  if (dtype == Dtype::kBf16) f(TypeTag<__nv_bfloat16>{});
  else f(TypeTag<__half>{});
  return cudaGetLastError();
}

bool vectorizable(std::int64_t cols) { return cols % kVec == 0; }

}  // namespace

cudaError_t fill_random(void* data, std::size_t count, Dtype dtype, std::uint64_t seed,
                        float scale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_random_kernel<T><<<blocks_for(static_cast<std::int64_t>(count)), kThreads, 0, stream>>>(
        static_cast<T*>(data), count, seed, scale);
  });
}

cudaError_t fill_random_ids(std::int64_t* ids, std::size_t count, std::int64_t max_id,
                            std::uint64_t seed, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (max_id < 1) return cudaErrorInvalidValue;
  fill_ids_kernel<<<blocks_for(static_cast<std::int64_t>(count)), kThreads, 0, stream>>>(
      ids, count, max_id, seed);
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t hold_stream(cudaStream_t stream, std::uint64_t nanoseconds) {
  hold_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

/// Launches a row kernel K<T, V, kCache> with V = 8 when cols allows 16-byte accesses, and the
/// smallest register cache (1, 2 or kRowCache packs per thread) that holds the row — a larger
/// one costs registers, hence occupancy, which a memory-bound kernel needs; longer rows stream.
#define LYNX_LAUNCH_ROW_KERNEL_V(K, V, grid, stream, packs, ...)                            \
  do {                                                                                     \
    const std::int64_t per_thread = ((packs) + kThreads - 1) / kThreads;                   \
    if (per_thread <= 1) K<T, V, 1><<<grid, kThreads, 0, stream>>>(__VA_ARGS__);           \
    else if (per_thread <= 2) K<T, V, 2><<<grid, kThreads, 0, stream>>>(__VA_ARGS__);      \
    else if (per_thread <= kRowCache)                                                      \
      K<T, V, kRowCache><<<grid, kThreads, 0, stream>>>(__VA_ARGS__);                      \
    else K<T, V, 0><<<grid, kThreads, 0, stream>>>(__VA_ARGS__);                           \
  } while (false)
#define LYNX_LAUNCH_ROW_KERNEL(K, grid, stream, cols, ...)                                   \
  do {                                                                                     \
    if (vectorizable(cols))                                                                \
      LYNX_LAUNCH_ROW_KERNEL_V(K, kVec, grid, stream, (cols) / kVec, __VA_ARGS__);         \
    else                                                                                   \
      LYNX_LAUNCH_ROW_KERNEL_V(K, 1, grid, stream, (cols), __VA_ARGS__);                   \
  } while (false)

cudaError_t layernorm(const void* x, const void* gamma, const void* beta, void* y, float* mean,
                      float* rstd, std::int64_t rows, std::int64_t cols, Dtype dtype,
                      cudaStream_t stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto grid = static_cast<unsigned>(rows);
    LYNX_LAUNCH_ROW_KERNEL(layernorm_kernel, grid, stream, cols, static_cast<const T*>(x),
                           static_cast<const T*>(gamma), static_cast<const T*>(beta),
                           static_cast<T*>(y), mean, rstd, cols);
  });
}

cudaError_t bias_gelu(const void* x, const void* bias, void* y, std::int64_t rows,
                      std::int64_t cols, Dtype dtype, cudaStream_t stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::int64_t count = rows * cols;
    if (vectorizable(cols))
      bias_gelu_kernel<T, kVec><<<blocks_for(count / kVec), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(y), count / kVec,
          cols);
    else
      bias_gelu_kernel<T, 1><<<blocks_for(count), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(y), count, cols);
  });
}

cudaError_t causal_softmax(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                           std::int64_t seq_len, float scale, Dtype dtype, cudaStream_t stream) {
  if (rows < 1 || cols < 1 || seq_len < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto grid = static_cast<unsigned>(rows);
    LYNX_LAUNCH_ROW_KERNEL(causal_softmax_kernel, grid, stream, cols, static_cast<const T*>(x),
                           static_cast<T*>(y), cols, seq_len, scale);
  });
}

cudaError_t dropout(const void* x, void* y, std::uint8_t* mask, std::size_t count,
                    float keep_prob, std::uint64_t seed, Dtype dtype, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const auto n = static_cast<std::int64_t>(count);
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (vectorizable(n))
      dropout_kernel<T, kVec><<<blocks_for(n / kVec), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), mask, n / kVec, keep_prob,
          keep_threshold(keep_prob), seed);
    else
      dropout_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), mask, n, keep_prob,
          keep_threshold(keep_prob), seed);
  });
}

cudaError_t dropout_residual(const void* x, const void* bias, const void* residual, void* y,
                             std::uint8_t* mask, std::int64_t rows, std::int64_t cols,
                             float keep_prob, std::uint64_t seed, Dtype dtype,
                             cudaStream_t stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::int64_t count = rows * cols;
    if (vectorizable(cols))
      dropout_residual_kernel<T, kVec><<<blocks_for(count / kVec), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual),
          static_cast<T*>(y), mask, count / kVec, cols, keep_prob, keep_threshold(keep_prob), seed);
    else
      dropout_residual_kernel<T, 1><<<blocks_for(count), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual),
          static_cast<T*>(y), mask, count, cols, keep_prob, keep_threshold(keep_prob), seed);
  });
}

cudaError_t cross_entropy(const void* logits, const std::int64_t* targets, float* probs,
                          float* loss, std::int64_t rows, std::int64_t cols, Dtype dtype,
                          cudaStream_t stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto grid = static_cast<unsigned>(rows);
    LYNX_LAUNCH_ROW_KERNEL(cross_entropy_kernel, grid, stream, cols, static_cast<const T*>(logits),
                           targets, probs, loss, cols);
  });
}

cudaError_t embedding_gather(const std::int64_t* ids, const void* table, void* y,
                             std::int64_t rows, std::int64_t cols, Dtype dtype,
                             cudaStream_t stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable(cols))
      embedding_gather_kernel<T, kVec><<<grid, kThreads, 0, stream>>>(
          ids, static_cast<const T*>(table), static_cast<T*>(y), cols);
    else
      embedding_gather_kernel<T, 1><<<grid, kThreads, 0, stream>>>(
          ids, static_cast<const T*>(table), static_cast<T*>(y), cols);
  });
}

cudaError_t scale_copy(const void* x, void* y, std::size_t count, float scale, Dtype dtype,
                       cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const auto n = static_cast<std::int64_t>(count);
  return with_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (vectorizable(n))
      scale_copy_kernel<T, kVec><<<blocks_for(n / kVec), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), n / kVec, scale);
    else
      scale_copy_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), n, scale);
  });
}

cudaError_t limited_copy(const void* src, void* dst, std::size_t bytes, int blocks,
                         cudaStream_t stream) {
  if (bytes % sizeof(uint4) != 0 || blocks < 1) return cudaErrorInvalidValue;
  limited_copy_kernel<<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(src),
                                                  static_cast<uint4*>(dst), bytes / sizeof(uint4));
  return cudaGetLastError();
}

}  // namespace lynx::gpu
