#!/usr/bin/env bash
# make bench: measures kernels, data loading and whole training epochs on this
# machine and writes docs/results/BENCHMARKS.md. Every figure in that file comes from
# the run that wrote it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
export CGO_CFLAGS=${CGO_CFLAGS:--I/usr/include/hdf5/serial}
export CGO_LDFLAGS=${CGO_LDFLAGS:--L/usr/lib/x86_64-linux-gnu/hdf5/serial}

NODES=${BENCH_NODES:-1000000}
DEGREE=${BENCH_DEGREE:-20}
EPOCHS=${BENCH_EPOCHS:-5}
OUT=${BENCH_OUT:-docs/results/BENCHMARKS.md}
work=bin/bench
mkdir -p "$work" docs

# The commit measured: the binary is built now, and the tree may move on
# while the benchmarks run.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=" with uncommitted changes"
echo "bench: building"
go build -tags cpu -o "$work/gnn-spmd" ./cmd/gnn-spmd
# One binary, two dense-product backends: the CBLAS it finds (OpenBLAS
# here), and the pure-Go fallback with the library turned off.
openblas=("$work/gnn-spmd")
gonum=(env GNN_SPMD_BLAS=none "$work/gnn-spmd")

echo "bench: kernels (gonum, openblas)"
GNN_SPMD_BLAS=none go test -tags cpu -run '^$' -bench . -benchtime 3x ./kernels | grep -E '^Benchmark' >"$work/kernels-gonum.txt"
go test -tags cpu -run '^$' -bench 'Gemm' -benchtime 3x ./kernels | grep -E '^Benchmark' >"$work/kernels-openblas.txt"

echo "bench: halo codecs (one core, 5 passes)"
# Five passes over every codec and the copy, so that a burst of noise on a
# shared machine lands in one pass of each, not in a whole codec's runs;
# the table takes each one's median.
: >"$work/codec-runs.txt"
for _ in 1 2 3 4 5; do
  go test -tags cpu -cpu 1 -run '^$' -bench 'Codec' -benchtime 5x ./comm/codec | grep -E '^Benchmark' >>"$work/codec-runs.txt"
done
python3 - "$work/codec-runs.txt" >"$work/codec.md" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(Benchmark\S+?)(-\d+)?\s+\d+\s+\d+ ns/op\s+([\d.]+) MB/s", line)
    if m:
        runs.setdefault(m.group(1), []).append(float(m.group(3)))
copy = statistics.median(runs["BenchmarkCodecCopy"])
print("| benchmark | median MB/s | of the copy's median | lowest..highest MB/s |")
print("|---|---:|---:|---|")
for name, v in runs.items():
    med = statistics.median(v)
    print("| %s | %.0f | %.0f%% | %.0f..%.0f |" % (name.removeprefix("Benchmark"), med, 100 * med / copy, min(v), max(v)))
PY

echo "bench: data loading"
go test -tags cpu -run '^$' -bench 'LoadOGB|ReadH5|ScanH5|ReadShard|ScanShard|Generate' -benchtime 3x ./data/... | grep -E '^Benchmark' >"$work/data.txt" || true

data="$work/csbm-${NODES}.h5"
if [ ! -f "$data" ]; then
  echo "bench: generating $NODES nodes, average degree $DEGREE"
  "$work/gnn-spmd" gen --out "$data" --nodes "$NODES" --degree "$DEGREE" --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1 | tee "$work/gen.txt"
fi

echo "bench: the epoch against this machine's roofline"
GNN_SPMD_BENCH_DATA="$PWD/$data" GNN_SPMD_ROOFLINE_OUT="$PWD/$work/roofline.md" \
  go test -tags cpu -run '^$' -bench 'EpochRoofline' -benchtime 2x ./gnn >/dev/null
# The same with the rows in METIS-cluster order (train --reorder metis).
GNN_SPMD_BENCH_DATA="$PWD/$data" GNN_SPMD_ROOFLINE_OUT="$PWD/$work/roofline-metis.md" GNN_SPMD_ROOFLINE_ORDER=metis \
  go test -tags cpu -run '^$' -bench 'EpochRoofline' -benchtime 2x ./gnn >/dev/null

