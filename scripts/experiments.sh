#!/usr/bin/env bash
# make experiments: the VARCO grid of docs/results/RESULTS.md. Every run writes one
# metrics file RESULTS/<grid>/<dataset>/<partition>-q<Q>/<method>-s<seed>.jsonl;
# a file that ends with its summary line is done and is skipped, so an
# interrupted grid resumes where it stopped. The report is rebuilt at the end.
#
#   scripts/experiments.sh [tune|core|core2|core3|core4|tunegs|tunegw|core5|core6|core7|core8|breadth|scaling|more|gat|family-tune|family-check|family-real|report|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

BIN=${BIN:-bin/gnn-spmd}
RESULTS=${RESULTS:-results}
DATA=${DATA:-../shared/data}
EPOCHS=${EPOCHS:-80}         # full-batch epochs of every run (T of the varco ramp)
HIDDEN=${HIDDEN:-64}         # 3-layer GraphSAGE (mean), hidden width
GEN_HIDDEN=${GEN_HIDDEN:-32} # the generated 100k-node graph: halo traffic, and so the
                             # codecs' CPU time, is 10x that of the real graphs
BIG_EPOCHS=${BIG_EPOCHS:-20} # the 1M-node graph of the "more" grid
BIG_HIDDEN=${BIG_HIDDEN:-16}
# Schedule settings chosen by the tune phase on validation accuracy (see
# docs/VARCO.md); trunc keeps the authors' ramp 128 -> 1.5, slope 5.
VARCO_RMIN_QUANT=${VARCO_RMIN_QUANT:-8}
KAPPA=${KAPPA:-2}
# The gat grid's model: 2-layer GAT, 8 heads of 8 hidden, one output head,
# lr 0.05 (chosen on validation accuracy, seed 0, METIS, full: over 0.01 on
# all three datasets and 0.02 on amazon_photo);
# epochs and no dropout as every grid.
GAT_MODEL=${GAT_MODEL:---model gat --layers 2 --heads 8 --hidden 8 --out-heads 1 --lr 0.05}

mkdir -p "$RESULTS/data"
[ -x "$BIN" ] || { echo "experiments: $BIN missing (run make build)" >&2; exit 2; }
[ -d "$DATA/amazon_photo" ] || { echo "experiments: $DATA/amazon_photo missing (the shared datasets)" >&2; exit 2; }

# Generated graphs: features alone are weak (snr 0.4), so the class signal
# travels along edges.
gen() { # name nodes
  [ -f "$RESULTS/data/$1.h5" ] || "$BIN" gen --out "$RESULTS/data/$1.h5" --nodes "$2" --classes 5 --degree 8 \
    --homophily 0.8 --features 16 --snr 0.4 --seed 7
}

# dataset_args dataset seed: where the data is and which split the seed uses.
dataset_args() {
  case $1 in
    amazon_photo) echo "--data $DATA/amazon_photo --split random_60_20_seed$2 --normalize-features" ;;
    tolokers) echo "--data $DATA/tolokers --split split_$2" ;;
    actor) echo "--data $DATA/actor --split split_$2 --normalize-features" ;;
    flickr) echo "--data $DATA/flickr --split lc60 --normalize-features" ;;
    # The breadth grid's other datasets: bag-of-words features; a seed
    # picks the split where a dataset has several.
    cora | citeseer) echo "--data $DATA/$1 --split public --normalize-features" ;;
    chameleon_filtered | squirrel_filtered | cornell | texas | wisconsin) echo "--data $DATA/$1 --split split_$2 --normalize-features" ;;
    acm | uai | blogcatalog) echo "--data $DATA/$1 --split lc60 --normalize-features" ;;
    csbm100k) echo "--data $RESULTS/data/csbm100k.h5 --split random --hidden $GEN_HIDDEN" ;;
    csbm1m) echo "--data $RESULTS/data/csbm1m.h5 --split random --hidden $BIG_HIDDEN --epochs $BIG_EPOCHS" ;;
    family-*) echo "--data $RESULTS/data/$1.h5 --split random" ;;
    *) echo "experiments: unknown dataset $1" >&2; exit 2 ;;
  esac
}

RECOMMENDED1="--residual forward --residual-skip 0.02 --residual-refresh 0 --bits-bwd 1 --grad-skip 0.1"

