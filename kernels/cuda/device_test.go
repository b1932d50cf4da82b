//go:build !cpu

package cuda

// Every CUDA kernel against its CPU twin on random inputs and edge cases.
// Without a GPU, the cudaprobe import makes this test binary print a SKIP
// line and exit 0 before any test runs.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/internal/kerneltest"
)

var (
	gpu *Device
	cpu = kernels.NewCPU(2)
)

// device is the tests' GPU 0, opened once (on the test goroutine: a
// Device belongs to the goroutine that made it, and go test runs tests and
// benchmarks one after another on fresh goroutines, hence the lock in New
// and SetCurrentContext here).
func device(t testing.TB) *Device {
	t.Helper()
	if gpu == nil {
		d, err := New(0)
		if err != nil {
			t.Fatal(err)
		}
		gpu = d
		t.Logf("GPU: %s", d.Name())
	}
	if err := gpu.MakeCurrent(); err != nil {
		t.Fatal(err)
	}
	return gpu
}

// Shapes with the edge cases: no rows, one row, widths that are not
// multiples of 32 (or 8, for the bit packing).
var shapes = [][2]int{{0, 5}, {1, 1}, {1, 33}, {7, 3}, {31, 64}, {100, 7}, {257, 100}, {1000, 129}}

// bigShapes are inputs past one pass of a launch's loop on this GPU: a
// second pass of every grid-stride loop (threads), of every warp-per-row
// loop (rows), and more than a reduction's capped grid sums in one pass.
func bigShapes(d *Device) [][2]int {
	threads, warps, reduced := d.GridPass()
	if reduced > threads {
		panic("cuda: a reduction's pass is larger than a launch's")
	}
	return [][2]int{{1, threads + 5}, {(threads + 37*40) / 37, 37}, {warps + 1000, 5}}
}

// The shared inputs and comparison of the twin tests.
var (
	specials         = kerneltest.Specials
	randMat, randAdj = kerneltest.RandMat, kerneltest.RandAdj
	same             = kerneltest.Same
)

func up(d *Device, m *kernels.Mat) *kernels.Mat {
	g := d.NewMat(m.Rows, m.Cols)
	d.Upload(g, m.Data)
	return g
}

func down(d *Device, g *kernels.Mat) []float32 {
	h := make([]float32, g.Len())
	d.Download(h, g)
	return h
}

// near allows tol relative to the largest magnitude (different summation
// order: cuBLAS against OpenBLAS, tree against sequential reductions).
func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 1e-30
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*scale {
			t.Fatalf("%s: element %d is %v, CPU %v (|diff| %.3g > %.3g)", what, i, got[i], want[i], d, tol*scale)
		}
	}
}

func TestSpMM(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(1, 2))
	_, warps, _ := d.GridPass()
	for _, s := range append(shapes, [2]int{warps + 1000, 5}) {
		for _, weighted := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				a := randAdj(rng, s[0], s[0]+3, weighted)
				x, y := randMat(rng, s[0]+3, s[1]), randMat(rng, s[0], s[1])
				gx, gy := up(d, x), up(d, y)
				cpu.SpMM(a, x, y, acc)
				d.SpMM(a, gx, gy, acc)
				same(t, fmt.Sprintf("SpMM %v weighted=%v acc=%v", s, weighted, acc), down(d, gy), y.Data)
				// the transpose, as the backward pass uses it
				yt, xt := randMat(rng, s[0]+3, s[1]), randMat(rng, s[0], s[1])
				gyt := up(d, yt)
				cpu.SpMM(a.T, xt, yt, acc)
				d.SpMM(a.T, up(d, xt), gyt, acc)
				same(t, fmt.Sprintf("SpMM^T %v", s), down(d, gyt), yt.Data)
			}
		}
	}
}

func TestGemm(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(3, 4))
	// {m, k, n}: k = 0 is c = beta*c
	for _, dims := range [][3]int{{1, 1, 1}, {7, 5, 3}, {100, 64, 33}, {513, 129, 47}, {0, 4, 4}, {4, 0, 4}, {4, 4, 0}, {1, 0, 1}} {
		m, k, n := dims[0], dims[1], dims[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				ar, ac, br, bc := m, k, k, n
				if ta {
					ar, ac = k, m
				}
				if tb {
					br, bc = n, k
				}
				for _, beta := range []float32{1, 0, 0.5} {
					a, b, c := randMat(rng, ar, ac), randMat(rng, br, bc), randMat(rng, m, n)
					if beta == 0 && len(c.Data) > 0 {
						c.Data[0] = float32(math.NaN()) // beta 0: c is not read
					}
					gc := up(d, c)
					cpu.Gemm(ta, tb, 0.5, a, b, beta, c)
					d.Gemm(ta, tb, 0.5, up(d, a), up(d, b), beta, gc)
					near(t, fmt.Sprintf("Gemm %v ta=%v tb=%v beta=%v", dims, ta, tb, beta), down(d, gc), c.Data, 1e-5)
				}
			}
		}
	}
}

