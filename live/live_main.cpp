/// lynxsim-live: live mode's CUDA backend (`lynxsim live PLAN.yaml` hands its arguments here).
/// The only place besides lynxsim's main that exits: errors are lynx::Error, printed as one line.
#include "common/error.hpp"
#include "live/cuda_backend.hpp"
#include "live/live_command.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const auto make_backend = [](const lynx::live::LiveOptions& options) -> std::unique_ptr<lynx::live::Backend> {
      if (options.backend == "cuda") return std::make_unique<lynx::live::CudaBackend>(lynx::live::CudaOptions{options.timeout_s});
      return lynx::live::make_host_backend(options);
    };
    return lynx::live::run_live_command(args, make_backend, "lynxsim-live has the cuda and host backends");
  } catch (const lynx::Error& e) {
    fmt::print(std::cerr, "lynxsim-live: error: {}\n", e.what());
    return 1;
  } catch (const boost::program_options::error& e) {
    fmt::print(std::cerr, "lynxsim-live: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(std::cerr, "lynxsim-live: internal error: {}\n", e.what());
    return 3;
  }
}
