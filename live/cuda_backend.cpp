#include "live/cuda_backend.hpp"

#include "common/bytes.hpp"
#include "common/clock.hpp"
#include "common/error.hpp"
#include "gpu/cublas_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/gpu_kernels.hpp"
#include "gpu/gpu_runtime.hpp"
#include "live/bootstrap_plan.hpp"
#include "live/buffer_ledger.hpp"
#include "live/cpu_reference.hpp"
#include "live/dry_run.hpp"
#include "live/measured_gather.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace lynx::live {

namespace {

constexpr gpu::Dtype kBf16 = gpu::Dtype::kBf16;
constexpr float kKeepProb = 0.9f;  // Megatron's default dropout 0.1
/// The HBM-stream kernel works through a buffer of this many bf16 values per launch.
constexpr std::size_t kStreamChunkElements = std::size_t{64} << 20;  // 128 MiB

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

/// `count` bf16 values of device memory as floats (synchronous copy: checks only).
std::vector<float> download_bf16(const void* device, std::size_t count) {
  std::vector<std::uint16_t> bits(count);
  LYNX_CUDA_CHECK(cudaMemcpy(bits.data(), device, count * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

std::vector<std::uint8_t> download_mask(const std::uint8_t* device, std::size_t count) {
  std::vector<std::uint8_t> out(count);
  LYNX_CUDA_CHECK(cudaMemcpy(out.data(), device, count, cudaMemcpyDeviceToHost));
  return out;
}

/// A random bf16 device buffer of `count` values (never zeros: uniform in [−scale, scale)).
gpu::DeviceBuffer random_buffer(std::size_t count, std::uint64_t seed, float scale, cudaStream_t stream) {
  gpu::DeviceBuffer b(std::max<std::size_t>(count, 8) * 2);
  LYNX_CUDA_CHECK(gpu::fill_random(b.get(), std::max<std::size_t>(count, 8), kBf16, seed, scale, stream));
  return b;
}

WallClock::time_point deadline_after(WallClock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(seconds));
}

/// A call on a nonblocking communicator returns ncclInProgress while NCCL finishes it in the
/// background: that is a start, anything else but success a failure.
void check_nccl_started(ncclResult_t status, const char* call) {
  if (status != ncclInProgress) gpu::check_nccl(status, call, __FILE__, __LINE__);
}

/// Polls a nonblocking communicator until its last call is through (ncclSuccess), failed (an
/// error), or `deadline` passed (ncclInProgress).
ncclResult_t settle(ncclComm_t comm, WallClock::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm, &state);
    if (status != ncclSuccess) return status;
    if (state != ncclInProgress || WallClock::now() > deadline) return state;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

/// Frees cudaMallocHost memory.
struct PinnedFree {
  void operator()(void* p) const { (void)cudaFreeHost(p); }
};

/// Per rank: its device, streams, cuBLAS handles, work buffers, events and allocator.
struct Rank {
  int device = 0;
  std::vector<gpu::CudaStream> streams;           ///< one per OpStream::stream_names entry
  std::vector<std::unique_ptr<gpu::CublasHandle>> cublas;  ///< per stream
  gpu::DeviceBuffer gemm_a, gemm_b, static_memory, kernel_x, residual, params, ids, comm_send, comm_recv;
  std::vector<gpu::DeviceBuffer> gemm_c, kernel_y, mask, probs;  ///< per stream (outputs)
  gpu::DeviceBuffer stats;  ///< LayerNorm mean/rstd, cross-entropy loss (fp32)
  cudaMemPool_t pool = nullptr;
  std::vector<cudaEvent_t> start, end;  ///< per op of this rank (indexed by op index)
  cudaEvent_t base = nullptr;
  std::unique_ptr<BufferLedger> ledger;
  std::unique_ptr<void, PinnedFree> pinned;  ///< host memory of the communication stand-in
};

}  // namespace

struct CudaBackend::State {
  BootstrapPlan plan;
  InProcessExchange alone;
  IdExchange* exchange = &alone;
  std::vector<int> local;   ///< the ranks this process runs (plan.process_ranks of its node)
  std::vector<Rank> ranks;  ///< per rank of the plan; set up for `local` only
  /// Per plan group (OpStream::comms first, so op.comm indexes it, then the pipeline pairs):
  /// one NCCL communicator per member (member order; null for members on other nodes).
  std::vector<std::vector<ncclComm_t>> comms;
  /// Directed pipeline pair (src, dst) -> its group: [0] on src, [1] on dst.
  std::map<std::pair<int, int>, int> pairs;
  std::string device_name;
  std::size_t num_ops = 0;

  ~State() {
    for (auto& c : comms)
      for (ncclComm_t comm : c)
        if (comm) (void)ncclCommDestroy(comm);
    for (const Rank& rk : ranks) {
      if (rk.start.empty() && rk.base == nullptr) continue;  // another node's, or prepare failed first
      (void)cudaSetDevice(rk.device);
      for (cudaEvent_t e : rk.start)
        if (e) (void)cudaEventDestroy(e);
      for (cudaEvent_t e : rk.end)
        if (e) (void)cudaEventDestroy(e);
      if (rk.base) (void)cudaEventDestroy(rk.base);
    }
  }
  /// Aborts every communicator of this process (stuck NCCL kernels end with it) and forgets them.
  void abort_all() {
    for (auto& c : comms)
      for (ncclComm_t comm : c)
        if (comm) (void)ncclCommAbort(comm);
    comms.clear();
    pairs.clear();
  }
  std::vector<ncclComm_t> all_comms() const {
    std::vector<ncclComm_t> out;
    for (const auto& c : comms)
      for (ncclComm_t comm : c)
        if (comm) out.push_back(comm);
    return out;
  }
};

CudaBackend::CudaBackend(CudaOptions options) : options_(options) {}
CudaBackend::~CudaBackend() = default;

std::string CudaBackend::device() const { return state_ ? state_->device_name : "CUDA (not prepared)"; }

void check_kernels_against_cpu() {
  const gpu::CudaStream stream;
  const cudaStream_t s = stream.get();
  const std::int64_t rows = 64, cols = 256;
  const auto count = static_cast<std::size_t>(rows * cols);
  const gpu::DeviceBuffer x = random_buffer(count, 101, 2.0f, s), gamma = random_buffer(cols, 102, 1.0f, s),
                          beta = random_buffer(cols, 103, 1.0f, s), residual = random_buffer(count, 104, 1.0f, s);
  gpu::DeviceBuffer y(count * 2), mask(count), stats(2 * rows * sizeof(float));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> hx = download_bf16(x.get(), count), hg = download_bf16(gamma.get(), cols),
                           hb = download_bf16(beta.get(), cols), hr = download_bf16(residual.get(), count);
  // bf16 outputs: 8 significant bits, so about 0.4% relative rounding, plus fp32 order effects.
  constexpr float kRel = 0.02f, kAbs = 0.02f;

  LYNX_CUDA_CHECK(gpu::layernorm(x.get(), gamma.get(), beta.get(), y.get(), stats.as<float>(),
                                 stats.as<float>() + rows, rows, cols, kBf16, s));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  check_close("layernorm", download_bf16(y.get(), count), layernorm_reference(hx, hg, hb, rows, cols), kRel, kAbs);

  LYNX_CUDA_CHECK(gpu::bias_gelu(x.get(), beta.get(), y.get(), rows, cols, kBf16, s));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  check_close("bias_gelu", download_bf16(y.get(), count), bias_gelu_reference(hx, hb, rows, cols), kRel, kAbs);

  const std::int64_t seq = 64, srows = 4 * seq;  // 4 heads of a 64-token sequence
  const auto scount = static_cast<std::size_t>(srows * seq);
  LYNX_CUDA_CHECK(gpu::causal_softmax(x.get(), y.get(), srows, seq, seq, 0.125f, kBf16, s));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> sx(hx.begin(), hx.begin() + static_cast<std::ptrdiff_t>(scount));
  check_close("causal_softmax", download_bf16(y.get(), scount), causal_softmax_reference(sx, srows, seq, seq, 0.125f),
              kRel, 0.002f);

  LYNX_CUDA_CHECK(gpu::dropout(x.get(), y.get(), mask.as<std::uint8_t>(), count, kKeepProb, 7, kBf16, s));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<std::uint8_t> m1 = download_mask(mask.as<std::uint8_t>(), count);
  check_keep_fraction("dropout", m1, kKeepProb, 0.02f);
  check_close("dropout", download_bf16(y.get(), count), dropout_reference(hx, m1, kKeepProb), kRel, kAbs);

  LYNX_CUDA_CHECK(gpu::dropout_residual(x.get(), beta.get(), residual.get(), y.get(), mask.as<std::uint8_t>(), rows,
                                        cols, kKeepProb, 8, kBf16, s));
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<std::uint8_t> m2 = download_mask(mask.as<std::uint8_t>(), count);
  check_keep_fraction("dropout_residual", m2, kKeepProb, 0.02f);
  check_close("dropout_residual", download_bf16(y.get(), count),
              dropout_residual_reference(hx, hb, hr, m2, rows, cols, kKeepProb), kRel, kAbs);

  // One cuBLAS GEMM as well: C[32×48] = A[32×64]·B[64×48].
  const gpu::CublasHandle cublas(s);
  gpu::GemmDims d;
  d.m = 32, d.n = 48, d.k = 64;
  gpu::row_major_gemm(cublas.get(), d, kBf16, x.get(), residual.get(), y.get());
  LYNX_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> expected(static_cast<std::size_t>(d.m * d.n));
  for (std::int64_t i = 0; i < d.m; ++i)
    for (std::int64_t j = 0; j < d.n; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < d.k; ++k)
        sum += static_cast<double>(hx[static_cast<std::size_t>(i * d.k + k)]) * hr[static_cast<std::size_t>(k * d.n + j)];
      expected[static_cast<std::size_t>(i * d.n + j)] = static_cast<float>(sum);
    }
  check_close("gemm_bf16", download_bf16(y.get(), expected.size()), expected, kRel, 0.1f);
}

void CudaBackend::prepare(const OpStream& ops) {
  state_ = std::make_unique<State>();
  State& st = *state_;
  st.num_ops = ops.ops.size();
  if (options_.exchange) st.exchange = options_.exchange;
  IdExchange& exchange = *st.exchange;
  const int me = exchange.process();
  st.plan = plan_bootstrap(ops);
  LYNX_CHECK(exchange.processes() == st.plan.processes, "{} processes for {} nodes (check_launch runs first)",
             exchange.processes(), st.plan.processes);
  st.local = st.plan.process_ranks.at(static_cast<std::size_t>(me));
  const auto device_of = [&](int r) { return st.plan.rank_device.at(static_cast<std::size_t>(r)); };
  const int ranks = static_cast<int>(ops.gpu_names.size());
  const ParallelSpec& par = ops.scenario.parallel;
  // Up front on every node (any failure ends the whole job): its GPUs, then their memory.
  int visible = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&visible); status != cudaSuccess)
    fail(ErrorCode::kSystemFailure, "live: no CUDA GPU can be used here ({}: {}); `lynxsim live --dry-run` and `--backend host` need none",
         cudaGetErrorName(status), cudaGetErrorString(status));
  int devices_used = 0;
  for (int r : st.local) devices_used = std::max(devices_used, device_of(r) + 1);
  if (devices_used > visible && st.plan.processes == 1)
    fail(ErrorCode::kTooManyGpus, "live: the plan needs {} GPUs (tp {} x pp {} x dp {}), {} visible", ranks, par.tp, par.pp,
         par.dp, visible);
  if (devices_used > visible)
    fail(ErrorCode::kTooManyGpus, "live: node {} runs {} of the plan's {} GPUs (tp {} x pp {} x dp {}, {} per node) on devices "
         "0-{}, {} visible",
         me, st.local.size(), ranks, par.tp, par.pp, par.dp, ops.scenario.hardware.gpus_per_node, devices_used - 1, visible);
  cudaDeviceProp prop{};
  LYNX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_of(st.local.front())));
  st.device_name = fmt::format("{} x{}", prop.name, ranks);
  if (st.plan.processes > 1) st.device_name += fmt::format(" ({} nodes)", st.plan.processes);

  // Work-buffer sizes: the largest operands of any op of a rank (elements of 2 bytes).
  struct Sizes {
    std::size_t a = 8, b = 8, c = 8, x = 8, comm = 8, probs = 8, ids = 8, vocab = 8, rows = 8, cols = 8;
    std::vector<bool> kernel_streams;  ///< streams that run GEMMs or kernels (get output buffers)
    std::size_t standin_bytes = 0;     ///< largest communication stand-in copy
  };
  std::vector<Sizes> sizes(static_cast<std::size_t>(ranks));
  for (Sizes& z : sizes) z.kernel_streams.assign(ops.stream_names.size(), false);
  for (const LiveOp& op : ops.ops) {
    Sizes& z = sizes[static_cast<std::size_t>(op.rank)];
    if (op.launch == LaunchKind::kGemm || op.launch == LaunchKind::kBatchedGemm || op.launch == LaunchKind::kMemoryBound)
      z.kernel_streams[static_cast<std::size_t>(op.stream)] = true;
    const auto u = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(v, 0)); };
    if (op.launch == LaunchKind::kGemm || op.launch == LaunchKind::kBatchedGemm) {
      z.a = std::max({z.a, u(op.m * op.k * op.batch), u(op.m2 * op.k2 * op.batch)});
      z.b = std::max({z.b, u(op.k * op.n * op.batch), u(op.k2 * op.n2 * op.batch)});
      z.c = std::max({z.c, u(op.m * op.n * op.batch), u(op.m2 * op.n2 * op.batch)});
    } else if (op.launch == LaunchKind::kMemoryBound) {
      z.rows = std::max(z.rows, u(op.m));
      z.cols = std::max(z.cols, u(op.n));
      z.x = std::max(z.x, op.kernel == Kernel::kStream ? std::min(kStreamChunkElements, u(static_cast<std::int64_t>(op.bytes / 4)))
                                                      : u(op.m * op.n));
      if (op.kernel == Kernel::kCrossEntropy) z.probs = std::max(z.probs, u(op.m * op.n));
      if (op.kernel == Kernel::kEmbedding || op.kernel == Kernel::kCrossEntropy) z.ids = std::max(z.ids, u(op.m));
      if (op.kernel == Kernel::kEmbedding) z.vocab = std::max(z.vocab, u(ops.scenario.model.vocab / ops.scenario.parallel.tp));
      if (op.kernel == Kernel::kLayerNorm || op.kernel == Kernel::kBiasGelu || op.kernel == Kernel::kDropoutResidual)
        z.x = std::max(z.x, u(op.m * op.n));
    } else if (op.launch != LaunchKind::kNone) {
      z.comm = std::max(z.comm, static_cast<std::size_t>(op.bytes / 2) + 8);
      if (op.launch == LaunchKind::kStandinCopy) z.standin_bytes = std::max(z.standin_bytes, static_cast<std::size_t>(op.bytes));
    }
  }
  const std::size_t num_streams = ops.stream_names.size();
  const std::int64_t reserve = static_cast<std::int64_t>(ops.scenario.hardware.memory_reserve_bytes);

  // Refuse up front what cannot fit, with numbers.
  for (int r : st.local) {
    const Sizes& z = sizes[static_cast<std::size_t>(r)];
    const std::int64_t hidden = ops.scenario.model.hidden;
    const auto outputs = static_cast<std::size_t>(std::count(z.kernel_streams.begin(), z.kernel_streams.end(), true));
    // Inputs (A, B, x, residual, parameters, send) + per kernel stream (C, y, mask, probs).
    const auto work = static_cast<std::int64_t>(
        2 * (z.a + z.b + z.x * 2 + z.comm * 2 + std::max(z.vocab * static_cast<std::size_t>(hidden), z.cols)) + z.ids * 8 +
        z.rows * 8 + outputs * (2 * z.c + 2 * z.x + z.x + 4 * z.probs));
    const std::int64_t static_bytes = std::max<std::int64_t>(0, ops.static_bytes[static_cast<std::size_t>(r)] - reserve);
    const std::int64_t activations = ops.predicted_peak_bytes[static_cast<std::size_t>(r)] - ops.static_bytes[static_cast<std::size_t>(r)];
    std::size_t free_bytes = 0, total_bytes = 0;
    LYNX_CUDA_CHECK(cudaSetDevice(device_of(r)));
    LYNX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::int64_t need = static_bytes + activations + work;
    if (need > static_cast<std::int64_t>(free_bytes))
      fail(ErrorCode::kSystemFailure, "live: rank {} (GPU {}) needs {:.2f} GiB (static {:.2f} GiB without the {:.2f} GiB reserve, activation "
           "peak {:.2f} GiB, work buffers {:.2f} GiB), {:.2f} GiB free of {:.2f} GiB",
           r, device_of(r), to_gib(need), to_gib(static_bytes), to_gib(reserve), to_gib(activations), to_gib(work),
           to_gib(static_cast<std::int64_t>(free_bytes)), to_gib(static_cast<std::int64_t>(total_bytes)));
  }

  LYNX_CUDA_CHECK(cudaSetDevice(device_of(st.local.front())));
  check_kernels_against_cpu();

  st.ranks.resize(static_cast<std::size_t>(ranks));
  for (int r : st.local) {
    Rank& rk = st.ranks[static_cast<std::size_t>(r)];
    const Sizes& z = sizes[static_cast<std::size_t>(r)];
    rk.device = device_of(r);
    LYNX_CUDA_CHECK(cudaSetDevice(rk.device));
    for (std::size_t s = 0; s < num_streams; ++s) rk.streams.emplace_back();
    const cudaStream_t s0 = rk.streams[0].get();
    for (std::size_t s = 0; s < num_streams; ++s) rk.cublas.push_back(std::make_unique<gpu::CublasHandle>(rk.streams[s].get()));
    rk.gemm_a = random_buffer(z.a, 1000 + static_cast<std::uint64_t>(r), 1.0f, s0);
    rk.gemm_b = random_buffer(z.b, 2000 + static_cast<std::uint64_t>(r), 1.0f, s0);
    rk.kernel_x = random_buffer(z.x, 3000 + static_cast<std::uint64_t>(r), 2.0f, s0);
    rk.residual = random_buffer(z.x, 4000 + static_cast<std::uint64_t>(r), 1.0f, s0);
    // Parameters: LayerNorm γ/β and biases (one row of `cols`), the embedding table (vocab × h).
    rk.params = random_buffer(std::max(z.vocab * static_cast<std::size_t>(ops.scenario.model.hidden), z.cols),
                              5000 + static_cast<std::uint64_t>(r), 1.0f, s0);
    rk.comm_send = random_buffer(z.comm, 6000 + static_cast<std::uint64_t>(r), 1.0f, s0);
    rk.comm_recv = gpu::DeviceBuffer(z.comm * 2);
    if (z.standin_bytes > 0) {
      void* pinned = nullptr;
      LYNX_CUDA_CHECK(cudaMallocHost(&pinned, z.standin_bytes));
      rk.pinned.reset(pinned);
    }
    rk.ids = gpu::DeviceBuffer(z.ids * 8);
    LYNX_CUDA_CHECK(gpu::fill_random_ids(rk.ids.as<std::int64_t>(), z.ids, static_cast<std::int64_t>(z.vocab), 7000, s0));
    rk.stats = gpu::DeviceBuffer(2 * z.rows * sizeof(float));  // LayerNorm mean + rstd, loss per row
    for (std::size_t s = 0; s < num_streams; ++s) {
      const bool used = z.kernel_streams[s];
      rk.gemm_c.emplace_back(used ? z.c * 2 : 0);
      rk.kernel_y.emplace_back(used ? z.x * 2 : 0);
      rk.mask.emplace_back(used ? z.x : 0);
      rk.probs.emplace_back(used ? z.probs * 4 : 0);
    }
    // Weights, gradients and optimizer state: resident all along, as planned (the reserve is
    // the CUDA context, workspaces and fragmentation, not allocated here).
    const std::int64_t static_bytes = std::max<std::int64_t>(0, ops.static_bytes[static_cast<std::size_t>(r)] - reserve);
    rk.static_memory = gpu::DeviceBuffer(static_cast<std::size_t>(static_bytes));
    LYNX_CUDA_CHECK(cudaMemsetAsync(rk.static_memory.get(), 1, static_cast<std::size_t>(static_bytes), s0));
    LYNX_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&rk.pool, rk.device));
    std::uint64_t keep = UINT64_MAX;  // keep freed pool memory mapped: no re-mapping inside an iteration
    LYNX_CUDA_CHECK(cudaMemPoolSetAttribute(rk.pool, cudaMemPoolAttrReleaseThreshold, &keep));
    rk.start.assign(ops.ops.size(), nullptr);
    rk.end.assign(ops.ops.size(), nullptr);
    for (int i : ops.rank_ops[static_cast<std::size_t>(r)]) {
      LYNX_CUDA_CHECK(cudaEventCreate(&rk.start[static_cast<std::size_t>(i)]));
      LYNX_CUDA_CHECK(cudaEventCreate(&rk.end[static_cast<std::size_t>(i)]));
    }
    LYNX_CUDA_CHECK(cudaEventCreate(&rk.base));
    LYNX_CUDA_CHECK(cudaStreamSynchronize(s0));
  }

  // NCCL: one communicator per OpStream communicator and per directed pipeline pair, in the
  // plan's one order on every process. Each id comes from its owner's ncclGetUniqueId through
  // the exchange (in this process for one node); the members on this node join with
  // ncclCommInitRank, together in one group (one thread drives several GPUs). One node takes
  // the same path: ncclCommInitAll is exactly this with every member local.
  static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "NCCL_UNIQUE_ID_BYTES changed");
  check_same_as_process0(exchange, ops.sim.result.event_fingerprint, "the op stream's event fingerprint",
                         options_.limits.comm_init_s);
  const std::vector<NcclIdBytes> ids = exchange_ids(
      exchange, st.plan,
      [] {
        ncclUniqueId id;
        LYNX_NCCL_CHECK(ncclGetUniqueId(&id));
        NcclIdBytes bytes;
        std::memcpy(bytes.data(), &id, sizeof id);
        return bytes;
      },
      options_.limits.comm_init_s, options_.stall);
  // Nonblocking communicators: creation is polled, so a member that never joins is found by
  // the watchdog (and the communicators aborted) instead of blocking ncclGroupEnd for ever.
  const WallClock::time_point init_deadline = deadline_after(WallClock::now(), options_.limits.comm_init_s);
  const TestStall& stall = options_.stall;
  std::vector<int> joined(static_cast<std::size_t>(ranks), 0);  // communicators each rank has joined
  st.comms.assign(st.plan.groups.size(), {});
  for (const int g : st.plan.groups_of(me)) {
    const CommGroup& group = st.plan.groups[static_cast<std::size_t>(g)];
    ncclUniqueId id;
    std::memcpy(&id, ids[static_cast<std::size_t>(g)].data(), sizeof id);
    std::vector<ncclComm_t>& members = st.comms[static_cast<std::size_t>(g)];
    members.assign(group.ranks.size(), nullptr);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    LYNX_NCCL_CHECK(ncclGroupStart());
    for (std::size_t m = 0; m < group.ranks.size(); ++m) {
      const int r = group.ranks[m];
      if (st.plan.rank_process[static_cast<std::size_t>(r)] != me) continue;
      if (stall.enabled && stall.at_init && stall.rank == r && joined[static_cast<std::size_t>(r)]++ == stall.index) continue;
      LYNX_CUDA_CHECK(cudaSetDevice(device_of(r)));
      check_nccl_started(ncclCommInitRankConfig(&members[m], static_cast<int>(group.ranks.size()), id, static_cast<int>(m), &config),
                         "ncclCommInitRankConfig");
    }
    check_nccl_started(ncclGroupEnd(), "ncclGroupEnd");
    for (std::size_t m = 0; m < group.ranks.size(); ++m) {
      if (members[m] == nullptr) continue;
      const ncclResult_t state = settle(members[m], init_deadline);
      if (state == ncclInProgress) {
        st.abort_all();
        fail(ErrorCode::kSystemFailure, "{}",
             watchdog_comm_init_message(ops, group.ranks[m], group.name,
                                        fmt::format("waited {:g} s (--timeout-comm-init)", options_.limits.comm_init_s),
                                        "a member never joined (NCCL's init is still in progress); communicators aborted"));
      }
      if (state != ncclSuccess) {
        st.abort_all();
        LYNX_NCCL_CHECK(state);
      }
    }
  }
  for (std::size_t g = st.plan.num_collective_groups; g < st.plan.groups.size(); ++g)
    st.pairs[{st.plan.groups[g].ranks[0], st.plan.groups[g].ranks[1]}] = static_cast<int>(g);
}

