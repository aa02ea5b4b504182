#!/usr/bin/env bash
# Live mode on the GPU of this machine, unattended, in one go (about 10 minutes on one H200):
#
#   bash live/run_on_device.sh
#
#   1. environment report (GPU, driver, toolchain; gpu/device_env.sh, shared with calibrate);
#   2. configure + build, Release, only lynxsim, lynxsim-live and lynxsim-calibrate, in
#      build-device/;
#   3. for each model (GPT-1.3B, and GPT-6.7B at micro-batch 2, which fits one H200 only with
#      recomputation: 163 GiB predicted without, 108-139 GiB with)
#      and each strategy (none, full, selective, lynx-heu): `lynxsim plan` on one H200
#      (scenario written here), then `lynxsim live PLAN` (the CUDA backend, with the
#      watchdog's limits: a stuck run ends with its error line, not at `timeout`) — a plan
#      that does not fit is refused up front by live mode with its numbers and recorded as such;
#      then GPT-1.3B at tp 2 on one GPU with the communication stand-in (sim.comm_standin:
#      TP collectives as device->host->device copies), selective and lynx-heu;
#   4. lynxsim-calibrate --quick over the same shapes (tp 1, this micro-batch), then
#      `lynxsim fit` of its raw CSV and of live mode's raw CSV (GPT-1.3B selective) against
#      the profile, and each run predicted again with each fitted profile (`lynxsim run`):
#      measured vs predicted before and after the fit;
#   5. a table of measured vs predicted iteration time and peak memory.
#
# Output ($OUT if set, else results/live; at most 8 files, what the device tool brings back):
#   summary.csv   run,strategy,status,measured_s,predicted_s,measured_peak_bytes,
#                 predicted_peak_bytes,predicted_calibrate_fit_s,predicted_live_fit_s
#   compare.csv   every run's measured-vs-predicted rows, prefixed with run,strategy
#   raw-gpt-1.3b-selective.csv   per-op times in calibrate's raw schema (lynxsim fit reads it)
#   trace-gpt-1.3b-selective.json  the measured iteration (open beside a simulated trace)
#   calib-raw.csv  lynxsim-calibrate's measurements
#   fit.txt        both fit reports and both fitted profiles
#   environment.txt  run.log
# Commit summary.csv, compare.csv and fit.txt under results/live/.
# Knobs (environment): MODELS (gpt-1.3b,gpt-6.7b), STRATEGIES (none,full,selective,lynx-heu),
#   MICRO_BATCH (2), GLOBAL_BATCH (8), SEQ_LEN (2048), ITERATIONS (3), WARMUP (1),
#   PROFILE (h200-sxm-141gb), RUN_TIMEOUT (240 s per live run), STANDIN_BW (25GB/s; 0: no
#   stand-in runs), CALIBRATE_BUDGET (90 s of measuring; 0: no calibrate step), JOBS (nproc),
#   BUILD_DIR (build-device).
# Exit status: 0 when every run that fits was measured and both fits ran; 1 otherwise.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
out=${OUT:-$repo/results/live}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1

models=${MODELS:-gpt-1.3b,gpt-6.7b}
strategies=${STRATEGIES:-none,full,selective,lynx-heu}
micro_batch=${MICRO_BATCH:-2}
global_batch=${GLOBAL_BATCH:-8}
seq_len=${SEQ_LEN:-2048}
iterations=${ITERATIONS:-3}
warmup=${WARMUP:-1}
profile=${PROFILE:-h200-sxm-141gb}
run_timeout=${RUN_TIMEOUT:-240}
standin_bw=${STANDIN_BW:-25GB/s}
calibrate_budget=${CALIBRATE_BUDGET:-90}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
build=${BUILD_DIR:-$repo/build-device}
envfile=$out/environment.txt
work=$(mktemp -d)
started=$(date +%s)

step() { echo; echo "=== [$(( $(date +%s) - started )) s] $*"; }
. "$repo/gpu/device_env.sh"

# ---- 1. environment -----------------------------------------------------------------------------
step "environment"
device_environment "$envfile"

# ---- 2. build -----------------------------------------------------------------------------------
step "build (Release: lynxsim, lynxsim-live, lynxsim-calibrate) in $build"
if ! have cmake; then echo "cmake not found"; exit 1; fi
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLYNXSIM_WITH_CUDA=ON \
  -DLYNXSIM_BUILD_TESTS=OFF -DLYNXSIM_BUILD_BENCH=OFF -DLYNXSIM_BUILD_PYTHON=OFF \
  -DLYNXSIM_WITH_MPI=OFF "-DLYNXSIM_CUDA_ARCHITECTURES=$arch" "${nccl_args[@]}" || exit 1
