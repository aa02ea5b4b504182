# Sourced by calibrate/run_on_device.sh and live/run_on_device.sh: what both need of the GPU
# machine before building — the environment report, where NCCL and cuBLAS are, and the GPU's
# compute capability.
#
#   . gpu/device_env.sh; device_environment ENVFILE
#
# Sets: nccl_args (cmake -DNCCL_* arguments), arch (LYNXSIM_CUDA_ARCHITECTURES), and prepends the
# NCCL / cuBLAS library folders to LD_LIBRARY_PATH; writes the report to ENVFILE and prints it.

have() { command -v "$1" >/dev/null 2>&1; }
# First file called $1 under the usual install roots (CUDA first, then pip packages in /opt).
find_first() {
  local root hit
  for root in /usr/local/cuda /usr/local /opt /usr /root; do
    [ -d "$root" ] || continue
    hit=$(find "$root" -name "$1" -print -quit 2>/dev/null)
    if [ -n "$hit" ]; then echo "$hit"; return 0; fi
  done
  return 1
}

device_environment() {  # ENVFILE
  local envfile=$1 lib_dir dir lib cap
  if ! have nvcc && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -a)"
    grep -E '^(PRETTY_NAME)=' /etc/os-release 2>/dev/null
    nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version,clocks.max.sm \
      --format=csv 2>&1 || echo "nvidia-smi: not available"
    nvidia-smi topo -m 2>/dev/null | head -12
    have nvcc && nvcc --version | tail -1
    have cmake && cmake --version | head -1
    have g++ && g++ --version | head -1
    have mpirun && mpirun --version 2>&1 | head -1
    echo "cpus: $(nproc 2>/dev/null)"
  } > "$envfile" 2>&1
  cat "$envfile"

  # NCCL and cuBLAS may live in the CUDA folder, the system folders or pip packages
  # (nvidia-nccl-*, nvidia-cublas-*). The NCCL header is taken from beside the library found.
  nccl_lib=$(find_first libnccl.so || find_first libnccl.so.2 || true)
  nccl_header=""
  if [ -n "$nccl_lib" ]; then
    lib_dir=$(dirname "$nccl_lib")
    for dir in "$lib_dir/../include" "$lib_dir/../../include" /usr/include; do
      if [ -f "$dir/nccl.h" ]; then nccl_header=$dir/nccl.h; break; fi
    done
  fi
  [ -z "$nccl_header" ] && nccl_header=$(find_first nccl.h || true)
  cublas_lib=$(find_first 'libcublas.so.1[0-9]' || true)
  cublaslt_lib=$(find_first 'libcublasLt.so.1[0-9]' || true)
  echo "nccl.h: ${nccl_header:-not found}; libnccl: ${nccl_lib:-not found};" \
    "libcublas: ${cublas_lib:-not found}"
  nccl_args=()
  [ -n "$nccl_header" ] && nccl_args+=("-DNCCL_INCLUDE_DIR=$(dirname "$nccl_header")")
  [ -n "$nccl_lib" ] && nccl_args+=("-DNCCL_LIB=$nccl_lib")
  for lib in "$nccl_lib" "$cublas_lib" "$cublaslt_lib"; do
    [ -n "$lib" ] && export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  # Build only for the GPU that is here (fast); both sm_80 and sm_90 when it cannot be asked.
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  arch=${cap:-"80-real;90"}
}