namespace {

int member_index(const Communicator& c, int rank) {
  const auto it = std::find(c.ranks.begin(), c.ranks.end(), rank);
  LYNX_CHECK(it != c.ranks.end(), "rank {} not in communicator {}", rank, c.name);
  return static_cast<int>(it - c.ranks.begin());
}

/// Enqueues what `op` launches on stream `s` of rank `rk`; an NCCL call still in progress
/// after `op_limit_s` (nonblocking communicators) fails with the watchdog line.
void launch(const OpStream& ops, const LiveOp& op, Rank& rk, const std::vector<std::vector<ncclComm_t>>& comms,
            const std::map<std::pair<int, int>, int>& pairs, std::uint64_t seed, double op_limit_s) {
  const auto enqueue = [&](ncclComm_t comm, ncclResult_t status, const char* call) {
    check_nccl_started(status, call);
    if (status != ncclInProgress) return;
    const ncclResult_t state = settle(comm, deadline_after(WallClock::now(), op_limit_s));
    if (state == ncclInProgress)
      fail(ErrorCode::kSystemFailure, "{}",
           watchdog_message(ops, static_cast<std::size_t>(&op - ops.ops.data()),
                            fmt::format("waited {:g} s for {} to be enqueued (--timeout-op)", op_limit_s, call), ""));
    gpu::check_nccl(state, call, __FILE__, __LINE__);
  };
  const auto pair = [&](int src, int dst, int member) {
    return comms.at(static_cast<std::size_t>(pairs.at({src, dst}))).at(static_cast<std::size_t>(member));
  };
  const auto si = static_cast<std::size_t>(op.stream);
  const cudaStream_t s = rk.streams[si].get();
  switch (op.launch) {
    case LaunchKind::kNone:
      return;
    case LaunchKind::kGemm:
    case LaunchKind::kBatchedGemm: {
      gpu::GemmDims d;
      d.m = op.m, d.n = op.n, d.k = op.k, d.batch = op.batch, d.strided = op.launch == LaunchKind::kBatchedGemm;
      gpu::row_major_gemm(rk.cublas[si]->get(), d, kBf16, rk.gemm_a.get(), rk.gemm_b.get(), rk.gemm_c[si].get());
      if (op.m2 > 0) {
        d.m = op.m2, d.n = op.n2, d.k = op.k2;
        gpu::row_major_gemm(rk.cublas[si]->get(), d, kBf16, rk.gemm_a.get(), rk.gemm_b.get(), rk.gemm_c[si].get());
      }
      return;
    }
    case LaunchKind::kMemoryBound: {
      void* y = rk.kernel_y[si].get();
      const void* x = rk.kernel_x.get();
      auto* mask = rk.mask[si].as<std::uint8_t>();
      switch (op.kernel) {
        case Kernel::kLayerNorm:
          LYNX_CUDA_CHECK(gpu::layernorm(x, rk.params.get(), rk.params.get(), y, rk.stats.as<float>(),
                                         rk.stats.as<float>() + op.m, op.m, op.n, kBf16, s));
          return;
        case Kernel::kBiasGelu:
          LYNX_CUDA_CHECK(gpu::bias_gelu(x, rk.params.get(), y, op.m, op.n, kBf16, s));
          return;
        case Kernel::kSoftmax:
          LYNX_CUDA_CHECK(gpu::causal_softmax(x, y, op.m, op.n, ops.scenario.model.seq_len, 0.125f, kBf16, s));
          return;
        case Kernel::kDropout:
          LYNX_CUDA_CHECK(gpu::dropout(x, y, mask, static_cast<std::size_t>(op.m * op.n), kKeepProb, seed, kBf16, s));
          return;
        case Kernel::kDropoutResidual:
          LYNX_CUDA_CHECK(gpu::dropout_residual(x, rk.params.get(), rk.residual.get(), y, mask, op.m, op.n, kKeepProb,
                                                seed, kBf16, s));
          return;
        case Kernel::kCrossEntropy:
          LYNX_CUDA_CHECK(gpu::cross_entropy(x, rk.ids.as<std::int64_t>(), rk.probs[si].as<float>(),
                                             rk.stats.as<float>(), op.m, op.n, kBf16, s));
          return;
        case Kernel::kEmbedding:
          LYNX_CUDA_CHECK(gpu::embedding_gather(rk.ids.as<std::int64_t>(), rk.params.get(), y, op.m, op.n, kBf16, s));
          return;
        case Kernel::kStream:
        case Kernel::kNone: {
          // Read + write `bytes`: 4 bytes per bf16 element, in chunks of the work buffer.
          std::uint64_t left = op.bytes / 4;
          while (left > 0) {
            const std::size_t n = std::min<std::uint64_t>(left, std::min(kStreamChunkElements, rk.kernel_x.bytes() / 2));
            LYNX_CUDA_CHECK(gpu::scale_copy(x, y, std::max<std::size_t>(n / 8 * 8, 8), 1.0f, kBf16, s));
            left -= std::min<std::uint64_t>(left, n);
          }
          return;
        }
      }
      return;
    }
    case LaunchKind::kCollective: {
      const Communicator& c = ops.comms.at(static_cast<std::size_t>(op.comm));
      ncclComm_t comm = comms.at(static_cast<std::size_t>(op.comm)).at(static_cast<std::size_t>(member_index(c, op.rank)));
      const std::size_t n = c.ranks.size();
      const std::size_t elements = std::max<std::size_t>(op.bytes / 2 / n * n, n);
      switch (op.collective) {
        case model::CollectiveKind::kAllGather:
          enqueue(comm, ncclAllGather(rk.comm_send.get(), rk.comm_recv.get(), elements / n, ncclBfloat16, comm, s), "ncclAllGather");
          return;
        case model::CollectiveKind::kReduceScatter:
          enqueue(comm, ncclReduceScatter(rk.comm_send.get(), rk.comm_recv.get(), elements / n, ncclBfloat16, ncclSum, comm, s),
                  "ncclReduceScatter");
          return;
        case model::CollectiveKind::kBroadcast:  // from the communicator's first member (tp rank 0)
          enqueue(comm, ncclBroadcast(rk.comm_send.get(), rk.comm_recv.get(), std::max<std::size_t>(op.bytes / 2, 1), ncclBfloat16, 0,
                                comm, s),
                  "ncclBroadcast");
          return;
        default:
          enqueue(comm, ncclAllReduce(rk.comm_send.get(), rk.comm_recv.get(), elements, ncclBfloat16, ncclSum, comm, s), "ncclAllReduce");
          return;
      }
    }
    case LaunchKind::kSend: {
      const std::size_t elements = std::max<std::size_t>(op.bytes / 2, 1);
      ncclComm_t comm = pair(op.rank, op.peer, 0);
      enqueue(comm, ncclSend(rk.comm_send.get(), elements, ncclBfloat16, 1, comm, s), "ncclSend");
      return;
    }
    case LaunchKind::kRecv: {
      const std::size_t elements = std::max<std::size_t>(op.bytes / 2, 1);
      ncclComm_t comm = pair(op.peer, op.rank, 1);
      enqueue(comm, ncclRecv(rk.comm_recv.get(), elements, ncclBfloat16, 0, comm, s), "ncclRecv");
      return;
    }
    case LaunchKind::kStandinCopy:
      // Through pinned host memory: the copy engines move the bytes, no SMs are used.
      if (op.to_host) {
        LYNX_CUDA_CHECK(cudaMemcpyAsync(rk.pinned.get(), rk.comm_send.get(), op.bytes, cudaMemcpyDeviceToHost, s));
      } else {
        LYNX_CUDA_CHECK(cudaMemcpyAsync(rk.comm_recv.get(), rk.pinned.get(), op.bytes, cudaMemcpyHostToDevice, s));
      }
      return;
  }
}

}  // namespace

