#include "live/id_exchange.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "sweep/ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#ifdef LYNXSIM_WITH_MPI
#include <mpi.h>
#endif

namespace lynx::live {

namespace {

#ifdef LYNXSIM_WITH_MPI
void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) fail(ErrorCode::kSystemFailure, "live: MPI: {} failed (error {})", call, status);
}

/// The processes of an MPI job, on MPI_COMM_WORLD; only the main thread calls it. Every
/// collective is nonblocking (MPI_Ibcast, ...) and polled, so a process that never arrives is
/// found by the limit instead of blocking the others for ever.
class MpiExchange final : public IdExchange {
 public:
  explicit MpiExchange(const sweep::Ranks& ranks) : ranks_(ranks) {}
  int process() const override { return ranks_.rank(); }
  int processes() const override { return ranks_.size(); }
  void broadcast(std::vector<std::uint8_t>& bytes, int root, const ExchangeWait& wait) override {
    LYNX_CHECK(bytes.size() <= INT_MAX, "broadcast of {} bytes", bytes.size());
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    complete(request, "MPI_Ibcast", wait);
  }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& bytes, const ExchangeWait& wait) override {
    if (bytes.size() > INT_MAX)
      fail(ErrorCode::kWorkTooLarge, "live: node {} measured {} bytes, more than one MPI message holds", process(), bytes.size());
    const int count = static_cast<int>(bytes.size());
    const bool root = process() == 0;
    std::vector<int> counts(root ? static_cast<std::size_t>(processes()) : 0);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &request), "MPI_Igather");
    complete(request, "MPI_Igather", wait);
    std::vector<int> displacements(counts.size());
    long long total = 0;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      displacements[p] = static_cast<int>(total);
      total += counts[p];
    }
    if (total > INT_MAX) fail(ErrorCode::kWorkTooLarge, "live: {} bytes of measurements, more than one MPI gather holds", total);
    std::vector<std::uint8_t> all(static_cast<std::size_t>(total));
    check_mpi(MPI_Igatherv(bytes.data(), count, MPI_BYTE, all.data(), counts.data(), displacements.data(), MPI_BYTE, 0,
                           MPI_COMM_WORLD, &request),
              "MPI_Igatherv");
    complete(request, "MPI_Igatherv", wait);
    std::vector<std::vector<std::uint8_t>> out;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      const auto begin = all.begin() + displacements[p];
      out.emplace_back(begin, begin + counts[p]);
    }
    return out;
  }
  void barrier(const ExchangeWait& wait) override {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    complete(request, "MPI_Ibarrier", wait);
  }
  void abort(int status) override { ranks_.abort_job(status); }

 private:
  /// Polls `request` until it completes or wait.limit_s passes (the request is left pending:
  /// the error ends the job with MPI_Abort).
  void complete(MPI_Request& request, const char* call, const ExchangeWait& wait) const {
    const WallClock::time_point start = WallClock::now();
    for (;;) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), call);
      if (done) return;
      if (wait.limit_s > 0 && seconds_since(start) > wait.limit_s)
        fail(ErrorCode::kSystemFailure, "live: watchdog: node {} of {} waited {:g} s in {}; a node never arrived", process(),
             processes(), wait.limit_s, wait.what);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

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

void check_same_as_process0(IdExchange& exchange, std::uint64_t value, const char* what, double limit_s) {
  std::vector<std::uint8_t> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  exchange.broadcast(bytes, 0, {limit_s, fmt::format("the check of {} (broadcast from node 0)", what)});
  std::uint64_t first = 0;
  std::memcpy(&first, bytes.data(), sizeof first);
  if (first != value)
    fail(ErrorCode::kPlanMismatch, "live: node {} has {} {:016x}, node 0 has {:016x}: give every node the same plan file "
         "and lynxsim-live build",
         exchange.process(), what, value, first);
}

std::vector<NcclIdBytes> exchange_ids(IdExchange& exchange, const BootstrapPlan& plan,
                                      const std::function<NcclIdBytes()>& new_id, double limit_s, const TestStall& stall) {
  LYNX_CHECK(exchange.processes() == plan.processes, "{} processes for a plan over {} nodes", exchange.processes(),
             plan.processes);
  const bool stalls_here = stall.enabled && stall.at_init && stall.rank >= 0 &&
                           stall.rank < static_cast<int>(plan.rank_process.size()) &&
                           plan.rank_process[static_cast<std::size_t>(stall.rank)] == exchange.process();
  int seen = 0;  // communicators of the stalled rank so far
  std::vector<NcclIdBytes> ids(plan.groups.size());
  std::vector<std::uint8_t> bytes(kNcclIdBytes);
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const CommGroup& group = plan.groups[g];
    const int owner = group.owner;
    const bool has_stalled_rank = stalls_here && std::count(group.ranks.begin(), group.ranks.end(), stall.rank) > 0;
    if (has_stalled_rank && seen++ == stall.index) {  // the test hook: never arrives
      std::this_thread::sleep_for(std::chrono::duration<double>(2 * limit_s));
      fail(ErrorCode::kSystemFailure, "live: watchdog: node {} stalled {:g} s before the id broadcast of communicator {} "
           "(LYNXSIM_LIVE_TEST_STALL); its peers' limit is {:g} s", exchange.process(), 2 * limit_s, group.name, limit_s);
    }
    if (exchange.process() == owner) {
      const NcclIdBytes id = new_id();
      bytes.assign(id.begin(), id.end());
    } else {
      bytes.assign(kNcclIdBytes, 0);
    }
    std::string members;
    for (int r : group.ranks) members += fmt::format("{}{}", members.empty() ? "" : ",", r);
    exchange.broadcast(bytes, owner,
                       {limit_s, fmt::format("creating communicator {} (ranks {}): the broadcast of its id from node {} "
                                             "(--timeout-comm-init)",
                                             group.name, members, owner)});
    std::copy(bytes.begin(), bytes.end(), ids[g].begin());
  }
  return ids;
}

}  // namespace lynx::live
