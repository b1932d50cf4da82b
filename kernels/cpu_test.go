package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// threadCounts are the pool sizes every kernel is checked with: 1 runs
// inline, the others go through the worker pool (7 leaves ragged chunks).
var threadCounts = []int{1, 2, 4, 7}

// vec wraps a host slice as a 1 x len(x) matrix without copying.
func vec(x []float32) *Mat { return &Mat{Rows: 1, Cols: len(x), Data: x} }

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func randMat(rng *rand.Rand, rows, cols int) *Mat {
	m := NewMat(rows, cols)
	for i := range m.Data {
		m.Data[i] = float32(rng.NormFloat64())
	}
	return m
}

func fillNaN(m *Mat) {
	for i := range m.Data {
		m.Data[i] = float32(math.NaN())
	}
}

// randAdj returns a random CSR matrix where about a fifth of the rows are
// empty and the others have 1..2*deg entries (repeated columns allowed).
func randAdj(rng *rand.Rand, rows, cols, deg int, weighted bool) *Adj {
	ptr := make([]int64, rows+1)
	var col []int32
	var val []float32
	for i := 0; i < rows; i++ {
		n := 0
		if cols > 0 && rng.IntN(5) != 0 {
			n = 1 + rng.IntN(2*deg)
		}
		for k := 0; k < n; k++ {
			col = append(col, int32(rng.IntN(cols)))
			val = append(val, float32(rng.NormFloat64()))
		}
		ptr[i+1] = int64(len(col))
	}
	if !weighted {
		val = nil
	}
	return NewAdj(rows, cols, ptr, col, val)
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %v, want %v (bitwise)", what, i, got[i], want[i])
		}
	}
}

func close32(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func copyMat(m *Mat) *Mat {
	return &Mat{Rows: m.Rows, Cols: m.Cols, Data: slices.Clone(m.Data)}
}

func forThreads(t *testing.T, f func(t *testing.T, p *CPU)) {
	for _, n := range threadCounts {
		p := NewCPU(n)
		f(t, p)
		p.Close()
	}
}

// ---- SpMM and NewAdj ----

func naiveSpMM(a *Adj, x, y *Mat, acc bool) {
	f := x.Cols
	for i := 0; i < a.Rows; i++ {
		if !acc {
			for j := 0; j < f; j++ {
				y.Data[i*f+j] = 0
			}
		}
		for k := a.Ptr[i]; k < a.Ptr[i+1]; k++ {
			c := int(a.Col[k])
			for j := 0; j < f; j++ {
				if a.Val == nil {
					y.Data[i*f+j] += x.Data[c*f+j]
				} else {
					y.Data[i*f+j] += a.Val[k] * x.Data[c*f+j]
				}
			}
		}
	}
}

func dense(a *Adj) [][]float64 {
	d := make([][]float64, a.Rows)
	for i := range d {
		d[i] = make([]float64, a.Cols)
		for k := a.Ptr[i]; k < a.Ptr[i+1]; k++ {
			v := 1.0
			if a.Val != nil {
				v = float64(a.Val[k])
			}
			d[i][a.Col[k]] += v
		}
	}
	return d
}

var spmmShapes = []struct{ rows, cols, f, deg int }{
	{0, 5, 3, 2}, {4, 0, 3, 2}, {1, 1, 1, 1}, {1, 7, 9, 3}, {6, 5, 0, 2},
	{37, 23, 13, 4}, {500, 300, 64, 8}, {2000, 1500, 33, 10}, {3000, 100, 7, 3},
	// Every count of whole vectors below the column block, with and without
	// single columns after them, and a block followed by a narrow rest.
	{120, 90, 23, 3}, {90, 70, 24, 4}, {300, 200, 40, 6}, {90, 70, 50, 4}, {200, 150, 56, 5}, {80, 60, 63, 3}, {100, 80, 104, 4},
}

func TestSpMM(t *testing.T) {
	rng := newRNG(1)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range spmmShapes {
			for _, weighted := range []bool{false, true} {
				a := randAdj(rng, s.rows, s.cols, s.deg, weighted)
				for _, m := range []*Adj{a, a.T} {
					x := randMat(rng, m.Cols, s.f)
					for _, acc := range []bool{false, true} {
						y := randMat(rng, m.Rows, s.f)
						if !acc {
							fillNaN(y)
						}
						want := copyMat(y)
						naiveSpMM(m, x, want, acc)
						p.SpMM(m, x, y, acc)
						bitsEqual(t, "SpMM", y.Data, want.Data)
					}
				}
			}
		}
	})
}

