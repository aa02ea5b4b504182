#include "live/id_exchange.hpp"

#include "common/error.hpp"
#include "sweep/ranks.hpp"

#include <climits>
#include <cstring>

#ifdef LYNXSIM_WITH_MPI
#include <mpi.h>
#endif

namespace lynx::live {

namespace {

#ifdef LYNXSIM_WITH_MPI
void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) fail(ErrorCode::kSystemFailure, "live: MPI: {} failed (error {})", call, status);
}

/// The processes of an MPI job, on MPI_COMM_WORLD; only the main thread calls it.
class MpiExchange final : public IdExchange {
 public:
  explicit MpiExchange(const sweep::Ranks& ranks) : ranks_(ranks) {}
  int process() const override { return ranks_.rank(); }
  int processes() const override { return ranks_.size(); }
  void broadcast(std::vector<std::uint8_t>& bytes, int root) override {
    LYNX_CHECK(bytes.size() <= INT_MAX, "broadcast of {} bytes", bytes.size());
    check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& bytes) override {
    if (bytes.size() > INT_MAX)
      fail(ErrorCode::kWorkTooLarge, "live: node {} measured {} bytes, more than one MPI message holds", process(), bytes.size());
    const int count = static_cast<int>(bytes.size());
    const bool root = process() == 0;
    std::vector<int> counts(root ? static_cast<std::size_t>(processes()) : 0);
    check_mpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::vector<int> displacements(counts.size());
    long long total = 0;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      displacements[p] = static_cast<int>(total);
      total += counts[p];
    }
    if (total > INT_MAX) fail(ErrorCode::kWorkTooLarge, "live: {} bytes of measurements, more than one MPI gather holds", total);
    std::vector<std::uint8_t> all(static_cast<std::size_t>(total));
    check_mpi(MPI_Gatherv(bytes.data(), count, MPI_BYTE, all.data(), counts.data(), displacements.data(), MPI_BYTE, 0,
                          MPI_COMM_WORLD),
              "MPI_Gatherv");
    std::vector<std::vector<std::uint8_t>> out;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      const auto begin = all.begin() + displacements[p];
      out.emplace_back(begin, begin + counts[p]);
    }
    return out;
  }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void abort(int status) override { ranks_.abort_job(status); }

 private:
  const sweep::Ranks& ranks_;
};
#endif

}  // namespace

bool mpi_in_build() {
#ifdef LYNXSIM_WITH_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<IdExchange> make_exchange(const sweep::Ranks& ranks) {
#ifdef LYNXSIM_WITH_MPI
  if (ranks.size() > 1) return std::make_unique<MpiExchange>(ranks);
#endif
  (void)ranks;
  return std::make_unique<InProcessExchange>();
}

void check_same_as_process0(IdExchange& exchange, std::uint64_t value, const char* what) {
  std::vector<std::uint8_t> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  exchange.broadcast(bytes, 0);
  std::uint64_t first = 0;
  std::memcpy(&first, bytes.data(), sizeof first);
  if (first != value)
    fail(ErrorCode::kPlanMismatch, "live: node {} has {} {:016x}, node 0 has {:016x}: give every node the same plan file "
         "and lynxsim-live build",
         exchange.process(), what, value, first);
}

std::vector<NcclIdBytes> exchange_ids(IdExchange& exchange, const BootstrapPlan& plan,
                                      const std::function<NcclIdBytes()>& new_id) {
  LYNX_CHECK(exchange.processes() == plan.processes, "{} processes for a plan over {} nodes", exchange.processes(),
             plan.processes);
  std::vector<NcclIdBytes> ids(plan.groups.size());
  std::vector<std::uint8_t> bytes(kNcclIdBytes);
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const int owner = plan.groups[g].owner;
    if (exchange.process() == owner) {
      const NcclIdBytes id = new_id();
      bytes.assign(id.begin(), id.end());
    } else {
      bytes.assign(kNcclIdBytes, 0);
    }
    exchange.broadcast(bytes, owner);
    std::copy(bytes.begin(), bytes.end(), ids[g].begin());
  }
  return ids;
}

}  // namespace lynx::live