cmake --build "$build" --target lynxsim lynxsim-live lynxsim-calibrate -j"$jobs" || { step "FAILED: build"; exit 1; }
lynxsim=$build/lynxsim
if [ ! -x "$build/lynxsim-live" ]; then
  step "FAILED: lynxsim-live was not built (CUDA or NCCL not found by CMake: see above)"
  exit 1
fi

# ---- 3. plan and run ----------------------------------------------------------------------------
summary=$out/summary.csv
compare=$out/compare.csv
echo "run,strategy,status,measured_s,predicted_s,measured_peak_bytes,predicted_peak_bytes" > "$work/summary.csv"
echo "run,strategy,row,rank,op,pass,stream,count,unit,measured,predicted,measured_over_predicted" > "$compare"
failures=0
# Runs: every model x strategy on one GPU, then the communication stand-in (tp 2 shard of
# GPT-1.3B on one GPU, TP collectives as device->host->device copies at $standin_bw).
runs=()
IFS=, read -r -a model_list <<< "$models"
IFS=, read -r -a strategy_list <<< "$strategies"
for model in "${model_list[@]}"; do
  for strategy in "${strategy_list[@]}"; do runs+=("$model $strategy 1 0"); done
done
if [ "$standin_bw" != 0 ]; then
  for strategy in selective lynx-heu; do runs+=("gpt-1.3b $strategy 2 $standin_bw"); done
fi
for run in "${runs[@]}"; do
  read -r model strategy tp bw <<< "$run"
  {
    name=$model-$strategy
    [ "$bw" != 0 ] && name=$model-tp$tp-standin-$strategy
    scenario=$work/$name.scenario.yaml
    standin=""
    [ "$bw" != 0 ] && standin=$'sim:\n  comm_standin:\n    bw: '"$bw"$'\n    latency: 10us'
    cat > "$scenario" <<EOF
name: $name
model:
  preset: $model
  seq_len: $seq_len
parallel:
  tp: $tp
  pp: 1
  dp: 1
  micro_batch: $micro_batch
  global_batch: $global_batch
hardware:
  profile: $profile
  nodes: 1
recompute:
  strategy: $strategy
$standin
EOF
    step "$name: plan"
    if ! "$lynxsim" plan "$scenario" -o "$work/$name.plan.yaml"; then
      echo "$name,$strategy,plan-failed,,,," >> "$work/summary.csv"
      failures=$((failures + 1))
      continue
    fi
    "$lynxsim" run --plan "$work/$name.plan.yaml" | head -8
    extra=()
    if [ "$name" = "gpt-1.3b-selective" ]; then
      extra=(--raw-csv "$out/raw-$name.csv" --trace "$out/trace-$name.json")
    fi
    step "$name: live ($iterations iterations after $warmup warm-up)"
    # The watchdog ends a stuck run with its error line well before `timeout` would.
    timeout "$run_timeout" "$lynxsim" live "$work/$name.plan.yaml" --iterations "$iterations" \
      --warmup "$warmup" --csv "$work/$name.compare.csv" "${extra[@]}" \
      --timeout-comm-init 60 --timeout-op 30 --timeout-iteration $(( run_timeout / 3 )) 2>&1 | tee "$work/$name.log"
    status=${PIPESTATUS[0]}
    if [ "$status" -ne 0 ]; then
      # A plan that does not fit is refused up front ("needs ... GiB ..."): a result, not a failure.
      if grep -q "needs .* GiB" "$work/$name.log"; then
        echo "$name,$strategy,does-not-fit,,,," >> "$work/summary.csv"
      else
        echo "$name,$strategy,failed-$status,,,," >> "$work/summary.csv"
        failures=$((failures + 1))
      fi
      continue
    fi
    tail -n +2 "$work/$name.compare.csv" | sed "s/^/$name,$strategy,/" >> "$compare"
    iteration=$(grep '^iteration,' "$work/$name.compare.csv" | head -1)
    peak=$(grep '^peak_memory,0,' "$work/$name.compare.csv" | head -1)
    echo "$name,$strategy,measured,$(echo "$iteration" | cut -d, -f8,9),$(echo "$peak" | cut -d, -f8,9)" >> "$work/summary.csv"
  }
