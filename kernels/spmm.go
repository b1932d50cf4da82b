package kernels

import "fmt"

type spmmTask struct {
	a      *Adj
	x, y   *Mat
	acc    bool
	bounds []int // row bounds of chunk c: [bounds[c], bounds[c+1])
	// With rows set (SpMMRows), the bounds index rows instead of a's rows.
	rows []int32
}

// SpMM computes y = A x (y += A x when accumulate), row-parallel. Each
// output row sums its entries in CSR order, so the bits do not depend on
// the thread count.
func (p *CPU) SpMM(a *Adj, x, y *Mat, accumulate bool) {
	checkMat("SpMM x", x)
	checkMat("SpMM y", y)
	if a.Cols != x.Rows || a.Rows != y.Rows || x.Cols != y.Cols || len(a.Ptr) != a.Rows+1 {
		panic(fmt.Sprintf("kernels: SpMM: A %dx%d (%d ptrs), x %dx%d, y %dx%d",
			a.Rows, a.Cols, len(a.Ptr), x.Rows, x.Cols, y.Rows, y.Cols))
	}
	if a.Rows == 0 {
		return
	}
	checkAdj("SpMM", a)
	t := &p.spmm
	nnz := int(a.Ptr[a.Rows] - a.Ptr[0])
	// A row costs its nnz reads plus one write of F elements.
	nc := p.chunks((nnz + a.Rows) * max(x.Cols, 1))
	t.bounds = splitByWeight(t.bounds, a.Ptr, nc)
	t.a, t.x, t.y, t.acc = a, x, y, accumulate
	p.run(t, nc)
	t.a, t.x, t.y = nil, nil, nil
}

// RowSet is a subset of an Adj's rows for SpMMRows, with the prefix sums of
// their nonzeros that balance the work across threads.
type RowSet struct {
	Rows   []int32
	weight []int64 // weight[k] = nonzeros of Rows[:k]
}

// NewRowSet lists rows (ascending, distinct) of a.
func NewRowSet(a *Adj, rows []int32) *RowSet {
	w := make([]int64, len(rows)+1)
	for k, i := range rows {
		if int(i) < 0 || int(i) >= a.Rows || (k > 0 && i <= rows[k-1]) {
			panic(fmt.Sprintf("kernels: NewRowSet: row %d at %d, expected ascending rows in [0, %d)", i, k, a.Rows))
		}
		w[k+1] = w[k] + a.Ptr[i+1] - a.Ptr[i]
	}
	return &RowSet{Rows: rows, weight: w}
}

// SpMMRows computes rows s of y = A x (y += A x when accumulate), leaving
// the other rows of y alone; every row it writes has the bits SpMM gives
// it. Two calls over complementary sets equal one SpMM: the overlap of
// aggregation with the halo exchange runs them on different goroutines.
func (p *CPU) SpMMRows(a *Adj, s *RowSet, x, y *Mat, accumulate bool) {
	checkMat("SpMMRows x", x)
	checkMat("SpMMRows y", y)
	if a.Cols != x.Rows || a.Rows != y.Rows || x.Cols != y.Cols || len(a.Ptr) != a.Rows+1 {
		panic(fmt.Sprintf("kernels: SpMMRows: A %dx%d (%d ptrs), x %dx%d, y %dx%d",
			a.Rows, a.Cols, len(a.Ptr), x.Rows, x.Cols, y.Rows, y.Cols))
	}
	if len(s.Rows) == 0 {
		return
	}
	checkAdj("SpMMRows", a)
	t := &p.spmmRows
	nc := p.chunks((int(s.weight[len(s.Rows)]) + len(s.Rows)) * max(x.Cols, 1))
	t.bounds = splitByWeight(t.bounds, s.weight, nc)
	t.a, t.x, t.y, t.acc, t.rows = a, x, y, accumulate, s.Rows
	p.run(t, nc)
	t.a, t.x, t.y, t.rows = nil, nil, nil, nil
}