# method_args method: the compression flags of a method name.
method_args() {
  case $1 in
    *-res) echo "$(method_args "${1%-res}") --residual forward" ;; # activations residual-coded
    *-cache) echo "$(method_args "${1%-cache}") --cache-input" ;; # the input sent once
    full) echo "" ;;
    nocomm) echo "--no-comm" ;;
    recommended-quant) echo "--compress recommended" ;;
    # The recommended setting from the ternary rung (a candidate: outside
    # the margin on two check members; docs/VARCO.md).
    rq-tern) echo "--compress recommended --ratio-max 20" ;;
    # The recommended setting before the validation family (grids before
    # family): 2-bit residual-coded activations skipped below 2% of their
    # size, 1-bit plain gradients without the rows below a tenth of the
    # mean squared norm.
    # Candidates of the family's tuning: the preset's fixed rate, or the
    # adaptive rule from 2 bits up with bound kappa.
    rq-fixed) echo "--compress recommended --schedule fixed --ratio 16" ;;
    rq-ak*) echo "--compress recommended --schedule adaptive --ratio-max 16 --kappa ${1#rq-ak}" ;;
    rq-gs*) echo "--compress recommended --grad-skip ${1#rq-gs}" ;; # the gradients' floor (tuned after the family)
    recommended1-quant) echo "--compress recommended $RECOMMENDED1" ;;
    recommended1-quant-gs*) echo "--compress recommended $RECOMMENDED1 --group-width 0 --grad-skip ${1#recommended1-quant-gs}" ;;
    recommended1-quant-gw*) echo "--compress recommended $RECOMMENDED1 --group-width ${1#recommended1-quant-gw}" ;;
    fixed*-*) local r=${1#fixed}; echo "--codec ${r#*-} --schedule fixed --ratio ${r%-*}" ;;
    varco-quant) echo "--codec quant --schedule varco --ratio-min $VARCO_RMIN_QUANT" ;;
    varco-trunc) echo "--codec trunc --schedule varco" ;;
    varco-quant-rmin*) echo "--codec quant --schedule varco --ratio-min ${1#varco-quant-rmin}" ;;
    adaptive-quant-k*) echo "--codec quant --schedule adaptive --kappa ${1#adaptive-quant-k}" ;;
    adaptive-*) echo "--codec ${1#adaptive-} --schedule adaptive --kappa $KAPPA" ;;
    *) echo "experiments: unknown method $1" >&2; exit 2 ;;
  esac
}

# run grid dataset partition Q method seed [model flags, last: they win]
run() {
  local dir="$RESULTS/$1/$2/$3-q$4" out eval="--eval exact"
  # The grids before core8 evaluated compressed runs in an exact pass
  # every epoch, the default then; they keep it, so that they reproduce.
  case $1 in core8 | breadth | family*) eval="" ;; esac
  out="$dir/$5-s$6.jsonl"
  # The grids before the family ran the recommended setting of their day:
  # they keep it under its name, so that they reproduce.
  local margs
  case $1:$5 in
    family*:*) margs=$(method_args "$5") ;;
    *:recommended-quant*) margs=$(method_args "${5/recommended/recommended1}") ;;
    *) margs=$(method_args "$5") ;;
  esac
  if [ -f "$out" ] && grep -q '"summary":true' "$out"; then return 0; fi
  mkdir -p "$dir"
  # shellcheck disable=SC2046 # the argument strings are meant to split
  # dataset_args comes after the common flags: its overrides win.
  if ! "$BIN" train --epochs "$EPOCHS" --hidden "$HIDDEN" $(dataset_args "$2" "$6") --ranks "$4" --partition "$3" \
    --seed "$6" $margs $eval ${7:-} --quiet --metrics "$out.tmp" >"$dir/$5-s$6.log" 2>&1; then
    echo "experiments: FAILED $out (see $dir/$5-s$6.log)" >&2
    rm -f "$out.tmp"
    return 0
  fi
  mv "$out.tmp" "$out"
  echo "$(date +%T) $out: $(tail -n1 "$dir/$5-s$6.log" | cut -c1-120)"
}

CORE_METHODS="full nocomm"
for c in quant trunc; do
  for r in 2 4 8 16 32; do CORE_METHODS+=" fixed$r-$c"; done
  CORE_METHODS+=" varco-$c adaptive-$c"
done
SCALING_METHODS="full fixed4-quant varco-quant adaptive-quant"
# The core grid rerun after the compression issue (grid core2): the codec
# format with a 6-byte row header, every layer compressed, the recommended
# setting, and the schedules with and without residual coding; fixed 1, 2
# and 4 bits (r = 32, 16, 8).
CORE2_METHODS="full nocomm recommended-quant varco-quant varco-quant-res adaptive-quant adaptive-quant-res fixed32-quant fixed16-quant fixed8-quant"