void CudaBackend::watch_iteration(const OpStream& ops, WallClock::time_point started) {
  State& st = *state_;
  const WatchdogLimits& limits = options_.limits;
  const WallClock::time_point iteration_deadline = deadline_after(started, limits.iteration_s);
  // Per (local rank, stream): its ops in order and the first not yet ended.
  struct Cursor {
    int rank = 0;
    std::vector<std::size_t> ops;
    std::size_t next = 0;
    bool started = false;  ///< ops[next]'s start event has fired
    WallClock::time_point started_at{};
  };
  std::vector<Cursor> cursors;
  for (int r : st.local) {
    std::vector<Cursor> per_stream(ops.stream_names.size());
    for (int index : ops.rank_ops[static_cast<std::size_t>(r)])
      per_stream[static_cast<std::size_t>(ops.ops[static_cast<std::size_t>(index)].stream)].ops.push_back(
          static_cast<std::size_t>(index));
    for (Cursor& c : per_stream) {
      c.rank = r;
      if (!c.ops.empty()) cursors.push_back(std::move(c));
    }
  }
  const std::vector<ncclComm_t> comms = st.all_comms();
  // The members of op i's collective group that, on this process, have not reached it.
  const auto not_arrived = [&](std::size_t i) {
    const std::int32_t group = ops.ops[i].task >= 0 ? ops.sim.built.program.tasks[i].group : -1;
    std::string names;
    for (std::size_t j = 0; group >= 0 && j < ops.num_tasks; ++j) {
      const LiveOp& other = ops.ops[j];
      if (ops.sim.built.program.tasks[j].group != group || j == i ||
          std::find(st.local.begin(), st.local.end(), other.rank) == st.local.end())
        continue;
      const Rank& rk = st.ranks[static_cast<std::size_t>(other.rank)];
      (void)cudaSetDevice(rk.device);
      if (cudaEventQuery(rk.start[j]) != cudaSuccess) names += fmt::format("{}{}", names.empty() ? "" : ", ", other.rank);
    }
    return names.empty() ? std::string("every member on this node reached it; NCCL communicators aborted")
                         : fmt::format("rank(s) {} never reached it; NCCL communicators aborted", names);
  };
  for (;;) {
    bool all_done = true;
    for (Cursor& c : cursors) {
      const Rank& rk = st.ranks[static_cast<std::size_t>(c.rank)];
      LYNX_CUDA_CHECK(cudaSetDevice(rk.device));
      while (c.next < c.ops.size()) {
        const std::size_t i = c.ops[c.next];
        const cudaError_t q = cudaEventQuery(rk.end[i]);
        if (q == cudaSuccess) {
          ++c.next;
          c.started = false;
          continue;
        }
        if (q != cudaErrorNotReady) {
          st.abort_all();
          LYNX_CUDA_CHECK(q);
        }
        if (!c.started && cudaEventQuery(rk.start[i]) == cudaSuccess) {
          c.started = true;
          c.started_at = WallClock::now();
        }
        if (c.started && is_communication(ops.ops[i]) && seconds_since(c.started_at) > limits.op_s) {
          const std::string detail = not_arrived(i);
          st.abort_all();
          fail(ErrorCode::kSystemFailure, "{}",
               watchdog_message(ops, i, fmt::format("waited {:g} s (--timeout-op)", limits.op_s), detail));
        }
        break;
      }
      all_done = all_done && c.next == c.ops.size();
    }
    if (all_done) return;
    for (ncclComm_t c : comms) {
      ncclResult_t async = ncclSuccess;
      LYNX_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        st.abort_all();
        fail(ErrorCode::kSystemFailure, "live: NCCL reported an asynchronous error: {}; communicators aborted",
             ncclGetErrorString(async));
      }
    }
    if (WallClock::now() > iteration_deadline) {
      for (const Cursor& c : cursors) {
        if (c.next == c.ops.size()) continue;
        st.abort_all();
        fail(ErrorCode::kSystemFailure, "{}",
             watchdog_message(ops, c.ops[c.next],
                              fmt::format("not done {:g} s after the iteration started (--timeout-iteration)", limits.iteration_s),
                              fmt::format("{} stream stuck; NCCL communicators aborted",
                                          ops.stream_names[static_cast<std::size_t>(ops.ops[c.ops[c.next]].stream)])));
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Measured CudaBackend::run_iteration(const OpStream& ops) {
  LYNX_CHECK(state_ && state_->num_ops == ops.ops.size(), "run_iteration before prepare");
  State& st = *state_;
  const int ranks = static_cast<int>(st.ranks.size());
  for (int r : st.local) {
    Rank& rk = st.ranks[static_cast<std::size_t>(r)];
    rk.ledger = std::make_unique<BufferLedger>(ops.static_bytes[static_cast<std::size_t>(r)], ops.tags.size());
    LYNX_CUDA_CHECK(cudaSetDevice(rk.device));
    std::uint64_t zero = 0;
    LYNX_CUDA_CHECK(cudaMemPoolSetAttribute(rk.pool, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  std::mutex error_mutex;
  std::exception_ptr error;
  // Every node starts enqueueing together: one time origin, roughly.
  st.exchange->barrier({options_.limits.iteration_s, "the barrier before the iteration (--timeout-iteration)"});
  const WallClock::time_point started = WallClock::now();
  const int stalled = stalled_op(ops, options_.stall);  // the test hook's op (not launched), or -1
  const auto enqueue_rank = [&](int r) {
    try {
      Rank& rk = st.ranks[static_cast<std::size_t>(r)];
      LYNX_CUDA_CHECK(cudaSetDevice(rk.device));
      // Every stream starts after the base event (recorded on compute): one time origin.
      LYNX_CUDA_CHECK(cudaEventRecord(rk.base, rk.streams[0].get()));
      for (std::size_t s = 1; s < rk.streams.size(); ++s)
        LYNX_CUDA_CHECK(cudaStreamWaitEvent(rk.streams[s].get(), rk.base, 0));
      std::uint64_t seed = 1;
      for (int index : ops.rank_ops[static_cast<std::size_t>(r)]) {
        const auto i = static_cast<std::size_t>(index);
        const LiveOp& op = ops.ops[i];
        const cudaStream_t s = rk.streams[static_cast<std::size_t>(op.stream)].get();
        for (int d : op.deps)
          if (ops.ops[static_cast<std::size_t>(d)].stream != op.stream)
            LYNX_CUDA_CHECK(cudaStreamWaitEvent(s, rk.end[static_cast<std::size_t>(d)], 0));
        LYNX_CUDA_CHECK(cudaEventRecord(rk.start[i], s));
        const double now_s = seconds_since(started);
        for (const sim::MemEffect& e : op.mem) {
          if (e.at_end || e.bytes <= 0) continue;
          void* p = nullptr;
          LYNX_CUDA_CHECK(cudaMallocAsync(&p, static_cast<std::size_t>(e.bytes), s));
          rk.ledger->add(e.tag, e.bytes, p, now_s);
        }
        if (index != stalled) launch(ops, op, rk, st.comms, st.pairs, seed, options_.limits.op_s);
        ++seed;
        for (const sim::MemEffect& e : op.mem) {
          if (e.bytes > 0 && e.at_end) {
            void* p = nullptr;
            LYNX_CUDA_CHECK(cudaMallocAsync(&p, static_cast<std::size_t>(e.bytes), s));
            rk.ledger->add(e.tag, e.bytes, p, now_s);
          } else if (e.bytes < 0) {
            LYNX_CUDA_CHECK(cudaFreeAsync(rk.ledger->take(e.tag, -e.bytes, now_s), s));
          }
        }
        LYNX_CUDA_CHECK(cudaEventRecord(rk.end[i], s));
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r : st.local) threads.emplace_back(enqueue_rank, r);
  for (std::thread& t : threads) t.join();
  if (error) {
    st.abort_all();  // what was enqueued may wait on what was not
    std::rethrow_exception(error);
  }
  watch_iteration(ops, started);

  Measured m;
  m.op_start_s.assign(ops.ops.size(), 0);
  m.op_end_s.assign(ops.ops.size(), 0);
  m.peak_bytes.assign(static_cast<std::size_t>(ranks), 0);
  m.memory_timeline.resize(static_cast<std::size_t>(ranks));
  for (int r : st.local) {
    Rank& rk = st.ranks[static_cast<std::size_t>(r)];
    LYNX_CUDA_CHECK(cudaSetDevice(rk.device));
    for (int index : ops.rank_ops[static_cast<std::size_t>(r)]) {
      const auto i = static_cast<std::size_t>(index);
      float start_ms = 0, end_ms = 0;
      LYNX_CUDA_CHECK(cudaEventElapsedTime(&start_ms, rk.base, rk.start[i]));
      LYNX_CUDA_CHECK(cudaEventElapsedTime(&end_ms, rk.base, rk.end[i]));
      m.op_start_s[i] = start_ms / 1e3;
      m.op_end_s[i] = end_ms / 1e3;
      m.iteration_s = std::max(m.iteration_s, m.op_end_s[i]);
    }
    std::uint64_t used_high = 0;
    LYNX_CUDA_CHECK(cudaMemPoolGetAttribute(rk.pool, cudaMemPoolAttrUsedMemHigh, &used_high));
    m.peak_bytes[static_cast<std::size_t>(r)] = ops.static_bytes[static_cast<std::size_t>(r)] + static_cast<std::int64_t>(used_high);
    // The memory counter in device time: allocations at their op's start, frees at its end.
    std::vector<std::pair<double, std::int64_t>> changes;
    for (int index : ops.rank_ops[static_cast<std::size_t>(r)]) {
      const auto i = static_cast<std::size_t>(index);
      for (const sim::MemEffect& e : ops.ops[i].mem) changes.emplace_back(e.at_end ? m.op_end_s[i] : m.op_start_s[i], e.bytes);
    }
    std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<double, std::int64_t>> timeline{{0.0, ops.static_bytes[static_cast<std::size_t>(r)]}};
    for (const auto& [at, bytes] : changes) timeline.emplace_back(at, timeline.back().second + bytes);
    m.memory_timeline[static_cast<std::size_t>(r)] = std::move(timeline);
    // What the plan left allocated (none for a whole iteration) goes back to the pool.
    for (void* p : rk.ledger->held()) LYNX_CUDA_CHECK(cudaFreeAsync(p, rk.streams[0].get()));
  }
  return gather_measured(*st.exchange, ops, st.plan, std::move(m), options_.limits.iteration_s);  // every rank's, on process 0
}

}  // namespace lynx::live
