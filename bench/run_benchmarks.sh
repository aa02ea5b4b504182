#!/bin/bash
# Regenerates the rows of BENCHMARKS.md that a few minutes of CPU can: exact-mode iterations,
# the event engine, fast mode's rate and its NVLink agreement, and `lynxsim figures`. Prints
# markdown table rows with today's date, ready to replace those in BENCHMARKS.md.
# Run from anywhere after a Release build: bench/run_benchmarks.sh [RUNS] (default 5 runs of
# each exact-mode case; BUILD=dir picks another build folder; PCIE=1 adds the PCIe agreement
# set, about 2 min more).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
runs=${1:-5}
today=$(date -u +%Y-%m-%d)
load=$(cut -d' ' -f1-3 /proc/loadavg)
cores=$(nproc)
mem_gib=$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
echo "Measured $today on $cores cores, $mem_gib GiB, load average $load, commit $commit."
echo

# The reference configurations (BENCHMARKS.md "Exact mode").
s1t="--set model.preset=gpt-1t --set parallel.pp=64 --set parallel.dp=1 --set hardware.nodes=64
     --set parallel.global_batch=512 --set parallel.sequence_parallel=false --set recompute.strategy=full"
s22="--set hardware.nodes=8 --set parallel.pp=8 --set parallel.micro_batch=1 --set parallel.global_batch=128"

# Median user + sys CPU seconds and the largest peak RSS over $runs runs of `lynxsim run ARGS`.
exact_row() {
  local label=$1
  shift
  local samples=()
  local rss_kib=0
  for _ in $(seq "$runs"); do
    read -r user sys rss < <({ /usr/bin/time -f "%U %S %M" "$build/lynxsim" run "$@" --format json >/dev/null; } 2>&1)
    samples+=("$(echo "$user + $sys" | bc)")
    ((rss > rss_kib)) && rss_kib=$rss
  done
  local median
  median=$(printf '%s\n' "${samples[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  printf '| %s | %.2f s | %d MiB | %s |\n' "$label" "$median" $((rss_kib / 1024)) "$today"
}

echo "| configuration | CPU (median of $runs) | peak RSS | date |"
echo "|---|---|---|---|"
# shellcheck disable=SC2086  # the override lists split into words on purpose
exact_row "GPT-1T, 512 GPUs (tp 8, pp 64, full)" scenarios/examples/gpt175b-1024gpu.yaml $s1t
exact_row "GPT-175B, 1024 GPUs (tp 8, pp 16, dp 8)" scenarios/examples/gpt175b-1024gpu.yaml
# shellcheck disable=SC2086
exact_row "GPT-22B, 64 GPUs (tp 8, pp 8, selective)" scenarios/examples/gpt22b-selective.yaml $s22
echo

echo "| benchmark | events per CPU second | date |"
echo "|---|---|---|"
"$build/bench/engine_bench" | awk -v d="$today" '
  /^engine, 64 actors/ { printf "| event queue, 64 pending | %.1fM | %s |\n", $(NF - 1) / 1e6, d }
  /^engine, 1024 actors/ { printf "| event queue, 1024 pending | %.1fM | %s |\n", $(NF - 1) / 1e6, d }
  /^executor, 500k tasks/ { printf "| executor, 500k tasks | %.1fM | %s |\n", $(NF - 1) / 1e6, d }'
echo

echo "| fast mode | figure | date |"
echo "|---|---|---|"
"$build/bench/fast_bench" --skip-agreement | awk -v d="$today" '
  /cold:/ { printf "| rate, GPT-22B on 64 GPUs, cold | %s configurations per CPU second | %s |\n", $5, d }
  /warm:/ { printf "| rate, GPT-22B on 64 GPUs, warm | %s configurations per CPU second | %s |\n", $5, d }'
sets=("tests/fast/configs.txt")
[[ ${PCIE:-0} == 1 ]] && sets+=("tests/fast/configs-pcie.txt")
for set in "${sets[@]}"; do
  "$build/bench/fast_bench" --agreement "$set" | awk -v d="$today" -v set="$set" '
    /^agreement over/ { n = $3 }
    /median/ { med = $5; p95 = $7; max = $9 }
    /Kendall tau/ { tau = $3; sub(/;$/, "", tau) }
    END { printf "| agreement with exact mode, %s (%d) | max %s, p95 %s, median %s, tau %s | %s |\n",
                 set, n, max, p95, med, tau, d }'
done
echo

out=$(mktemp -d)
start=$(date +%s.%N)
"$build/lynxsim" figures --out "$out" >/dev/null 2>&1
wall=$(echo "$(date +%s.%N) - $start" | bc)
rm -rf "$out"
echo "| command | wall | date |"
echo "|---|---|---|"
# shellcheck disable=SC2016  # the backquotes are markdown
printf '| `lynxsim figures` (60 runs, both clusters) | %.1f s | %s |\n' "$wall" "$today"
