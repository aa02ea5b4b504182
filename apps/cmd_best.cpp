// `lynxsim best`: the fastest plan that fits for a scenario's model on N GPUs (search/,
// docs/best.md).
#include "apps/cli.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "megatron/megatron_export.hpp"
#include "runner/plan_file.hpp"
#include "scenarios/scenario_loader.hpp"
#include "search/best_search.hpp"
#include "strategies/plan_yaml.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

namespace lynx::apps {
namespace {

/// "1-8" or "1,2,4": whole numbers >= 1, ascending, each once.
std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  for (std::string_view part : split(text, ',')) {
    const std::string item(trim(part));
    const std::size_t dash = item.find('-');
    const int from = parse_whole_number(item.substr(0, dash), option, "(a list such as 1-8 or 1,2,4)", 1);
    const int to = dash == std::string::npos
                       ? from
                       : parse_whole_number(item.substr(dash + 1), option, "(a list such as 1-8 or 1,2,4)", from);
    for (int v = from; v <= to; ++v) {
      if (!out.empty() && v <= out.back()) fail(ErrorCode::kInvalidOption, "{} {}: values must ascend, each once", option, text);
      out.push_back(v);
    }
  }
  return out;
}

/// search | on | off: both values, or one.
std::vector<bool> parse_switch(const std::string& text, const std::string& option) {
  if (text == "search") return {false, true};
  if (text == "on") return {true};
  if (text == "off") return {false};
  fail(ErrorCode::kInvalidOption, "{} {}: expected search, on or off", option, text);
}

/// --sharding LIST (levels in the order given), unless --dist-opt on / off picks one level.
std::vector<Sharding> parse_sharding(const std::string& text, const std::string& dist_opt) {
  if (!dist_opt.empty() && dist_opt != "search") {
    const std::vector<bool> on = parse_switch(dist_opt, "--dist-opt");
    return {on.front() ? Sharding::kOptimizer : Sharding::kNone};
  }
  std::vector<Sharding> out;
  for (std::string_view part : split(text, ',')) {
    const std::string name(trim(part));
    std::size_t i = 0;
    while (i < kShardingNames.size() && name != kShardingNames[i]) ++i;
    if (i == kShardingNames.size())
      fail(ErrorCode::kInvalidOption, "--sharding {}: unknown level '{}' (none, optimizer, gradients, full)", text, name);
    out.push_back(static_cast<Sharding>(i));
  }
  return out;
}

std::vector<std::string> parse_strategies(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view part : split(text, ',')) {
    const std::string name(trim(part));
    bool known = false;
    for (const char* k : kRecomputeKindNames) known = known || name == k;
    if (!known)
      fail(ErrorCode::kInvalidOption, "--strategies {}: unknown strategy '{}' (none, full, selective, checkmate, lynx-heu, lynx-opt)", text, name);
    out.push_back(name);
  }
  return out;
}

}  // namespace

int cmd_best(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  std::string gpus_text, top_text = "5", threads_text, scenario_out, plan_out;
  std::string micro_text = "1-8", virtual_text = "1-4", sp_text = "search", dopt_text,
              sharding_text = "none,optimizer,full", flash_text = "search", cp_text = "auto",
              strategies_text = "none,full,selective,checkmate,lynx-heu";
  bool as_megatron_args = false;
  po::options_description desc("best options");
  add_scenario_options(desc, args);
  desc.add_options()("gpus", po::value(&gpus_text), "GPUs to lay the model out on (required): tp·cp·pp·dp = N")(
      "top", po::value(&top_text), "plans to confirm in exact mode and print (default 5)")(
      "threads", po::value(&threads_text), "worker threads (default: the machine's cores)")(
      "write-scenario", po::value(&scenario_out), "write the winner as a scenario YAML file")(
      "write-plan", po::value(&plan_out), "write the winner's plan file (what `lynxsim run --plan` reads)")(
      "as-megatron-args", po::bool_switch(&as_megatron_args), "print the winner's Megatron-LM launch arguments")(
      "micro-batches", po::value(&micro_text), "micro-batch sizes searched (default 1-8)")(
      "virtual-stages", po::value(&virtual_text), "virtual stages searched (default 1-4; > 1 interleaves)")(
      "sp", po::value(&sp_text), "sequence parallelism: search (default), on or off")(
      "sharding", po::value(&sharding_text), "sharding levels searched (default none,optimizer,full; also gradients)")(
      "dist-opt", po::value(&dopt_text), "on: search sharding optimizer only; off: none only (overrides --sharding)")(
      "flash", po::value(&flash_text), "flash attention: search (default), on or off")(
      "cp", po::value(&cp_text),
      "context-parallel degrees searched (default auto: 1, and with seq_len >= 8192 every cp giving each rank "
      ">= 4096 tokens; docs/best.md)")(
      "strategies", po::value(&strategies_text),
      "recompute strategies searched (default none,full,selective,checkmate,lynx-heu)");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim best SCENARIO.yaml --gpus N [--top K] [--threads N] "
                     "[--write-scenario F.yaml] [--write-plan F.yaml] [--as-megatron-args]\n"
                     "Searches tp, cp, pp, dp (tp·cp·pp·dp = N), micro-batch, virtual stages, sequence "
                     "parallelism, sharding level, flash attention and the recompute strategy "
                     "for the fastest plan that fits: bounds prune, fast mode ranks, exact mode "
                     "confirms the top K (docs/best.md)."))
    return 0;
  if (args.file.empty()) fail(ErrorCode::kMissingArgument, "best: expected a scenario file (lynxsim best SCENARIO.yaml --gpus N)");
  if (gpus_text.empty()) fail(ErrorCode::kMissingArgument, "best: --gpus N is required (the GPUs to lay the model out on)");
  search::BestRequest request;
  request.scenario_path = args.file;
  request.overrides = args.overrides;
  request.space.gpus = parse_whole_number(gpus_text, "--gpus", "GPUs", 1);
  request.top = parse_whole_number(top_text, "--top", "plans", 1);
  if (!threads_text.empty()) request.threads = parse_whole_number(threads_text, "--threads", "threads", 1);
  request.space.micro_batches = parse_int_list(micro_text, "--micro-batches");
  request.space.virtual_stages = parse_int_list(virtual_text, "--virtual-stages");
  if (cp_text != "auto") request.space.context_parallel = parse_int_list(cp_text, "--cp");
  request.space.sequence_parallel = parse_switch(sp_text, "--sp");
  request.space.sharding = parse_sharding(sharding_text, dopt_text);
  request.space.flash_attention = parse_switch(flash_text, "--flash");
  request.space.strategies = parse_strategies(strategies_text);
  request.progress = true;

  const search::BestOutcome outcome = search::run_best(request);
  std::cout << search::best_text(outcome);
  fmt::print(std::cerr, "{}", search::best_timing_text(outcome));
  const runner::SimRun& winner = outcome.top.front().exact;
  if (!scenario_out.empty()) write_text_file(scenario_out, scenario_to_yaml(winner.result.scenario), "--write-scenario");
  if (!plan_out.empty())
    write_text_file(plan_out, strategies::plan_to_yaml(runner::plan_file_of(winner)), "--write-plan");
  if (as_megatron_args) std::cout << megatron::scenario_to_megatron_args(winner.result.scenario);
  return 0;
}

}  // namespace lynx::apps