// SpMMRows over a row set and its complement, and SpMM over the RowRange
// views of a cut, give the bits of one SpMM.
func TestSpMMRowsAndRowRange(t *testing.T) {
	rng := newRNG(3)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range spmmShapes {
			for _, weighted := range []bool{false, true} {
				a := randAdj(rng, s.rows, s.cols, s.deg, weighted)
				x := randMat(rng, a.Cols, s.f)
				for _, acc := range []bool{false, true} {
					y := randMat(rng, a.Rows, s.f)
					want := copyMat(y)
					p.SpMM(a, x, want, acc)

					var in, out []int32
					for i := 0; i < a.Rows; i++ {
						if rng.IntN(3) == 0 {
							in = append(in, int32(i))
						} else {
							out = append(out, int32(i))
						}
					}
					got := copyMat(y)
					p.SpMMRows(a, NewRowSet(a, in), x, got, acc)
					p.SpMMRows(a, NewRowSet(a, out), x, got, acc)
					bitsEqual(t, "SpMMRows", got.Data, want.Data)

					cut := rng.IntN(a.Rows + 1)
					got = copyMat(y)
					p.SpMM(a.RowRange(0, cut), x, got.View(0, cut), acc)
					p.SpMM(a.RowRange(cut, a.Rows), x, got.View(cut, a.Rows), acc)
					bitsEqual(t, "RowRange", got.Data, want.Data)
				}
			}
		}
	})
}

func TestSpMMSkewed(t *testing.T) {
	// One row holding most of the entries must not break the nnz split.
	rng := newRNG(2)
	rows, cols, f := 300, 50, 17
	ptr := make([]int64, rows+1)
	var col []int32
	for i := 0; i < rows; i++ {
		n := 1
		if i == 150 {
			n = 20000
		}
		for k := 0; k < n; k++ {
			col = append(col, int32(rng.IntN(cols)))
		}
		ptr[i+1] = int64(len(col))
	}
	a := NewAdj(rows, cols, ptr, col, nil)
	x := randMat(rng, cols, f)
	want := NewMat(rows, f)
	naiveSpMM(a, x, want, false)
	forThreads(t, func(t *testing.T, p *CPU) {
		y := NewMat(rows, f)
		p.SpMM(a, x, y, false)
		bitsEqual(t, "SpMM skewed", y.Data, want.Data)
	})
}

// TestSpMMBadAdj: a column or row pointer outside the matrix panics
// instead of reaching the C gather, in SpMM and SpMMRows.
func TestSpMMBadAdj(t *testing.T) {
	cases := map[string]func() *Adj{
		"column": func() *Adj {
			a := NewAdj(2, 3, []int64{0, 1, 2}, []int32{0, 2}, nil)
			a.Cols = 2 // column 2 is now out of range
			return a
		},
		"row pointer past the columns": func() *Adj {
			return &Adj{Rows: 2, Cols: 2, Ptr: []int64{0, 1, 3}, Col: []int32{0, 1}}
		},
		"row pointers decreasing": func() *Adj {
			return &Adj{Rows: 2, Cols: 2, Ptr: []int64{0, 2, 1}, Col: []int32{0, 1}}
		},
		"fewer values than nonzeros": func() *Adj {
			return &Adj{Rows: 2, Cols: 2, Ptr: []int64{0, 1, 2}, Col: []int32{0, 1}, Val: []float32{1}}
		},
	}
	for name, bad := range cases {
		for _, rows := range []bool{false, true} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s (SpMMRows %v): no panic", name, rows)
					}
				}()
				p, a := NewCPU(1), bad()
				if rows {
					p.SpMMRows(a, NewRowSet(a, []int32{0, 1}), NewMat(2, 4), NewMat(2, 4), false)
				} else {
					p.SpMM(a, NewMat(2, 4), NewMat(2, 4), false)
				}
			}()
		}
	}
}

