/// lynxsim-live: live mode's CUDA backend (`lynxsim live PLAN.yaml` hands its arguments here).
/// One process per node of the plan (`mpirun -np NODES --map-by node lynxsim-live PLAN.yaml`,
/// or srun), each running its node's ranks; alone for a one-node plan. The only place besides
/// lynxsim's main that exits: errors are lynx::Error, printed as one coded line (prefixed
/// with the node when there are several), after which every process of the job ends.
#include "common/error.hpp"
#include "live/cuda_backend.hpp"
#include "live/id_exchange.hpp"
#include "live/live_command.hpp"
#include "sweep/ranks.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <iostream>
#include <memory>

namespace {

/// Prints the one error line (naming the node in a job of several) and ends the job.
int report(lynx::live::IdExchange* exchange, lynx::ErrorCode code, const char* what, int status) {
  const std::string node = exchange && exchange->processes() > 1
                               ? fmt::format("node {} of {}: ", exchange->process(), exchange->processes())
                               : "";
  fmt::print(std::cerr, "lynxsim-live: {}error {} ({}): {}\n", node, lynx::error_code_id(code),
             lynx::error_code_info(code).name, what);
  std::cerr.flush();
  if (exchange) exchange->abort(status);  // the others may wait for this one: never a hang
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::unique_ptr<lynx::sweep::Ranks> ranks;
  std::unique_ptr<lynx::live::IdExchange> exchange;
  try {
    lynx::live::LaunchContext launch{std::max(1, lynx::sweep::launcher_size()), lynx::live::mpi_in_build()};
    // Built with MPI: join the job a launcher started (MPI_Init_thread only then). Without MPI
    // each started process runs alone, and check_launch refuses it with the count above.
    if (launch.mpi_in_build) {
      ranks = std::make_unique<lynx::sweep::Ranks>();
      exchange = lynx::live::make_exchange(*ranks);
      launch.processes = ranks->size();
    } else {
      exchange = std::make_unique<lynx::live::InProcessExchange>();
    }
    lynx::live::IdExchange& world = *exchange;
    const auto make_backend = [&world](const lynx::live::LiveOptions& options) -> std::unique_ptr<lynx::live::Backend> {
      if (options.backend == "cuda")
        return std::make_unique<lynx::live::CudaBackend>(lynx::live::CudaOptions{options.limits, options.stall, &world});
      return lynx::live::make_host_backend(options);
    };
    return lynx::live::run_live_command(args, make_backend, "lynxsim-live has the cuda and host backends", world, launch);
  } catch (const lynx::Error& e) {
    return report(exchange.get(), e.code(), e.what(), 1);
  } catch (const boost::program_options::error& e) {
    return report(exchange.get(), lynx::ErrorCode::kBadUsage, e.what(), 2);
  } catch (const std::exception& e) {
    return report(exchange.get(), lynx::ErrorCode::kInternal, e.what(), 3);
  }
}