tune() { # seed 0 of the core datasets, METIS, Q = 4; choices read on val_acc only
  for d in amazon_photo tolokers csbm100k; do
    for m in full varco-quant-rmin4 varco-quant-rmin5.33 varco-quant-rmin8 adaptive-quant-k0.5 adaptive-quant-k1 adaptive-quant-k2; do
      run tune "$d" metis 4 "$m" 0
    done
  done
}

# grid5 grid methods...: every core dataset and partition, Q = 4, 5 seeds;
# seeds "S..." grid methods... the same for the seeds given.
seeds() {
  local ss=$1 g=$2 s d p m
  shift 2
  for s in $ss; do
    for d in amazon_photo tolokers csbm100k; do
      for p in random metis; do
        for m in "$@"; do run "$g" "$d" "$p" 4 "$m" "$s"; done
      done
    done
  done
}
grid5() { seeds "0 1 2 3 4" "$@"; }

core() { grid5 core $CORE_METHODS; }
core2() { grid5 core2 $CORE2_METHODS; }
# The recommended setting again after the 3-byte row header (wire format
# version 3), beside full communication (grid core3).
core3() { grid5 core3 full recommended-quant; }
# The same after wire format 4 (draws from a 32-bit hash, rounding by
# adding the draw): grid core4.
core4() { grid5 core4 full recommended-quant; }
# The recommended setting's gradient skip threshold (rows with their own
# headers, grid tune-gs), then its header-sharing width (with that
# threshold, grid tune-gw), chosen on validation accuracy: seeds 0 and 1,
# every core group.
tunegs() { seeds "0 1" tune-gs recommended-quant-gs{0,0.1,0.2,0.5}; }
tunegw() { seeds "0 1" tune-gw recommended-quant-gw{0,32,64,128}; }
# Gradient row skipping alone (τg = 0.1), and the recommended setting
# (with it, rows narrower than 64 values sharing headers): grid core5.
core5() { grid5 core5 full recommended-quant-gs0.1 recommended-quant; }
# The core grid rerun with the gradient skip and shared headers in place
# (grid core6): core2's methods, every layer compressed.
core6() { grid5 core6 $CORE2_METHODS; }

# (grid core7): the first layer's input sent every epoch (the default)
# against once (--cache-input), for full communication and the recommended
# setting.
core7() { grid5 core7 full full-cache recommended-quant recommended-quant-cache; }
# (grid core8): compressed runs evaluated by the default --eval confirm
# (accuracies under compression every epoch, the best epoch's confirmed at
# full precision after the last) instead of an exact pass every epoch.
core8() { grid5 core8 full recommended-quant; }

# (grid breadth): full communication and the recommended setting on every
# shared dataset with features beyond the core three, random partition (the
# harder case for compression), Q = 4, 5 seeds: does the setting chosen on
# the core datasets hold on graphs it was not chosen on?
BREADTH_DATASETS="cora citeseer actor chameleon_filtered squirrel_filtered cornell texas wisconsin acm uai flickr blogcatalog"
breadth() {
  for s in 0 1 2 3 4; do
    for d in $BREADTH_DATASETS; do
      for m in full recommended-quant; do run breadth "$d" random 4 "$m" "$s"; done
    done
  done
}

scaling() {
  for s in 0 1 2; do
    for d in amazon_photo tolokers csbm100k; do
      for p in random metis; do
        for q in 2 8; do
          for m in $SCALING_METHODS; do run scaling "$d" "$p" "$q" "$m" "$s"; done
        done
      done
    done
  done
}

# more datasets [...]: the core methods at Q = 4, one seed, METIS.
more() {
  for d in "$@"; do
    [ "$d" = csbm1m ] && gen csbm1m 1000000
    for m in $CORE_METHODS; do run more "$d" metis 4 "$m" 0; done
  done
}

# GAT on the core datasets: full, no communication and the recommended
# quant setting, both partitions, Q = 4, 5 seeds.
gat() {
  for s in 0 1 2 3 4; do
    for d in amazon_photo tolokers csbm100k; do
      for p in random metis; do
        for m in full nocomm recommended-quant; do run gat "$d" "$p" 4 "$m" "$s" "$GAT_MODEL"; done
      done
    done
  done
}