func TestSplitByWeight(t *testing.T) {
	ptr := []int64{0, 0, 100, 100, 101, 102, 300, 300}
	for nc := 1; nc <= 10; nc++ {
		b := splitByWeight(nil, ptr, nc)
		if len(b) != nc+1 || b[0] != 0 || b[nc] != len(ptr)-1 || !slices.IsSorted(b) {
			t.Fatalf("nc=%d: bounds %v", nc, b)
		}
	}
}

func TestNewAdjTranspose(t *testing.T) {
	rng := newRNG(3)
	for _, s := range spmmShapes {
		for _, weighted := range []bool{false, true} {
			a := randAdj(rng, s.rows, s.cols, s.deg, weighted)
			at := a.T
			if at.T != a || at.Rows != a.Cols || at.Cols != a.Rows {
				t.Fatalf("transpose links/shape wrong")
			}
			if (at.Val == nil) != (a.Val == nil) || len(at.Ptr) != a.Cols+1 || at.Ptr[a.Cols] != a.Ptr[a.Rows] {
				t.Fatalf("transpose structure wrong")
			}
			for i := 0; i < at.Rows; i++ {
				if !slices.IsSorted(at.Col[at.Ptr[i]:at.Ptr[i+1]]) {
					t.Fatalf("transposed row %d not in source-row order", i)
				}
			}
			d, dt := dense(a), dense(at)
			for i := range d {
				for j := range d[i] {
					if d[i][j] != dt[j][i] {
						t.Fatalf("A[%d,%d] = %v, A^T[%d,%d] = %v", i, j, d[i][j], j, i, dt[j][i])
					}
				}
			}
		}
	}
}

// ---- Gemm ----

func naiveGemm(tA, tB bool, alpha float32, a, b *Mat, beta float32, c *Mat) []float64 {
	at := func(m *Mat, tr bool, i, j int) float64 {
		if tr {
			i, j = j, i
		}
		return float64(m.Data[i*m.Cols+j])
	}
	k := a.Cols
	if tA {
		k = a.Rows
	}
	out := make([]float64, c.Rows*c.Cols)
	for i := 0; i < c.Rows; i++ {
		for j := 0; j < c.Cols; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += at(a, tA, i, l) * at(b, tB, l, j)
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c.Data[i*c.Cols+j])
			}
			out[i*c.Cols+j] = s
		}
	}
	return out
}

func TestGemm(t *testing.T) {
	rng := newRNG(4)
	// The last two are cut into row blocks and into chunks of k (gemm.go).
	shapes := [][3]int{{0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {1, 1, 1}, {17, 33, 9}, {64, 48, 80}, {130, 7, 257}, {600, 5, 3}, {9, 6, 4500}}
	p := NewCPU(4)
	defer p.Close()
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}, {2, 0.25}} {
					a := randMat(rng, m, k)
					if tA {
						a = randMat(rng, k, m)
					}
					b := randMat(rng, k, n)
					if tB {
						b = randMat(rng, n, k)
					}
					c := randMat(rng, m, n)
					if ab[1] == 0 {
						fillNaN(c)
					}
					want := naiveGemm(tA, tB, ab[0], a, b, ab[1], c)
					p.Gemm(tA, tB, ab[0], a, b, ab[1], c)
					close32(t, "Gemm", c.Data, want, 1e-4)
				}
			}
		}
	}
}

// TestGemmThreadIndependent: Gemm gives the same bits for every thread
// count, for products cut into row blocks, into chunks of k, and neither.
func TestGemmThreadIndependent(t *testing.T) {
	rng := newRNG(14)
	for _, s := range [][3]int{{37, 29, 41}, {1500, 24, 40}, {40, 24, 9000}, {300, 300, 5000}} {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				a, b := randMat(rng, m, k), randMat(rng, k, n)
				if tA {
					a = randMat(rng, k, m)
				}
				if tB {
					b = randMat(rng, n, k)
				}
				c0 := randMat(rng, m, n)
				var want []float32
				for _, threads := range []int{1, 2, 3, 8} {
					p := NewCPU(threads)
					c := copyMat(c0)
					p.Gemm(tA, tB, 0.75, a, b, 0.5, c)
					p.Close()
					if want == nil {
						want = c.Data
						continue
					}
					bitsEqual(t, fmt.Sprintf("Gemm %dx%dx%d transA %v transB %v, %d threads", m, n, k, tA, tB, threads), c.Data, want)
				}
			}
		}
	}
}

// ---- element-wise ----

