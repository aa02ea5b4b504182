#include "calibrate/bench_nccl.hpp"

#include "gpu/cuda_check.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef LYNXSIM_CALIBRATE_WITH_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <functional>
#include <memory>

namespace lynx::calibrate {

namespace {

constexpr std::uint64_t kElementBytes = 2;  // bf16 payloads

/// Payload actually moved for a requested size: all-gather / reduce-scatter need S divisible
/// by 2·ranks (whole bf16 elements per rank), the others by 2.
std::uint64_t effective_bytes(const std::string& collective, std::uint64_t bytes, int ranks) {
  const std::uint64_t unit = (collective == "all_gather" || collective == "reduce_scatter")
                                 ? kElementBytes * static_cast<std::uint64_t>(ranks)
                                 : kElementBytes;
  return bytes / unit * unit;
}

/// Enqueues one collective of `bytes` on one rank (inside a group when several ranks are
/// driven by this process). send/recv: rank `src` sends to `dst`.
void enqueue(const std::string& collective, std::uint64_t bytes, int ranks, int rank,
             const void* send, void* recv, ncclComm_t comm, cudaStream_t stream, int src, int dst) {
  const std::size_t count = bytes / kElementBytes;
  const std::size_t shard = count / static_cast<std::size_t>(ranks);
  if (collective == "all_reduce") {
    LYNX_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, comm, stream));
  } else if (collective == "all_gather") {
    LYNX_NCCL_CHECK(ncclAllGather(send, recv, shard, ncclBfloat16, comm, stream));
  } else if (collective == "reduce_scatter") {
    LYNX_NCCL_CHECK(ncclReduceScatter(send, recv, shard, ncclBfloat16, ncclSum, comm, stream));
  } else if (collective == "send_recv") {
    if (rank == src) LYNX_NCCL_CHECK(ncclSend(send, count, ncclBfloat16, dst, comm, stream));
    if (rank == dst) LYNX_NCCL_CHECK(ncclRecv(recv, count, ncclBfloat16, src, comm, stream));
  } else {
    fail(ErrorCode::kInvalidOption, "unknown collective '{}'", collective);
  }
}

/// The largest message of the sweep: every buffer is allocated once at this size.
std::uint64_t largest_size(const BenchSettings& settings) {
  const std::vector<std::uint64_t> sizes = nccl_sizes(settings);
  if (sizes.empty())
    fail(ErrorCode::kInvalidOption, "no NCCL message sizes between {} and {} bytes", settings.nccl_min_bytes,
         settings.nccl_max_bytes);
  return sizes.back();
}

class NcclGroup {
 public:
  NcclGroup() { LYNX_NCCL_CHECK(ncclGroupStart()); }
  ~NcclGroup() noexcept(false) {
    // A failed ncclGroupEnd must surface; never throw while another exception unwinds.
    const ncclResult_t status = ncclGroupEnd();
    if (std::uncaught_exceptions() == 0) LYNX_NCCL_CHECK(status);
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
};

}  // namespace

const std::vector<std::string>& nccl_collective_names() {
  static const std::vector<std::string> kNames{"all_reduce", "all_gather", "reduce_scatter",
                                               "send_recv"};
  return kNames;
}

std::vector<std::uint64_t> nccl_sizes(const BenchSettings& settings) {
  LYNX_CHECK(settings.nccl_step >= 2 && settings.nccl_min_bytes >= kElementBytes,
             "step {} min {}", settings.nccl_step, settings.nccl_min_bytes);
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = settings.nccl_min_bytes; s <= settings.nccl_max_bytes;
       s *= static_cast<std::uint64_t>(settings.nccl_step))
    sizes.push_back(s);
  return sizes;
}

void bench_nccl_single_process(const BenchContext& ctx, int gpus) {
  if (gpus < 1) fail(ErrorCode::kSystemFailure, "NCCL benchmark needs at least one GPU, got {}", gpus);
  std::vector<int> devices;
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus), nullptr);
  LYNX_NCCL_CHECK(ncclCommInitAll(comms.data(), gpus, devices.data()));
  // Destroy the communicators on every exit path.
  const auto destroy = [](std::vector<ncclComm_t>* c) {
    for (ncclComm_t comm : *c)
      if (comm != nullptr) (void)ncclCommDestroy(comm);
  };
  const std::unique_ptr<std::vector<ncclComm_t>, decltype(destroy)> comm_guard(&comms, destroy);

  const std::uint64_t max_bytes = largest_size(ctx.settings);
  std::vector<CudaStream> streams;
  std::vector<cudaStream_t> raw_streams;
  std::vector<DeviceBuffer> send, recv;
  for (int d : devices) {
    LYNX_CUDA_CHECK(cudaSetDevice(d));
    streams.emplace_back();
    raw_streams.push_back(streams.back().get());
    send.emplace_back(max_bytes);
    recv.emplace_back(max_bytes);
    LYNX_CUDA_CHECK(gpu::fill_random(send.back().get(), max_bytes / kElementBytes,
                                     gpu::Dtype::kBf16, 0xacc0 + static_cast<std::uint64_t>(d),
                                     1.0f, raw_streams.back()));
  }
  ctx.say("nccl: {} GPU(s) in one process{}", gpus,
          gpus == 1 ? " (collectives on 1 rank are local copies; recorded with ranks = 1)" : "");

  for (const std::string& collective : nccl_collective_names()) {
    // send/recv: GPU 0 -> GPU 1, or GPU 0 to itself with one GPU.
    const bool p2p = collective == "send_recv";
    const int ranks = p2p ? std::min(gpus, 2) : gpus;
    const int src = 0, dst = ranks - 1;
    const std::vector<int> involved(devices.begin(), devices.begin() + ranks);
    const std::vector<cudaStream_t> involved_streams(raw_streams.begin(),
                                                     raw_streams.begin() + ranks);
    for (std::uint64_t requested : nccl_sizes(ctx.settings)) {
      if (ctx.out_of_time()) {
        ctx.say("nccl {}: time budget spent", collective);
        break;
      }
      const std::uint64_t bytes = effective_bytes(collective, requested, ranks);
      if (bytes == 0) continue;
      const auto launch = [&] {
        const NcclGroup group;
        for (int r = 0; r < ranks; ++r)
          enqueue(collective, bytes, ranks, r, send[static_cast<std::size_t>(r)].get(),
                  recv[static_cast<std::size_t>(r)].get(), comms[static_cast<std::size_t>(r)],
                  raw_streams[static_cast<std::size_t>(r)], src, dst);
      };
      const TimingSummary t = time_on_devices(involved, involved_streams, ctx.settings.warmup,
                                              ctx.settings.reps, launch);
      Measurement row = timed_row(MeasurementKind::kCollective, collective, "bf16", t);
      row.bytes = bytes;
      row.ranks = ranks;
      row.scope = "intra";
      ctx.emit(row);
    }
    ctx.say("nccl {}: done ({} rank(s))", collective, ranks);
  }
  for (int d : devices) {
    LYNX_CUDA_CHECK(cudaSetDevice(d));
    LYNX_CUDA_CHECK(cudaDeviceSynchronize());
  }
  LYNX_CUDA_CHECK(cudaSetDevice(0));
}

