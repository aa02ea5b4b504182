#pragma once
/// `lynxsim live PLAN.yaml [--iterations N] [--dry-run] [--backend host|cuda] ...`: the command
/// shared by lynxsim (dry run, host backend) and lynxsim-live (the CUDA backend). Options are
/// parsed here once; the caller says which backends it has.
#include "live/backend.hpp"
#include "live/bootstrap_plan.hpp"
#include "live/id_exchange.hpp"
#include "live/watchdog.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lynx::live {

/// Options of the command that a backend may read.
struct LiveOptions {
  std::string plan_path;
  std::vector<std::string> overrides;  ///< --set
  std::string backend = "cuda";
  int iterations = 3;   ///< counted iterations
  int warmup = 1;       ///< iterations run first and not counted
  bool dry_run = false;
  double host_scale = 1.0 / 4096;  ///< host backend: bytes allocated per planned byte
  std::string compare_csv;  ///< measured vs predicted CSV
  std::string raw_csv;      ///< per-op raw CSV (calibrate's schema, `lynxsim fit` input)
  std::string trace;        ///< Perfetto trace of the last iteration
  WatchdogLimits limits;    ///< --timeout-comm-init, --timeout-op, --timeout-iteration (--timeout: all three)
  TestStall stall;          ///< test hook, from LYNXSIM_LIVE_TEST_STALL (watchdog.hpp)
  bool run_as_bf16_unchunked = false;  ///< run a TP-comm-overlap or FP8 plan as bf16, unchunked
};

/// Makes the backend `options.backend`; returns null when this program has none of that name.
using BackendFactory = std::function<std::unique_ptr<Backend>(const LiveOptions& options)>;

/// The host backend (always available).
std::unique_ptr<Backend> make_host_backend(const LiveOptions& options);

/// Parses `argv` (the arguments after "live"), checks the start against the plan
/// (check_launch: the CUDA backend one process per node, the others one), then dry-runs or
/// runs. `make_backend` null result: fails naming the backend and `missing_hint`. With several
/// processes (`exchange`), process 0 alone writes the report, the CSVs and the trace, of every
/// rank. Returns the exit status.
int run_live_command(const std::vector<std::string>& argv, const BackendFactory& make_backend,
                     const std::string& missing_hint, IdExchange& exchange, const LaunchContext& launch);

/// check_launch for `options` before anything runs (lynxsim, before it hands a CUDA run to
/// lynxsim-live): reads the plan and resolves its scenario, without simulating it.
void check_live_launch(const LiveOptions& options, const LaunchContext& launch);

/// Just the option parsing (true: run; false: --help was printed).
bool parse_live_options(const std::vector<std::string>& argv, LiveOptions& options);

}  // namespace lynx::live
