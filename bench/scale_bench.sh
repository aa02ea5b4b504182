#!/bin/sh
# The cluster-scale numbers of `lynxsim best` and fast mode (docs/best.md, docs/sweep.md):
#   1. best for GPT-175B on 1024 A100s (scenarios/examples/gpt175b-1024gpu.yaml), top 3, the
#      default space, on 1 and on 2 threads: wall, CPU (user + system), peak RSS;
#   2. best refusing a GPU count no layout divides (--gpus 1048576);
#   3. fast mode's rate over distinct layouts of GPT-22B on 64 GPUs and exact mode's step
#      times (build/bench/fast_bench --skip-agreement, build/bench/sim_bench).
# The load average is printed before and after each (the machine may be shared). Run from the
# repository root after a Release build: bench/scale_bench.sh [--quick] (--quick: 2 threads
# only for step 1).
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
echo "== fast mode over distinct layouts (fast_bench --skip-agreement)"
timed build/bench/fast_bench --skip-agreement
echo "== exact mode (sim_bench)"
timed build/bench/sim_bench 3 steps
