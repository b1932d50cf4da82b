#!/usr/bin/env bash
# predict-bench.sh DATA RANKS [OUT.md]: predict against training on one
# graph: RANKS ranks (1: one process; more: mpirun on METIS parts, made once
# in one process) train 3-layer GraphSAGE-256 for 3 epochs with a
# checkpoint, then predict every node with it (logits and layer 1's
# embeddings). Prints a
# Markdown table (to OUT.md too): the median training epoch after the first
# and the prediction (the forward pass; with the file written; the whole
# command, data loading included), in seconds, and peak memory per process. Writes its files in bin/bench/predict-<ranks>.
set -euo pipefail
cd "$(dirname "$0")/.."
data=$1 ranks=$2 out=${3:-/dev/null}
work=bin/bench/predict-$ranks
mkdir -p "$work"
bin=bin/gnn-spmd
run=("$bin")
input=(--data "$data")
args=()
if [ "$ranks" -gt 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
  [ -f "$work/parts/meta.h5" ] || "$bin" partition --data "$data" --parts "$ranks" --method metis --out "$work/parts" >/dev/null
  run=(mpirun -np "$ranks" "$bin")
  input=(--parts "$work/parts")
  args=(--threads 1)
fi
rm -f "$work"/ck.h5 "$work"/pred.h5
"${run[@]}" train "${input[@]}" --hidden 256 --epochs 3 --quiet "${args[@]}" \
  --checkpoint "$work/ck.h5" --metrics "$work/train.jsonl" >"$work/train.log"
/usr/bin/time -f "wall %e" -o "$work/predict.time" \
  "${run[@]}" predict --checkpoint "$work/ck.h5" "${input[@]}" --out "$work/pred.h5" --embeddings 1 "${args[@]}" >"$work/predict.log"
python3 - "$work/train.jsonl" "$work/predict.log" "$data" "$ranks" "$work/predict.time" <<'PY' | tee "$out"
import json, re, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
epochs, summary = lines[:-1], lines[-1]
epoch = statistics.median(e["epoch_seconds"] for e in epochs[1:])
log = open(sys.argv[2]).read()
m = re.search(r"in ([\d.]+)s \(forward pass ([\d.]+)s\), peak memory (\d+) MiB", log)
total, forward, peak = float(m.group(1)), float(m.group(2)), int(m.group(3))
wall = float(open(sys.argv[5]).read().split()[-1])
print("| graph | ranks | training epoch s | training peak MiB per process | predict: forward pass s | predict: pass and file s | predict: whole command s | predict peak MiB per process |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
print("| %s | %s | %.2f | %d | %.2f | %.2f | %.1f | %d |" % (sys.argv[3], sys.argv[4], epoch, summary["max_rss_mb"], forward, total, wall, peak))
PY
