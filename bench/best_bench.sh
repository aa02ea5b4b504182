#!/bin/sh
# `lynxsim best` on the issue's whole space for GPT-22B on 64 A100s: every tp·pp·dp = 64
# layout, micro-batch 1-8, virtual stages 1-4, SP on/off, none / full / selective / checkmate /
# lynx-heu (distributed optimizer and flash attention fixed off, as the space), top 5
# confirmed in exact mode. Prints the report, the rates, and the wall / CPU time, peak RSS and
# load around it. Run from the repository root after building: bench/best_bench.sh [THREADS]
set -e
threads=${1:-$(nproc)}
echo "load before: $(cat /proc/loadavg)"
/usr/bin/time -f "wall %e s, user %U s, system %S s, peak RSS %M KiB" \
  build/lynxsim best bench/best-gpt22b-64.yaml --gpus 64 --top 5 --threads "$threads" \
  --micro-batches 1-8 --virtual-stages 1-4 --sp search --dist-opt off --flash off \
  --strategies none,full,selective,checkmate,lynx-heu
echo "load after: $(cat /proc/loadavg)"