func TestElementwise(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range append(shapes, bigShapes(d)...) {
		x, dy := randMat(rng, s[0], s[1]), randMat(rng, s[0], s[1])
		b := randMat(rng, 1, s[1])
		gx := up(d, x)
		y := kernels.NewMat(s[0], s[1])
		gy := d.NewMat(s[0], s[1])

		cpu.Copy(y, x)
		cpu.AddBias(y, b)
		d.Copy(gy, gx)
		d.AddBias(gy, up(d, b))
		same(t, "AddBias", down(d, gy), y.Data)

		cpu.ReLU(y, y)
		d.ReLU(gy, gy)
		same(t, "ReLU", down(d, gy), y.Data)

		dx := kernels.NewMat(s[0], s[1])
		gdx := d.NewMat(s[0], s[1])
		cpu.ReLUBackward(y, dy, dx)
		d.ReLUBackward(gy, up(d, dy), gdx)
		same(t, "ReLUBackward", down(d, gdx), dx.Data)

		cpu.Mul(x, dy, dx)
		d.Mul(gx, up(d, dy), gdx)
		same(t, "Mul", down(d, gdx), dx.Data)

		for _, acc := range []bool{false, true} {
			db, gdb := randMat(rng, 1, s[1]), d.NewMat(1, s[1])
			d.Upload(gdb, db.Data)
			cpu.BiasGrad(dy, db, acc)
			d.BiasGrad(up(d, dy), gdb, acc)
			near(t, "BiasGrad", down(d, gdb), db.Data, 1e-6)
		}

		if got, want := d.SumSquares(gx), cpu.SumSquares(x); math.Abs(got-want) > 1e-9*max(want, 1) {
			t.Fatalf("SumSquares %v: %v, CPU %v", s, got, want)
		}
		d.zero(gx)
		same(t, "Zero", down(d, gx), make([]float32, x.Len()))
	}
}

// ReLU and its backward on the values the CPU defines: -0 and NaN give +0.
func TestReLUSpecials(t *testing.T) {
	d := device(t)
	x := kernels.NewMat(len(specials), len(specials))
	for i := range x.Rows {
		for j := range x.Cols {
			x.Data[i*x.Cols+j] = specials[(i+j)%len(specials)]
		}
	}
	dy := kernels.NewMat(x.Rows, x.Cols)
	for i := range dy.Data {
		dy.Data[i] = specials[i%len(specials)]
	}
	y, gy := kernels.NewMat(x.Rows, x.Cols), d.NewMat(x.Rows, x.Cols)
	cpu.ReLU(x, y)
	d.ReLU(up(d, x), gy)
	got := down(d, gy)
	for i, v := range got { // ReLU makes no NaN: every bit must match
		if math.Float32bits(v) != math.Float32bits(y.Data[i]) {
			t.Fatalf("ReLU(%v) = %v (%#x), CPU %v (%#x)", x.Data[i], v, math.Float32bits(v), y.Data[i], math.Float32bits(y.Data[i]))
		}
	}
	dx, gdx := kernels.NewMat(x.Rows, x.Cols), d.NewMat(x.Rows, x.Cols)
	cpu.ReLUBackward(x, dy, dx)
	d.ReLUBackward(up(d, x), up(d, dy), gdx)
	same(t, "ReLUBackward of specials", down(d, gdx), dx.Data)
}

func TestDropout(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range append(shapes, bigShapes(d)[1]) {
		for _, p := range []float32{0, 0.1, 0.5, 1} {
			for _, withIDs := range []bool{false, true} {
				x := randMat(rng, s[0], s[1])
				var ids []int32
				if withIDs {
					ids = make([]int32, s[0])
					for i := range ids {
						ids[i] = int32(rng.IntN(1 << 30))
					}
				}
				y, m := kernels.NewMat(s[0], s[1]), kernels.NewMat(s[0], s[1])
				gy, gm := d.NewMat(s[0], s[1]), d.NewMat(s[0], s[1])
				cpu.Dropout(x, y, m, p, 42, ids)
				d.Dropout(up(d, x), gy, gm, p, 42, ids)
				what := fmt.Sprintf("Dropout %v p=%v ids=%v", s, p, withIDs)
				same(t, what, down(d, gy), y.Data)
				same(t, what+" mask", down(d, gm), m.Data)
			}
		}
	}
}

