// `lynxsim live`: run a plan file's iteration (live mode). The dry run and the host backend run
// here; the CUDA backend is lynxsim-live (built with CUDA and NCCL), which this command
// hands the arguments to when it sits beside lynxsim.
#include "apps/cli.hpp"
#include "common/error.hpp"
#include "live/live_command.hpp"
#include "sweep/ranks.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace lynx::apps {

namespace {

/// lynxsim-live beside this executable, or "" when there is none.
std::string cuda_live_program() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path live = self.parent_path() / "lynxsim-live";
  return std::filesystem::is_regular_file(live, ec) && ::access(live.c_str(), X_OK) == 0 ? live.string() : "";
}

}  // namespace

int cmd_live(const std::vector<std::string>& argv) {
  live::LiveOptions options;
  if (!live::parse_live_options(argv, options)) return 0;
  // lynxsim joins no MPI job for live mode: the processes a launcher started are lynxsim-live's.
  const live::LaunchContext launch{std::max(1, sweep::launcher_size()), live::mpi_in_build()};
  if (!options.dry_run && options.backend == "cuda") {
    live::check_live_launch(options, launch);  // refused starts are refused here too, GPU or not
    const std::string program = cuda_live_program();
    if (program.empty())
      fail(ErrorCode::kNotInBuild, "live: this lynxsim has no CUDA backend (lynxsim-live is built when CMake finds CUDA and NCCL); "
           "use --dry-run, or --backend host to run the op stream on CPU threads");
    std::vector<std::string> args{program};
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> raw;
    for (std::string& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(program.c_str(), raw.data());
    fail(ErrorCode::kSystemFailure, "live: cannot run {}: {}", program, std::error_code(errno, std::generic_category()).message());
  }
  live::InProcessExchange alone;
  return live::run_live_command(argv, live::make_host_backend,
                                "lynxsim runs --backend host; the CUDA backend is lynxsim-live", alone, launch);
}

}  // namespace lynx::apps
