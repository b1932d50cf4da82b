#!/usr/bin/env bash
# Partition quality of PT-Scotch by slices against METIS in one process on
# every dataset in ../shared/data: edge cut (directed edges between parts),
# halo rows per layer, node and training-node balance, as a Markdown table.
#
#   scripts/distpart-quality.sh [PARTS]        (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gnn-spmd}
Q=${1:-4}
DATA=${DATA:-../shared/data}
[ -d "$DATA" ] || { echo "distpart-quality: $DATA missing (the shared datasets)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
stats() { # log: cut rows nodebal trainbal
  sed -n 's/^edge cut \([0-9]*\), halo rows per layer and direction \([0-9]*\), node balance \([0-9.]*\), train balance \([0-9.]*\)$/\1 \2 \3 \4/p' "$1"
}
echo "| dataset | nodes | edges | METIS cut | PT-Scotch cut | ratio | METIS halo rows | PT-Scotch halo rows | ratio | node balance METIS / PT-Scotch | train balance METIS / PT-Scotch |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for d in "$DATA"/*/; do
  name=$(basename "$d")
  [ -d "$d/raw" ] || continue
  "$BIN" convert --data "$d" --out "$tmp/$name.h5" >"$tmp/convert.log"
  n=$(sed -n 's/.*: \([0-9]*\) nodes, \([0-9]*\) edges.*/\1/p' "$tmp/convert.log")
  e=$(sed -n 's/.*: \([0-9]*\) nodes, \([0-9]*\) edges.*/\2/p' "$tmp/convert.log")
  "$BIN" partition --data "$tmp/$name.h5" --parts "$Q" --method metis --out "$tmp/m" >"$tmp/m.log"
  mpirun -np "$Q" "$BIN" partition --data "$tmp/$name.h5" --parts "$Q" --method ptscotch --out "$tmp/p" >"$tmp/p.log"
  read -r mc mr mb mt < <(stats "$tmp/m.log")
  read -r pc pr pb pt < <(stats "$tmp/p.log")
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }
  echo "| $name | $n | $e | $mc | $pc | $(ratio "$pc" "$mc") | $mr | $pr | $(ratio "$pr" "$mr") | $mb / $pb | $mt / $pt |"
  rm -rf "$tmp/m" "$tmp/p" "$tmp/$name.h5"
done
