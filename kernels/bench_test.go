package kernels

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Benchmark sizes; the defaults need about 3 GiB. Shrink with e.g.
// -spmm.n=100000 on small machines.
var (
	benchSpMMN         = flag.Int("spmm.n", 1_000_000, "SpMM benchmark rows")
	benchSpMMDeg       = flag.Int("spmm.deg", 20, "SpMM benchmark nonzeros per row")
	benchF             = flag.Int("bench.f", 256, "feature width for SpMM and Gemm benchmarks")
	benchSpMMClusters  = flag.Int("spmm.clusters", 0, "SpMM and attention benchmark communities (0: every source anywhere)")
	benchSpMMHomophily = flag.Float64("spmm.homophily", 0.7, "SpMM and attention benchmark share of sources in the row's community")
)

// Every benchmark writes its buffers before timing so that page faults on
// fresh memory are not counted, and calls the kernel once to warm up.

// fastFill fills s with cheap pseudo-random values in [-1, 1).
func fastFill(s []float32, seed uint64) {
	for i := range s {
		s[i] = float32(int32(rng.Mix64(seed+uint64(i))>>32)) / (1 << 31)
	}
}

// benchGraph is the CSR of the SpMM and attention benchmarks: n rows of
// deg sources each, drawn anywhere, or with -spmm.clusters a graph ordered
// by its communities, as --reorder metis leaves the generated benchmark
// graph: rows in clusters of n/clusters, a share -spmm.homophily of each
// row's sources in its own cluster, the rest anywhere, ascending in a row.
func benchGraph(n, deg int) ([]int64, []int32) {
	ptr, col := make([]int64, n+1), make([]int32, n*deg)
	for i := range ptr {
		ptr[i] = int64(i * deg)
	}
	if *benchSpMMClusters <= 0 {
		for i := range col {
			col[i] = int32(rng.Mix64(uint64(i)) % uint64(n))
		}
		return ptr, col
	}
	size := max(1, n / *benchSpMMClusters)
	for i := range col {
		r := rng.Mix64(uint64(i))
		if float64(r>>11)/(1<<53) < *benchSpMMHomophily {
			lo := i / deg / size * size
			col[i] = int32(lo + int(rng.Mix64(r)%uint64(min(size, n-lo))))
		} else {
			col[i] = int32(rng.Mix64(r) % uint64(n))
		}
	}
	for i := range n {
		slices.Sort(col[i*deg : (i+1)*deg])
	}
	return ptr, col
}

// graphTag names benchGraph's communities in a benchmark's name, if any.
func graphTag() string {
	if *benchSpMMClusters <= 0 {
		return ""
	}
	return fmt.Sprintf("/clusters=%d/homophily=%g", *benchSpMMClusters, *benchSpMMHomophily)
}

func BenchmarkSpMM(b *testing.B) {
	n, deg, f := *benchSpMMN, *benchSpMMDeg, *benchF
	ptr, col := benchGraph(n, deg)
	val := make([]float32, n*deg)
	fastFill(val, 1)
	x, y := NewMat(n, f), NewMat(n, f)
	fastFill(x.Data, 2)
	fastFill(y.Data, 3)
	// Bytes touched: every nonzero reads a source row, every row is written.
	bytes := int64(n*deg)*int64(f)*4 + int64(n)*int64(f)*4
	for _, weighted := range []bool{false, true} {
		a := &Adj{Rows: n, Cols: n, Ptr: ptr, Col: col}
		name := "unweighted"
		if weighted {
			a.Val, name = val, "weighted"
		}
		for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/N=%d/deg=%d%s/F=%d/threads=%d", name, n, deg, graphTag(), f, threads), func(b *testing.B) {
				p := NewCPU(threads)
				defer p.Close()
				b.SetBytes(bytes)
				p.SpMM(a, x, y, false)
				for b.Loop() {
					p.SpMM(a, x, y, false)
				}
			})
		}
	}
}

