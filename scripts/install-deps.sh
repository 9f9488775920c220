#!/usr/bin/env bash
# Installs the Debian packages gpulimit builds and tests with. Idempotent: a
# package already installed is left alone, and apt is not touched at all when
# nothing is missing. Runs apt-get through sudo when not root.
set -euo pipefail

packages=(
  build-essential  # g++ (C++20), make
  cmake
  ninja-build
  pkg-config
  clang-format
  libboost-dev     # Boost.Interprocess (header-only)
  libspdlog-dev
  libfmt-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libcli11-dev     # command-line parsing
  nlohmann-json3-dev  # JSON: gpulimitd's status, read by gpulimit status
  libcpp-httplib-dev  # HTTP: gpulimitd's Prometheus endpoint
  prometheus       # a real scraper for the metrics integration test
  clang            # gpulimitd's BPF watcher (limiter-server/source/watcher/bpf/gpu_watch.bpf.c)
  libclang-rt-dev  # compiler-rt (libFuzzer, ASan, UBSan) for the fuzzers, fuzz/: only recommended by clang
  llvm             # llvm-objdump, to read the compiled BPF object
  libbpf-dev       # the watcher's loader
  bpftool          # vmlinux.h and the BPF skeleton, at build time
  libelf-dev       # libbpf's dependency
  libzstd-dev      # the simulated driver reads compressed fatbins (CUDA 13: ZSTD)
  liblz4-dev       # and those of older toolkits (LZ4)
  libtomlplusplus-dev  # TOML: gpulimitd's policy file
  libsqlite3-dev   # SQLite: gpulimitd's usage database, read by gpulimit usage (usage/)
  libseccomp-dev   # the systemd unit check models the unit's seccomp sandboxing (tests/integration/packaging)
  python3          # the GPU suite's scripts (tests/gpu), run on the simulator by ctest -L gpusuite
  python3-venv     # the project's venv with PyTorch (tests/pytorch), made below
  python3-dev      # Python.h: Triton builds its launcher with it (torch.compile, tests/pytorch)
  help2man         # gpulimitd(8), made from gpulimitd --help at build time
  dpkg-dev         # dpkg-shlibdeps: the .deb's Depends (cpack)
  file             # cpack's DEB generator finds the ELF files to give dpkg-shlibdeps
  libslurm-dev     # <slurm/spank.h>: the Slurm plugin, tools/slurm
  slurm-wlm        # srun, sbatch, scancel: the Slurm test (tests/integration/slurm)
  slurmd
  slurmctld
  munge            # Slurm's authentication, started by the Slurm test
  spin             # SPIN, the model checker of the protocol models (ctest -L model)
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=()
  if ((EUID != 0)); then sudo=(sudo); fi
  echo "install-deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# PyTorch (a CUDA build from PyPI, several GB with its nvidia-* wheels) in
# the project's venv (scripts/pytorch-venv.sh names it). The venv remembers
# the hash of the requirements it was made from: an unchanged file leaves it
# alone, a changed pin is installed into it.
venv=$(scripts/pytorch-venv.sh)
wanted=$(sha256sum tests/pytorch/requirements.txt | cut -d' ' -f1)
if [[ -x $venv/bin/python && $(cat "$venv/.requirements" 2>/dev/null) == "$wanted" ]]; then
  echo "install-deps: PyTorch venv present ($venv)"
else
  echo "install-deps: installing tests/pytorch/requirements.txt into $venv" \
       "(downloads several GB the first time)"
  mkdir -p "$(dirname "$venv")"
  if ! { { [[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"; } &&
         "$venv/bin/python" -m pip install --quiet --progress-bar off \
           -r tests/pytorch/requirements.txt &&
         "$venv/bin/python" -c 'import torch, pytest; assert torch.version.cuda, "not a CUDA build"'
       } >"$venv.log" 2>&1; then
    tail -n 20 "$venv.log" >&2
    echo "install-deps: error: PyTorch could not be installed into $venv (log: $venv.log);" \
         "the PyTorch tests need it" >&2
    exit 1
  fi
  echo "$wanted" >"$venv/.requirements"
  echo "install-deps: PyTorch venv ready: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
fi

if [[ ! -x /usr/local/cuda/bin/nvcc || ! -f /usr/local/cuda/include/cuda.h ]]; then
  echo "install-deps: warning: no CUDA toolkit at /usr/local/cuda (nvcc, cuda.h);" \
       "install NVIDIA's CUDA toolkit 12 or 13 there before building" >&2
fi