func TestAddBias(t *testing.T) {
	rng := newRNG(5)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 4}, {1, 1}, {3, 0}, {7, 13}, {1000, 67}} {
			y := randMat(rng, s[0], s[1])
			b := randMat(rng, 1, s[1]).Data
			want := copyMat(y)
			for i := 0; i < y.Rows; i++ {
				for j := 0; j < y.Cols; j++ {
					want.Data[i*y.Cols+j] += b[j]
				}
			}
			p.AddBias(y, vec(b))
			bitsEqual(t, "AddBias", y.Data, want.Data)
		}
	})
}

func TestBiasGrad(t *testing.T) {
	rng := newRNG(6)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 4}, {1, 1}, {3, 0}, {7, 13}, {5000, 67}} {
			dy := randMat(rng, s[0], s[1])
			for _, acc := range []bool{false, true} {
				db := randMat(rng, 1, s[1]).Data
				want := make([]float64, s[1])
				for j := range want {
					if acc {
						want[j] = float64(db[j])
					}
					for i := 0; i < dy.Rows; i++ {
						want[j] += float64(dy.Data[i*dy.Cols+j])
					}
				}
				p.BiasGrad(dy, vec(db), acc)
				close32(t, "BiasGrad", db, want, 1e-6)
			}
		}
	})
}

func TestReLU(t *testing.T) {
	rng := newRNG(7)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 4}, {1, 1}, {7, 13}, {1000, 67}} {
			x := randMat(rng, s[0], s[1])
			want := copyMat(x)
			for i, v := range want.Data {
				if !(v > 0) {
					want.Data[i] = 0
				}
			}
			y := randMat(rng, s[0], s[1])
			p.ReLU(x, y)
			bitsEqual(t, "ReLU", y.Data, want.Data)
			p.ReLU(x, x) // in place
			bitsEqual(t, "ReLU in place", x.Data, want.Data)

			dy := randMat(rng, s[0], s[1])
			wantDx := copyMat(dy)
			for i, v := range y.Data {
				if !(v > 0) {
					wantDx.Data[i] = 0
				}
			}
			dx := randMat(rng, s[0], s[1])
			p.ReLUBackward(y, dy, dx)
			bitsEqual(t, "ReLUBackward", dx.Data, wantDx.Data)
			p.ReLUBackward(y, dy, dy)
			bitsEqual(t, "ReLUBackward in place", dy.Data, wantDx.Data)
		}
	})
}

func TestMulZero(t *testing.T) {
	rng := newRNG(8)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 4}, {1, 1}, {7, 13}, {1000, 67}} {
			x, m := randMat(rng, s[0], s[1]), randMat(rng, s[0], s[1])
			want := copyMat(x)
			for i := range want.Data {
				want.Data[i] *= m.Data[i]
			}
			y := randMat(rng, s[0], s[1])
			p.Mul(x, m, y)
			bitsEqual(t, "Mul", y.Data, want.Data)
			p.Mul(x, m, x)
			bitsEqual(t, "Mul in place", x.Data, want.Data)
			p.zeroSlice(x.Data)
			bitsEqual(t, "Zero", x.Data, make([]float32, len(x.Data)))
		}
	})
}

// ---- dropout ----

// refUniform restates the documented dropout hash independently of the
// package code, so that a change to either is caught.
func refUniform(seed uint64, row, col int32) float32 {
	sm := func(z uint64) uint64 {
		z += 0x9E3779B97F4A7C15
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	key := uint64(uint32(row))<<32 | uint64(uint32(col))
	return float32(sm(sm(seed)^key)>>40) / (1 << 24)
}

func TestDropoutReference(t *testing.T) {
	rng := newRNG(9)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 4}, {1, 1}, {7, 13}, {1000, 67}} {
			for _, prob := range []float32{0, 0.1, 0.5, 0.9, 1} {
				for _, withIDs := range []bool{false, true} {
					x := randMat(rng, s[0], s[1])
					var ids []int32
					if withIDs {
						ids = make([]int32, s[0])
						for i := range ids {
							ids[i] = rng.Int32()
						}
					}
					seed := rng.Uint64()
					wantY, wantM := copyMat(x), copyMat(x)
					for i := 0; i < x.Rows; i++ {
						id := int32(i)
						if withIDs {
							id = ids[i]
						}
						for j := 0; j < x.Cols; j++ {
							k := i*x.Cols + j
							switch {
							case prob == 0:
								wantM.Data[k] = 1
							case refUniform(seed, id, int32(j)) >= prob:
								wantM.Data[k] = float32(1 / (1 - float64(prob)))
								wantY.Data[k] = x.Data[k] * wantM.Data[k]
							default:
								wantM.Data[k], wantY.Data[k] = 0, 0
							}
						}
					}
					y, m := randMat(rng, s[0], s[1]), randMat(rng, s[0], s[1])
					p.Dropout(x, y, m, prob, seed, ids)
					bitsEqual(t, "Dropout y", y.Data, wantY.Data)
					bitsEqual(t, "Dropout mask", m.Data, wantM.Data)
					p.Dropout(x, x, m, prob, seed, ids) // in place
					bitsEqual(t, "Dropout in place", x.Data, wantY.Data)
				}
			}
		}
	})
}

