#!/usr/bin/env bash
# Time to accuracy on a real, slow network: the ranks run under mpirun with
# Open MPI's TCP transport inside a network namespace whose loopback is
# rate-limited with tc (a token bucket: every rank pair shares RATE, like
# nodes behind one link, with a deep queue). Shared memory is off (btl tcp,self), so every
# halo byte crosses the limited link. Needs root (ip netns, tc).
#
#   [DATASET=csbm100k|amazon_photo|local200k] [SEEDS="0 1 2"] [PARTITION=metis] [Q=2]
#   [METHODS="full full-nooverlap"] [EPOCHS=N] scripts/slownet.sh [RATE...]
#                                       (default: 1gbit 10gbit)
#
# Per rate and seed it runs full communication (with and without
# --overlap), the recommended quant setting, fixed 8- and 4-bit quantization (r = 4, 8), VARCO and the adaptive
# schedule on DATASET (a method name ending in -cache adds --cache-input) with a random partition (the generated 100k-node
# graph or Amazon Photo, with the experiment grid's settings; a seed picks
# Amazon Photo's split as in the grid), and prints `gnn-results compare`
# (which includes the training time until each method reaches full
# communication's mean accuracy minus half a point). METHODS may add no-comm
# (no halo exchange: the epoch's floor). Metrics go to
# OUT/<dataset>/<rate>/<method>-s<seed>.jsonl (default OUT=results-slownet,
# apart from the experiment grid's directory, whose layout `gnn-spmd
# report` checks); finished runs are skipped. A run with another PARTITION
# or Q goes to OUT/<dataset>-<partition>-q<Q>/.
#
# local200k is a generated graph with communities (--locality 0.95), where a
# METIS partition leaves most rows interior: the setting in which the
# overlap of aggregation with the exchanges (--overlap) has rows to hide.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gnn-spmd}
RESULTS=${RESULTS:-results}
DATA=${DATA:-../shared/data}
OUT=${OUT:-results-slownet}
DATASET=${DATASET:-csbm100k}
SEEDS=${SEEDS:-0}
PARTITION=${PARTITION:-random}
Q=${Q:-4}
EPOCHS=${EPOCHS:-80}
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(1gbit 10gbit)
[ -x "$BIN" ] || { echo "slownet: $BIN missing (run make build)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slownet: needs root for ip netns and tc" >&2; exit 2; }
# dataset_args seed: the experiment grid's settings (scripts/experiments.sh).
case $DATASET in
  csbm100k)
    mkdir -p "$RESULTS/data"
    [ -f "$RESULTS/data/csbm100k.h5" ] || "$BIN" gen --out "$RESULTS/data/csbm100k.h5" --nodes 100000 --classes 5 \
      --degree 8 --homophily 0.8 --features 16 --snr 0.4 --seed 7
    dataset_args() { echo "--data $RESULTS/data/csbm100k.h5 --split random --hidden 32"; } ;;
  amazon_photo)
    [ -d "$DATA/amazon_photo" ] || { echo "slownet: $DATA/amazon_photo missing (the shared datasets)" >&2; exit 2; }
    dataset_args() { echo "--data $DATA/amazon_photo --split random_60_20_seed$1 --normalize-features --hidden 64"; } ;;
  local200k)
    mkdir -p "$RESULTS/data"
    [ -f "$RESULTS/data/local200k.h5" ] || "$BIN" gen --out "$RESULTS/data/local200k.h5" --nodes 200000 --classes 10 \
      --degree 20 --homophily 0.8 --features 64 --snr 1 --communities 64 --locality 0.95 --seed 7
    dataset_args() { echo "--data $RESULTS/data/local200k.h5 --split random --hidden 256"; } ;;
  *) echo "slownet: DATASET=$DATASET, expected csbm100k, amazon_photo or local200k" >&2; exit 2 ;;
esac

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
ns=gnnslow$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT

read -r -a methods <<<"${METHODS:-full full-nooverlap recommended-quant fixed4-quant fixed8-quant varco-quant adaptive-quant}"
tag=$DATASET
[ "$PARTITION" = random ] && [ "$Q" = 4 ] || tag=$DATASET-$PARTITION-q$Q
method_args() {
  case $1 in
    *-cache) echo "$(method_args "${1%-cache}") --cache-input" ;; # the input sent once
    full) echo "" ;;
    full-nooverlap) echo "--overlap=false" ;;
    # No halo exchange at all (the edges between parts dropped): the floor
    # of an epoch on this link and machine, which no codec can go below.
    no-comm) echo "--no-comm" ;;
    # Compressed runs take each epoch's accuracy from the training pass
    # (the default --eval confirm, as the VARCO authors measure it) and
    # confirm the best epoch's at full precision after the last; --eval
    # exact would add a raw evaluation pass every epoch whose bytes (56 MB
    # here) exceed the compressed training's.
    recommended-quant) echo "--compress recommended" ;;
    fixed4-quant) echo "--codec quant --schedule fixed --ratio 4" ;;
    fixed8-quant) echo "--codec quant --schedule fixed --ratio 8 --residual off" ;;
    varco-quant) echo "--codec quant --schedule varco --ratio-min 8" ;;
    adaptive-quant) echo "--codec quant --schedule adaptive --kappa 2" ;;
  esac
}

for rate in "${rates[@]}"; do
  dir=$OUT/$tag/$rate
  mkdir -p "$dir"
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  # A deep queue (limit), as a switch port has: a shallow one drops the
  # ranks' bursts and TCP's retransmission timeouts, not the rate, then
  # set the pace (measured: 11,520 drops and byte-independent times).
  ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst 1mb limit 256mb
  for seed in $SEEDS; do
    for m in "${methods[@]}"; do
      out=$dir/$m-s$seed.jsonl
      if [ -f "$out" ] && grep -q '"summary":true' "$out"; then continue; fi
      # shellcheck disable=SC2046 # the argument strings are meant to split
      ip netns exec "$ns" mpirun -np "$Q" --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
        "$BIN" train $(dataset_args "$seed") --partition "$PARTITION" --epochs "$EPOCHS" \
        --threads 1 --seed "$seed" $(method_args "$m") --quiet --metrics "$out.tmp" >"${out%.jsonl}.log" 2>&1 \
        || { echo "slownet: FAILED $out (see ${out%.jsonl}.log)" >&2; continue; }
      mv "$out.tmp" "$out"
      echo "$(date +%T) $tag $rate $m seed $seed: $(tail -n1 "${out%.jsonl}.log" | cut -c1-100)"
    done
  done
  ip netns exec "$ns" tc -s qdisc show dev lo | sed -n 's/^ *Sent/qdisc: sent/p' | tee "$dir/qdisc.txt"
  cleanup
  echo "== $tag, $rate (tc tbf on loopback, $Q ranks, Open MPI TCP)"
  args=()
  for m in "${methods[@]}"; do
    runs=$(ls "$dir/$m"-s*.jsonl 2>/dev/null | paste -sd, -) || true
    [ -n "$runs" ] && args+=("$m=$runs")
  done
  "$(dirname "$BIN")/gnn-results" compare "${args[@]}" | tee "$dir/compare.txt"
done
