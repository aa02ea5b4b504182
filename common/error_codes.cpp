#include "common/error_codes.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace lynx {
namespace {

// The texts of every code, in code order. `example` is what the code's case in
// tests/errors/cases.json prints (without the "lynxsim: error CODE (name): " prefix).
const std::vector<ErrorCodeInfo> kCatalogue = {
    {ErrorCode::kInternal, "internal-error",
     "an internal invariant of lynxsim failed: a bug in lynxsim, not in the input",
     "please report it with the command line and the input files",
     "internal check failed at sim/executor.cpp:612: cond (what went wrong)",
     "no input triggers it on purpose (that would be a bug); tests/errors checks that LYNX_CHECK throws it"},
    {ErrorCode::kMalformedYaml, "malformed-yaml", "a YAML file (or a --set value) is not valid YAML",
     "fix the syntax at the line and column named", "bad.yaml:3:9: malformed YAML: end of sequence flow not found", ""},
    {ErrorCode::kExtraDocument, "extra-yaml-document",
     "a YAML file holds a second document after '---', which would be ignored",
     "keep one document per file",
     "two.yaml:4:1: a second YAML document (after '---') would be ignored: keep one document per file", ""},
    {ErrorCode::kWrongShape, "wrong-shape",
     "a key holds the wrong kind of YAML node: a list or map where one value belongs, a value "
     "where a section of keys belongs, a key that is not a plain word",
     "write the key as docs/scenario.md (or docs/sweep.md) shows",
     "bad.yaml:2:3: key 'model.layers': expected a single value, got a list", ""},
    {ErrorCode::kUnknownKey, "unknown-key", "a key (or field prefix) lynxsim does not know",
     "check the spelling (the message suggests the nearest key); `lynxsim fields` lists them all",
     "bad.yaml:3:3: unknown key 'model.layerz'; did you mean 'model.layers'?", ""},
    {ErrorCode::kDuplicateKey, "duplicate-key", "the same key or list entry is given twice",
     "keep one of them",
     "plan.yaml:100:48: key 'stages[0].layers[0].mode': given twice", ""},
    {ErrorCode::kMissingKey, "missing-key", "a required key or value is absent",
     "give it (the message says which)", "bad.yaml:2:3: key 'model.layers': no value given", ""},
    {ErrorCode::kBadExpression, "bad-expression",
     "a sweep `where:` filter that does not parse or cannot be evaluated",
     "fix the expression (docs/sweep.md lists its operators and names)",
     "grid.yaml:5:8: where 'parallel.tp >': expected a value, got 'end of expression' (at character 14)", ""},
    {ErrorCode::kWrongType, "wrong-type",
     "a value of the wrong type: text where a number, an integer, true/false or a ratio belongs",
     "give a value of the type `lynxsim fields` lists",
     "<built-in default scenario>: --set parallel.tp=two: key 'parallel.tp': expected an integer, got 'two'", ""},
    {ErrorCode::kWrongUnit, "wrong-unit",
     "a quantity without a unit, with a unit of another kind, or malformed",
     "write it with a unit of its kind, e.g. 600GB/s, 1.5us, 80GiB, 312TFLOPS",
     "<built-in default scenario>: --set hardware.node.nic.bw=200GB: key 'hardware.node.nic.bw': expected a bandwidth like '600GB/s', got '200GB' (units: B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s; bits: Mb/s, Gb/s, Tb/s)", ""},
    {ErrorCode::kUnknownChoice, "unknown-choice",
     "a value that is not one of the names the field accepts (strategy, schedule, preset, ...)",
     "use one of the names the message lists",
     "bad.yaml:2:13: key 'recompute.strategy': 'magic' is not one of: none, full, selective, checkmate, lynx-heu, lynx-opt", ""},
    {ErrorCode::kOutOfRange, "out-of-range", "a number outside its documented range",
     "use a value in the range the message (and docs/scenario.md) gives",
     "big.yaml:3:11: key 'model.hidden': must be between 0 and 131072, got 200000", ""},
    {ErrorCode::kValueOverflow, "value-overflow",
     "values each in range whose product or sum does not fit in 64-bit integers",
     "make the named values smaller",
     "<built-in default scenario>: --set model.seq_len=1048576: key 'model.seq_len': the attention scores' size (seq_len² 1048576² x micro_batch 65536 x heads 4096) does not fit in 64-bit integers; make it smaller", ""},
    {ErrorCode::kBadRange, "bad-range",
     "a sweep axis whose values cannot be listed: empty, a step that does not lead from 'from' "
     "to 'to', a geometric range that does not grow",
     "fix the axis (docs/sweep.md)",
     "grid.yaml:4:16: axis 'parallel.tp': step -1 does not lead from 1 to 8", ""},
    {ErrorCode::kIndivisibleLayout, "indivisible-layout",
     "the model or batch does not split over the parallel layout (heads or ffn by tp, layers by "
     "pp x virtual stages, batch by micro-batch x dp, GPUs by the model-parallel size)",
     "pick degrees that divide the sizes, or change the sizes",
     "bad.yaml:1:1: key 'model': a custom model (no model.preset) needs model.layers, model.hidden and model.heads (got layers 0, hidden 0, heads 0); or name a preset: gpt-1.3b, gpt-2.7b, gpt-6.7b, gpt-13b, gpt-22b, gpt-23b, gpt-39b, gpt-175b, ...", ""},
    {ErrorCode::kTooManyGpus, "too-many-gpus",
     "the layout (tp x pp x dp) needs more GPUs than the cluster has",
     "add nodes (hardware.nodes) or make the layout smaller",
     "<built-in default scenario>:12:17: key 'parallel.global_batch': 32 is not divisible by micro_batch * dp = 2 * 64 = 128", ""},
    {ErrorCode::kIncompatibleSettings, "incompatible-settings",
     "settings that cannot be simulated together (virtual stages without the interleaved "
     "schedule, --trace in fast mode, a profile and a profile file, ...)",
     "change one of them as the message says",
     "bad.yaml:2:19: key 'parallel.virtual_stages': 2 model chunks per GPU need schedule 'interleaved'", ""},
    {ErrorCode::kNotModelled, "not-modelled",
     "an input lynxsim does not model yet (a Megatron-LM argument, fp32 training), or a plan "
     "live mode would run as another (TP-comm overlap, FP8 GEMMs)",
     "leave it out or replace it as the message says",
     "--megatron-args: neither --bf16 nor --fp16: fp32 training is not modelled by lynxsim yet (it simulates 16-bit mixed precision); add --bf16 or --fp16", ""},
    {ErrorCode::kNotInBuild, "not-in-build",
     "a feature this build of lynxsim lacks (the CBC MILP planner)",
     "install its package and rebuild (tools/setup.sh), or use another strategy",
     "recompute.strategy 'lynx-opt' needs a planner (not available in this build)",
     "every build tools/setup.sh makes has CBC; tests/strategies checks the code at library level"},
    {ErrorCode::kNotAPlan, "not-a-plan", "the file given as a plan is not a lynxsim plan file",
     "give a file `lynxsim plan -o` wrote",
     "plan.yaml:1:1: not a plan file: expected a mapping with lynxsim_plan, strategy, scenario and stages, got a list", ""},
    {ErrorCode::kPlanVersion, "plan-version",
     "a plan file of a format version this lynxsim does not read",
     "make the plan again with `lynxsim plan`",
     "plan.yaml:1:15: key 'lynxsim_plan': format 1 (plans without their scenario) is no longer read; make the plan again with `lynxsim plan`", ""},
    {ErrorCode::kPlanMismatch, "plan-mismatch",
     "the plan was made for another scenario (model, layout or strategy differ)",
     "run the plan with its own scenario, or plan again for this one",
     "plan.yaml:32:14: key 'scenario.model.seq_len': made for 2048, scenarios/examples/pcie-gpt1.3b-lynx.yaml has 4096 "
     "(scenarios/examples/pcie-gpt1.3b-lynx.yaml:11:12)", ""},
    {ErrorCode::kPlanUnbuildable, "plan-unbuildable",
     "the plan's decisions cannot be run (a dropped layer input, layers or stages out of order, "
     "a mode that does not match its drop list)",
     "make the plan again with `lynxsim plan`, or fix the entry named",
     "plan.yaml:100:26: key 'stages[0].layers[0].drop': layer 0 drops group 'input' (the layer input): every plan keeps it, the recompute starts from it (droppable groups: post, proj, core, mlp, moe_act)", ""},
    {ErrorCode::kUnknownProfile, "unknown-profile",
     "a hardware profile name that is neither built in nor a file",
     "use a built-in profile (the message lists them) or give hardware.profile_file",
     "bad.yaml:2:12: key 'hardware.profile': unknown hardware profile 'dgx-z100' (built-in profiles: dgx-a100-80gb, a100-pcie-40gb, dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit, hgx-b200-180gb, gb200-nvl72)", ""},
    {ErrorCode::kIncompleteProfile, "incomplete-profile",
     "a hardware profile file leaves fields out",
     "give them all, or start from a built-in profile with 'base: NAME' and give what differs",
     "p.yaml:1:1: hardware profile lacks 26 of its 27 fields: source, gpu.name, gpu.hbm_bw, gpu.memory, gpu.reserve, gpu.kernel_launch, gpu.gemm_efficiency.max, gpu.gemm_efficiency.half_flops, gpu.attention_efficiency.max, ...", ""},
    {ErrorCode::kBadHardware, "bad-hardware",
     "a hardware description that makes no physical sense (a zero bandwidth, a memory reserve "
     "above the memory, PCIe switches that do not split the node)",
     "fix the named field of the profile",
     "bad.yaml:4:14: key 'hardware.gpu.reserve': the reserve (107374182400 bytes) must be smaller than gpu.memory (85899345920 bytes)", ""},
    {ErrorCode::kInsufficientData, "insufficient-data",
     "too few or too uniform measurements to fit a profile or summarize the agreement",
     "give more rows, or measurements that vary", "v.csv: a summary needs at least 2 rows, got 1", ""},
    {ErrorCode::kBadCsvRow, "bad-csv-row",
     "a CSV row with the wrong number of columns or a cell that is not a valid value",
     "fix the row at the file:line named",
     "v.csv:3: column 4 (hidden size): 'abc' is not a positive integer", ""},
    {ErrorCode::kBadCsvHeader, "bad-csv-header", "a CSV file without the header lynxsim expects",
     "give a file lynxsim-calibrate wrote (the header names its columns)",
     "raw.csv:1: expected the raw CSV header 'kind,name,dtype,m,n,k,batch,bytes,ranks,nodes,scope,time_us_median,time_us_p10,time_us_p90,reps', got 'a,b,c'", ""},
    {ErrorCode::kEmptyCsv, "empty-csv", "a CSV file with no data rows",
     "give a file with measurements", "v.csv: no measured rows (only blank or '#' lines)", ""},
    {ErrorCode::kInconsistentCsvRow, "inconsistent-csv-row",
     "a CSV row whose values contradict each other (tp x dp x pp is not the GPU count, the batch "
     "does not split, percentiles out of order)",
     "fix the row at the file:line named",
     "v.csv:3: tp · dp · pp = 2 · 1 · 2 does not equal the 8 GPUs of the row", ""},
    {ErrorCode::kFileNotFound, "file-not-found", "an input file that does not exist",
     "check the path", "nothing.yaml: cannot open the scenario file: no such file", ""},
    {ErrorCode::kNotRegularFile, "not-a-regular-file",
     "an input path that is a folder, a device or a pipe, not a regular file",
     "give a regular file", "DIR: cannot read the scenario file: not a regular file", ""},
    {ErrorCode::kFileTooLarge, "file-too-large",
     "an input file above the size limit lynxsim reads (64 MiB)",
     "give the right file; no real input comes near the limit",
     "huge.yaml: the scenario file is 68157440 bytes, more than the 67108864 bytes lynxsim reads", ""},
    {ErrorCode::kReadFailed, "read-failed", "an input file that exists but cannot be read",
     "check its permissions",
     "/proc/self/mem: cannot read the scenario file: basic_filebuf::xsgetn error reading the file: Input/output error", ""},
    {ErrorCode::kWriteFailed, "write-failed",
     "an output file or standard output that cannot be opened or written (a full disk, a missing "
     "folder, a closed pipe)",
     "free space or choose another path", "-o: cannot write '/dev/full': No space left on device", ""},
    {ErrorCode::kOutputMismatch, "output-mismatch",
     "a sweep output file that holds another sweep, so it cannot be resumed",
     "remove the file or choose another -o",
     "-o out.csv:1: the file holds another sweep (its header differs from this grid's: another grid or base scenario, lynxsim version or column set); remove it or choose another file", ""},
    {ErrorCode::kBadUsage, "bad-usage",
     "an unknown command or option, or an option without its value (exit status 2)",
     "see `lynxsim --help` and `lynxsim COMMAND --help`", "unknown command 'frobnicate'", ""},
    {ErrorCode::kInvalidOption, "invalid-option-value",
     "a command-line option (or Python argument) with a value it cannot take",
     "give a value the message (or --help) accepts", "--format: unknown format 'xml' (expected table, csv or json)", ""},
    {ErrorCode::kMissingArgument, "missing-argument",
     "a required command-line argument, Megatron-LM argument or setting is missing",
     "give it (the message says which)",
     "validate: give the measurements CSV (e.g. validate/data/vtrain_single_node.csv)", ""},
    {ErrorCode::kConflictingOptions, "conflicting-options",
     "options that exclude each other, or one that needs another",
     "give one of them, or add the one it needs", "--trace-stages needs --trace OUT.json", ""},
    {ErrorCode::kBadLaunchLine, "bad-launch-line",
     "a Megatron-LM launch line or script that cannot be read (an unterminated quote, an "
     "unresolved variable, a stray word, a flag with a value)",
     "fix it, or give variables with --megatron-env NAME=VALUE", "--megatron-args:1:14: unterminated single quote", ""},
    {ErrorCode::kContradictingArguments, "contradicting-arguments",
     "Megatron-LM arguments that contradict each other or are given twice with different values",
     "keep one of them",
     "--megatron-args:1:132: --fp16 contradicts --bf16 (--megatron-args:1:125): Megatron-LM refuses both", ""},
    {ErrorCode::kLauncherMismatch, "launcher-mismatch",
     "the processes started are not the job needed: several that this lynxsim cannot join into one "
     "(built without MPI, or srun without an MPI plugin), or, for a live plan over N nodes, not one "
     "process per node",
     "rebuild with MPI (libopenmpi-dev), use srun --mpi=pmix, start a live plan over N nodes as "
     "mpirun -np N --map-by node lynxsim-live PLAN.yaml, or run one process",
     "the launcher started 2 processes but MPI sees each alone; with Slurm use srun --mpi=pmix (or pmi2)", ""},
    {ErrorCode::kWorkTooLarge, "work-too-large",
     "a simulation, grid or cluster estimated above what lynxsim builds (sim.max_tasks, the "
     "machine's memory, the grid point limit)",
     "make it smaller, or raise sim.max_tasks for a deliberately huge run",
     "<built-in>: key 'sim.max_tasks': the simulation would build about 5.48e+10 tasks (2 simulated GPUs (parallel.pp, one GPU per stage) x 262144 micro-batches (parallel.global_batch / (micro_batch x dp)) x 34824 ops per GPU (model.layers / ...", ""},
    {ErrorCode::kTimeOverflow, "simulated-time-overflow",
     "the simulated clock would pass 2^63 ps (106 days): a latency or bandwidth far off",
     "fix the key the message names",
     "simulated time overflow (2^63 ps, 106 days) in the simulated clock (it grows with model.layers, parallel.global_batch, the link latencies hardware.node.*.latency and the hardware's speeds): 6000000000089364301 ps + 6000000000000000000 ps", ""},
    {ErrorCode::kSystemFailure, "system-failure",
     "the machine refused a resource: a thread, MPI, a CUDA device or call, a plotting tool",
     "use fewer threads, or install what the message names",
     "cannot start 256 simulation threads (Resource temporarily unavailable); use fewer with --threads", ""},
    {ErrorCode::kNoValidLayout, "no-valid-layout",
     "`lynxsim best` found no valid layout of the GPUs for the scenario",
     "change --gpus or the model so that some tp x pp x dp divides it",
     "best: no layout of 7 GPUs is valid for this scenario; the first candidate (tp 1 pp 1 dp 7, mb 1, none) fails with: scenarios/examples/default.yaml:12:17: key 'parallel.global_batch': 32 is not divisible by micro_batch * dp = 1 * 7 = 7", ""},
    {ErrorCode::kNothingFits, "nothing-fits",
     "`lynxsim best` found no plan that fits in GPU memory",
     "give more GPUs, GPUs with more memory, or allow recomputation (--strategies)",
     "best: no plan fits in GPU memory on 8 GPUs (0 candidates out of memory, 3840 pruned by the memory bound, 1280 invalid)", ""},
};

std::string capitalized(std::string text) {
  if (!text.empty() && text[0] >= 'a' && text[0] <= 'z') text[0] = static_cast<char>(text[0] - 'a' + 'A');
  return text;
}

}  // namespace

