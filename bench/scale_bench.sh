#!/bin/sh
# The cluster-scale numbers of `lynxsim best` and fast mode (docs/best.md, docs/sweep.md):
#   1. best for GPT-175B on 1024 A100s (scenarios/examples/gpt175b-1024gpu.yaml), top 3, the
#      default space, on 1 and on 2 threads: wall, CPU (user + system), peak RSS;
#   2. best refusing a GPU count no layout divides (--gpus 1048576);
#   3. a fast-mode sweep over distinct layouts of GPT-22B on 64 GPUs
#      (bench/sweep-gpt22b-64-layouts.yaml: no two layouts share step profiles) on 1 and 2
#      threads: points per second from its summary line, CPU and peak RSS;
#   4. fast mode's rate (build/bench/fast_bench --skip-agreement) and exact mode's step times
#      (build/bench/sim_bench);
#   5. with --maps: `figures --maps --no-plot` (the whole map file, about 10 CPU-minutes): its
#      peak RSS.
# The load average is printed before and after each (the machine may be shared: CPU seconds
# are the figure to compare). Run from the repository root after a Release build:
# bench/scale_bench.sh [--quick | --maps] (--quick: 2 threads only for steps 1 and 3).
set -e
quick=${1:-}
timed() {
  echo "load before: $(cat /proc/loadavg)"
  /usr/bin/time -f "wall %e s, user %U s, system %S s, peak RSS %M KiB" "$@"
  echo "load after: $(cat /proc/loadavg)"
}
for threads in 1 2; do
  [ "$quick" = "--quick" ] && [ "$threads" = 1 ] && continue
  echo "== best gpt175b-1024gpu --gpus 1024 --top 3 --threads $threads"
  timed build/lynxsim best scenarios/examples/gpt175b-1024gpu.yaml --gpus 1024 --top 3 --threads "$threads"
done
echo "== best gpt175b-1024gpu --gpus 1048576 (no layout divides the model)"
timed build/lynxsim best scenarios/examples/gpt175b-1024gpu.yaml --gpus 1048576 --top 3 || true
for threads in 1 2; do
  [ "$quick" = "--quick" ] && [ "$threads" = 1 ] && continue
  echo "== sweep bench/sweep-gpt22b-64-layouts.yaml --threads $threads"
  rm -f "${TMPDIR:-/tmp}/scale-bench-sweep.csv"  # else the sweep resumes the previous run's file
  timed build/lynxsim sweep bench/sweep-gpt22b-64-layouts.yaml -o "${TMPDIR:-/tmp}/scale-bench-sweep.csv" \
    --threads "$threads" 2>&1 | grep -E "simulated|wall|load"
done
echo "== fast mode's rate (fast_bench --skip-agreement)"
timed build/bench/fast_bench --skip-agreement
echo "== exact mode (sim_bench)"
timed build/bench/sim_bench 3 steps
if [ "$quick" = "--maps" ]; then
  echo "== figures --maps (peak RSS)"
  timed build/lynxsim figures --maps --no-plot --threads 2 --out "${TMPDIR:-/tmp}/scale-bench-maps"
fi
