#!/usr/bin/env bash
# Partition a generated graph of ogbn-products' density (50.5 directed edges
# per node, 100 features, 256 communities, as scripts/scale.sh) two ways and
# compare peak memory, time and quality: METIS in one process, and PT-Scotch
# with RANKS processes that each read only their slice of the file.
#
#   scripts/distpart-scale.sh [NODES]         (default 2449029)
#   ONLY=metis|ptscotch scripts/distpart-scale.sh NODES   (one of the two)
#
# Writes OUT/n<NODES>/ (default OUT=results-scale): graph.h5 (kept for
# scripts/scale.sh), metis.log, ptscotch.log (each process's peak memory
# from /usr/bin/time -v); the partition directories are removed after.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gnn-spmd}
OUT=${OUT:-results-scale}
RANKS=${RANKS:-4}
NODES=${1:-2449029}
[ -x "$BIN" ] || { echo "distpart-scale: $BIN missing (run make build)" >&2; exit 2; }
dir=$OUT/n$NODES
mkdir -p "$dir"
data=$dir/graph.h5
[ -f "$data" ] || /usr/bin/time -f "gen: wall %e s, peak memory %M KiB" "$BIN" gen --out "$data" --nodes "$NODES" --classes 47 \
  --features 100 --degree 50.5 --homophily 0.8 --snr 1 --communities 256 --locality 0.98 --seed 1 >"$dir/gen.log" 2>&1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
if [ "${ONLY:-metis}" = metis ]; then
  /usr/bin/time -v "$BIN" partition --data "$data" --parts "$RANKS" --method metis --out "$dir/parts-metis$RANKS.tmp" >"$dir/metis.log" 2>&1 || { tail "$dir/metis.log"; exit 1; }
  rm -rf "$dir/parts-metis$RANKS.tmp"
  echo "== METIS, one process"
  grep -E "^wrote|^edge cut|Maximum resident|Elapsed" "$dir/metis.log"
fi
if [ "${ONLY:-ptscotch}" = ptscotch ]; then
  start=$(date +%s.%N)
  mpirun -np "$RANKS" /usr/bin/time -v "$BIN" partition --data "$data" --parts "$RANKS" --method ptscotch --out "$dir/parts-ptscotch$RANKS.tmp" >"$dir/ptscotch.log" 2>&1 || { tail -n 30 "$dir/ptscotch.log"; exit 1; }
  end=$(date +%s.%N)
  rm -rf "$dir/parts-ptscotch$RANKS.tmp"
  echo "== PT-Scotch, $RANKS processes (wall $(echo "$end - $start" | bc) s with mpirun)"
  grep -E "^wrote|^edge cut|^peak memory|Maximum resident" "$dir/ptscotch.log"
fi
