#!/usr/bin/env bash
# Installs what the GPU build needs on Debian 12: CUDA 11.8 (nvcc, cuda.h,
# libcuda) from Debian's non-free component, without touching the system's
# apt sources. About 1.6 GB; skipped when nvcc and cuda.h are present (any
# CUDA toolkit will do: point PATH at its nvcc and CGO_CFLAGS at its
# include directory). cuBLAS and NCCL are loaded at run time, not linked.
set -euo pipefail
if command -v nvcc >/dev/null 2>&1 && [ -f /usr/include/cuda.h -o -f /usr/local/cuda/include/cuda.h ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
tmp=$(mktemp -d)
mkdir -p "$tmp/lists/partial"
sed 's/^Components: main$/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources >"$tmp/nf.sources"
o=(-o "Dir::Etc::sourcelist=$tmp/nf.sources" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$tmp/lists")
echo "cuda-deps: installing nvidia-cuda-toolkit (CUDA 11.8) from Debian non-free"
$sudo apt-get "${o[@]}" update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get "${o[@]}" install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
rm -rf "$tmp"
