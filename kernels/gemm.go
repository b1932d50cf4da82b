package kernels

import "fmt"

// Gemm computes c = alpha*op(a)*op(b) + beta*c with the BLAS chosen at build
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
	p.sgemm(transA, transB, m, n, k, alpha, a.Data[:a.Rows*a.Cols], a.Cols, b.Data[:b.Rows*b.Cols], b.Cols, beta, cd, n)
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