# (grid family): the validation family of the recommended setting.
# Generated graphs of 20000 nodes and 64 features spanning where halo
# compression can cost accuracy: average degree 2 to 50, feature signal
# from nearly none (snr 0.05) to strong (2), homophily 0.3 to 0.9, 4 to 40
# classes, random and METIS partitions, Q = 2, 4 and 8, GraphSAGE, GCN and
# GAT, 100 epochs. The members were drawn once, Latin-hypercube style
# (every level of every dimension equally often, each dimension's levels
# shuffled on its own, Python's random.Random(1) for the 12 tune members
# and (2) for the 24 check members): the tune members chose the setting on
# validation accuracy; the check members, and every shared dataset with
# features (family-real), test it. Columns: name, degree, snr, homophily,
# classes, partition, Q, model, gen seed.
FAMILY="
tune00 10 0.05 0.3 16 metis 8 sage 100
tune01 4 2 0.9 4 metis 8 gcn 101
tune02 2 0.05 0.7 4 metis 8 gcn 102
tune03 25 0.3 0.7 40 metis 4 gat 103
tune04 2 1 0.5 8 random 2 gcn 104
tune05 4 2 0.9 8 metis 2 sage 105
tune06 25 0.3 0.9 16 random 4 sage 106
tune07 2 1 0.3 16 random 2 gat 107
tune08 50 0.3 0.5 8 random 4 gat 108
tune09 4 1 0.7 40 metis 2 gat 109
tune10 50 0.05 0.3 40 random 8 gcn 110
tune11 10 2 0.5 4 random 4 sage 111
check00 2 2 0.3 4 metis 4 gat 200
check01 10 0.3 0.5 8 metis 4 gat 201
check02 2 1 0.7 16 metis 2 gcn 202
check03 10 0.3 0.7 40 random 2 sage 203
check04 50 1 0.7 8 random 2 sage 204
check05 25 2 0.5 8 random 8 gcn 205
check06 50 0.05 0.5 16 metis 4 sage 206
check07 50 2 0.3 16 random 8 sage 207
check08 10 0.05 0.9 4 metis 2 gcn 208
check09 2 0.3 0.9 4 random 4 gat 209
check10 25 0.05 0.3 4 metis 8 gat 210
check11 4 1 0.7 4 random 4 gat 211
check12 4 1 0.9 4 metis 2 gat 212
check13 2 0.05 0.5 8 metis 8 gcn 213
check14 25 2 0.3 40 random 2 gat 214
check15 25 2 0.3 8 random 8 sage 215
check16 4 0.3 0.5 16 metis 2 gcn 216
check17 25 0.3 0.7 40 metis 8 sage 217
check18 50 0.05 0.9 40 random 2 sage 218
check19 2 0.3 0.5 40 random 4 gat 219
check20 4 0.05 0.7 8 random 8 sage 220
check21 10 1 0.9 16 random 4 gcn 221
check22 10 1 0.3 40 metis 8 gcn 222
check23 4 2 0.9 16 metis 4 gcn 223
"
family_model() {
  case $1 in
    sage) echo "--model sage --layers 3 --hidden 64 --lr 0.01 --epochs 100" ;;
    gcn) echo "--model gcn --layers 3 --hidden 64 --lr 0.01 --epochs 100" ;;
    gat) echo "--model gat --layers 2 --heads 8 --hidden 8 --out-heads 1 --lr 0.05 --epochs 100" ;;
  esac
}
# family PATTERN "SEEDS" methods...: the members whose name matches the
# shell pattern.
family() {
  local pattern=$1 seeds=$2 name deg snr hom cls part q model gseed s m
  shift 2
  while read -r name deg snr hom cls part q model gseed; do
    # shellcheck disable=SC2254 # the pattern is meant to match
    case $name in $pattern) ;; *) continue ;; esac
    [ -f "$RESULTS/data/family-$name.h5" ] || "$BIN" gen --out "$RESULTS/data/family-$name.h5" --nodes 20000 --features 64 \
      --degree "$deg" --snr "$snr" --homophily "$hom" --classes "$cls" --seed "$gseed" >/dev/null
    for s in $seeds; do
      for m in "$@"; do run family "family-$name" "$part" "$q" "$m" "$s" "$(family_model "$model")"; done
    done
  done <<<"$FAMILY"
}
# The shared datasets with features and the core grid's generated graph,
# both partitions, Q = 4, the core grid's model and epochs.
# FAMILY_SEEDS samples the seeds of the generated members (the script
# skips finished runs, so a later call with more seeds adds only those).
FAMILY_SEEDS=${FAMILY_SEEDS:-0 1 2 3 4}
FAMILY_REAL=${FAMILY_REAL:-"amazon_photo tolokers csbm100k $BREADTH_DATASETS"}
family_real() {
  local s d p m
  for s in 0 1 2 3 4; do
    for d in $FAMILY_REAL; do
      for p in random metis; do
        for m in "$@"; do run family-real "$d" "$p" 4 "$m" "$s"; done
      done
    done
  done
}

