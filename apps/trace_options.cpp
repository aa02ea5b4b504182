#include "apps/trace_options.hpp"
#include "common/files.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "runner/report.hpp"
#include "scenarios/scenario_loader.hpp"
#include "scenarios/units.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>

namespace lynx::apps {
namespace {

/// "0,3" or "0-3,7" as a mask over `count` stages.
std::vector<bool> parse_stages(const std::string& text, int count) {
  std::vector<bool> stages(static_cast<std::size_t>(count), false);
  const auto stage = [&](std::string_view item) {
    std::int64_t value = 0;
    try {
      value = units::parse_integer(trim(item));
    } catch (const Error&) {
      fail(ErrorCode::kInvalidOption, "--trace-stages: '{}' is not a stage number (expected e.g. 0,3 or 0-3)", text);
    }
    if (value < 0 || value >= count)
      fail(ErrorCode::kInvalidOption, "--trace-stages: stage {} does not exist (the pipeline has stages 0 to {})", value, count - 1);
    return static_cast<std::size_t>(value);
  };
  for (const std::string_view item : split(text, ',')) {
    const std::size_t dash = item.find('-');
    const std::size_t first = stage(item.substr(0, dash));
    const std::size_t last = dash == std::string_view::npos ? first : stage(item.substr(dash + 1));
    if (last < first) fail(ErrorCode::kInvalidOption, "--trace-stages: range '{}' ends before it starts", trim(item));
    for (std::size_t s = first; s <= last; ++s) stages[s] = true;
  }
  return stages;
}

/// One bound of --trace-window: a time with its unit, or `fallback` when empty.
TimePs parse_bound(const std::string& window, std::string_view text, TimePs fallback) {
  if (trim(text).empty()) return fallback;
  try {
    return units::parse_time_ps(trim(text));
  } catch (const Error& e) {
    fail(e.code(), "--trace-window '{}': {}", window, e.what());
  }
}

}  // namespace

void add_trace_options(po::options_description& desc, TraceArgs& args) {
  desc.add_options()("trace", po::value(&args.path), "write a Chrome-trace / Perfetto JSON timeline to this file")(
      "trace-stages", po::value(&args.stages),
      "trace only these pipeline stages, e.g. 0,3 or 0-3 (GPUs and the links their flows use)")(
      "trace-window", po::value(&args.window),
      "trace only what overlaps START:END of the iteration, e.g. 1.5s:2s, :500ms, 1s:");
}

TraceRequest parse_trace_request(const TraceArgs& args, int pipeline_stages) {
  TraceRequest request;
  request.path = args.path;
  request.args = args;
  if (args.path.empty()) {
    if (!args.stages.empty()) fail(ErrorCode::kConflictingOptions, "--trace-stages needs --trace OUT.json");
    if (!args.window.empty()) fail(ErrorCode::kConflictingOptions, "--trace-window needs --trace OUT.json");
    return request;
  }
  if (!args.stages.empty()) request.stages = parse_stages(args.stages, pipeline_stages);
  if (!args.window.empty()) {
    const std::size_t colon = args.window.find(':');
    if (colon == std::string::npos)
      fail(ErrorCode::kInvalidOption, "--trace-window '{}': expected START:END, e.g. 1.5s:2s (either side may be empty)", args.window);
    const std::string_view text(args.window);
    request.from_ps = parse_bound(args.window, text.substr(0, colon), 0);
    request.to_ps = parse_bound(args.window, text.substr(colon + 1), request.to_ps);
    if (request.to_ps < request.from_ps) fail(ErrorCode::kInvalidOption, "--trace-window '{}': the window ends before it starts", args.window);
  }
  return request;
}

void write_trace(const TraceRequest& request, const runner::SimRun& run) {
  if (request.path.empty()) return;
  sim::TraceOptions options;
  options.from_ps = request.from_ps;
  options.to_ps = request.to_ps;
  if (!request.stages.empty()) {
    for (const int stage : run.built.gpu_stage) options.gpus.push_back(request.stages[static_cast<std::size_t>(stage)]);
  }
  options.metadata = {{"lynxsim_version", runner::lynxsim_version()},
                      {"strategy", run.result.strategy},
                      {"strategy_requested", run.result.strategy_requested},
                      {"scenario_yaml", scenario_to_yaml(run.result.scenario)}};
  if (!request.args.stages.empty()) options.metadata.emplace_back("trace_stages", request.args.stages);
  if (!request.args.window.empty()) options.metadata.emplace_back("trace_window", request.args.window);
  if (request.from_ps > run.exec.makespan_ps)
    fmt::print(std::cerr, "note: --trace-window starts after the iteration ends ({}), so the trace holds no slices\n",
               units::format_time(run.exec.makespan_ps));
  OutputFile trace(request.path, "--trace");
  sim::write_chrome_trace(trace.stream(), run.built.machine, run.built.program, run.exec, runner::trace_annotations(run), options);
  trace.close();
}

}  // namespace lynx::apps