const std::vector<ErrorCodeInfo>& error_catalogue() { return kCatalogue; }

const ErrorCodeInfo& error_code_info(ErrorCode code) {
  const auto it = std::find_if(kCatalogue.begin(), kCatalogue.end(),
                               [&](const ErrorCodeInfo& row) { return row.code == code; });
  LYNX_CHECK(it != kCatalogue.end(), "error code {} has no row in the catalogue",
             static_cast<int>(code));
  return *it;
}

std::string error_code_id(ErrorCode code) { return fmt::format("E{:03}", static_cast<int>(code)); }

std::string error_catalogue_markdown() {
  std::string out;
  for (const ErrorCodeInfo& row : kCatalogue) {
    out += fmt::format("### {} `{}`\n\n{}. **What to do:** {}.\n\n", error_code_id(row.code),
                       row.name, capitalized(row.meaning), row.remedy);
    if (*row.example != '\0')
      out += fmt::format("    lynxsim: error {} ({}): {}\n\n", error_code_id(row.code), row.name,
                         row.example);
    if (*row.no_cli_case != '\0') out += fmt::format("No command line triggers it: {}.\n\n", row.no_cli_case);
  }
  return out;
}

std::string error_text(const ErrorCodeInfo& row) {
  return fmt::format("{} {}\n  {}\n  what to do: {}\n", error_code_id(row.code), row.name,
                     row.meaning, row.remedy);
}

std::string error_catalogue_text() {
  std::string out;
  for (const ErrorCodeInfo& row : kCatalogue) out += error_text(row);
  return out;
}

}  // namespace lynx
