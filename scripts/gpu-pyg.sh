#!/usr/bin/env bash
# Ours against PyG on one GPU: 3-layer GraphSAGE-256, full batch, on one
# generated graph near ogbn-products' size that both read (2.5M nodes, 50M
# edges, 128 features, 40 classes), rows in the file's order for both
# (--reorder none). Prints each one's mean epoch time without the first
# epoch and the peak device memory nvidia-smi saw while it ran (the CUDA
# context included, the same for both); PyG also reports what torch
# allocated. Runs from a bundle made by `make gpu-bundle`, on a machine
# whose python3 has torch and torch_geometric:
#
#   bin/gpu-bundle/gpu-pyg.sh [OUT] [EPOCHS]      (or scripts/gpu-pyg.sh)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$here
[ -x "$bundle/bin/gnn-spmd" ] || bundle=$here/../bin/gpu-bundle
pyg=$here/pyg_gpu.py
[ -f "$pyg" ] || pyg=$here/../bench/reference/pyg_gpu.py
out=${1:-gpu-pyg-out}
epochs=${2:-10}
limit=${GPU_CHECK_STEP_TIMEOUT:-300}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$bundle/bin/gnn-spmd
g=$out/csbm-2.5m.h5

peak() { # FILE command...: runs it while sampling the device's used memory
  local f=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$f" &
  local w=$!
  timeout -k 5 "$limit" "$@"
  local rc=$?
  kill "$w" 2>/dev/null; wait "$w" 2>/dev/null
  echo "peak device memory $(sort -n "$f" | tail -1) MiB (nvidia-smi)"
  return $rc
}

echo "== $(date +%T) graph"
timeout -k 5 "$limit" "$bin" gen --out "$g" --nodes 2500000 --degree 20 --features 128 --classes 40 \
  --homophily 0.7 --snr 1 --seed 1 || exit 1
echo "== $(date +%T) ours"
peak "$out/mem-ours.txt" "$bin" train --data "$g" --device cuda --reorder none --layers 3 --hidden 256 \
  --epochs "$epochs" --quiet --metrics "$out/ours.jsonl"
for adj in csr edge_index; do
  echo "== $(date +%T) pyg --adj $adj"
  peak "$out/mem-pyg-$adj.txt" python3 "$pyg" --data "$g" --adj "$adj" --epochs "$epochs" | tee "$out/pyg-$adj.jsonl"
done
rm -f "$g"
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def mean_ours(p):
    s = [json.loads(l)["epoch_seconds"] for l in open(p) if '"epoch_seconds"' in l]
    return sum(s[1:]) / len(s[1:])
def peak(p):
    v = [int(x) for x in open(p).read().split() if x.isdigit()]
    return max(v) if v else float("nan")
ours = mean_ours(f"{out}/ours.jsonl")
print(f"ours              {ours:8.4f} s/epoch  peak {peak(f'{out}/mem-ours.txt')} MiB")
for adj in ("csr", "edge_index"):
    p = f"{out}/pyg-{adj}.jsonl"
    if not os.path.exists(p):
        continue
    s = [json.loads(l) for l in open(p) if '"summary"' in l]
    if not s:
        print(f"pyg {adj:13s} failed"); continue
    m = s[0]["mean_epoch_seconds"]
    print(f"pyg {adj:13s} {m:8.4f} s/epoch  peak {peak(f'{out}/mem-pyg-{adj}.txt')} MiB "
          f"(torch allocated {s[0]['peak_allocated_mib']:.0f})  ours/pyg {ours / m:.3f}")
PY
