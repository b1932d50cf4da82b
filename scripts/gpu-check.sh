#!/usr/bin/env bash
# The GPU check, in one go (about 5 minutes on one H200): the CUDA kernels
# against their CPU twins, GPU training against CPU training (one rank, and
# four ranks sharing the GPU with quantized halo rows), throughput next to
# the device's copy bandwidth, and epoch times. Runs from a bundle made by
# `make gpu-bundle` (no Go, MPI or HDF5 needed on the GPU machine):
#
#   bin/gpu-bundle/gpu-check.sh [OUT]     (or scripts/gpu-check.sh [OUT])
#
# Everything it prints is also written to OUT/gpu-check.log (default
# ./gpu-check-out); the exit code is non-zero if a check failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$here
[ -x "$bundle/bin/gnn-spmd" ] || bundle=$here/../bin/gpu-bundle
out=${1:-gpu-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$bundle/bin/gnn-spmd
exec > >(tee "$out/gpu-check.log") 2>&1
failed=()
step() { echo; echo "== $(date +%T) $*"; }
# Every program runs under a time limit, so that a hung kernel or NCCL call
# fails its step instead of the whole check (GPU_CHECK_STEP_TIMEOUT seconds).
limit=${GPU_CHECK_STEP_TIMEOUT:-300}
t() { timeout -k 5 "$limit" "$@"; }
check() { # name command...
  local name=$1; shift
  [ "$(type -t "$1")" = function ] || set -- t "$@"
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed+=("$name"); fi
}

step "machine"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
echo "$(nproc) CPU cores"
# The GPUs and where cuBLAS and NCCL were found (and what each try gave);
# printed with or without a GPU, not a check by itself.
t "$bin" devices || echo "(gnn-spmd devices: something the GPU build needs is missing, see above)"
if probe=$(t "$bundle/bin/kernels-cuda.test" -test.run '^$' 2>&1) && grep -q '^SKIP' <<<"$probe"; then
  echo "$probe"
  echo "gpu-check: no usable GPU here: nothing checked"
  exit 1
fi

step "kernels against their CPU twins"
check kernels "$bundle/bin/kernels-cuda.test" -test.v -test.count=1

step "the halo exchange's GPU memory against the host's (byte-identical payloads; NCCL with 2 GPUs)"
check halo "$bundle/bin/halo-gpu.test" -test.v -test.count=1

step "4 ranks on one GPU against 4 CPU ranks (full and quantized halo rows)"
check exchange "$bundle/bin/job.test" -test.v -test.count=1 -test.run GPU

step "throughput (GB/s of float32 input; copy = the device's own limit)"
t "$bundle/bin/kernels-cuda.test" -test.run '^$' -test.bench . -test.benchtime 50x | tee "$out/bench.txt"

step "one rank: GPU loss against CPU loss, same graph and seed (GraphSAGE, then GAT)"
g=$out/csbm-200k.h5
t "$bin" gen --out "$g" --nodes 200000 --classes 10 --degree 16 --homophily 0.7 --features 100 --snr 0.6 --seed 1
common=(train --data "$g" --layers 3 --hidden 128 --epochs 10 --seed 3 --quiet)
t "$bin" "${common[@]}" --device cuda --verbose --metrics "$out/one-gpu.jsonl" # --verbose: the GPU bound
t "$bin" "${common[@]}" --device cpu --metrics "$out/one-cpu.jsonl"
loss_match() { # a.jsonl b.jsonl tolerance
  python3 - "$@" <<'PY'
import json, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
la = [json.loads(l)["loss"] for l in open(a) if '"loss"' in l]
lb = [json.loads(l)["loss"] for l in open(b) if '"loss"' in l]
worst = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
print(f"{len(la)} epochs, max relative loss difference {worst:.3g} (tolerance {tol})")
sys.exit(0 if len(la) == len(lb) and worst <= tol else 1)
PY
}
check one-rank-loss loss_match "$out/one-gpu.jsonl" "$out/one-cpu.jsonl" 1e-4
gat=(train --data "$g" --model gat --layers 2 --heads 8 --hidden 8 --out-heads 1 --epochs 10 --seed 3 --quiet)
t "$bin" "${gat[@]}" --device cuda --metrics "$out/gat-gpu.jsonl"
t "$bin" "${gat[@]}" --device cpu --metrics "$out/gat-cpu.jsonl"
check gat-loss loss_match "$out/gat-gpu.jsonl" "$out/gat-cpu.jsonl" 1e-4

step "4 ranks on the one GPU: VARCO quantized halo rows against full communication"
q=(train --data "$g" --ranks 4 --partition metis --layers 3 --hidden 128 --epochs 60 --seed 3 --device cuda)
check ranks4-varco "$bin" "${q[@]}" --codec quant --schedule varco --ratio-min 8 --metrics "$out/q4-varco.jsonl"
check ranks4-full "$bin" "${q[@]}" --quiet --metrics "$out/q4-full.jsonl"
t "$bin" compare full="$out/q4-full.jsonl" varco="$out/q4-varco.jsonl"

step "epoch time: 3-layer GraphSAGE-256, 1M nodes, one rank"
g1=$out/csbm-1m.h5
t "$bin" gen --out "$g1" --nodes 1000000 --classes 10 --degree 16 --homophily 0.7 --features 100 --snr 0.6 --seed 1
check epoch-1m "$bin" train --data "$g1" --reorder none --layers 3 --hidden 256 --epochs 10 --device cuda --metrics "$out/epoch-1m.jsonl"
rm -f "$g" "$g1"

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-check: all checks passed"
