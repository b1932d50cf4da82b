package kernels

import "fmt"

// Element-wise kernels cut their index range into chunks of whole rows (when
// they need the column index) or plain elements; each element is computed
// on its own, so results are the same for any chunking.

type biasTask struct {
	y  *Mat
	b  []float32
	nc int
}

// AddBias adds b to every row of y.
func (p *CPU) AddBias(y *Mat, bias *Mat) {
	checkMat("AddBias", y)
	b := bias.Data[:bias.Len()]
	if len(b) != y.Cols {
		panic(fmt.Sprintf("kernels: AddBias: %d biases for %d columns", len(b), y.Cols))
	}
	t := &p.bias
	t.y, t.b, t.nc = y, b, p.chunks(y.Rows*y.Cols)
	p.run(t, t.nc)
	t.y, t.b = nil, nil
}

func (t *biasTask) do(c int) {
	lo, hi := span(t.y.Rows, t.nc, c)
	f := t.y.Cols
	if !portable && f > 0 && hi > lo {
		addBiasC(t.y.Data[lo*f:hi*f], t.b)
		return
	}
	for i := lo; i < hi; i++ {
		add(t.y.Data[i*f:i*f+f], t.b)
	}
}

type biasGradTask struct {
	dy   *Mat
	part []float64 // block b's column sums at [b*Cols, (b+1)*Cols)
	nb   int
}

// BiasGrad sums the columns of dy: each block of rows sums into its own
// float64 partial row, and the partials are added in block order.
func (p *CPU) BiasGrad(dy *Mat, dbias *Mat, accumulate bool) {
	checkMat("BiasGrad", dy)
	db := dbias.Data[:dbias.Len()]
	f := dy.Cols
	if len(db) != f {
		panic(fmt.Sprintf("kernels: BiasGrad: %d outputs for %d columns", len(db), f))
	}
	t := &p.bgrad
	t.dy, t.nb = dy, blocks(dy.Rows*f)
	t.part = grow(t.part, t.nb*f)
	p.run(t, t.nb)
	for j := range db {
		var s float64
		if accumulate {
			s = float64(db[j])
		}
		for b := 0; b < t.nb; b++ {
			s += t.part[b*f+j]
		}
		db[j] = float32(s)
	}
	t.dy = nil
}

func (t *biasGradTask) do(c int) {
	f := t.dy.Cols
	lo, hi := span(t.dy.Rows, t.nb, c)
	s := t.part[c*f : c*f+f]
	if !portable && f > 0 && hi > lo {
		colSumsC(t.dy.Data[lo*f:hi*f], s)
		return
	}
	clear(s)
	for i := lo; i < hi; i++ {
		row := t.dy.Data[i*f : i*f+f]
		for j, v := range row {
			s[j] += float64(v)
		}
	}
}

// grow returns buf resized to n, reallocating only when it is too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

type reluTask struct {
	x, y []float32
	nc   int
}

// ReLU computes y = max(x, 0) (NaN gives 0).
func (p *CPU) ReLU(x, y *Mat) {
	sameShape("ReLU", x, y)
	n := x.Rows * x.Cols
	t := &p.relu
	t.x, t.y, t.nc = x.Data[:n], y.Data[:n], p.chunks(n)
	p.run(t, t.nc)
	t.x, t.y = nil, nil
}

func (t *reluTask) do(c int) {
	lo, hi := span(len(t.x), t.nc, c)
	x, y := t.x[lo:hi], t.y[lo:hi]
	if !portable {
		reluC(x, y[:len(x)])
		return
	}
	for i, v := range x {
		if v > 0 {
			y[i] = v
		} else {
			y[i] = 0
		}
	}
}

type reluBackTask struct {
	y, dy, dx []float32
	nc        int
}

// ReLUBackward computes dx = dy where y > 0, else 0.
func (p *CPU) ReLUBackward(y, dy, dx *Mat) {
	sameShape("ReLUBackward", y, dy)
	sameShape("ReLUBackward", y, dx)
	n := y.Rows * y.Cols
	t := &p.reluB
	t.y, t.dy, t.dx, t.nc = y.Data[:n], dy.Data[:n], dx.Data[:n], p.chunks(n)
	p.run(t, t.nc)
	t.y, t.dy, t.dx = nil, nil, nil
}

func (t *reluBackTask) do(c int) {
	lo, hi := span(len(t.y), t.nc, c)
	y, dy, dx := t.y[lo:hi], t.dy[lo:hi], t.dx[lo:hi]
	dy, dx = dy[:len(y)], dx[:len(y)]
	if !portable {
		reluBackwardC(y, dy, dx)
		return
	}
	for i, v := range y {
		if v > 0 {
			dx[i] = dy[i]
		} else {
			dx[i] = 0
		}
	}
}

type mulTask struct {
	x, m, y []float32
	nc      int
}

// Mul computes y = x * m element-wise.
func (p *CPU) Mul(x, m, y *Mat) {
	sameShape("Mul", x, m)
	sameShape("Mul", x, y)
	n := x.Rows * x.Cols
	t := &p.mul
	t.x, t.m, t.y, t.nc = x.Data[:n], m.Data[:n], y.Data[:n], p.chunks(n)
	p.run(t, t.nc)
	t.x, t.m, t.y = nil, nil, nil
}

func (t *mulTask) do(c int) {
	lo, hi := span(len(t.x), t.nc, c)
	x, m, y := t.x[lo:hi], t.m[lo:hi], t.y[lo:hi]
	m, y = m[:len(x)], y[:len(x)]
	for i, v := range x {
		y[i] = v * m[i]
	}
}

type zeroTask struct {
	m  []float32
	nc int
}

// zeroSlice sets every element of m to 0, in parallel.
func (p *CPU) zeroSlice(m []float32) {
	t := &p.zero
	t.m, t.nc = m, p.chunks(len(m))
	p.run(t, t.nc)
	t.m = nil
}

func (t *zeroTask) do(c int) {
	lo, hi := span(len(t.m), t.nc, c)
	clear(t.m[lo:hi])
}
