#include "calibrate/bench_contention.hpp"

#include "calibrate/bench_kernels.hpp"
#include "gpu/cuda_check.hpp"
#include "calibrate/workload_shapes.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace lynx::calibrate {

namespace {

constexpr std::uint64_t kElementBytes = 2;

/// Everything one GPU needs for the contention measurement.
struct DeviceSide {
  int device = 0;
  std::unique_ptr<CudaStream> compute, comm;
  cublasHandle_t cublas = nullptr;
  DeviceBuffer a, b, c, send, recv;
  ncclComm_t nccl = nullptr;
};

struct Sides {
  std::vector<DeviceSide> sides;
  ~Sides() {
    for (DeviceSide& side : sides) {
      (void)cudaSetDevice(side.device);
      if (side.cublas != nullptr) (void)cublasDestroy(side.cublas);
      if (side.nccl != nullptr) (void)ncclCommDestroy(side.nccl);
    }
  }
};

}  // namespace

void bench_contention(const BenchContext& ctx, int gpus) {
  const BenchSettings& settings = ctx.settings;
  if (gpus < 1) fail(ErrorCode::kSystemFailure, "contention benchmark needs a GPU");
  const bool standin = gpus == 1;
  const std::string scope = standin ? "standin" : "intra";
  const std::uint64_t comm_bytes = settings.contention_comm_bytes / 16 * 16;
  std::int64_t max_size = 0;
  for (std::int64_t n : settings.contention_sizes) max_size = std::max(max_size, n);
  const auto max_elements = static_cast<std::size_t>(max_size * max_size);

  Sides all;
  all.sides.resize(static_cast<std::size_t>(gpus));
  std::vector<int> devices;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus), nullptr);
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  if (!standin) {
    LYNX_NCCL_CHECK(ncclCommInitAll(comms.data(), gpus, devices.data()));
  }
  std::vector<cudaStream_t> compute_streams, comm_streams;
  for (int d = 0; d < gpus; ++d) {
    DeviceSide& side = all.sides[static_cast<std::size_t>(d)];
    side.device = d;
    side.nccl = comms[static_cast<std::size_t>(d)];
    LYNX_CUDA_CHECK(cudaSetDevice(d));
    side.compute = std::make_unique<CudaStream>();
    side.comm = std::make_unique<CudaStream>();
    LYNX_CUBLAS_CHECK(cublasCreate(&side.cublas));
    LYNX_CUBLAS_CHECK(cublasSetStream(side.cublas, side.compute->get()));
    for (DeviceBuffer* buffer : {&side.a, &side.b}) {
      buffer->reserve(max_elements * kElementBytes);
      LYNX_CUDA_CHECK(gpu::fill_random(buffer->get(), max_elements, gpu::Dtype::kBf16,
                                       0xc0de + static_cast<std::uint64_t>(d), 1.0f,
                                       side.compute->get()));
    }
    side.c.reserve(max_elements * kElementBytes);
    side.send.reserve(comm_bytes);
    side.recv.reserve(comm_bytes);
    LYNX_CUDA_CHECK(gpu::fill_random(side.send.get(), comm_bytes / kElementBytes, gpu::Dtype::kBf16,
                                     0xfeed, 1.0f, side.compute->get()));
    LYNX_CUDA_CHECK(cudaStreamSynchronize(side.compute->get()));
    compute_streams.push_back(side.compute->get());
    comm_streams.push_back(side.comm->get());
  }
  ctx.say("contention: {} GPU(s), communication = {}", gpus,
          standin ? fmt::format("copy kernel on {} blocks (stand-in for NCCL: one GPU)",
                                settings.standin_blocks)
                  : std::string("NCCL all-reduce"));

  for (std::int64_t n : settings.contention_sizes) {
    if (ctx.out_of_time()) {
      ctx.say("contention: time budget spent");
      break;
    }
    const GemmShape shape{model::OpKind::kGemm, n, n, n, 1, false, false, "contention"};
    const auto enqueue_gemm = [&] {
      for (DeviceSide& side : all.sides) {
        LYNX_CUDA_CHECK(cudaSetDevice(side.device));
        run_gemm(side.cublas, shape, gpu::Dtype::kBf16, side.a.get(), side.b.get(), side.c.get());
      }
    };
    const auto enqueue_comm = [&] {
      if (standin) {
        DeviceSide& side = all.sides.front();
        LYNX_CUDA_CHECK(cudaSetDevice(side.device));
        LYNX_CUDA_CHECK(gpu::limited_copy(side.send.get(), side.recv.get(), comm_bytes,
                                          settings.standin_blocks, side.comm->get()));
        return;
      }
      LYNX_NCCL_CHECK(ncclGroupStart());
      for (DeviceSide& side : all.sides)
        LYNX_NCCL_CHECK(ncclAllReduce(side.send.get(), side.recv.get(), comm_bytes / kElementBytes,
                                      ncclBfloat16, ncclSum, side.nccl, side.comm->get()));
      LYNX_NCCL_CHECK(ncclGroupEnd());
    };

    // Burst lengths: G GEMMs of about burst_ms in total, and R communication operations of
    // about the same length, so the two overlap for the whole GEMM burst.
    const double one_gemm_us =
        median(rep_times_on_devices(devices, compute_streams, 2, 3, enqueue_gemm));
    const double one_comm_us =
        median(rep_times_on_devices(devices, comm_streams, 2, 3, enqueue_comm));
    const int bursts_gemm = std::clamp(
        static_cast<int>(std::lround(settings.contention_burst_ms * 1000.0 / one_gemm_us)), 1,
        10000);
    const int bursts_comm = std::clamp(
        static_cast<int>(std::lround(bursts_gemm * one_gemm_us / one_comm_us)), 1, 10000);
    const auto gemm_burst = [&] {
      for (int i = 0; i < bursts_gemm; ++i) enqueue_gemm();
    };
    const auto comm_burst = [&] {
      for (int i = 0; i < bursts_comm; ++i) enqueue_comm();
    };

    std::vector<double> gemm_alone, comm_alone, gemm_together, comm_together;
    for (double t :
         rep_times_on_devices(devices, compute_streams, 1, settings.contention_reps, gemm_burst))
      gemm_alone.push_back(t / bursts_gemm);
    for (double t :
         rep_times_on_devices(devices, comm_streams, 1, settings.contention_reps, comm_burst))
      comm_alone.push_back(t / bursts_comm);

    // Concurrent: both streams start from one event, then GEMMs and communication are
    // enqueued interleaved; each stream's own events time its burst.
    std::vector<std::unique_ptr<EventSet>> events;  // per device: 4 per rep
    for (DeviceSide& side : all.sides) {
      LYNX_CUDA_CHECK(cudaSetDevice(side.device));
      events.push_back(
          std::make_unique<EventSet>(4 * static_cast<std::size_t>(settings.contention_reps)));
    }
    for (int rep = 0; rep < settings.contention_reps; ++rep) {
      const auto base = 4 * static_cast<std::size_t>(rep);
      for (std::size_t d = 0; d < all.sides.size(); ++d) {
        DeviceSide& side = all.sides[d];
        LYNX_CUDA_CHECK(cudaSetDevice(side.device));
        LYNX_CUDA_CHECK(cudaEventRecord((*events[d])[base], side.compute->get()));
        LYNX_CUDA_CHECK(cudaStreamWaitEvent(side.comm->get(), (*events[d])[base], 0));
        LYNX_CUDA_CHECK(cudaEventRecord((*events[d])[base + 1], side.comm->get()));
      }
      for (int i = 0; i < std::max(bursts_gemm, bursts_comm); ++i) {
        if (i < bursts_gemm) enqueue_gemm();
        if (i < bursts_comm) enqueue_comm();
      }
      for (std::size_t d = 0; d < all.sides.size(); ++d) {
        DeviceSide& side = all.sides[d];
        LYNX_CUDA_CHECK(cudaSetDevice(side.device));
        LYNX_CUDA_CHECK(cudaEventRecord((*events[d])[base + 2], side.compute->get()));
        LYNX_CUDA_CHECK(cudaEventRecord((*events[d])[base + 3], side.comm->get()));
      }
      double gemm_us = 0.0, comm_us = 0.0;
      for (std::size_t d = 0; d < all.sides.size(); ++d) {
        DeviceSide& side = all.sides[d];
        LYNX_CUDA_CHECK(cudaSetDevice(side.device));
        LYNX_CUDA_CHECK(cudaStreamSynchronize(side.compute->get()));
        LYNX_CUDA_CHECK(cudaStreamSynchronize(side.comm->get()));
        gemm_us = std::max(gemm_us, elapsed_us((*events[d])[base], (*events[d])[base + 2]));
        comm_us = std::max(comm_us, elapsed_us((*events[d])[base + 1], (*events[d])[base + 3]));
      }
      gemm_together.push_back(gemm_us / bursts_gemm);
      comm_together.push_back(comm_us / bursts_comm);
    }

    const auto emit = [&](const char* name, const std::vector<double>& times) {
      Measurement row = timed_row(MeasurementKind::kContention, name, "bf16", summarize(times));
      row.m = row.n = row.k = n;
      row.bytes = comm_bytes;
      row.ranks = gpus;
      row.scope = scope;
      ctx.emit(row);
    };
    emit("gemm_alone", gemm_alone);
    emit("gemm_concurrent", gemm_together);
    emit("comm_alone", comm_alone);
    emit("comm_concurrent", comm_together);
    ctx.say("contention n={}: GEMM {:.1f} -> {:.1f} us ({:+.1f}%), comm {:.1f} -> {:.1f} us "
            "({} GEMMs, {} comm ops per burst)",
            n, median(gemm_alone), median(gemm_together),
            100.0 * (median(gemm_together) / median(gemm_alone) - 1.0), median(comm_alone),
            median(comm_together), bursts_gemm, bursts_comm);
  }
  LYNX_CUDA_CHECK(cudaSetDevice(0));
}

}  // namespace lynx::calibrate
