package kernels

import "fmt"

type spmmTask struct {
	a      *Adj
	x, y   *Mat
	acc    bool
	bounds []int // row bounds of chunk c: [bounds[c], bounds[c+1])
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
	t := &p.spmm
	nnz := int(a.Ptr[a.Rows] - a.Ptr[0])
	// A row costs its nnz reads plus one write of F elements.
	nc := p.chunks((nnz + a.Rows) * max(x.Cols, 1))
	t.bounds = splitByWeight(t.bounds, a.Ptr, nc)
	t.a, t.x, t.y, t.acc = a, x, y, accumulate
	p.run(t, nc)
	t.a, t.x, t.y = nil, nil, nil
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

// spmmPrefetch is how many nonzeros ahead gatherAxpy prefetches source
// rows: random rows miss cache and TLB, and prefetching hides that latency.
const spmmPrefetch = 8

func (t *spmmTask) do(c int) {
	a, f := t.a, t.x.Cols
	xd, yd := t.x.Data, t.y.Data
	lo, hi := t.bounds[c], t.bounds[c+1]
	base, end := a.Ptr[lo], a.Ptr[hi]
	cols := a.Col[base:end]
	var vals []float32
	if a.Val != nil {
		vals = a.Val[base:end]
	}
	// gatherAxpy does not check indices, so do it here.
	for _, j := range cols {
		if uint32(j) >= uint32(t.x.Rows) {
			panic(fmt.Sprintf("kernels: SpMM: column %d out of range [0, %d)", j, t.x.Rows))
		}
	}
	n := int64(len(cols))
	for i := lo; i < hi; i++ {
		yi := yd[i*f : i*f+f]
		if !t.acc {
			clear(yi)
		}
		k0, k1 := a.Ptr[i]-base, a.Ptr[i+1]-base
		if k0 == k1 || f == 0 {
			continue
		}
		var v []float32
		if vals != nil {
			v = vals[k0:k1]
		}
		gatherAxpy(yi, xd, f, cols[k0:k1], v, cols[min(k0+spmmPrefetch, n):min(k1+spmmPrefetch, n)])
	}
}

// gatherAxpyGo is the portable gatherAxpy (without prefetching).
func gatherAxpyGo(y, x []float32, f int, cols []int32, vals []float32, _ []int32) {
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

// axpy computes y += a*x.
func axpy(a float32, x, y []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}
