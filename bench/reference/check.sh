#!/usr/bin/env bash
# Fairness check: the PyTorch reference (bench/reference/train.py) must train
# the same model as ours. For a small generated graph and, if present,
# ../shared/data/amazon_photo, for sage and gcn, with ours run for EPOCHS
# epochs (1 rank, dropout 0, seed 0, a checkpoint after every epoch):
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
#       between two builds of ours. When `go` is available the script builds
#       ours without OpenBLAS (gonum's gemm: another summation order) and
#       prints that drift (ours vs ours) next to the reference's.
#
# usage: bench/reference/check.sh        (from the repo root, after make build)
# env:   GNN_SPMD (binary, default bin/gnn-spmd), PYTHON (default /usr/bin/python3),
#        TOL (1e-4), FWD_TOL (1e-5), EPOCHS (30), THREADS (1), NODES (2000),
#        LAYERS (3), HIDDEN (256), NOISE=0 to skip the gonum build, PHOTO (amazon_photo dir),
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

ALT=
if [[ $NOISE == 1 ]]; then
	GO=$(command -v go || echo /usr/local/go/bin/go)
	if [[ -x $GO ]] && CGO_CFLAGS=${CGO_CFLAGS:--I/usr/include/hdf5/serial} \
		CGO_LDFLAGS=${CGO_LDFLAGS:--L/usr/lib/x86_64-linux-gnu/hdf5/serial} GOMAXPROCS= \
		"$GO" build -tags cpu -o "$WORK/gnn-spmd-gonum" ./cmd/gnn-spmd 2>"$WORK/gonum-build.log"; then
		ALT=$WORK/gnn-spmd-gonum
	else
		echo "check: could not build ours with gonum (see $WORK/gonum-build.log): no ours-vs-ours drift"
	fi
fi

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

fail=0
for data in "${datasets[@]}"; do
	name=$(basename "$data" .h5)
	for model in sage gcn; do
		tag="$WORK/$name-$model"
		common=(--data "$data" --model "$model" --layers "$LAYERS" --hidden "$HIDDEN" --seed 0 --dropout 0)
		mkdir -p "$tag-ck"
		"$BIN" train "${common[@]}" --ranks 1 --threads "$THREADS" --epochs "$EPOCHS" --metrics "$tag-ours.jsonl" \
			--checkpoint "$tag-ck/ck.h5" --checkpoint-every 1 --keep "$EPOCHS" --quiet --progress lines >"$tag-ours.log"
		"$PY" $REF/stepcheck.py --label "$name $model step" --fwd-tol "$FWD_TOL" --step-tol "$TOL" \
			"$tag-ours.jsonl" "$tag-ck"/ck.h5* -- "${common[@]}" --threads "$THREADS" || fail=1
		"$PY" $REF/train.py "${common[@]}" --threads "$THREADS" --epochs "$EPOCHS" >"$tag-ref.jsonl"
		"$PY" $REF/compare.py "$tag-ours.jsonl" "$tag-ref.jsonl" "$name $model run: ours vs reference" || fail=1
		if [[ -n $ALT ]]; then
			"$ALT" train "${common[@]}" --ranks 1 --threads "$THREADS" --epochs "$EPOCHS" --metrics "$tag-gonum.jsonl" \
				--quiet --progress lines >/dev/null
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