func BenchmarkGemm(b *testing.B) {
	f := *benchF
	p := NewCPU(0)
	defer p.Close()
	for _, m := range []int{4096, 1_000_000} {
		a, w, c := NewMat(m, f), NewMat(f, f), NewMat(m, f)
		fastFill(a.Data, 3)
		fastFill(w.Data, 4)
		fastFill(c.Data, 5)
		flops := 2 * float64(m) * float64(f) * float64(f)
		// fwd: H W as in a layer's forward; dW: H^T dY as in its backward.
		b.Run(fmt.Sprintf("%s/fwd/%dx%dx%d", GemmBackend(), m, f, f), func(b *testing.B) {
			p.Gemm(false, false, 1, a, w, 0, c)
			for b.Loop() {
				p.Gemm(false, false, 1, a, w, 0, c)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("%s/dW/%dx%dx%d", GemmBackend(), f, f, m), func(b *testing.B) {
			p.Gemm(true, false, 1, a, c, 0, w)
			for b.Loop() {
				p.Gemm(true, false, 1, a, c, 0, w)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkMemcpy measures the memory bandwidth that bounds every
// element-wise kernel and SpMM: MB/s counts the bytes copied, rw-GB/s
// counts reads plus writes.
func BenchmarkMemcpy(b *testing.B) {
	const n = 64 << 20 // 256 MiB of float32
	src, dst := make([]float32, n), make([]float32, n)
	fastFill(src, 5)
	copy(dst, src) // fault the pages in
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("256MiB/threads=%d", threads), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				var wg sync.WaitGroup
				for t := 0; t < threads; t++ {
					lo, hi := span(n, threads, t)
					wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
				}
				wg.Wait()
			}
			b.ReportMetric(2*4*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "rw-GB/s")
		})
	}
}

// BenchmarkBias is the bias add and the bias gradient's column sums on
// 200k rows of 256 (a layer of the benchmark model; 200 MiB, beyond the
// caches), the C loops against their Go twins. MB/s counts the matrix's
// bytes once.
func BenchmarkBias(b *testing.B) {
	const rows, f = 200_000, 256
	p := NewCPU(0)
	defer p.Close()
	y, bias, db := NewMat(rows, f), NewMat(1, f), NewMat(1, f)
	fastFill(y.Data, 7)
	fastFill(bias.Data, 8)
	for _, impl := range []string{"c", "go"} {
		run := func(f func()) { f() }
		if impl == "go" {
			run = goTwin
		}
		b.Run("AddBias/"+impl, func(b *testing.B) {
			b.SetBytes(4 * rows * f)
			for b.Loop() {
				run(func() { p.AddBias(y, bias) })
			}
		})
		b.Run("BiasGrad/"+impl, func(b *testing.B) {
			b.SetBytes(4 * rows * f)
			for b.Loop() {
				run(func() { p.BiasGrad(y, db, false) })
			}
		})
	}
}

func BenchmarkAdam(b *testing.B) {
	p := NewCPU(0)
	defer p.Close()
	for _, n := range []int{1 << 20, 16 << 20} {
		w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		fastFill(w, 6)
		fastFill(g, 7)
		clear(m)
		clear(v)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n) * 4 * 7) // reads p, g, m, v; writes p, m, v
			p.Adam(vec(w), vec(g), vec(m), vec(v), 1, 1e-3, 0.9, 0.999, 1e-8, 5e-4)
			step := 1
			for b.Loop() {
				step++
				p.Adam(vec(w), vec(g), vec(m), vec(v), step, 1e-3, 0.9, 0.999, 1e-8, 5e-4)
			}
		})
	}
}

func BenchmarkSoftmaxCE(b *testing.B) {
	p := NewCPU(0)
	defer p.Close()
	const n, c = 1_000_000, 47
	logits, d := NewMat(n, c), NewMat(n, c)
	fastFill(logits.Data, 8)
	clear(d.Data)
	labels, rows := make([]int32, n), make([]int32, n)
	for i := range rows {
		rows[i] = int32(i)
		labels[i] = int32(rng.Mix64(uint64(i)) % c)
	}
	b.Run(fmt.Sprintf("N=%d/C=%d", n, c), func(b *testing.B) {
		b.SetBytes(int64(n) * c * 4 * 3) // zero d, read logits, write d
		p.SoftmaxCrossEntropy(logits, labels, rows, 1.0/n, d)
		for b.Loop() {
			p.SoftmaxCrossEntropy(logits, labels, rows, 1.0/n, d)
		}
	})
}

// BenchmarkAttention times GAT's attention passes (forward; backward, both
// passes) on a random graph of -spmm.n rows and -spmm.deg edges per row,
// for a hidden layer (8 heads of 8) and an output layer (1 head of 40),
// with stored and recomputed coefficients. Bytes: one source row of q per
// edge and pass (the rows the passes gather at random).
func BenchmarkAttention(b *testing.B) {
	n, deg := *benchSpMMN, *benchSpMMDeg
	ptr, col := benchGraph(n, deg)
	a := &Adj{Rows: n, Cols: n, Ptr: ptr, Col: col}
	e := NewEdgesBySource(a)
	for _, s := range []struct{ heads, width int }{{8, 8}, {1, 40}} {
		at := &Attention{Heads: s.heads, Width: s.width, Mean: s.heads == 1, Slope: 0.2}
		q, t := NewMat(n, at.SourceCols()), NewMat(n, at.Heads)
		stats, out, dOut := NewMat(n, at.StatsCols()), NewMat(n, at.OutCols()), NewMat(n, at.OutCols())
		rec, dq, dt := NewMat(n, at.RecordCols()), NewMat(n, at.SourceCols()), NewMat(n, at.Heads)
		alpha := NewMat(n*deg, at.Heads)
		for i, m := range []*Mat{q, t, stats, out, dOut, rec, dq, dt, alpha} {
			fastFill(m.Data, uint64(10+i))
		}
		for _, stored := range []bool{true, false} {
			al := alpha
			if !stored {
				al = nil
			}
			for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
				name := fmt.Sprintf("heads=%d/width=%d/stored=%v/N=%d/deg=%d%s/threads=%d", s.heads, s.width, stored, n, deg, graphTag(), threads)
				p := NewCPU(threads)
				b.Run("forward/"+name, func(b *testing.B) {
					b.SetBytes(int64(n*deg) * int64(q.Cols) * 4)
					p.AttentionForward(at, a, q, t, stats, al, out, true)
					for b.Loop() {
						p.AttentionForward(at, a, q, t, stats, al, out, true)
					}
				})
				b.Run("backward/"+name, func(b *testing.B) {
					b.SetBytes(2 * int64(n*deg) * int64(q.Cols) * 4)
					p.AttentionBackward(at, a, e, q, t, stats, al, dOut, rec, dq, dt, true)
					for b.Loop() {
						p.AttentionBackward(at, a, e, q, t, stats, al, dOut, rec, dq, dt, true)
					}
				})
				p.Close()
			}
		}
	}
}
