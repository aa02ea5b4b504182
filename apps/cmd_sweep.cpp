// `lynxsim sweep`: simulate every point of a grid file (sweep/, docs/sweep.md).
#include "apps/cli.hpp"
#include "common/error.hpp"
#include "sweep/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

namespace lynx::apps {
int cmd_sweep(const std::vector<std::string>& argv) {
  sweep::SweepRequest request;
  std::string threads_text;
  po::options_description desc("sweep options");
  desc.add_options()("grid", po::value(&request.grid_path), "sweep grid YAML file (docs/sweep.md)")(
      "output,o", po::value(&request.output_path),
      "write the rows to OUT.csv or OUT.jsonl (by extension); an existing file of the same grid "
      "is resumed; without -o a table goes to stdout")(
      "threads", po::value(&threads_text),
      "worker threads per process (default: the machine's cores, shared by the MPI ranks on it)")(
      "help,h", "show this help");
  if (!parse_options(argv, desc, {"grid"},
                     "usage: lynxsim sweep GRID.yaml [-o OUT.csv|OUT.jsonl] [--threads N]\n"
                     "       mpirun -np N lynxsim sweep GRID.yaml -o OUT.csv   (MPI builds)"))
    return 0;
  if (request.grid_path.empty()) fail(ErrorCode::kMissingArgument, "sweep: expected a grid file (lynxsim sweep GRID.yaml)");
  if (!threads_text.empty()) request.threads = parse_whole_number(threads_text, "--threads", "threads", 1);

  sweep::Ranks ranks;
  try {
    const sweep::SweepSummary summary = sweep::run_sweep(request, ranks, std::cout);
    if (ranks.is_root()) fmt::print(std::cerr, "{}", sweep::summary_text(summary));
  } catch (const Error& e) {
    // The other ranks wait on this one: end the whole job (main reports the error otherwise).
    if (ranks.size() > 1) {
      fmt::print(std::cerr, "lynxsim: error {} ({}) (rank {} of {}): {}\n", error_code_id(e.code()),
                 error_code_info(e.code()).name, ranks.rank(), ranks.size(), e.what());
      ranks.abort_job(1);
    }
    throw;
  }
  return 0;
}

}  // namespace lynx::apps