func TestLossAndCounts(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(9, 10))
	threads, _, _ := d.GridPass()
	for _, n := range []int{1, 7, 1000, 2*threads + 3} {
		for _, c := range []int{1, 2, 7, 47} {
			if n > 1000 && c > 2 {
				continue // a second pass needs rows, not classes
			}
			logits := randMat(rng, n, c)
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(rng.IntN(c))
			}
			var rows []int32
			for i := range n {
				if rng.IntN(3) > 0 {
					rows = append(rows, int32(i))
				}
			}
			gl := up(d, logits)
			dl, gdl := kernels.NewMat(n, c), d.NewMat(n, c)
			want := cpu.SoftmaxCrossEntropy(logits, labels, rows, 0.25, dl)
			got := d.SoftmaxCrossEntropy(gl, labels, rows, 0.25, gdl)
			if math.Abs(got-want) > 1e-9*max(math.Abs(want), 1) {
				t.Fatalf("SoftmaxCrossEntropy n=%d c=%d: loss %v, CPU %v", n, c, got, want)
			}
			same(t, "dlogits", down(d, gdl), dl.Data)
			if g, w := d.CountCorrect(gl, labels, rows), cpu.CountCorrect(logits, labels, rows); g != w {
				t.Fatalf("CountCorrect n=%d c=%d: %d, CPU %d", n, c, g, w)
			}
			if c == 2 {
				hg, hc := make([]float64, 2*kernels.ScoreBins), make([]float64, 2*kernels.ScoreBins)
				d.ScoreHistogram(gl, labels, rows, hg)
				cpu.ScoreHistogram(logits, labels, rows, hc)
				for i := range hg {
					if hg[i] != hc[i] {
						t.Fatalf("ScoreHistogram n=%d: bin %d is %v, CPU %v", n, i, hg[i], hc[i])
					}
				}
			}
		}
	}
}

func TestAdam(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	threads, _, _ := d.GridPass()
	for _, n := range []int{1, 33, 10000, threads + 5} {
		for _, wd := range []float32{0, 5e-4} {
			p, m, v := randMat(rng, 1, n), kernels.NewMat(1, n), kernels.NewMat(1, n)
			gp, gm, gv := up(d, p), up(d, m), up(d, v)
			for step := 1; step <= 3; step++ {
				g := randMat(rng, 1, n)
				cpu.Adam(p, g, m, v, step, 0.01, 0.9, 0.999, 1e-8, wd)
				d.Adam(gp, up(d, g), gm, gv, step, 0.01, 0.9, 0.999, 1e-8, wd)
			}
			same(t, "Adam p", down(d, gp), p.Data)
			same(t, "Adam m", down(d, gm), m.Data)
			same(t, "Adam v", down(d, gv), v.Data)
		}
	}
}

func TestGatherScatter(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(13, 14))
	big := bigShapes(d)[1]
	for _, s := range append(shapes, [2]int{2 * big[0], big[1]}) { // half the rows move
		if s[0] == 0 {
			continue
		}
		src := randMat(rng, s[0], s[1])
		idx := rng.Perm(s[0])[:max(1, s[0]/2)]
		ids := make([]int32, len(idx))
		for i, v := range idx {
			ids[i] = int32(v)
		}
		got := d.NewMat(len(ids), s[1])
		d.GatherRows(RowList(ids), up(d, src), got)
		want := kernels.NewMat(len(ids), s[1])
		for k, r := range ids {
			copy(want.Row(k), src.Row(int(r)))
		}
		same(t, "GatherRows", down(d, got), want.Data)

		dst := randMat(rng, s[0], s[1])
		gdst := up(d, dst)
		d.ScatterAddRows(ListOnce(ids), got, gdst)
		for k, r := range ids {
			for j, v := range want.Row(k) {
				dst.Data[int(r)*s[1]+j] += v
			}
		}
		same(t, "ScatterAddRows", down(d, gdst), dst.Data)
	}
}