# median epoch time over epochs 1.. (epoch 0 warms caches and the allocator)
median_epoch() { python3 -c '
import json,sys,statistics
e=[json.loads(l) for l in open(sys.argv[1])]
t=[x["epoch_seconds"] for x in e if "epoch" in x and x["epoch"]>0]
s=[x for x in e if x.get("summary")][0]
print("%.3f %d" % (statistics.median(t), s.get("max_rss_mb", 0)))' "$1"; }

rows=""
for backend in openblas gonum; do
  # gonum's transposed products are slow (see the kernels section): fewer epochs.
  epochs=$EPOCHS
  [ "$backend" = gonum ] && epochs=${BENCH_GONUM_EPOCHS:-2}
  echo "bench: 3-layer GraphSAGE-256, $epochs epochs, gemm $backend"
  cmd=("${openblas[@]}")
  [ "$backend" = gonum ] && cmd=("${gonum[@]}")
  "${cmd[@]}" train --data "$data" --model sage --layers 3 --hidden 256 --epochs "$epochs" \
    --quiet --metrics "$work/train-$backend.jsonl" >"$work/train-$backend.txt"
  read -r med rss < <(median_epoch "$work/train-$backend.jsonl")
  load=$(sed -n 's/.*(ready in \([0-9.]*\)s).*/\1/p' "$work/train-$backend.txt")
  rows+="| $backend | $med | $rss | $load |"$'\n'
done

# Ours against the PyTorch reference (bench/reference: same model, same
# .h5, same threads and OpenBLAS), one process, on generated graphs of
# 100k, 1M and 2.5M nodes; the ratio is taken in the same run.
THREADS=$(nproc)
refrows=""
sizes=""
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench: installing Debian's python3-torch for the reference"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-torch python3-h5py >/dev/null || true
fi
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  for n in ${BENCH_REF_NODES:-100000 1000000 2500000}; do
    g="$work/csbm-${n}.h5"
    [ -f "$g" ] || "$work/gnn-spmd" gen --out "$g" --nodes "$n" --degree "$DEGREE" --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1 >/dev/null
    e=3
    [ "$n" -le 100000 ] && e=5
    echo "bench: ours vs PyTorch, $n nodes, $e epochs, $THREADS threads"
    if line=$(GNN_SPMD="$work/gnn-spmd" bench/reference/epoch.sh "$g" "$THREADS" "$e" 2>"$work/ref-$n.err"); then
      read -r _ o _ t _ r _ _ _ ro _ rt <<<"$line"
      refrows+="| $n | $o | $t | $r | $ro | $rt |"$'\n'
      sizes+="nodes $n $o $ro"$'\n'
    else
      refrows+="| $n | failed: $(tail -n1 "$work/ref-$n.err" | cut -c1-80) | | | | |"$'\n'
    fi
  done
  torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
fi

# Distributed: one generated graph, METIS parts, Q = 1, 2, 4 under mpirun on this machine.
DNODES=${BENCH_DIST_NODES:-200000}
ddata="$work/csbm-${DNODES}.h5"
[ -f "$ddata" ] || "$work/gnn-spmd" gen --out "$ddata" --nodes "$DNODES" --degree "$DEGREE" --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 2 >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
split_stats() { python3 -c '
import json,sys,statistics as st
e=[json.loads(l) for l in open(sys.argv[1])]
x=[r for r in e if "epoch" in r and r["epoch"]>0]
m=lambda k: st.median(r[k] for r in x)
b=m("bytes_fwd")+m("bytes_bwd"); h=m("halo_seconds")
print("%.3f %.3f %.3f %.3f %.1f %s" % (m("epoch_seconds"), m("compute_seconds"), m("comm_seconds"), h, b/2**20, ("%.2f" % (b/h/1e9)) if h>0 else "-"))' "$1"; }
# the largest rank's peak RSS in MiB (one process: its own)
rank_rss() { python3 -c '
import json,sys
s=[json.loads(l) for l in open(sys.argv[1]) if "summary" in l][-1]
print(max(s.get("rank_rss_mb") or [s.get("max_rss_mb", 0)]))' "$1"; }
drows=""
ranks=""
for q in 1 2 4; do
  echo "bench: distributed, Q=$q"
  parts="$work/parts-${DNODES}-$q"
  ptime=$("$work/gnn-spmd" partition --data "$ddata" --parts "$q" --method metis --out "$parts" |
    sed -n 's/.*, partition \([0-9.]*\)s,.*/\1/p')
  # --bind-to none: Open MPI binds each of up to two ranks to one core,
  # which leaves a lone rank one CPU of the machine's.
  mpirun -np "$q" --bind-to none "$work/gnn-spmd" train --parts "$parts" --layers 3 --hidden 256 --epochs "$EPOCHS" --quiet \
    --metrics "$work/dist-$q.jsonl" >/dev/null
  read -r ep comp com halo mib bw < <(split_stats "$work/dist-$q.jsonl")
  drows+="| $q | $ptime | $ep | $comp | $com | $halo | $mib | $bw |"$'\n'
  ranks+="ranks $q $ep $(rank_rss "$work/dist-$q.jsonl")"$'\n'
  [ "$q" = 2 ] && two_ranks=$ep
done

# Threads inside one process against as many single-threaded ranks, on the
# same graph and model: one process with --threads 1 and --threads 2, and
# the Q = 2 run above.
trows=""
for t in 1 2; do
  echo "bench: one process, $t threads, $DNODES nodes"
  "$work/gnn-spmd" train --data "$ddata" --ranks 1 --threads "$t" --layers 3 --hidden 256 --epochs "$EPOCHS" --quiet \
    --metrics "$work/threads-$t.jsonl" >/dev/null
  read -r med _ < <(median_epoch "$work/threads-$t.jsonl")
  trows+="| one process, $t thread$([ "$t" = 1 ] || echo s) | $med |"$'\n'
  [ "$t" = 2 ] && two_threads=$med
done
# The rows as given, for comparison with the default METIS-cluster order.
"$work/gnn-spmd" train --data "$ddata" --ranks 1 --threads 2 --reorder none --layers 3 --hidden 256 --epochs "$EPOCHS" --quiet \
  --metrics "$work/threads-2-none.jsonl" >/dev/null
read -r med _ < <(median_epoch "$work/threads-2-none.jsonl")
trows+="| one process, 2 threads, rows as given (\`--reorder none\`) | $med |"$'\n'
trows+="| 2 ranks of 1 thread (mpirun, METIS) | $two_ranks |"$'\n'
thread_ratio=$(python3 -c "print('%.2f' % ($two_threads / $two_ranks))")

# Cost against width: the benchmark graph and model at hidden 64 and 512
# (256 is the training run above), one process.
widths=""
for h in 64 256 512; do
  if [ "$h" = 256 ]; then
    jl="$work/train-openblas.jsonl"
  else
    echo "bench: 3-layer GraphSAGE-$h, $NODES nodes, 3 epochs"
    jl="$work/width-$h.jsonl"
    "${openblas[@]}" train --data "$data" --model sage --layers 3 --hidden "$h" --epochs 3 --quiet --metrics "$jl" >/dev/null
  fi
  read -r med rss < <(median_epoch "$jl")
  widths+="width $h $med $rss"$'\n'
done
printf "# axis value epoch_seconds peak_mib\n%s%s%s" "$sizes" "$widths" "$ranks" >"$work/growth.tsv"
go build -o "$work/gnn-results" ./cmd/gnn-results
"$work/gnn-results" growth --out docs/results/figures/growth "$work/growth.tsv" >/dev/null
growth_table=$(python3 - "$work/growth.tsv" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
first = {}
for axis, v, s, m in rows:
    v, s, m = float(v), float(s), float(m)
    f = first.setdefault(axis, (v, s, m))
    print("| %s | %d | %.3f | %.0f | %.2fx | %.2fx | %.2fx |" % (axis, v, s, m, v / f[0], s / f[1], m / f[2]))
PY
)
echo "bench: GAT with and without --recompute, $NODES nodes"
gat_table=$(GNN_SPMD="$work/gnn-spmd" scripts/gat-memory.sh "$data" "$work")

echo "bench: predict against a training epoch"
scripts/predict-bench.sh "$data" 1 "$work/predict.md" >/dev/null
go build -o "$work/gnn-mpibench" ./cmd/gnn-mpibench
a2a2=$(mpirun -np 2 "$work/gnn-mpibench" 2>&1 | grep -E '^(mode|alltoallv )' || true)
a2a4=$(mpirun -np 4 "$work/gnn-mpibench" 2>&1 | grep -E '^(mode|alltoallv )' || true)

{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d), commit $commit."
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(go version | cut -d' ' -f3)."
  echo "Dense products: $(sed -n 's/.*gemm \(.*\)$/\1/p' "$work/train-openblas.txt" | head -n1)."
  echo "The GPU build's figures (an H200, against PyG) are in [GPU.md](GPU.md), run by hand with scripts/gpu-check.sh and scripts/gpu-pyg.sh."
  echo
  echo "## Training epoch (one process)"
  echo
  echo "Graph: \`gnn-spmd gen --nodes $NODES --degree $DEGREE --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1\`"
  # the training log's dataset line (gen.txt exists only when this run generated the graph)
  echo "($(sed -n '1s/^dataset [^:]*: \([0-9]* nodes, [0-9]* edges\).*/\1/p' "$work/train-openblas.txt"))."
  echo "Model: 3-layer GraphSAGE-mean, hidden 256, Adam; \`gnn-spmd train --data G.h5 --layers 3 --hidden 256 --epochs $EPOCHS\`."
  echo "Epoch = forward + backward + optimizer step + accuracy counts; median over epochs 1..$((EPOCHS-1)) (gonum: epoch 1 only)."
  echo
  echo "| dense products | epoch seconds (median) | peak RSS MiB | dataset ready seconds (.h5 read, checks, graph weights) |"
  echo "| --- | ---: | ---: | ---: |"
  printf "%s" "$rows"
  echo
  echo "## Ours against PyTorch (one process, same threads)"
  echo
  if [ -n "$refrows" ]; then
    echo "3-layer GraphSAGE-256 on \`gnn-spmd gen --nodes N --degree $DEGREE --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 1\`,"
    echo "ours (\`train --ranks 1 --threads $THREADS\`, OpenBLAS, rows in METIS-cluster order: the default \`--reorder metis\`, done once before epoch 0) against bench/reference/train.py (PyTorch $torch_version, torch sparse CSR,"
    echo "\`torch.set_num_threads($THREADS)\`, the same OpenBLAS), same .h5, float32, dropout 0: \`bench/reference/epoch.sh G.h5 $THREADS E\`."
    echo "Mean epoch seconds (forward + loss + backward + Adam + the training accuracy count) over epochs 1..E-1 (E = 5 at 100k,"
    echo "3 above); ratio = ours / torch, both from the same run of this script; peak RSS includes loading the data (and importing torch)."
    echo "bench/reference/README.md says how the reference was checked to compute the same losses."
    echo
    echo "| nodes | ours s/epoch | torch s/epoch | ratio | ours peak RSS MiB | torch peak RSS MiB |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    printf "%s" "$refrows"
  else
    echo "Not run: /usr/bin/python3 has no torch (apt-get install python3-torch)."
  fi
  echo
  echo "## Distributed epoch: compute and communication (mpirun, one machine)"
  echo
  echo "Graph: \`gnn-spmd gen --nodes $DNODES --degree $DEGREE --features 128 --classes 40 --homophily 0.7 --snr 1 --seed 2\`;"
  echo "\`gnn-spmd partition --method metis --parts Q\`, then \`mpirun -np Q gnn-spmd train --parts DIR --layers 3 --hidden 256 --epochs $EPOCHS\`"
  echo "(OMPI_MCA_mpi_yield_when_idle=1). Medians over epochs 1..$((EPOCHS-1)), rank 0's clock. All Q ranks share this machine's"
  echo "$(nproc) cores, so compute does not shrink with Q here: the point is the split and the transport's speed. Halo bandwidth ="
  echo "halo bytes sent by all ranks per epoch / time inside the halo exchanges."
  echo
  echo "| Q | METIS s | epoch s | compute s | comm s | of which halo s | halo MiB/epoch | halo GB/s |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf "%s" "$drows"
  echo
  echo "### Threads in one process against single-threaded ranks"
  echo
  echo "The same graph and model, one process (\`train --data G.h5 --ranks 1 --threads T\`, rows in the default METIS-cluster order) against the Q = 2 run above;"
  echo "median epoch seconds over epochs 1..$((EPOCHS-1)). One process with 2 threads takes ${thread_ratio}x the time of 2 ranks of 1 thread."
  echo
  echo "| run | epoch s |"
  echo "| --- | ---: |"
  printf "%s" "$trows"
  echo
  echo "The transport's own limit, a plain MPI_Alltoallv of B bytes per peer (S = Q*B per rank; algbw counts all ranks' bytes,"
  echo "offbw only those that cross processes), \`mpirun -np Q bin/gnn-mpibench\`:"
  echo
  echo '```'
  echo "Q=2"; echo "$a2a2"; echo "Q=4"; echo "$a2a4"
  echo '```'
  echo
  echo "## How cost grows"
  echo
  echo "Epoch time (median over the epochs after the first) and peak RSS against the graph's size (the reference comparison's"
  echo "runs of ours), the model's width (3-layer GraphSAGE on the $NODES-node benchmark graph) and the number of ranks (the"
  echo "distributed runs above: all ranks share this machine's $(nproc) cores, so the same work is split, not added; memory is the"
  echo "largest rank's). Factors are against each axis's first row; docs/results/figures/growth.png plots them against linear growth."
  echo
  echo "| axis | value | epoch s | peak RSS MiB | value factor | time factor | memory factor |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  echo "$growth_table"
  echo
  echo "![cost against size](figures/growth.png)"
  echo
  echo "## GAT: memory against recomputation"
  echo
  echo "2-layer GAT (8 heads of 8, one output head; the attention coefficients are edges x heads floats per layer) on the"
  echo "$NODES-node benchmark graph, with and without \`--recompute\` (the backward pass computes the coefficients again"
  echo "instead of keeping them; the results are the same bits), one process and 4 ranks under mpirun (METIS parts), 3 epochs,"
  echo "median of epochs 1..2: \`scripts/gat-memory.sh\`."
  echo
  echo "$gat_table"
  echo
  echo "## Predict against a training epoch"
  echo
  echo "3-layer GraphSAGE-256 trained for 3 epochs on the $NODES-node benchmark graph in one process, then"
  echo "\`gnn-spmd predict --embeddings 1\` with its checkpoint: every node's logits and layer 1's output (256 wide) written"
  echo "to one file. The training epoch is the median after the first; the prediction's forward pass, then with the file"
  echo "written, then the whole command (reading the data and the checkpoint included): \`scripts/predict-bench.sh DATA 1\`."
  echo
  cat "$work/predict.md"
  echo
  echo "## Halo codecs (one core)"
  echo
  echo "A block of 100,000 halo rows x 256 float32 features (102 MB). MB/s counts float32 input bytes per second on one core;"
  echo "CodecCopy is a plain copy of the same bytes, the memory limit. Encode = quantize + pack (quant-b: b bits per value;"
  echo "quant-16 is bf16) or keep columns (trunc); decode = unpack + dequantize or zero-pad. Delta is residual coding's"
  echo "sender in one pass (difference from a reference 1% off the rows, skip test, code, the reference's update and"
  echo "comp_error): every row sent (skip=0) or, at skip=0.02, all of them left out. It reads the rows and the reference and"
  echo "writes the reference back, three times the copy's traffic. EncodeWidth and DeltaWidth cut the same bytes into the"
  echo "narrower rows halo exchanges mostly have (hidden widths, a few classes), where the per-row work weighs more."
  echo "\`go test -tags cpu -cpu 1 -run '^\$' -bench Codec -benchtime 5x ./comm/codec\`, five passes; the median of each"
  echo "benchmark's five, and its share of the copy's median (Delta moves three times the copy's bytes):"
  echo
  cat "$work/codec.md"
  echo
  echo "## Kernels (go test -bench, pure-Go gonum backend)"
  echo
  echo '```'
  cat "$work/kernels-gonum.txt"
  echo '```'
  echo
  echo "## Dense products with OpenBLAS (loaded at run time)"
  echo
  echo '```'
  cat "$work/kernels-openblas.txt"
  echo '```'
  echo
  echo "## The epoch against the roofline"
  echo
  echo "One process, the benchmark graph and model (\`BenchmarkEpochRoofline\` in \`gnn\`): each phase's"
  echo "kernel time per epoch against the time this machine's limits allow it: the dense products'"
  echo "FLOPs at the sgemm rate measured at the model's shape, every other kernel's bytes (each input"
  echo "read once, each output written once; \`kernels.PhaseTimer\`) at the all-core copy bandwidth."
  echo
  cat "$work/roofline.md"
  echo
  echo "The same with \`--reorder metis\` (the rows of every rank grouped by METIS clusters of about 32768 rows):"
  echo
  cat "$work/roofline-metis.md"
  echo
  echo "## Data loading (go test -bench ./data/...)"
  echo
  echo '```'
  cat "$work/data.txt"
  echo '```'
  echo
  echo "## Opening untrusted files"
  echo
  echo "Every HDF5 file is scanned by a child process before it is opened (docs/FORMATS.md, Untrusted"
  echo "files). Its cost, from the benchmarks above (1M nodes, 128 features; part 1 of 4 with meta.h5):"
  echo
  python3 - "$work/data.txt" <<'PY'
import re, sys
ns = {}
for line in open(sys.argv[1]):
    m = re.match(r'Benchmark(\w+)-\d+\s+\d+\s+(\d+) ns/op', line)
    if m:
        ns[m.group(1)] = int(m.group(2)) / 1e6
for read, scan, what in (("ReadH5", "ScanH5", "dataset file"), ("ReadShard", "ScanShard", "part file and meta.h5")):
    if read in ns and scan in ns:
        print("- %s: scan %.1f ms against %.0f ms to read and validate it (%.1f%%)." % (what, ns[scan], ns[read], 100 * ns[scan] / ns[read]))
PY

  echo
  echo "Reproduce: \`make bench\` (BENCH_NODES, BENCH_DEGREE, BENCH_EPOCHS override the graph and run length)."
} >"$OUT"
echo "bench: wrote $OUT"
