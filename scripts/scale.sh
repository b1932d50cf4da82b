#!/usr/bin/env bash
# Products-scale training on this one machine: a generated graph of
# ogbn-products' size (2,449,029 nodes, 61,859,140 undirected edges, so
# 50.5 directed edges per node; 100 features, 47 classes), partitioned with
# METIS into RANKS parts and trained with 3-layer GraphSAGE-256 by RANKS MPI
# ranks (shared memory), each loading only its own part.
#
#   scripts/scale.sh [NODES]            (default 2449029)
#
# The graph has 256 communities with 98% of each node's edges inside its own
# (gen --communities --locality): real graphs have such structure, and
# without it no partition has a small cut. Steps already done are skipped.
# Writes OUT/n<NODES>/ (default OUT=results-scale): gen.log, partition.log,
# train.log, train.jsonl (per-epoch metrics; the summary holds every rank's
# peak memory) and memory.log (the machine's used memory every 2 s), then
# prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gnn-spmd}
OUT=${OUT:-results-scale}
RANKS=${RANKS:-4}
EPOCHS=${EPOCHS:-10}
NODES=${1:-2449029}
[ -x "$BIN" ] || { echo "scale: $BIN missing (run make build)" >&2; exit 2; }
dir=$OUT/n$NODES
mkdir -p "$dir"
data=$dir/graph.h5
parts=$dir/parts-metis$RANKS

timed() { # log command...: run it, appending its wall time and peak memory to log
  local log=$1; shift
  /usr/bin/time -f "wall %e s, peak memory %M KiB" "$@" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
}
[ -f "$data" ] || timed "$dir/gen.log" "$BIN" gen --out "$data" --nodes "$NODES" --classes 47 --features 100 \
  --degree 50.5 --homophily 0.8 --snr 1 --communities 256 --locality 0.98 --seed 1
[ -f "$parts/meta.h5" ] || timed "$dir/partition.log" "$BIN" partition --data "$data" --parts "$RANKS" --method metis --out "$parts"

if ! { [ -f "$dir/train.jsonl" ] && grep -q '"summary":true' "$dir/train.jsonl"; }; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
  ( while sleep 2; do free -m | awk -v t="$(date +%T)" '/Mem:/{print t, "used_mib", $3}'; done ) >"$dir/memory.log" &
  sampler=$!
  trap 'kill $sampler 2>/dev/null || true' EXIT
  rc=0
  mpirun -np "$RANKS" "$BIN" train --parts "$parts" --hidden 256 --epochs "$EPOCHS" --threads 1 --progress lines \
    --metrics "$dir/train.jsonl.tmp" >"$dir/train.log" 2>&1 || rc=$?
  kill $sampler
  [ $rc = 0 ] || { tail -n 20 "$dir/train.log" >&2; echo "scale: training failed (exit $rc), see $dir/train.log" >&2; exit 1; }
  mv "$dir/train.jsonl.tmp" "$dir/train.jsonl"
fi

echo "== n$NODES: $RANKS ranks, METIS, 3-layer GraphSAGE-256, $EPOCHS epochs, --threads 1 per rank"
sed -n 's/^/gen: /p' "$dir/gen.log" 2>/dev/null | tail -n 2
sed -n 's/^wrote/partition: wrote/p; s/^wall/partition: wall/p; /edge cut/p' "$dir/partition.log"
head -n 2 "$dir/train.log"
tail -n 1 "$dir/train.log"
python3 - "$dir/train.jsonl" "$dir/memory.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in rows if "epoch" in r and not r.get("summary")]
s = [r for r in rows if r.get("summary")][0]
sec = [e["epoch_seconds"] for e in epochs]
rest = epochs[1:] or epochs
mean = lambda k: sum(e[k] for e in rest) / len(rest)
print(f"epoch seconds (training step and evaluation): first {sec[0]:.1f}, mean of the others {mean('epoch_seconds'):.1f}, "
      f"of which halo exchange {mean('halo_seconds'):.1f}; test accuracy after epoch {epochs[-1]['epoch']}: {epochs[-1]['test_acc']:.4f}")
print(f"peak memory per rank (MiB): {s['rank_rss_mb']}, sum {sum(s['rank_rss_mb'])}")
used = [int(l.split()[2]) for l in open(sys.argv[2]) if l.strip()]
print(f"machine memory in use at most: {max(used)} MiB of the machine's total")
PY