func TestDropoutStatistics(t *testing.T) {
	p := NewCPU(4)
	defer p.Close()
	rows, cols := 2000, 100
	x := NewMat(rows, cols)
	for i := range x.Data {
		x.Data[i] = 1
	}
	y, m := NewMat(rows, cols), NewMat(rows, cols)
	for _, prob := range []float32{0.1, 0.5, 0.8} {
		for seed := uint64(0); seed < 3; seed++ {
			p.Dropout(x, y, m, prob, seed, nil)
			kept, sum := 0, 0.0
			for i, v := range m.Data {
				if v != 0 {
					kept++
				}
				sum += float64(y.Data[i])
			}
			n := float64(len(m.Data))
			frac, want := float64(kept)/n, 1-float64(prob)
			sd := math.Sqrt(want * (1 - want) / n)
			if math.Abs(frac-want) > 5*sd {
				t.Errorf("p=%v seed=%d: kept %.4f, want %.4f ± %.4f", prob, seed, frac, want, 5*sd)
			}
			// Survivors are scaled so that E[y] = x.
			if mean := sum / n; math.Abs(mean-1) > 5*sd/want {
				t.Errorf("p=%v seed=%d: mean(y) = %.4f, want 1", prob, seed, mean)
			}
		}
	}
	// Columns and rows must not be correlated: seed 0 and 1 differ, and
	// per-column keep rates look uniform.
	p.Dropout(x, y, m, 0.5, 0, nil)
	m0 := slices.Clone(m.Data)
	p.Dropout(x, y, m, 0.5, 1, nil)
	same := 0
	for i := range m0 {
		if m0[i] == m.Data[i] {
			same++
		}
	}
	if f := float64(same) / float64(len(m0)); math.Abs(f-0.5) > 0.01 {
		t.Errorf("masks of seeds 0 and 1 agree on %.3f of elements, want 0.5", f)
	}
	for j := 0; j < cols; j++ {
		kept := 0
		for i := 0; i < rows; i++ {
			if m.Data[i*cols+j] != 0 {
				kept++
			}
		}
		if f := float64(kept) / float64(rows); math.Abs(f-0.5) > 5*math.Sqrt(0.25/float64(rows)) {
			t.Errorf("column %d keeps %.3f", j, f)
		}
	}
}

func TestDropoutRowIDsPermutation(t *testing.T) {
	rng := newRNG(10)
	p := NewCPU(4)
	defer p.Close()
	rows, cols := 500, 37
	x := randMat(rng, rows, cols)
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(1000 + 3*i)
	}
	perm := rng.Perm(rows)
	xp := NewMat(rows, cols)
	idsp := make([]int32, rows)
	for i, src := range perm {
		copy(xp.Row(i), x.Row(src))
		idsp[i] = ids[src]
	}
	y, m := NewMat(rows, cols), NewMat(rows, cols)
	yp, mp := NewMat(rows, cols), NewMat(rows, cols)
	p.Dropout(x, y, m, 0.3, 77, ids)
	p.Dropout(xp, yp, mp, 0.3, 77, idsp)
	for i, src := range perm {
		bitsEqual(t, "permuted mask", mp.Row(i), m.Row(src))
		bitsEqual(t, "permuted y", yp.Row(i), y.Row(src))
	}
}

// ---- loss ----

