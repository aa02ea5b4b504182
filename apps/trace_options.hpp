#pragma once
/// `lynxsim run --trace OUT.json` and the options that limit what the trace holds (pipeline
/// stages, a time window). The limits filter what is written, never what is simulated.
#include "apps/cli.hpp"
#include "runner/simulate.hpp"

#include <limits>
#include <string>
#include <vector>

namespace lynx::apps {

/// The trace options as given on the command line.
struct TraceArgs {
  std::string path;    ///< --trace: output file ("" = no trace)
  std::string stages;  ///< --trace-stages: "0,3", "0-3,7" ("" = every stage)
  std::string window;  ///< --trace-window: "1.5s:2s", ":2s", "1.5s:" ("" = whole iteration)
};

/// The trace request, checked against the scenario before anything is simulated.
struct TraceRequest {
  std::string path;          ///< output file ("" = no trace)
  std::vector<bool> stages;  ///< per pipeline stage (empty: every stage)
  TimePs from_ps = 0;        ///< window start
  TimePs to_ps = std::numeric_limits<TimePs>::max();  ///< window end
  TraceArgs args;            ///< as given, for the trace's metadata
};

/// Adds --trace, --trace-stages and --trace-window to `desc`.
void add_trace_options(po::options_description& desc, TraceArgs& args);

/// Parses the limits; throws lynx::Error naming the option on a malformed value, a stage
/// outside the pipeline (`pipeline_stages` = parallel.pp), or a limit without --trace.
TraceRequest parse_trace_request(const TraceArgs& args, int pipeline_stages);

/// Writes the trace of `run` (kept with SimOptions::keep_trace_data) to request.path, with the
/// lynxsim version, the strategies and the resolved scenario as metadata.
void write_trace(const TraceRequest& request, const runner::SimRun& run);

}  // namespace lynx::apps
