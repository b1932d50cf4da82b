#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine that has a CUDA
# driver but no Go, MPI or HDF5: the GPU binary, gnn-results (compare), the
# GPU test binaries, and every shared library ldd says they load, except the
# C runtime and libcuda, which must come from the machine (libcuda belongs
# to its driver). cuBLAS and NCCL are loaded with dlopen, so ldd does not
# list them: the binaries find them on the machine (the CUDA toolkit,
# LD_LIBRARY_PATH, a Python environment's NVIDIA wheels; "gnn-spmd devices"
# says where). Output: bin/gpu-bundle/{bin,lib} plus the check script and the PyG
# comparison (gpu-pyg.sh).
#
#   make gpu-bundle            (or scripts/gpu-bundle.sh; both build first)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
out=bin/gpu-bundle
tags=${CUDA_TAGS:-}
# The GPU binary from the tree as it is (PTX first): a bin/gnn-spmd-cuda
# left from an earlier build must not travel.
make -s cuda
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp bin/gnn-spmd-cuda "$out/bin/gnn-spmd"
go build -tags "$tags" -o "$out/bin/gnn-results" ./cmd/gnn-results
go test -tags "$tags" -c -o "$out/bin/kernels-cuda.test" ./kernels/cuda
go test -tags "$tags" -c -o "$out/bin/halo-gpu.test" ./comm/halo/gpu
go test -tags "$tags" -c -o "$out/bin/job.test" ./gnn/job
cp scripts/gpu-check.sh scripts/gpu-pyg.sh bench/reference/pyg_gpu.py "$out/"
for b in "$out"/bin/*; do
  { ldd "$b" 2>/dev/null || true; } | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | wc -l) libraries)"
# One compressed file for machines reached through a size-limited copy.
tar -C bin -cJf bin/gpu-bundle.tar.xz gpu-bundle
echo "gpu-bundle: bin/gpu-bundle.tar.xz $(du -h bin/gpu-bundle.tar.xz | cut -f1)"
