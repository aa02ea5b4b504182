#!/usr/bin/env bash
# Measures the GPU(s) of this machine and fits a lynxsim hardware profile from the results,
# unattended, in one go:
#
#   bash calibrate/run_on_device.sh [extra lynxsim-calibrate options]
#
#   1. environment report (GPU, driver, toolchain);
#   2. configure + build, Release, only lynxsim-calibrate and lynxsim, in build-device/;
#      if that fails and build-device-deps/ was carried, again against those Debian packages;
#      if that fails too and build-device-bundle/ was carried, its prebuilt binaries are used
#      (both folders come from calibrate/prepare_device_carry.sh);
#   3. lynxsim-calibrate --quick over the gpt-1.3b and gpt-6.7b shapes on all visible GPUs;
#   4. lynxsim fit against the datasheet profile h200-sxm-141gb, printing the fit report and
#      the fitted-vs-datasheet comparison table.
#
# Output (at most 8 files, what the device tool brings back): $OUT if set, else ./calib-out:
#   raw.csv  fitted-profile.yaml  fit-report.txt  environment.txt  run.log
# Knobs (environment): MODELS (gpt-1.3b,gpt-6.7b), TP (1,2,4,8), MICRO_BATCH (1,2,4),
#   BASE_PROFILE (h200-sxm-141gb), CALIBRATE_TIMEOUT (420 s), JOBS (nproc),
#   BUILD_DIR (build-device), BUILD_LYNXSIM (1; 0 = measure only, fit elsewhere).
# Exit status: 0 when raw.csv has measurements and the fit ran; 1 otherwise.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
out=${OUT:-$repo/calib-out}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1

models=${MODELS:-gpt-1.3b,gpt-6.7b}
tp=${TP:-1,2,4,8}
micro_batch=${MICRO_BATCH:-1,2,4}
base_profile=${BASE_PROFILE:-h200-sxm-141gb}
calibrate_timeout=${CALIBRATE_TIMEOUT:-420}
build_lynxsim=${BUILD_LYNXSIM:-1}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
build=${BUILD_DIR:-$repo/build-device}
deps=$repo/build-device-deps
bundle=$repo/build-device-bundle
raw=$out/raw.csv
profile=$out/fitted-profile.yaml
report=$out/fit-report.txt
envfile=$out/environment.txt
started=$(date +%s)

step() { echo; echo "=== [$(( $(date +%s) - started )) s] $*"; }
# have, find_first and the environment report (shared with live/run_on_device.sh).
. "$repo/gpu/device_env.sh"

# ---- 1. environment -----------------------------------------------------------------------------
step "environment"
device_environment "$envfile"

# ---- 2. build -----------------------------------------------------------------------------------
calibrate_bin=""
lynxsim_bin=""
build_with() {  # extra cmake arguments...
  if ! have cmake; then echo "cmake not found"; return 1; fi
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLYNXSIM_WITH_CUDA=ON \
    -DLYNXSIM_BUILD_TESTS=OFF -DLYNXSIM_BUILD_BENCH=OFF "-DLYNXSIM_CUDA_ARCHITECTURES=$arch" \
    "${nccl_args[@]}" "$@" || return 1
  cmake --build "$build" --target lynxsim-calibrate -j"$jobs" || return 1
  calibrate_bin=$build/lynxsim-calibrate
  # lynxsim (for the fit) is second: a failure here still leaves the measurements.
  if [ "$build_lynxsim" != 0 ] && cmake --build "$build" --target lynxsim -j"$jobs"; then
    lynxsim_bin=$build/lynxsim
  fi
  return 0
}

unpack_deps() {
  local root=$deps/root deb
  rm -rf "$root"
  mkdir -p "$root"
  for deb in "$deps"/debs/*.deb; do
    if have dpkg; then
      dpkg -x "$deb" "$root" || return 1
    else
      (cd "$root" && ar p "$deb" "$(ar t "$deb" | grep '^data\.tar')" | tar -x -J -f -) || return 1
    fi
  done
  # The packages' pkg-config files name /usr: point them at the private prefix.
  local pc
  for pc in "$root"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$root"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -e "s|^prefix=/usr\$|prefix=$root/usr|" -e "s|=/usr/|=$root/usr/|g" "$pc"
  done
  export PATH="$root/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local pc_dir=$root/usr/lib/x86_64-linux-gnu/pkgconfig
  export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
}

step "build (Release: lynxsim-calibrate, lynxsim) in $build"
if ! build_with; then
  if [ -d "$deps/debs" ]; then
    step "build failed against the system; again with the carried packages in $deps"
    rm -rf "$build"
    if unpack_deps; then build_with "-DCMAKE_PREFIX_PATH=$deps/root/usr" || calibrate_bin=""; fi
  fi
fi
if [ -z "$calibrate_bin" ] && [ -x "$bundle/bin/lynxsim-calibrate" ]; then
  step "building failed; using the prebuilt binaries of $bundle"
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  calibrate_bin=$bundle/bin/lynxsim-calibrate
  [ "$build_lynxsim" != 0 ] && [ -x "$bundle/bin/lynxsim" ] && lynxsim_bin=$bundle/bin/lynxsim
fi
if [ -z "$lynxsim_bin" ] && [ "$build_lynxsim" != 0 ] && [ -x "$bundle/bin/lynxsim" ]; then
  echo "lynxsim did not build here; the fit uses the prebuilt $bundle/bin/lynxsim"
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$bundle/lib"
  lynxsim_bin=$bundle/bin/lynxsim
fi
if [ -z "$calibrate_bin" ]; then
  step "FAILED: no lynxsim-calibrate could be built (see the log above; carry build-device-deps"
  echo "or build-device-bundle from calibrate/prepare_device_carry.sh)"
  exit 1
fi

# ---- 3. measure ---------------------------------------------------------------------------------
step "measure: $calibrate_bin --quick --model $models --tp $tp --micro-batch $micro_batch $*"
timeout "$calibrate_timeout" "$calibrate_bin" --quick --model "$models" --tp "$tp" \
  --micro-batch "$micro_batch" --out "$raw" "$@"
calibrate_status=$?
rows=0
[ -f "$raw" ] && rows=$(grep -v '^#' "$raw" | tail -n +2 | grep -c . || true)
echo "lynxsim-calibrate exit status $calibrate_status; $rows measurement rows in $raw"
if [ "$rows" -gt 0 ]; then
  echo "rows per kind:"
  grep -v '^#' "$raw" | tail -n +2 | cut -d, -f1 | sort | uniq -c
fi
if [ "$rows" -eq 0 ]; then
  step "FAILED: no measurements"
  exit 1
fi

# ---- 4. fit -------------------------------------------------------------------------------------
step "fit: lynxsim fit $raw --base $base_profile --out $profile"
if [ -n "$lynxsim_bin" ] && "$lynxsim_bin" fit --help >/dev/null 2>&1; then
  "$lynxsim_bin" fit "$raw" --base "$base_profile" --out "$profile" > "$report" 2>&1
  fit_status=$?
  cat "$report"
else
  echo "'lynxsim fit' is not available in this build; the measurements are in $raw —"
  echo "fit them on any machine with: lynxsim fit raw.csv --base $base_profile --out fitted.yaml"
  fit_status=1
fi

step "done: files in $out"
ls -l "$out"
[ "$fit_status" -eq 0 ] && exit 0
exit 1
