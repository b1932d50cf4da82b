#!/usr/bin/env bash
# make bench: measures kernels, data loading and whole training epochs on this
# machine and writes docs/BENCHMARKS.md. Every figure in that file comes from
# the run that wrote it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
export CGO_CFLAGS=${CGO_CFLAGS:--I/usr/include/hdf5/serial}
export CGO_LDFLAGS=${CGO_LDFLAGS:--L/usr/lib/x86_64-linux-gnu/hdf5/serial}

NODES=${BENCH_NODES:-1000000}
DEGREE=${BENCH_DEGREE:-20}
EPOCHS=${BENCH_EPOCHS:-5}
OUT=${BENCH_OUT:-docs/BENCHMARKS.md}
work=bin/bench
mkdir -p "$work" docs

echo "bench: building both dense-product backends"
go build -tags "cpu" -o "$work/gnn-spmd-gonum" ./cmd/gnn-spmd
go build -tags "cpu openblas" -o "$work/gnn-spmd-openblas" ./cmd/gnn-spmd

echo "bench: kernels (gonum, openblas)"
go test -tags cpu -run '^$' -bench . -benchtime 3x ./kernels | grep -E '^Benchmark' >"$work/kernels-gonum.txt"
go test -tags "cpu openblas" -run '^$' -bench 'Gemm' -benchtime 3x ./kernels | grep -E '^Benchmark' >"$work/kernels-openblas.txt"
openblas_core=$(OPENBLAS_VERBOSE=2 "$work/gnn-spmd-openblas" --help 2>&1 | grep -i 'core' | head -n1 || true)

echo "bench: data loading"
go test -tags cpu -run '^$' -bench 'LoadOGB|ReadH5|Generate' -benchtime 2x ./data | grep -E '^Benchmark' >"$work/data.txt" || true

data="$work/csbm-${NODES}.h5"
if [ ! -f "$data" ]; then
  echo "bench: generating $NODES nodes, average degree $DEGREE"
  "$work/gnn-spmd-openblas" gen --out "$data" --nodes "$NODES" --degree "$DEGREE" --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1 | tee "$work/gen.txt"
fi

# median epoch time over epochs 1.. (epoch 0 warms caches and the allocator)
median_epoch() { python3 -c '
import json,sys,statistics
e=[json.loads(l) for l in open(sys.argv[1])]
t=[x["epoch_seconds"] for x in e if "epoch" in x and x["epoch"]>0]
s=[x for x in e if x.get("summary")][0]
print("%.3f %d" % (statistics.median(t), s.get("max_rss_mb", 0)))' "$1"; }

rows=""
for backend in openblas gonum; do
  echo "bench: 3-layer GraphSAGE-256, $EPOCHS epochs, gemm $backend"
  "$work/gnn-spmd-$backend" train --data "$data" --model sage --layers 3 --hidden 256 --epochs "$EPOCHS" \
    --quiet --metrics "$work/train-$backend.jsonl" >"$work/train-$backend.txt"
  read -r med rss < <(median_epoch "$work/train-$backend.jsonl")
  load=$(sed -n 's/.*loaded in \([0-9.]*\)s.*/\1/p' "$work/train-$backend.txt")
  rows+="| $backend | $med | $rss | $load |"$'\n'
done

{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(go version | cut -d' ' -f3)."
  echo "OpenBLAS: ${openblas_core:-core not reported}."
  echo
  echo "## Training epoch (one process)"
  echo
  echo "Graph: \`gnn-spmd gen --nodes $NODES --degree $DEGREE --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1\`"
  echo "($(sed -n 's/.*: \([0-9]* nodes, [0-9]* edges\).*/\1/p' "$work/gen.txt" 2>/dev/null || true))."
  echo "Model: 3-layer GraphSAGE-mean, hidden 256, Adam; \`gnn-spmd train --data G.h5 --layers 3 --hidden 256 --epochs $EPOCHS\`."
  echo "Epoch = forward + backward + optimizer step + accuracy counts; median over epochs 1..$((EPOCHS-1))."
  echo
  echo "| dense products | epoch seconds (median) | peak RSS MiB | dataset load seconds (.h5) |"
  echo "| --- | ---: | ---: | ---: |"
  printf "%s" "$rows"
  echo
  echo "## Kernels (go test -bench, pure-Go gonum backend)"
  echo
  echo '```'
  cat "$work/kernels-gonum.txt"
  echo '```'
  echo
  echo "## Dense products with OpenBLAS (-tags openblas)"
  echo
  echo '```'
  cat "$work/kernels-openblas.txt"
  echo '```'
  echo
  echo "## Data loading (go test -bench ./data)"
  echo
  echo '```'
  cat "$work/data.txt"
  echo '```'
  echo
  echo "Reproduce: \`make bench\` (BENCH_NODES, BENCH_DEGREE, BENCH_EPOCHS override the graph and run length)."
} >"$OUT"
echo "bench: wrote $OUT"
