#!/usr/bin/env bash
# Prepares, on a Debian 12 development machine with network, two folders that
# calibrate/run_on_device.sh can use on a GPU machine that has no network and may lack this
# project's build dependencies:
#   build-device-deps/debs/   Debian packages of the build dependencies (Boost program_options
#                             and graph, fmt, yaml-cpp, pkgconf, CBC). run_on_device.sh unpacks them
#                             into a private prefix only if configuring against the system fails.
#   build-device-bundle/      lynxsim-calibrate and lynxsim built here (static CUDA runtime,
#                             cuBLAS and NCCL left to the target), plus the shared libraries they
#                             need besides glibc, libstdc++ and CUDA's. Used only if building on
#                             the GPU machine fails.
# Both are ignored by git (/build*/); hand them to the device tool with carry.
#
#   calibrate/prepare_device_carry.sh [--deps-only | --bundle-only]
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
deps_dir=build-device-deps
bundle_dir=build-device-bundle
bundle_tree=build-device-bundle-tree  # object files: not carried

if [ "$mode" != "--bundle-only" ]; then
  rm -rf "$deps_dir"
  mkdir -p "$deps_dir/debs"
  packages=(
    libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
    libboost-graph1.74-dev libboost-graph1.74.0 libboost-program-options-dev libboost-graph-dev
    libboost-regex1.74-dev libboost-regex1.74.0
    libfmt-dev libfmt9 libyaml-cpp-dev libyaml-cpp0.7 pkgconf pkgconf-bin libpkgconf3
    coinor-libcbc-dev coinor-libcbc3 coinor-libcgl-dev coinor-libcgl1 coinor-libclp-dev
    coinor-libclp1 coinor-libosi-dev coinor-libosi1v5 coinor-libcoinutils-dev
    coinor-libcoinutils3v5
  )
  (cd "$deps_dir/debs" && apt-get download "${packages[@]}")
  echo "prepare: $(ls "$deps_dir/debs" | wc -l) packages in $deps_dir/debs" \
    "($(du -sh "$deps_dir" | cut -f1))"
fi

if [ "$mode" != "--deps-only" ]; then
  jobs=${JOBS:-2}
  cmake -S . -B "$bundle_tree" -DCMAKE_BUILD_TYPE=Release -DLYNXSIM_WITH_CUDA=ON \
    -DLYNXSIM_BUILD_TESTS=OFF -DLYNXSIM_BUILD_BENCH=OFF -DLYNXSIM_CALIBRATE_STATIC_CUDART=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON "-DLYNXSIM_CUDA_ARCHITECTURES=80-real;90"
  cmake --build "$bundle_tree" --target lynxsim-calibrate -j"$jobs"
  rm -rf "$bundle_dir"
  mkdir -p "$bundle_dir/bin" "$bundle_dir/lib"
  cp "$bundle_tree/lynxsim-calibrate" "$bundle_dir/bin/"
  # lynxsim (for `lynxsim fit`) is optional: without it the bundle still measures.
  if cmake --build "$bundle_tree" --target lynxsim -j"$jobs"; then
    cp "$bundle_tree/lynxsim" "$bundle_dir/bin/"
  else
    echo "prepare: lynxsim did not build; the bundle has lynxsim-calibrate only"
  fi
  # Shared libraries to take along: everything ldd resolves except the C library family,
  # libstdc++/libgcc (the target's newer ones are backward compatible) and CUDA's own
  # (cuBLAS, NCCL and the driver come from the target machine).
  skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s'
  skip+='|libcuda\.|libcublas|libcublasLt|libnccl|libcudart)'
  for binary in "$bundle_dir"/bin/*; do
    ldd "$binary" | awk '/=> \// {print $1, $3}' | while read -r name path; do
      if ! [[ $name =~ $skip ]]; then cp -Lf "$path" "$bundle_dir/lib/$name"; fi
    done
  done
  echo "prepare: bundle $(ls "$bundle_dir/bin" | tr '\n' ' ')+ $(ls "$bundle_dir/lib" | wc -l)" \
    "libraries ($(du -sh "$bundle_dir" | cut -f1))"
fi