func naiveSCE(logits *Mat, labels, rows []int32, scale float32) (float64, []float64) {
	f := logits.Cols
	d := make([]float64, len(logits.Data))
	var loss float64
	for _, i := range rows {
		x := logits.Data[int(i)*f : int(i)*f+f]
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range x {
			s += math.Exp(float64(v) - mx)
		}
		loss += mx + math.Log(s) - float64(x[labels[i]])
		for j, v := range x {
			g := math.Exp(float64(v)-mx) / s
			if int32(j) == labels[i] {
				g--
			}
			d[int(i)*f+j] = float64(scale) * g
		}
	}
	return loss, d
}

func randLabels(rng *rand.Rand, n, c int) []int32 {
	l := make([]int32, n)
	for i := range l {
		l[i] = int32(rng.IntN(c))
	}
	return l
}

// randRows picks a random subset of [0, n) in random order.
func randRows(rng *rand.Rand, n int) []int32 {
	var r []int32
	for _, i := range rng.Perm(n) {
		if rng.IntN(3) != 0 {
			r = append(r, int32(i))
		}
	}
	return r
}

func TestSoftmaxCrossEntropy(t *testing.T) {
	rng := newRNG(11)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 3}, {1, 1}, {1, 5}, {9, 7}, {3000, 41}} {
			logits := randMat(rng, s[0], s[1])
			for i := range logits.Data {
				logits.Data[i] *= 5
			}
			if s[0] > 1 { // far outside exp's range: must stay finite
				logits.Data[0], logits.Data[1] = 1000, -1000
			}
			labels := randLabels(rng, s[0], s[1])
			rows := randRows(rng, s[0])
			if s[0] == 1 {
				rows = []int32{0}
			}
			wantLoss, wantD := naiveSCE(logits, labels, rows, 0.25)
			d := randMat(rng, s[0], s[1])
			fillNaN(d)
			loss := p.SoftmaxCrossEntropy(logits, labels, rows, 0.25, d)
			if math.Abs(loss-wantLoss) > 1e-9*(1+math.Abs(wantLoss)) || math.IsNaN(loss) {
				t.Fatalf("%v: loss %v, want %v", s, loss, wantLoss)
			}
			close32(t, "dlogits", d.Data, wantD, 1e-6)
		}
	})
}

func TestCountCorrect(t *testing.T) {
	rng := newRNG(12)
	forThreads(t, func(t *testing.T, p *CPU) {
		for _, s := range [][2]int{{0, 3}, {1, 1}, {9, 7}, {3000, 41}} {
			logits := randMat(rng, s[0], s[1])
			labels := randLabels(rng, s[0], s[1])
			for i := 0; i < s[0]; i += 2 { // make half of them right
				logits.Data[i*s[1]+int(labels[i])] = 10
			}
			rows := randRows(rng, s[0])
			want := 0
			for _, i := range rows {
				best := 0
				for j := 1; j < s[1]; j++ {
					if logits.Data[int(i)*s[1]+j] > logits.Data[int(i)*s[1]+best] {
						best = j
					}
				}
				if int32(best) == labels[i] {
					want++
				}
			}
			if got := p.CountCorrect(logits, labels, rows); got != want {
				t.Fatalf("%v: %d correct, want %d", s, got, want)
			}
		}
		// Ties go to the lowest index.
		logits := &Mat{Rows: 2, Cols: 3, Data: []float32{1, 2, 2, 3, 3, 3}}
		if got := p.CountCorrect(logits, []int32{1, 0}, []int32{0, 1}); got != 2 {
			t.Fatalf("ties: %d correct, want 2", got)
		}
		if got := p.CountCorrect(logits, []int32{2, 1}, []int32{0, 1}); got != 0 {
			t.Fatalf("ties: %d correct, want 0", got)
		}
	})
}

// ---- Adam ----