done

# ---- 4. calibrate, fit, predict again -----------------------------------------------------------
fit=$out/fit.txt
: > "$fit"
live_raw=$out/raw-gpt-1.3b-selective.csv
calib_raw=$out/calib-raw.csv
# Each fitted profile predicts every scenario again; $work/<fit>.<run> holds the iteration time.
predict_with() {  # fit-name profile.yaml
  local fitname=$1 profile_yaml=$2 scenario
  for scenario in "$work"/*.scenario.yaml; do
    [ -e "$scenario" ] || continue
    local name
    name=$(basename "$scenario" .scenario.yaml)
    sed "s|^  profile: .*|  profile_file: $profile_yaml|" "$scenario" > "$work/$name.$fitname.yaml"
    "$lynxsim" run "$work/$name.$fitname.yaml" --format json > "$work/$name.$fitname.json" 2>> "$work/predict.log" &&
      python3 -c 'import json,sys
def find(v):
    if isinstance(v, dict):
        if "iteration_time_s" in v: return v["iteration_time_s"]
        v = list(v.values())
    if isinstance(v, list):
        for x in v:
            r = find(x)
            if r is not None: return r
print(find(json.load(open(sys.argv[1]))))' "$work/$name.$fitname.json" > "$work/$fitname.$name" ||
      echo "" > "$work/$fitname.$name"
  done
}
if [ "$calibrate_budget" != 0 ]; then
  step "lynxsim-calibrate --quick ($models shapes, tp 1, micro-batch $micro_batch, ${calibrate_budget} s budget)"
  timeout $(( calibrate_budget + 120 )) "$build/lynxsim-calibrate" --quick --model "$models" --tp 1 \
    --micro-batch "$micro_batch" --seq "$seq_len" --no-sweeps --dtypes bf16 --time-budget "$calibrate_budget" \
    --out "$calib_raw" || { step "FAILED: lynxsim-calibrate"; failures=$((failures + 1)); }
fi
for source in calibrate live; do
  raw=$calib_raw
  [ "$source" = live ] && raw=$live_raw
  if [ ! -s "$raw" ]; then
    echo "no $raw: no $source fit" | tee -a "$fit"
    failures=$((failures + 1))
    continue
  fi
  step "lynxsim fit $(basename "$raw") --base $profile"
  { echo "=== lynxsim fit $(basename "$raw") --base $profile"
    "$lynxsim" fit "$raw" --base "$profile" -o "$work/fitted-$source.yaml"
    echo "=== fitted-$source.yaml"; cat "$work/fitted-$source.yaml"; } >> "$fit" 2>&1 ||
    { step "FAILED: fit of $source"; failures=$((failures + 1)); continue; }
  predict_with "$source-fit" "$work/fitted-$source.yaml"
done
echo "run,strategy,status,measured_s,predicted_s,measured_peak_bytes,predicted_peak_bytes,predicted_calibrate_fit_s,predicted_live_fit_s" > "$summary"
tail -n +2 "$work/summary.csv" | while IFS=, read -r name rest; do
  echo "$name,$rest,$(cat "$work/calibrate-fit.$name" 2>/dev/null),$(cat "$work/live-fit.$name" 2>/dev/null)"
done >> "$summary"

# ---- 5. table -----------------------------------------------------------------------------------
step "measured vs predicted (one H200, $profile profile, then the fitted ones; times per iteration, peaks static included)"
awk -F, 'NR == 1 { printf "%-32s %-10s %-14s %11s %11s %7s %9s %9s %11s %11s\n", "run", "strategy", "status",
                        "measured_s", "predicted_s", "ratio", "meas_GiB", "pred_GiB", "calib_fit_s", "live_fit_s"; next }
  $3 == "measured" { printf "%-32s %-10s %-14s %11.4f %11.4f %7.3f %9.2f %9.2f %11s %11s\n", $1, $2, $3, $4, $5,
                       ($5 > 0 ? $4 / $5 : 0), $6 / 1073741824, $7 / 1073741824, $8, $9; next }
  { printf "%-32s %-10s %-14s\n", $1, $2, $3 }' "$summary"
step "done: files in $out"
ls -l "$out"
rm -rf "$work"
[ "$failures" -eq 0 ] && exit 0
exit 1
