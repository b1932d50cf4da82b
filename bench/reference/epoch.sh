#!/usr/bin/env bash
# Epoch time of ours against the PyTorch reference, same data, model, threads.
#
# usage: bench/reference/epoch.sh DATA.h5 THREADS EPOCHS     (from the repo root)
# prints one line (times in s/epoch, RSS in MiB):
#   ours <mean s/epoch>  torch <mean s/epoch>  ratio <ours/torch>  peak RSS ours <MiB> torch <MiB>
#
# Both run 3-layer GraphSAGE-256 (MODEL=gcn for GCN), full batch, one process,
# dropout 0, seed 0. MODEL=gat runs GAT with the flags in GAT_ARGS (default
# 2 layers, 8 heads of 8, 1 output head; attention dropout 0), the same for
# both. Means leave out epoch 0 (warm-up); EPOCHS >= 2. Epoch time is
# forward + loss + backward + optimizer step (and the accuracy count from the
# training logits, in both). Ours runs `train --ranks 1 --threads T` with
# GOMAXPROCS=T; the reference torch.set_num_threads(T); both get
# OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=T. Peak RSS is each process's
# getrusage ru_maxrss (dataset loading included, for both).
# env: GNN_SPMD (default bin/gnn-spmd), PYTHON (default /usr/bin/python3), MODEL (sage),
#      GAT_ARGS (MODEL=gat: "--layers 2 --heads 8 --hidden 8 --out-heads 1"),
#      TORCH_ARGS (extra flags for the reference only, e.g. "--gat-agg csr"),
#      KEEP=DIR to keep both runs' outputs there.
set -euo pipefail
if (($# != 3)); then
	echo "usage: $0 DATA.h5 THREADS EPOCHS" >&2
	exit 2
fi
DATA=$1 T=$2 EPOCHS=$3
cd "$(dirname "$0")/../.."
BIN=${GNN_SPMD:-bin/gnn-spmd}
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-sage}
((EPOCHS >= 2)) || { echo "epoch.sh: EPOCHS must be >= 2 (epoch 0 is left out of the mean)" >&2; exit 2; }
if [[ -n ${KEEP:-} ]]; then
	OUT=$KEEP
	mkdir -p "$OUT"
else
	OUT=$(mktemp -d /tmp/refepoch.XXXXXX)
	trap 'rm -rf "$OUT"' EXIT
fi
export GOMAXPROCS=$T OPENBLAS_NUM_THREADS=$T OMP_NUM_THREADS=$T MKL_NUM_THREADS=$T

if [[ $MODEL == gat ]]; then
	read -r -a arch <<<"${GAT_ARGS:---layers 2 --heads 8 --hidden 8 --out-heads 1}"
	arch+=(--attn-dropout 0)
else
	arch=(--hidden 256 --layers 3)
fi
read -r -a extra <<<"${TORCH_ARGS:-}"

"$BIN" train --data "$DATA" --ranks 1 --model "$MODEL" "${arch[@]}" --epochs "$EPOCHS" \
	--threads "$T" --dropout 0 --seed 0 --metrics "$OUT/ours.jsonl" --quiet --progress lines >"$OUT/ours.log"
"$PY" bench/reference/train.py --data "$DATA" --model "$MODEL" "${arch[@]}" --epochs "$EPOCHS" \
	--threads "$T" --dropout 0 --seed 0 "${extra[@]}" >"$OUT/torch.jsonl"

"$PY" - "$OUT/ours.jsonl" "$OUT/torch.jsonl" <<'EOF'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ref = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
secs = [r["epoch_seconds"] for r in ours if not r.get("summary") and r["epoch"] > 0]
o = sum(secs) / len(secs)
o_rss = [r for r in ours if r.get("summary")][0]["max_rss_mb"]
s = [r for r in ref if r.get("summary")][0]
t = s["mean_epoch_seconds"]
print(f"ours {o:.4f}  torch {t:.4f}  ratio {o / t:.3f}  peak RSS ours {o_rss:.0f} torch {s['max_rss_mb']:.0f}")
EOF