func TestAdamTwoSteps(t *testing.T) {
	// Expected values worked out in float64 from the torch.optim.Adam update.
	type step struct{ p, m, v float64 }
	cases := []struct {
		p0                  float32
		g                   [2]float32
		lr, b1, b2, eps, wd float32
		want                [2]step
	}{
		{1, [2]float32{0.5, -0.25}, 0.1, 0.9, 0.999, 1e-8, 0,
			[2]step{{0.900000002, 0.05, 0.00025}, {0.8733662987078463, 0.02, 0.00031225}}},
		{-2, [2]float32{0.25, 0.75}, 0.01, 0.8, 0.99, 1e-3, 0.5,
			[2]step{{-1.9900133155792277, -0.15, 0.005625}, {-1.9815969165774978, -0.16900133155792274, 0.006169032623612375}}},
	}
	forThreads(t, func(t *testing.T, dev *CPU) {
		for _, c := range cases {
			p, m, v := []float32{c.p0}, []float32{0}, []float32{0}
			for s := 0; s < 2; s++ {
				g := []float32{c.g[s]}
				dev.Adam(vec(p), vec(g), vec(m), vec(v), s+1, c.lr, c.b1, c.b2, c.eps, c.wd)
				w := c.want[s]
				close32(t, "Adam p", p, []float64{w.p}, 1e-6)
				close32(t, "Adam m", m, []float64{w.m}, 1e-6)
				close32(t, "Adam v", v, []float64{w.v}, 1e-6)
				if g[0] != c.g[s] {
					t.Fatalf("Adam changed the gradient")
				}
			}
		}
	})
}

func TestAdamRandom(t *testing.T) {
	rng := newRNG(13)
	const n = 100003
	forThreads(t, func(t *testing.T, dev *CPU) {
		p, m, v := randMat(rng, 1, n).Data, make([]float32, n), make([]float32, n)
		rp, rm, rv := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range p {
			rp[i] = float64(p[i])
		}
		lr, b1, b2, eps, wd := 0.01, 0.9, 0.999, 1e-8, 5e-4
		for s := 1; s <= 3; s++ {
			g := randMat(rng, 1, n).Data
			dev.Adam(vec(p), vec(g), vec(m), vec(v), s, float32(lr), float32(b1), float32(b2), float32(eps), float32(wd))
			for i := range rp {
				gi := float64(g[i]) + float64(float32(wd))*rp[i]
				rm[i] = float64(float32(b1))*rm[i] + (1-float64(float32(b1)))*gi
				rv[i] = float64(float32(b2))*rv[i] + (1-float64(float32(b2)))*gi*gi
				bc1 := 1 - math.Pow(float64(float32(b1)), float64(s))
				bc2 := 1 - math.Pow(float64(float32(b2)), float64(s))
				rp[i] -= float64(float32(lr)) / bc1 * rm[i] / (math.Sqrt(rv[i])/math.Sqrt(bc2) + float64(float32(eps)))
			}
		}
		close32(t, "Adam p", p, rp, 1e-5)
		close32(t, "Adam m", m, rm, 1e-5)
	})
}

// ---- determinism, pool, allocations ----

func TestDeterministicAcrossThreads(t *testing.T) {
	rng := newRNG(14)
	a := randAdj(rng, 20000, 20000, 10, true)
	x := randMat(rng, 20000, 19)
	dy := randMat(rng, 20000, 19)
	logits := randMat(rng, 20000, 19)
	labels := randLabels(rng, 20000, 19)
	rows := randRows(rng, 20000)

	type result struct {
		y, db, d []float32
		loss     float64
	}
	compute := func(threads int) result {
		p := NewCPU(threads)
		defer p.Close()
		var r result
		y := NewMat(20000, 19)
		p.SpMM(a.T, x, y, false)
		r.y = y.Data
		r.db = make([]float32, 19)
		p.BiasGrad(dy, vec(r.db), false)
		d := NewMat(20000, 19)
		r.loss = p.SoftmaxCrossEntropy(logits, labels, rows, 1, d)
		r.d = d.Data
		return r
	}
	r1 := compute(1)
	for _, n := range []int{2, 4, 7} {
		rn := compute(n)
		bitsEqual(t, "SpMM", rn.y, r1.y)
		bitsEqual(t, "BiasGrad", rn.db, r1.db)
		bitsEqual(t, "dlogits", rn.d, r1.d)
		if math.Float64bits(rn.loss) != math.Float64bits(r1.loss) {
			t.Fatalf("loss with %d threads %v, with 1 thread %v", n, rn.loss, r1.loss)
		}
	}
}

func TestClose(t *testing.T) {
	p := NewCPU(4)
	p.Close()
	p.Close()
	x := NewMat(1000, 100)
	for i := range x.Data {
		x.Data[i] = -1
	}
	p.ReLU(x, x)
	bitsEqual(t, "ReLU after Close", x.Data, make([]float32, len(x.Data)))
	if NewCPU(0).Threads() < 1 {
		t.Fatal("NewCPU(0) has no threads")
	}
}

