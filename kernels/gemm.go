package kernels

import "fmt"

// Gemm's decomposition. c is cut into blocks of gemmRows rows; a product
// with few rows and a long inner dimension (a weight gradient, H^T dY) is
// cut along k into chunks of about gemmK, whose partial products are added
// in chunk order. The cut depends on the shapes alone and every piece is
// one single-threaded BLAS call on the pool, so each element of c comes
// from the same operations in the same order for any thread count: results
// are bit-identical with --threads 1, 2 or 8 (TestGemmThreadIndependent).
const (
	gemmRows    = 256
	gemmK       = 2048
	gemmKChunks = 64 // at most, bounding the partial products' memory
)

// gemmTask is one Gemm cut into pieces (see above).
type gemmTask struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	rowBlocks      int         // > 0: piece i is rows of c
	kChunks        int         // > 0: piece i is a chunk of k, into part
	part           []float32   // kChunks partial products, m x n each
	sumChunks      int         // pieces of the partials' sum
	pack           [][]float32 // per piece: transposed operands for the pure-Go BLAS
}

// Gemm computes c = alpha*op(a)*op(b) + beta*c with the BLAS found at run
// time (see GemmBackend). Empty products never reach the BLAS, which
// rejects leading dimensions of 0.
func (p *CPU) Gemm(transA, transB bool, alpha float32, a, b *Mat, beta float32, c *Mat) {
	checkMat("Gemm a", a)
	checkMat("Gemm b", b)
	checkMat("Gemm c", c)
	m, n, k := GemmShape(transA, transB, a, b, c)
	if m == 0 || n == 0 {
		return
	}
	cd := c.Data[:m*n]
	if k == 0 {
		if beta == 0 {
			p.zeroSlice(cd)
		} else if beta != 1 {
			for i := range cd {
				cd[i] *= beta
			}
		}
		return
	}
	t := &p.gemm
	*t = gemmTask{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a.Data[:a.Rows*a.Cols], b: b.Data[:b.Rows*b.Cols], c: cd, lda: a.Cols, ldb: b.Cols, ldc: n, part: t.part, pack: t.pack}
	switch {
	case m >= 2*gemmRows || k < 2*gemmK:
		t.rowBlocks = (m + gemmRows - 1) / gemmRows
		t.growPack(t.rowBlocks)
		p.run(t, t.rowBlocks)
	default:
		t.kChunks = min(gemmKChunks, k/gemmK)
		t.part = grow(t.part, t.kChunks*m*n)
		t.growPack(t.kChunks)
		p.run(t, t.kChunks)
		t.kChunks, t.sumChunks = 0, blocks(m*n)
		p.run(t, t.sumChunks)
	}
	t.a, t.b, t.c = nil, nil, nil
}

func (t *gemmTask) do(i int) {
	switch {
	case t.rowBlocks > 0:
		lo, hi := i*gemmRows, min((i+1)*gemmRows, t.m)
		var a []float32
		if t.transA {
			a = t.a[lo:] // columns lo.. of a
		} else {
			a = t.a[lo*t.lda:]
		}
		sgemm1(t.transA, t.transB, hi-lo, t.n, t.k, t.alpha, a, t.lda, t.b, t.ldb, t.beta, t.c[lo*t.ldc:], t.ldc, &t.pack[i])
	case t.kChunks > 0:
		k0, k1 := span(t.k, t.kChunks, i)
		var a, b []float32
		if t.transA {
			a = t.a[k0*t.lda:]
		} else {
			a = t.a[k0:]
		}
		if t.transB {
			b = t.b[k0:]
		} else {
			b = t.b[k0*t.ldb:]
		}
		mn := t.m * t.n
		sgemm1(t.transA, t.transB, t.m, t.n, k1-k0, 1, a, t.lda, b, t.ldb, 0, t.part[i*mn:(i+1)*mn], t.n, &t.pack[i])
	default:
		// c = alpha * (sum of the partials, in chunk order) + beta * c.
		mn, nk := t.m*t.n, len(t.part)/(t.m*t.n)
		lo, hi := span(mn, t.sumChunks, i)
		for j := lo; j < hi; j++ {
			s := t.part[j]
			for q := 1; q < nk; q++ {
				s += t.part[q*mn+j]
			}
			if t.beta == 0 {
				t.c[j] = t.alpha * s
			} else {
				t.c[j] = t.alpha*s + t.beta*t.c[j]
			}
		}
	}
}

// growPack makes room for n pieces' packing buffers (kept between calls).
func (t *gemmTask) growPack(n int) {
	for len(t.pack) < n {
		t.pack = append(t.pack, nil)
	}
}

// GemmShape returns the m x n x k of c = op(a) op(b), panicking when the
// shapes do not agree (every device checks Gemm the same way).
func GemmShape(transA, transB bool, a, b, c *Mat) (m, n, k int) {
	m, k = a.Rows, a.Cols
	if transA {
		m, k = k, m
	}
	kb, n := b.Rows, b.Cols
	if transB {
		kb, n = n, kb
	}
	if k != kb || c.Rows != m || c.Cols != n {
		panic(fmt.Sprintf("kernels: Gemm: op(a) %dx%d, op(b) %dx%d, c %dx%d", m, k, kb, n, c.Rows, c.Cols))
	}
	return m, n, k
}
