#!/usr/bin/env bash
# GAT's memory against recomputation: peak RSS per rank and epoch time of
# 2-layer GAT (8 heads of 8, one output head) with and without --recompute,
# one process and 4 MPI ranks, on a generated graph of 1M nodes and 20M
# edges. Prints a Markdown table; make bench puts it into BENCHMARKS.md.
#
# usage: scripts/gat-memory.sh DATA.h5 WORKDIR [EPOCHS]   (from the repo root; bin/gnn-spmd built)
set -euo pipefail
data=$1 work=$2 epochs=${3:-3}
bin=${GNN_SPMD:-bin/gnn-spmd}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
model=(--model gat --layers 2 --hidden 8 --heads 8 --out-heads 1 --epochs "$epochs" --quiet)
parts="$work/gat-parts-4"
[ -f "$parts/meta.h5" ] || "$bin" partition --data "$data" --parts 4 --method metis --out "$parts" >/dev/null
stats() { python3 -c '
import json,sys,statistics as st
e=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t=[r["epoch_seconds"] for r in e if "epoch" in r and r["epoch"]>0]
s=[r for r in e if r.get("summary")][-1]
print("%.2f %d" % (st.median(t), max(s.get("rank_rss_mb") or [s.get("max_rss_mb", 0)])))' "$1"; }
echo "| ranks | --recompute | epoch s (median) | peak RSS MiB per rank |"
echo "| ---: | --- | ---: | ---: |"
for q in 1 4; do
  for r in false true; do
    jl="$work/gat-q$q-recompute-$r.jsonl"
    if [ "$q" = 1 ]; then
      "$bin" train --data "$data" --ranks 1 "${model[@]}" --recompute="$r" --metrics "$jl" >/dev/null
    else
      mpirun -np 4 --bind-to none "$bin" train --parts "$parts" "${model[@]}" --recompute="$r" --metrics "$jl" >/dev/null
    fi
    read -r sec rss < <(stats "$jl")
    echo "| $q | $r | $sec | $rss |"
  done
done