#ifdef LYNXSIM_CALIBRATE_WITH_MPI

namespace {
void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) fail(ErrorCode::kSystemFailure, "{} failed with MPI error {}", call, status);
}
}  // namespace

void bench_nccl_mpi(const BenchContext& ctx) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type");
  int local_rank = 0, local_size = 0;
  check_mpi(MPI_Comm_rank(local, &local_rank), "MPI_Comm_rank(local)");
  check_mpi(MPI_Comm_size(local, &local_size), "MPI_Comm_size(local)");
  check_mpi(MPI_Comm_free(&local), "MPI_Comm_free");
  int is_leader = local_rank == 0 ? 1 : 0, nodes = 0;
  check_mpi(MPI_Allreduce(&is_leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce(nodes)");

  int device_count = 0;
  LYNX_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  if (device_count < 1) fail(ErrorCode::kSystemFailure, "rank {}: no CUDA device visible", rank);
  const int device = local_rank % device_count;
  LYNX_CUDA_CHECK(cudaSetDevice(device));

  ncclUniqueId id{};
  if (rank == 0) LYNX_NCCL_CHECK(ncclGetUniqueId(&id));
  check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast(ncclUniqueId)");
  ncclComm_t comm = nullptr;
  LYNX_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  const auto destroy = [](ncclComm_t* c) { (void)ncclCommDestroy(*c); };
  const std::unique_ptr<ncclComm_t, decltype(destroy)> comm_guard(&comm, destroy);

  const std::uint64_t max_bytes = largest_size(ctx.settings);
  const CudaStream stream;
  DeviceBuffer send(max_bytes), recv(max_bytes);
  LYNX_CUDA_CHECK(gpu::fill_random(send.get(), max_bytes / kElementBytes, gpu::Dtype::kBf16,
                                   0xacc0 + static_cast<std::uint64_t>(rank), 1.0f, stream.get()));
  const std::string scope = nodes > 1 ? "inter" : "intra";
  ctx.say("nccl (MPI): {} ranks on {} node(s), {} per node", size, nodes, local_size);

  for (const std::string& collective : nccl_collective_names()) {
    // send/recv: rank 0 to the first rank of the next node (ranks placed node by node), or to
    // rank 1 on one node.
    const bool p2p = collective == "send_recv";
    const int src = 0;
    const int dst = p2p ? (nodes > 1 ? size / nodes : std::min(1, size - 1)) : 0;
    for (std::uint64_t requested : nccl_sizes(ctx.settings)) {
      int stop = ctx.out_of_time() ? 1 : 0;  // rank 0 decides for everybody
      check_mpi(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast(stop)");
      if (stop != 0) {
        ctx.say("nccl {}: time budget spent", collective);
        break;
      }
      const std::uint64_t bytes = effective_bytes(collective, requested, size);
      if (bytes == 0) continue;
      const bool takes_part = !p2p || rank == src || rank == dst;
      std::vector<double> times(static_cast<std::size_t>(ctx.settings.reps), 0.0);
      if (takes_part)
        times = rep_times_on_devices({device}, {stream.get()}, ctx.settings.warmup,
                                     ctx.settings.reps, [&] {
                                       enqueue(collective, bytes, size, rank, send.get(),
                                               recv.get(), comm, stream.get(), src, dst);
                                     });
      std::vector<double> slowest(times.size(), 0.0);
      check_mpi(MPI_Reduce(times.data(), slowest.data(), static_cast<int>(times.size()), MPI_DOUBLE,
                           MPI_MAX, 0, MPI_COMM_WORLD),
                "MPI_Reduce(times)");
      if (rank == 0) {
        Measurement row =
            timed_row(MeasurementKind::kCollective, collective, "bf16", summarize(slowest));
        row.bytes = bytes;
        row.ranks = p2p ? (src == dst ? 1 : 2) : size;
        row.nodes = p2p ? (nodes > 1 ? 2 : 1) : nodes;
        row.scope = p2p && nodes > 1 ? "inter" : scope;
        ctx.emit(row);
      }
    }
    ctx.say("nccl {}: done", collective);
  }
  LYNX_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
}

#endif  // LYNXSIM_CALIBRATE_WITH_MPI

}  // namespace lynx::calibrate
