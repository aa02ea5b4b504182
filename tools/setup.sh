#!/usr/bin/env bash
# Installs the Debian packages lynxsim needs (only those missing), then configures and builds
# in ./build (Release). Safe to run again. Run as root (or with sudo) on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake make pkg-config
  libboost-graph-dev libboost-program-options-dev libfmt-dev libyaml-cpp-dev doctest-dev
  coinor-libcbc-dev python3-matplotlib python3-numpy pybind11-dev python3-pybind11 python3-dev openmpi-bin libopenmpi-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
