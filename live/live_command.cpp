#include "live/live_command.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "live/dry_run.hpp"
#include "live/host_backend.hpp"
#include "live/live_report.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/plan_yaml.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

namespace lynx::live {

namespace po = boost::program_options;

std::unique_ptr<Backend> make_host_backend(const LiveOptions& options) {
  if (options.backend != "host") return nullptr;
  HostOptions host;
  host.size_scale = options.host_scale;
  host.limits = options.limits;
  host.stall = options.stall;
  return std::make_unique<HostBackend>(host);
}

bool parse_live_options(const std::vector<std::string>& argv, LiveOptions& o) {
  po::options_description desc("live options");
  desc.add_options()("help,h", "show this help")("plan", po::value(&o.plan_path), "plan file (lynxsim plan -o)")(
      "set", po::value(&o.overrides)->composing(), "override a field of the plan's scenario (not recompute.*)")(
      "dry-run", po::bool_switch(&o.dry_run), "print streams, ops, shapes, bytes, allocations, frees and the memory peak")(
      "backend", po::value(&o.backend), "cuda (default; lynxsim-live) | host (CPU threads, CI)")(
      "iterations", po::value(&o.iterations), "counted iterations (default 3)")(
      "warmup", po::value(&o.warmup), "iterations run first and not counted (default 1)")(
      "host-scale", po::value(&o.host_scale), "host backend: bytes allocated per planned byte (default 1/4096)")(
      "csv", po::value(&o.compare_csv), "write measured vs predicted as CSV here")(
      "raw-csv", po::value(&o.raw_csv), "write the measured per-op times as a calibrate raw CSV (lynxsim fit reads it)")(
      "trace", po::value(&o.trace), "write the last iteration as a Perfetto trace (the simulated trace's format)")(
      "timeout-comm-init", po::value(&o.limits.comm_init_s),
      "seconds to create the communicators (NCCL init, the id exchange between nodes) (default 120)")(
      "timeout-op", po::value(&o.limits.op_s), "seconds one collective, send or receive may take from its start (default 60)")(
      "timeout-iteration", po::value(&o.limits.iteration_s),
      "seconds one iteration may take, and each node's wait for the others before it (default 600)")(
      "timeout", po::value<double>(), "all three limits at once (an explicit --timeout-* wins)")(
      "run-as-bf16-unchunked", po::bool_switch(&o.run_as_bf16_unchunked),
      "run a plan with FP8 GEMMs or TP-comm overlap as bf16, unchunked (and predict that), instead of refusing it");
  po::positional_options_description pos;
  pos.add("plan", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(argv).options(desc).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: lynxsim live PLAN.yaml [--iterations N] [--warmup N] [--backend cuda|host] [--dry-run]\n"
                 "                    [--set k=v]... [--csv OUT.csv] [--raw-csv RAW.csv] [--trace OUT.json]\n"
                 "                    [--timeout-comm-init S] [--timeout-op S] [--timeout-iteration S] [--run-as-bf16-unchunked]\n"
                 "       mpirun -np NODES --map-by node lynxsim-live PLAN.yaml ...   (a plan over several nodes)\n\n"
              << desc << "\n";
    return false;
  }
  po::notify(vm);
  if (vm.count("timeout")) {
    const double all = vm["timeout"].as<double>();
    if (!(all > 0)) fail(ErrorCode::kInvalidOption, "--timeout {}: expected seconds > 0", all);
    if (!vm.count("timeout-comm-init")) o.limits.comm_init_s = all;
    if (!vm.count("timeout-op")) o.limits.op_s = all;
    if (!vm.count("timeout-iteration")) o.limits.iteration_s = all;
  }
  for (const auto& [name, seconds] : {std::pair{"--timeout-comm-init", o.limits.comm_init_s}, std::pair{"--timeout-op", o.limits.op_s},
                                      std::pair{"--timeout-iteration", o.limits.iteration_s}})
    if (!(seconds > 0)) fail(ErrorCode::kInvalidOption, "{} {}: expected seconds > 0", name, seconds);
  o.stall = test_stall_from_env();
  if (o.plan_path.empty()) fail(ErrorCode::kMissingArgument, "live: give a plan file (lynxsim plan SCENARIO -o plan.yaml)");
  if (o.iterations < 1) fail(ErrorCode::kInvalidOption, "--iterations {}: expected a whole number of iterations >= 1", o.iterations);
  if (o.warmup < 0) fail(ErrorCode::kInvalidOption, "--warmup {}: expected a whole number of iterations >= 0", o.warmup);
  if (!(o.host_scale > 0 && o.host_scale <= 1)) fail(ErrorCode::kInvalidOption, "--host-scale {}: expected a fraction in (0, 1]", o.host_scale);
  return true;
}

namespace {

/// Whether `options` run one process per node (the CUDA backend) or every rank in one.
bool per_node(const LiveOptions& options) { return options.backend == "cuda" && !options.dry_run; }

void check_scenario_launch(const LiveOptions& options, const Scenario& sc, const LaunchContext& launch) {
  const ParallelSpec& p = sc.parallel;
  check_launch(plan_nodes(sc), static_cast<int>(gpus_used(p)), sc.hardware.gpus_per_node, per_node(options), launch);
}

}  // namespace

void check_live_launch(const LiveOptions& options, const LaunchContext& launch) {
  const strategies::PlanFile plan = strategies::read_plan_file(options.plan_path);
  check_scenario_launch(options, strategies::scenario_for_plan(plan, options.plan_path, "", options.overrides).scenario(),
                        launch);
}

int run_live_command(const std::vector<std::string>& argv, const BackendFactory& make_backend,
                     const std::string& missing_hint, IdExchange& exchange, const LaunchContext& launch) {
  LiveOptions options;
  if (!parse_live_options(argv, options)) return 0;
  const strategies::PlanFile plan = strategies::read_plan_file(options.plan_path);
  const OpStream ops = build_op_stream(plan, options.plan_path, options.overrides, options.run_as_bf16_unchunked);
  check_scenario_launch(options, ops.scenario, launch);
  if (options.dry_run) {
    write_dry_run(std::cout, ops, options.plan_path);
    return 0;
  }
  std::unique_ptr<Backend> backend = make_backend(options);
  if (!backend) fail(ErrorCode::kNotInBuild, "live: no backend '{}' in this program: {}", options.backend, missing_hint);
  backend->prepare(ops);
  LiveRun run;
  run.plan_label = options.plan_path;
  run.backend = backend->name();
  run.device = backend->device();
  run.runs_as = runs_as_note(ops);
  run.warmup = options.warmup;
  for (int i = 0; i < options.warmup + options.iterations; ++i) run.iterations.push_back(backend->run_iteration(ops));
  if (exchange.process() != 0) return 0;  // process 0 has every rank's measurements and reports them
  const std::vector<CompareRow> rows = compare_rows(ops, run);
  write_compare_table(std::cout, rows, run);
  if (!options.compare_csv.empty()) {
    OutputFile out(options.compare_csv, "--csv");
    write_compare_csv(out.stream(), rows);
    out.close();
  }
  if (!options.raw_csv.empty()) calibrate::write_raw_csv_file(options.raw_csv, raw_measurements(ops, run));
  if (!options.trace.empty()) {
    OutputFile out(options.trace, "--trace");
    write_live_trace(out.stream(), ops, run);
    out.close();
    fmt::print(std::cerr, "trace written to {} (open in ui.perfetto.dev)\n", options.trace);
  }
  return 0;
}

}  // namespace lynx::live