config() {
  cat >"$RESULTS/config.txt" <<EOF
scripts/experiments.sh on $(uname -n): $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); config written at git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)
every run: gnn-spmd train <dataset> --ranks Q --partition P --seed S --epochs $EPOCHS --hidden $HIDDEN <method> [--eval exact: every grid but core8, breadth and family*] --quiet --metrics FILE
model: 3-layer GraphSAGE (mean), hidden $HIDDEN, Adam lr 0.01, no dropout, no weight decay, $EPOCHS epochs; compressed runs evaluated at full precision every epoch (--eval exact, then the default) but in grids core8, breadth and family* (the default --eval confirm)
recommended-quant: --compress recommended, the setting of the grid's day: in the grids before family $RECOMMENDED1 on top of today's preset; rq-tern: $(method_args rq-tern), the candidate starting from ternary codes
grid family: the generated members of FAMILY in scripts/experiments.sh (gnn-spmd gen --nodes 20000 --features 64 --degree D --snr S --homophily H --classes C --seed G), each with its partition, Q and model (sage and gcn: 3 layers, hidden 64, lr 0.01; gat: $(family_model gat | sed 's/ --epochs 100//')), 100 epochs; candidates tuned on the tune members: $(for m in recommended1-quant rq-fixed rq-ak0.5 rq-ak1 rq-ak2; do echo -n "$m: $(method_args $m); "; done)
grid family-real: amazon_photo tolokers csbm100k $BREADTH_DATASETS with the core model, both partitions, Q = 4
csbm100k: hidden $GEN_HIDDEN; csbm1m: $BIG_EPOCHS epochs, hidden $BIG_HIDDEN
grid gat: the model flags $GAT_MODEL after all others (so the per-head hidden width is 8 on every dataset)
generated graphs: gnn-spmd gen --nodes N --classes 5 --degree 8 --homophily 0.8 --features 16 --snr 0.4 --seed 7
datasets: $(for d in amazon_photo tolokers csbm100k actor flickr csbm1m $BREADTH_DATASETS; do echo -n "$d: $(dataset_args $d S); "; done)
methods: $(for m in $CORE_METHODS $CORE2_METHODS; do echo -n "$m: $(method_args $m); "; done | awk -v RS='; ' '!seen[$0]++ {printf "%s; ", $0}')
EOF
}

report() {
  config
  "$(dirname "$BIN")/gnn-results" report --dir "$RESULTS" --out docs/results/RESULTS.md --figures docs/results/figures
}

gen csbm100k 100000
case ${1:-all} in
  tune) tune ;;
  core) core ;;
  core2) core2 ;;
  core3) core3 ;;
  core4) core4 ;;
  tunegs) tunegs ;;
  tunegw) tunegw ;;
  core5) core5 ;;
  core6) core6 ;;
  core7) core7 ;;
  core8) core8 ;;
  breadth) breadth ;;
  scaling) scaling ;;
  more) more actor flickr csbm1m ;;
  gat) gat ;;
  family-tune) family 'tune*' "$FAMILY_SEEDS" full recommended-quant ;;
  family-tern) family '*' "$FAMILY_SEEDS" full rq-tern ;;
  family-real-tern) family_real full rq-tern ;;
  family-tune-candidates) family 'tune*' "$FAMILY_SEEDS" full recommended1-quant rq-fixed rq-ak0.5 rq-ak1 rq-ak2 ;;
  family-tune-gs) family 'tune*' "$FAMILY_SEEDS" full rq-gs0.1 rq-gs0.3 rq-gs1 ;;
  family-check) family 'check*' "$FAMILY_SEEDS" full recommended-quant ;;
  family-real) family_real full recommended-quant ;;
  report) report ;;
  # The 1M-node graph last: its runs are the longest.
  all) tune; core; core2; core3; core4; tunegs; tunegw; core5; core6; core7; core8; breadth; more actor flickr; scaling; gat; more csbm1m; report ;;
  *) echo "usage: scripts/experiments.sh [tune|core|core2|core3|core4|tunegs|tunegw|core5|core6|core7|core8|breadth|scaling|more|gat|family-tune|family-check|family-real|report|all]" >&2; exit 2 ;;
esac