// splitByWeight cuts rows into nc chunks of near-equal nnz+rows, reusing
// buf. Row i ends at weight Ptr[i+1]-Ptr[0]+i+1, which increases with i.
func splitByWeight(buf []int, ptr []int64, nc int) []int {
	rows := len(ptr) - 1
	if cap(buf) < nc+1 {
		buf = make([]int, nc+1)
	}
	buf = buf[:nc+1]
	total := ptr[rows] - ptr[0] + int64(rows)
	buf[0] = 0
	lo := 0
	for c := 1; c < nc; c++ {
		target := total * int64(c) / int64(nc)
		// Smallest i in [lo, rows] with weight before row i >= target.
		hi := rows
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if ptr[mid]-ptr[0]+int64(mid) < target {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		buf[c] = lo
	}
	buf[nc] = rows
	return buf
}

func (t *spmmTask) do(c int) {
	a := t.a
	lo, hi := t.bounds[c], t.bounds[c+1]
	if t.x.Cols == 0 || lo == hi {
		return
	}
	if !portable {
		spmmC(a, t.x, t.y, t.rows, lo, hi, t.acc)
		return
	}
	for r := lo; r < hi; r++ {
		i := r
		if t.rows != nil {
			i = int(t.rows[r])
		}
		t.row(i)
	}
}

// checkAdj panics unless a's row pointers and columns lie inside it (the C
// gather does not check; the callers check a.Cols against x). An Adj must
// not change after its first use (Device), so this walk over every
// nonzero runs on the first call only.
func checkAdj(op string, a *Adj) {
	if a.checked.Load() {
		return
	}
	if a.Ptr[0] < 0 || a.Ptr[a.Rows] > int64(len(a.Col)) || a.Val != nil && a.Ptr[a.Rows] > int64(len(a.Val)) {
		panic(fmt.Sprintf("kernels: %s: row pointers [%d, %d] outside %d columns, %d values", op, a.Ptr[0], a.Ptr[a.Rows], len(a.Col), len(a.Val)))
	}
	for i := range a.Rows {
		if a.Ptr[i] > a.Ptr[i+1] {
			panic(fmt.Sprintf("kernels: %s: row %d ends at %d before it starts at %d", op, i, a.Ptr[i+1], a.Ptr[i]))
		}
	}
	for _, j := range a.Col[a.Ptr[0]:a.Ptr[a.Rows]] {
		if uint32(j) >= uint32(a.Cols) {
			panic(fmt.Sprintf("kernels: %s: column %d out of range [0, %d)", op, j, a.Cols))
		}
	}
	a.checked.Store(true)
}

// row computes output row i in Go, the twin of simd.c's loop.
func (t *spmmTask) row(i int) {
	a, f := t.a, t.x.Cols
	yi := t.y.Data[i*f : i*f+f]
	if !t.acc {
		clear(yi)
	}
	k0, k1 := a.Ptr[i], a.Ptr[i+1]
	var v []float32
	if a.Val != nil {
		v = a.Val[k0:k1]
	}
	gatherAxpyGo(yi, t.x.Data, f, a.Col[k0:k1], v)
}

// gatherAxpyGo computes, for each k in order, y += vals[k] * (row cols[k]
// of x, f wide), with vals == nil meaning 1.
func gatherAxpyGo(y, x []float32, f int, cols []int32, vals []float32) {
	for k, j := range cols {
		src := x[int(j)*f : int(j)*f+f]
		if vals == nil {
			add(y, src)
		} else {
			axpy(vals[k], src, y)
		}
	}
}

// add computes y += x.
func add(y, x []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += x[i]
		y[i+1] += x[i+1]
		y[i+2] += x[i+2]
		y[i+3] += x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += x[i]
	}
}

// axpy computes y += a*x, each product rounded before the sum (the
// conversions keep a Go target with FMA, arm64 or GOAMD64=v3, from fusing
// them, as the assembly and the GPU kernel do not).
func axpy(a float32, x, y []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += float32(a * x[i])
		y[i+1] += float32(a * x[i+1])
		y[i+2] += float32(a * x[i+2])
		y[i+3] += float32(a * x[i+3])
	}
	for ; i < len(y); i++ {
		y[i] += float32(a * x[i])
	}
}
