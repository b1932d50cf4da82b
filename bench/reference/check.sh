#!/usr/bin/env bash
# Fairness check: the PyTorch reference (bench/reference/train.py) must train
# the same model as ours. For a small generated graph and, if present,
# ../shared/data/amazon_photo, for sage, gcn and gat, and ../shared/data/cora
# for gat, with ours run for EPOCHS epochs (1 rank, dropout 0, seed 0, a
# checkpoint after every epoch):
#
#   step (pass/fail): from ours' state at every epoch E (epoch 0: the weights
#       the reference draws from the same seed; E >= 1: ours' checkpoint with
#       Adam's moments and step) the reference computes the loss at E (fwd,
#       tolerance FWD_TOL) and, after one backward pass and Adam step, the loss
#       at E+1 (step, tolerance TOL); see stepcheck.py.
#   run (reported): the reference trained from the seed for EPOCHS epochs
#       against ours, epoch by epoch. Rounding differences grow over a run
#       (a ReLU input within rounding of zero flips its mask; Adam turns a
#       near-zero gradient into a full step), so whole runs drift apart even
#       between two builds of ours. The script also runs ours with its
#       dense products in gonum instead of OpenBLAS (GNN_SPMD_BLAS=none:
#       another summation order) and prints that drift (ours vs ours) next
#       to the reference's.
#
# SAGE and GCN: LAYERS layers of HIDDEN. GAT: GAT_LAYERS layers, GAT_HEADS
# heads of GAT_HIDDEN in the hidden layers, GAT_OUT_HEADS averaged output
# heads, lr GAT_LR, attention dropout 0.
#
# usage: bench/reference/check.sh        (from the repo root, after make build)
#        MODELS=gat bench/reference/check.sh     (only the GAT cases)
# env:   GNN_SPMD (binary, default bin/gnn-spmd), PYTHON (default /usr/bin/python3),
#        MODELS ("sage gcn gat"), TOL (1e-4), FWD_TOL (1e-5), EPOCHS (30), THREADS (1),
#        NODES (2000), LAYERS (3), HIDDEN (256), GAT_LAYERS (2), GAT_HEADS (8),
#        GAT_HIDDEN (8), GAT_OUT_HEADS (1), GAT_LR (0.005), NOISE=0 to skip the
#        gonum runs, PHOTO (amazon_photo dir), CORA (cora dir),
#        WORK (scratch dir; default a new temp dir, removed on success)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${GNN_SPMD:-bin/gnn-spmd}
PY=${PYTHON:-/usr/bin/python3}
TOL=${TOL:-1e-4}
FWD_TOL=${FWD_TOL:-1e-5}
EPOCHS=${EPOCHS:-30}
THREADS=${THREADS:-1}
NODES=${NODES:-2000}
LAYERS=${LAYERS:-3}
HIDDEN=${HIDDEN:-256}
NOISE=${NOISE:-1}
MODELS=${MODELS:-sage gcn gat}
GAT_LAYERS=${GAT_LAYERS:-2}
GAT_HEADS=${GAT_HEADS:-8}
GAT_HIDDEN=${GAT_HIDDEN:-8}
GAT_OUT_HEADS=${GAT_OUT_HEADS:-1}
GAT_LR=${GAT_LR:-0.005}
for model in $MODELS; do
	[[ $model == sage || $model == gcn || $model == gat ]] || { echo "check: MODELS: unknown model $model" >&2; exit 2; }
done
has_model() { [[ " $MODELS " == *" $1 "* ]]; }
REF=bench/reference
if [[ -z ${WORK:-} ]]; then
	WORK=$(mktemp -d /tmp/refcheck.XXXXXX)
	CLEAN=1
else
	mkdir -p "$WORK"
	CLEAN=0
fi
[[ -x $BIN ]] || { echo "check: $BIN not found: run make build (or set GNN_SPMD)" >&2; exit 2; }
export GOMAXPROCS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
"$PY" -c 'import torch; print("torch", torch.__version__)'

datasets=()
"$BIN" gen --out "$WORK/gen$NODES.h5" --nodes "$NODES" --seed 1 >/dev/null
datasets+=("$WORK/gen$NODES.h5")
PHOTO=${PHOTO:-../shared/data/amazon_photo}
if [[ -d $PHOTO ]]; then
	"$BIN" convert --data "$PHOTO" --out "$WORK/amazon_photo.h5" >/dev/null
	datasets+=("$WORK/amazon_photo.h5")
else
	echo "check: $PHOTO is absent: skipping amazon_photo"
fi
CORA=${CORA:-../shared/data/cora}
if has_model gat; then
	if [[ -d $CORA ]]; then
		"$BIN" convert --data "$CORA" --out "$WORK/cora.h5" >/dev/null
		datasets+=("$WORK/cora.h5")
	else
		echo "check: $CORA is absent: skipping cora"
	fi
fi

fail=0
for data in "${datasets[@]}"; do
	name=$(basename "$data" .h5)
	for model in $MODELS; do
		[[ $name == cora && $model != gat ]] && continue # cora: the GAT cases only
		tag="$WORK/$name-$model"
		if [[ $model == gat ]]; then
			common=(--data "$data" --model gat --layers "$GAT_LAYERS" --hidden "$GAT_HIDDEN" --heads "$GAT_HEADS"
				--out-heads "$GAT_OUT_HEADS" --lr "$GAT_LR" --seed 0 --dropout 0 --attn-dropout 0)
		else
			common=(--data "$data" --model "$model" --layers "$LAYERS" --hidden "$HIDDEN" --seed 0 --dropout 0)
		fi
		mkdir -p "$tag-ck"
		"$BIN" train "${common[@]}" --ranks 1 --threads "$THREADS" --epochs "$EPOCHS" --metrics "$tag-ours.jsonl" \
			--checkpoint "$tag-ck/ck.h5" --checkpoint-every 1 --keep "$EPOCHS" --quiet --progress lines >"$tag-ours.log"
		"$PY" $REF/stepcheck.py --label "$name $model step" --fwd-tol "$FWD_TOL" --step-tol "$TOL" \
			"$tag-ours.jsonl" "$tag-ck"/ck.h5* -- "${common[@]}" --threads "$THREADS" || fail=1
		"$PY" $REF/train.py "${common[@]}" --threads "$THREADS" --epochs "$EPOCHS" >"$tag-ref.jsonl"
		"$PY" $REF/compare.py "$tag-ours.jsonl" "$tag-ref.jsonl" "$name $model run: ours vs reference" || fail=1
		if [[ $NOISE == 1 ]]; then
			# The same binary with its dense products in gonum instead of the
			# CBLAS it loads (GNN_SPMD_BLAS=none): another summation order.
			GNN_SPMD_BLAS=none "$BIN" train "${common[@]}" --ranks 1 --threads "$THREADS" --epochs "$EPOCHS" --metrics "$tag-gonum.jsonl" \
				--quiet --progress lines >"$tag-gonum.log"
			grep -q "gemm gonum" "$tag-ours.log" && echo "check: ours found no CBLAS: its gonum run is the same computation"
			"$PY" $REF/compare.py "$tag-ours.jsonl" "$tag-gonum.jsonl" "$name $model run: ours vs ours(gonum)" || fail=1
		fi
		rm -rf "$tag-ck"
	done
done
if ((fail)); then
	echo "check: FAILED (files in $WORK)"
	exit 1
fi
echo "check: ok"
((CLEAN)) && rm -rf "$WORK"
exit 0
