#include "sweep/ranks.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#ifdef LYNXSIM_WITH_MPI
#include <mpi.h>
#endif

namespace lynx::sweep {

// Open MPI's mpirun, PMI or PMIx (MPICH's hydra, srun --mpi=...), or srun's step size
// (SLURM_STEP_NUM_TASKS, also set without an MPI plugin).
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr ? 1 : 0;
}

namespace {

#ifdef LYNXSIM_WITH_MPI
constexpr int kOutcomeTag = 7;
constexpr std::size_t kHeaderBytes = 12;  ///< of an outcome message, before its text

void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) fail(ErrorCode::kSystemFailure, "MPI: {} failed (error {})", call, status);
}
#endif

}  // namespace

bool Ranks::built_with_mpi() {
#ifdef LYNXSIM_WITH_MPI
  return true;
#else
  return false;
#endif
}

Ranks::Ranks() {
  const int announced = launcher_size();
#ifdef LYNXSIM_WITH_MPI
  if (announced == 0) return;  // a plain launch: one rank, MPI never initialised
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    initialized_here_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  MPI_Comm_size(node, &ranks_on_node_);
  MPI_Comm_free(&node);
  // srun without an MPI plugin starts tasks that each see a job of one: refuse, or every task
  // would run the whole sweep and write the same file.
  if (size_ == 1 && announced > 1)
    fail(ErrorCode::kLauncherMismatch, "the launcher started {} processes but MPI sees each alone; with Slurm use "
         "srun --mpi=pmix (or pmi2)",
         announced);
#else
  if (announced > 1)
    fail(ErrorCode::kLauncherMismatch, "this lynxsim was built without MPI, but a launcher started {} processes: each would "
         "run the whole sweep; rebuild with MPI (libopenmpi-dev) or run one process",
         announced);
#endif
}

Ranks::~Ranks() {
#ifdef LYNXSIM_WITH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_here_ && finalized == 0) MPI_Finalize();
#endif
}

void Ranks::broadcast(std::vector<std::uint64_t>& words) const {
  if (size_ == 1) return;
#ifndef LYNXSIM_WITH_MPI
  (void)words;
#else
  unsigned long long count = words.size();
  check_mpi(MPI_Bcast(&count, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
  words.resize(static_cast<std::size_t>(count));
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  // In slices: an MPI count is an int.
  constexpr std::size_t kSlice = std::size_t{1} << 28;
  for (std::size_t begin = 0; begin < words.size(); begin += kSlice) {
    const std::size_t n = std::min(kSlice, words.size() - begin);
    check_mpi(MPI_Bcast(words.data() + begin, static_cast<int>(n), MPI_UNSIGNED_LONG_LONG, 0,
                        MPI_COMM_WORLD),
              "MPI_Bcast");
  }
#endif
}

void Ranks::send_to_root(std::uint64_t index, const PointOutcome& outcome) const {
#ifdef LYNXSIM_WITH_MPI
  // [index: 8 bytes][kind: 1 byte][oom: 1 byte][error code: 2 bytes][text]
  std::string message(kHeaderBytes + outcome.text.size(), '\0');
  std::memcpy(message.data(), &index, 8);
  message[8] = static_cast<char>(outcome.kind);
  message[9] = outcome.oom ? 1 : 0;
  const auto code = static_cast<std::uint16_t>(outcome.code);  // codes are 1..999
  std::memcpy(message.data() + 10, &code, 2);
  std::memcpy(message.data() + kHeaderBytes, outcome.text.data(), outcome.text.size());
  check_mpi(MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, kOutcomeTag,
                     MPI_COMM_WORLD),
            "MPI_Send");
#else
  (void)index;
  (void)outcome;
  LYNX_CHECK(false, "send_to_root without MPI");
#endif
}

PointOutcome Ranks::receive(int from, std::uint64_t index) const {
#ifdef LYNXSIM_WITH_MPI
  MPI_Status status;
  check_mpi(MPI_Probe(from, kOutcomeTag, MPI_COMM_WORLD, &status), "MPI_Probe");
  int bytes = 0;
  MPI_Get_count(&status, MPI_CHAR, &bytes);
  std::string message(static_cast<std::size_t>(bytes), '\0');
  check_mpi(MPI_Recv(message.data(), bytes, MPI_CHAR, from, kOutcomeTag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
  LYNX_CHECK(message.size() >= kHeaderBytes, "short sweep message from rank {}", from);
  std::uint64_t got = 0;
  std::memcpy(&got, message.data(), 8);
  LYNX_CHECK(got == index, "rank {} sent point {}, expected {}", from, got, index);
  PointOutcome outcome;
  outcome.kind = static_cast<PointOutcome::Kind>(message[8]);
  outcome.oom = message[9] != 0;
  std::uint16_t code = 0;
  std::memcpy(&code, message.data() + 10, 2);
  outcome.code = static_cast<ErrorCode>(code);
  outcome.text = message.substr(kHeaderBytes);
  return outcome;
#else
  (void)from;
  (void)index;
  LYNX_CHECK(false, "receive without MPI");
  return {};
#endif
}

void Ranks::abort_job(int status) const {
#ifdef LYNXSIM_WITH_MPI
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, status);
#else
  (void)status;
#endif
}

}  // namespace lynx::sweep
