#!/usr/bin/env bash
# A compressed epoch against a full one with no network between the ranks:
# 4 goroutine ranks in one process (--ranks 4) on the demo graph's METIS
# parts, so that the exchange is a memory copy and compression can only
# cost time. The modes take turns for ROUNDS rounds, so that the machine's
# busy spells fall on all of them, and `gnn-results compare` prints each
# mode's median epoch (epochs after the first) and its ratio to full's.
#
#   [ROUNDS=6] [EPOCHS=30] [OUT=results-inprocess] scripts/inprocess.sh
#
#   full         full communication; its evaluation reads the training pass
#   quant        --compress recommended: accuracies from
#                the training pass, under compression, and two passes at
#                full precision after the last epoch (--eval confirm, the
#                default), which count in the run's seconds, not its epochs'
#   quant-exact  the same with --eval exact: an evaluation pass of its own
#                at full precision every epoch
#   full-cache, quant-cache
#                full and quant with --cache-input: the first layer's input
#                crosses once and is neither exchanged nor coded after
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gnn-spmd}
DEMO=${DEMO:-bin/demo-csbm-50k.h5} # make bin/demo-csbm-50k.h5 writes it
ROUNDS=${ROUNDS:-6}
EPOCHS=${EPOCHS:-30}
OUT=${OUT:-results-inprocess}
[ -x "$BIN" ] || { echo "inprocess: $BIN missing (run make build)" >&2; exit 2; }
[ -f "$DEMO" ] || { echo "inprocess: $DEMO missing (run make $DEMO)" >&2; exit 2; }
mkdir -p "$OUT"
modes=(full quant quant-exact full-cache quant-cache)
mode_args() {
  case $1 in
    full) echo "" ;;
    quant) echo "--compress recommended" ;;
    quant-exact) echo "--compress recommended --eval exact" ;;
    full-cache) echo "--cache-input" ;;
    quant-cache) echo "--compress recommended --cache-input" ;;
  esac
}
for r in $(seq 1 "$ROUNDS"); do
  for m in "${modes[@]}"; do
    # shellcheck disable=SC2046 # the argument string is meant to split
    "$BIN" train --data "$DEMO" --ranks 4 --partition metis --epochs "$EPOCHS" --hidden 128 \
      $(mode_args "$m") --quiet --metrics "$OUT/$m-r$r.jsonl" >"$OUT/$m-r$r.log" 2>&1 \
      || { echo "inprocess: FAILED $m round $r (see $OUT/$m-r$r.log)" >&2; exit 1; }
  done
  echo "$(date +%T) round $r of $ROUNDS done"
done
args=()
for m in "${modes[@]}"; do
  # This run's rounds only, not those an earlier run with more left in OUT.
  args+=("$m=$(for r in $(seq 1 "$ROUNDS"); do echo "$OUT/$m-r$r.jsonl"; done | paste -sd, -)")
done
"$(dirname "$BIN")/gnn-results" compare "${args[@]}" | tee "$OUT/compare.txt"
