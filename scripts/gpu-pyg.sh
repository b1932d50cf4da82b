#!/usr/bin/env bash
# Ours against PyG on one GPU, on one generated graph that both read (by
# default near ogbn-products' size: 2.5M nodes, 50M edges, 128 features,
# 40 classes; PYG_NODES sets the nodes, the degree staying 20), 3-layer
# GraphSAGE-256. Runs from a bundle made by `make gpu-bundle`, on a machine
# whose python3 has torch, torch_geometric and h5py:
#
#   bin/gpu-bundle/gpu-pyg.sh [OUT] [EPOCHS]       (or scripts/gpu-pyg.sh)
#       epoch time, full batch for both, rows in the file's order for both
#       (--reorder none): each one's mean epoch time without the first
#       epoch and the peak device memory nvidia-smi saw while it ran (the
#       CUDA context included, the same for both); PyG also reports what
#       torch allocated.
#
#   bin/gpu-bundle/gpu-pyg.sh race [OUT] [EPOCHS]
#       time to a target test accuracy: ours full-graph for EPOCHS (100)
#       epochs, then PyG's mini-batch training (NeighborLoader, fanouts
#       PYG_FANOUTS 15,10,5, batches of PYG_BATCH 1024; pyg_minibatch.py)
#       until it reaches the same target or PYG_TIME_LIMIT (180) seconds of
#       training. The target is PYG_TARGET if set, else ours' test accuracy
#       at its best validation epoch less PYG_MARGIN (0.005). Ours' time:
#       the sum of its epoch_seconds through the first epoch at or above the
#       target; PyG's: its training batches' time through the evaluation
#       that reached it (evaluations excluded for both).
set -uo pipefail
mode=epoch
if [ "${1:-}" = race ]; then mode=race; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
bundle=$here
[ -x "$bundle/bin/gnn-spmd" ] || bundle=$here/../bin/gpu-bundle
ref=$here
[ -f "$ref/pyg_gpu.py" ] || ref=$here/../bench/reference
out=${1:-gpu-pyg-out}
limit=${GPU_CHECK_STEP_TIMEOUT:-300}
nodes=${PYG_NODES:-2500000}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$bundle/bin/gnn-spmd
g=$out/csbm-$nodes.h5
python3 -c 'import torch, torch_geometric, h5py' ||
  { echo "gpu-pyg: python3 needs torch, torch_geometric and h5py (above: what is missing)"; exit 1; }

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

echo "== $(date +%T) graph ($nodes nodes)"
timeout -k 5 "$limit" "$bin" gen --out "$g" --nodes "$nodes" --degree 20 --features 128 --classes 40 \
  --homophily 0.7 --snr 1 --seed 1 || exit 1

if [ "$mode" = race ]; then
  epochs=${2:-100}
  echo "== $(date +%T) ours, full graph, $epochs epochs"
  timeout -k 5 "$limit" "$bin" train --data "$g" --device cuda --layers 3 --hidden 256 \
    --epochs "$epochs" --quiet --metrics "$out/race-ours.jsonl" || exit 1
  target=${PYG_TARGET:-$(python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][0]
print(round(s["test_at_best_val"] - float(sys.argv[2]), 4))' "$out/race-ours.jsonl" "${PYG_MARGIN:-0.005}")}
  echo "== $(date +%T) pyg mini-batch to test accuracy $target"
  # The time limit leaves the loading and the last evaluation room.
  timeout -k 5 "$((${PYG_TIME_LIMIT:-180} + limit))" python3 "$ref/pyg_minibatch.py" --data "$g" --target "$target" \
    --fanouts "${PYG_FANOUTS:-15,10,5}" --batch "${PYG_BATCH:-1024}" --time-limit "${PYG_TIME_LIMIT:-180}" \
    | tee "$out/race-pyg.jsonl"
  rm -f "$g"
  python3 - "$out" "$target" <<'PY'
import json, sys
out, target = sys.argv[1], float(sys.argv[2])
ep = [json.loads(l) for l in open(f"{out}/race-ours.jsonl") if '"summary"' not in l and '"loss"' in l]
t, hit = 0.0, None
for e in ep:
    t += e["epoch_seconds"]
    if e["test_acc"] >= target:
        hit = (t, e["epoch"] + 1)
        break
print(f"target test accuracy {target:.4f}")
if hit:
    print(f"ours (full graph)     {hit[0]:8.2f} s  ({hit[1]} epochs)")
else:
    print(f"ours (full graph)     not reached in {len(ep)} epochs ({t:.2f} s)")
s = [json.loads(l) for l in open(f"{out}/race-pyg.jsonl") if '"summary"' in l]
if not s:
    print("pyg (mini-batch)      failed (see above)"); sys.exit(1)
s = s[0]
if s["reached"]:
    print(f"pyg (mini-batch)      {s['seconds_to_target']:8.2f} s  ({s['batches']} batches, epoch {s['epochs']}; "
          f"{s['wall_seconds_to_target']:.2f} s with evaluations; sampler {s['sampler']})")
    if hit:
        print(f"ours / pyg            {hit[0] / s['seconds_to_target']:8.3f}")
else:
    print(f"pyg (mini-batch)      not reached in {s['train_seconds']:.1f} s of training "
          f"(best test accuracy {s['best_test_acc']:.4f}; sampler {s['sampler']})")
PY
  exit
fi

epochs=${2:-10}
echo "== $(date +%T) ours"
peak "$out/mem-ours.txt" "$bin" train --data "$g" --device cuda --reorder none --layers 3 --hidden 256 \
  --epochs "$epochs" --quiet --metrics "$out/ours.jsonl"
for adj in csr edge_index; do
  echo "== $(date +%T) pyg --adj $adj"
  peak "$out/mem-pyg-$adj.txt" python3 "$ref/pyg_gpu.py" --data "$g" --adj "$adj" --epochs "$epochs" | tee "$out/pyg-$adj.jsonl"
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