func TestNoAllocs(t *testing.T) {
	rng := newRNG(15)
	p := NewCPU(4)
	defer p.Close()
	const n, f, c = 5000, 32, 7
	a := randAdj(rng, n, n, 8, true)
	x, y := randMat(rng, n, f), NewMat(n, f)
	m := NewMat(n, f)
	b := make([]float32, f)
	ids := make([]int32, n)
	logits, d := randMat(rng, n, c), NewMat(n, c)
	labels, rows := randLabels(rng, n, c), randRows(rng, n)
	w, wa, wb, wv := randMat(rng, f, f), NewMat(f, f), NewMat(f, f), NewMat(f, f)
	step := 0
	kernels := []struct {
		name string
		f    func()
	}{
		{"SpMM", func() { p.SpMM(a, x, y, false) }},
		{"SpMM^T", func() { p.SpMM(a.T, x, y, true) }},
		{"AddBias", func() { p.AddBias(y, vec(b)) }},
		{"BiasGrad", func() { p.BiasGrad(y, vec(b), false) }},
		{"ReLU", func() { p.ReLU(x, y) }},
		{"ReLUBackward", func() { p.ReLUBackward(x, y, y) }},
		{"Dropout", func() { p.Dropout(x, y, m, 0.5, 1, ids) }},
		{"Mul", func() { p.Mul(x, m, y) }},
		{"Zero", func() { p.zeroSlice(y.Data) }},
		{"SoftmaxCrossEntropy", func() { p.SoftmaxCrossEntropy(logits, labels, rows, 1, d) }},
		{"CountCorrect", func() { p.CountCorrect(logits, labels, rows) }},
		{"Adam", func() { step++; p.Adam(w, wa, wb, wv, step, 0.01, 0.9, 0.999, 1e-8, 0.1) }},
	}
	if GemmBackend() != "gonum" {
		kernels = append(kernels, struct {
			name string
			f    func()
		}{"Gemm", func() { p.Gemm(false, true, 1, x, w, 0, y) }})
	}
	for _, k := range kernels {
		if allocs := testing.AllocsPerRun(20, k.f); allocs != 0 {
			t.Errorf("%s: %v allocations per call", k.name, allocs)
		}
	}
}

// ---- ROC AUC from score histograms ----

func TestScoreHistogramAUC(t *testing.T) {
	rng := newRNG(21)
	p := NewCPU(1)
	defer p.Close()
	n := 3000
	logits := randMat(rng, n, 2)
	labels := randLabels(rng, n, 2)
	for i := range labels { // make the positives score higher on average
		logits.Data[2*i+1] += float32(labels[i])
	}
	rows := randRows(rng, n)
	hist := make([]float64, 2*ScoreBins)
	p.ScoreHistogram(logits, labels, rows, hist)
	// Exact AUC over all (positive, negative) pairs, ties counting half.
	var pairs, wins float64
	for _, i := range rows {
		for _, j := range rows {
			if labels[i] != 1 || labels[j] != 0 {
				continue
			}
			di := logits.Data[2*i+1] - logits.Data[2*i]
			dj := logits.Data[2*j+1] - logits.Data[2*j]
			pairs++
			switch {
			case di > dj:
				wins++
			case di == dj:
				wins += 0.5
			}
		}
	}
	if got, want := AUC(hist), wins/pairs; math.Abs(got-want) > 1e-3 || want < 0.6 {
		t.Fatalf("AUC from the histogram %.5f, exact %.5f", got, want)
	}
	// Split histograms add up: the sum over two halves equals the whole.
	halves := make([]float64, 2*ScoreBins)
	p.ScoreHistogram(logits, labels, rows[:len(rows)/2], halves)
	p.ScoreHistogram(logits, labels, rows[len(rows)/2:], halves)
	for b := range hist {
		if hist[b] != halves[b] {
			t.Fatalf("bin %d: %v whole, %v from the halves", b, hist[b], halves[b])
		}
	}
	if !math.IsNaN(AUC(make([]float64, 2*ScoreBins))) {
		t.Error("AUC of an empty histogram is not NaN")
	}
	if got := p.SumSquares(vec([]float32{3, 4})); got != 25 {
		t.Errorf("SumSquares(3, 4) = %v", got)
	}
}
