package gnn

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// BenchmarkEpochRoofline trains the benchmark model (3-layer GraphSAGE-256)
// on one process and holds every phase of an epoch against the time this
// machine's limits allow: the dense products' FLOPs at the sgemm rate
// measured at the model's largest shape, every other kernel's bytes (each
// input read once, each output written once; kernels.PhaseTimer) at the
// all-core copy bandwidth. GNN_SPMD_BENCH_DATA names the dataset (.h5),
// else a 100k-node graph is generated; GNN_SPMD_ROOFLINE_OUT, if set, is
// where the table goes (Markdown); GNN_SPMD_ROOFLINE_ORDER, the row order
// (View.Reorder; default none). GNN_SPMD_ROOFLINE_RATES, if set, names
// another machine's limits as "name,bytes/s,FLOP/s" (e.g. a GPU's memory
// bandwidth, counting reads and writes, and its FP32 rate): the same
// epoch's work, the same kernel calls, is then held against those too,
// for the time that machine's epoch cannot beat.
func BenchmarkEpochRoofline(b *testing.B) {
	ds, view, order, reorderSeconds := rooflineView(b)
	cpu := kernels.NewCPU(0)
	defer cpu.Close()
	timer := kernels.NewPhaseTimer(cpu)
	mc := ModelConfig{Model: "sage", Layers: 3, Hidden: 256, InDim: ds.NumFeatures, Classes: ds.NumClasses, Seed: 1}
	m, err := NewModel(mc, view, timer)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultTrainConfig()
	epochs := 1 + b.N // one to warm up
	cfg.Epochs = epochs
	tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var wall float64
	var start time.Time
	_, err = tr.Run(func(e *metrics.Epoch) error {
		if e.Epoch == 0 {
			timer.Reset()
			start = time.Now()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	wall = time.Since(start).Seconds()
	measured := float64(epochs - 1)
	if measured == 0 {
		return
	}
	// The machine's rates.
	stream1, streamAll := copyBandwidth(1), copyBandwidth(runtime.GOMAXPROCS(0))
	sgemm := sgemmRate(cpu, view.NumOwned, ds.NumFeatures, 256)

	var sb strings.Builder
	if order != OrderNone {
		fmt.Fprintf(&sb, "Rows in %s order (reordered once, in %.1f s). ", order, reorderSeconds)
	}
	fmt.Fprintf(&sb, "%d nodes, %d edges, %d features; 3-layer GraphSAGE-256, %d threads; copy bandwidth %.1f GB/s (1 core), %.1f GB/s (all); sgemm %.0f GFLOP/s at %dx%dx256\n\n",
		ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, cpu.Threads(), stream1/1e9, streamAll/1e9, sgemm/1e9, view.NumOwned, ds.NumFeatures)
	sb.WriteString("| phase | measured s/epoch | bound s/epoch | measured/bound | work per epoch |\n|---|---|---|---|---|\n")
	var sumMeasured, sumBound float64
	for p := range kernels.NumPhases {
		sec := timer.Seconds[p] / measured
		var bound float64
		var work string
		if p == kernels.Dense {
			bound = timer.Flops[p] / measured / sgemm
			work = fmt.Sprintf("%.1f GFLOP", timer.Flops[p]/measured/1e9)
		} else {
			bound = timer.Bytes[p] / measured / streamAll
			work = fmt.Sprintf("%.2f GB", timer.Bytes[p]/measured/1e9)
		}
		sumMeasured += sec
		sumBound += bound
		fmt.Fprintf(&sb, "| %s | %.3f | %.3f | %.2f | %s |\n", p, sec, bound, sec/bound, work)
		b.ReportMetric(sec, p.String()+"-s/epoch")
	}
	epoch := wall / measured
	fmt.Fprintf(&sb, "| kernels | %.3f | %.3f | %.2f | |\n", sumMeasured, sumBound, sumMeasured/sumBound)
	fmt.Fprintf(&sb, "| **epoch** (wall, with evaluation and bookkeeping) | %.3f | %.3f | %.2f | |\n", epoch, sumBound, epoch/sumBound)
	b.ReportMetric(epoch, "epoch-s")
	b.ReportMetric(epoch/sumBound, "epoch/bound")
	if spec := os.Getenv("GNN_SPMD_ROOFLINE_RATES"); spec != "" {
		other, err := parseRates(spec)
		if err != nil {
			b.Fatal(err)
		}
		other.table(&sb, timer, measured)
	}
	b.Log("\n" + sb.String())
	if out := os.Getenv("GNN_SPMD_ROOFLINE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// rates are a machine's limits: memory bandwidth (reads and writes) and
// dense FLOP rate.
type rates struct {
	name         string
	bytes, flops float64
}

// parseRates reads "name,bytes/s,FLOP/s".
func parseRates(spec string) (rates, error) {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return rates{}, fmt.Errorf("GNN_SPMD_ROOFLINE_RATES: got %q, expected name,bytes/s,FLOP/s", spec)
	}
	r := rates{name: f[0]}
	var err error
	if r.bytes, err = strconv.ParseFloat(f[1], 64); err == nil {
		r.flops, err = strconv.ParseFloat(f[2], 64)
	}
	if err != nil || !(r.bytes > 0 && r.flops > 0) {
		return rates{}, fmt.Errorf("GNN_SPMD_ROOFLINE_RATES: got %q, expected name,bytes/s,FLOP/s with positive rates", spec)
	}
	return r, nil
}

// table writes the epoch's work per phase against r's limits.
func (r rates) table(sb *strings.Builder, timer *kernels.PhaseTimer, epochs float64) {
	fmt.Fprintf(sb, "\nThe same work against %s: %.2f TB/s, %.1f TFLOP/s\n\n", r.name, r.bytes/1e12, r.flops/1e12)
	sb.WriteString("| phase | work per epoch | bound s/epoch |\n|---|---|---|\n")
	var sum float64
	for p := range kernels.NumPhases {
		bound, work := timer.Bytes[p]/epochs/r.bytes, fmt.Sprintf("%.2f GB", timer.Bytes[p]/epochs/1e9)
		if p == kernels.Dense {
			bound, work = timer.Flops[p]/epochs/r.flops, fmt.Sprintf("%.1f GFLOP", timer.Flops[p]/epochs/1e9)
		}
		sum += bound
		fmt.Fprintf(sb, "| %s | %s | %.4f |\n", p, work, bound)
	}
	fmt.Fprintf(sb, "| **epoch** | | %.4f |\n", sum)
}

// rooflineView is the benchmark graph (rooflineData) as one process's
// GraphSAGE view, its rows in the order GNN_SPMD_ROOFLINE_ORDER names
// (default none), with that order and the seconds the reordering took.
func rooflineView(b *testing.B) (*data.Dataset, *View, string, float64) {
	ds := rooflineData(b)
	view, err := SingleProcess(ds, ds.SplitNames()[0], "sage")
	order := cmp.Or(os.Getenv("GNN_SPMD_ROOFLINE_ORDER"), OrderNone)
	start := time.Now()
	if err == nil {
		view, err = view.Reorder(order)
	}
	if err != nil {
		b.Fatal(err)
	}
	return ds, view, order, time.Since(start).Seconds()
}

func rooflineData(b *testing.B) *data.Dataset {
	if path := os.Getenv("GNN_SPMD_BENCH_DATA"); path != "" {
		ds, err := datafile.Read(path)
		if err != nil {
			b.Fatal(err)
		}
		return ds
	}
	ds, err := gen.Generate(gen.Options{Nodes: 100_000, Classes: 40, AvgDegree: 20, Homophily: 0.7, Features: 128, SNR: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return ds
}

// copyBandwidth is the best of five copies of 256 MiB, split over the
// given number of goroutines, in bytes per second counting reads and
// writes.
func copyBandwidth(workers int) float64 {
	const n = 64 << 20
	src, dst := make([]float32, n), make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	best := 0.0
	for range 5 {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo, hi := w*n/workers, (w+1)*n/workers
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		best = max(best, 2*4*n/time.Since(start).Seconds())
	}
	return best
}

// sgemmRate is the best FLOP rate of three forward products of the
// model's first layer (rows x in times in x out) on the device.
func sgemmRate(dev *kernels.CPU, rows, in, out int) float64 {
	a, w, c := kernels.NewMat(rows, in), kernels.NewMat(in, out), kernels.NewMat(rows, out)
	for i := range a.Data {
		a.Data[i] = float32(i%7) / 7
	}
	best := 0.0
	for range 3 {
		start := time.Now()
		dev.Gemm(false, false, 1, a, w, 0, c)
		best = max(best, 2*float64(rows)*float64(in)*float64(out)/time.Since(start).Seconds())
	}
	return best
}

// BenchmarkAggregation times the benchmark model's aggregations one shape
// at a time (forward A x and backward A^T dz, 256 and 40 wide) on the
// graph of BenchmarkEpochRoofline, in the same row order, with the bytes
// the roofline counts.
func BenchmarkAggregation(b *testing.B) {
	_, view, _, _ := rooflineView(b)
	cpu := kernels.NewCPU(0)
	defer cpu.Close()
	a := view.Adj
	for _, f := range []int{256, 40} {
		x := kernels.NewMat(a.Cols, f)
		for i := range x.Data {
			x.Data[i] = float32(i%13) / 13
		}
		y := kernels.NewMat(a.Rows, f)
		for _, c := range []struct {
			name string
			a    *kernels.Adj
		}{{"forward", a}, {"backward", a.T}} {
			b.Run(fmt.Sprintf("%s/F=%d", c.name, f), func(b *testing.B) {
				timer := kernels.NewPhaseTimer(cpu)
				timer.SpMM(c.a, x.View(0, c.a.Cols), y.View(0, c.a.Rows), false)
				b.SetBytes(int64(timer.Bytes[kernels.Aggregation]))
				for b.Loop() {
					cpu.SpMM(c.a, x.View(0, c.a.Cols), y.View(0, c.a.Rows), false)
				}
			})
		}
	}
}
