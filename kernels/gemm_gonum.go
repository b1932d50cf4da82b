//go:build !openblas

package kernels

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// GemmBackend names the BLAS that Gemm calls; build with -tags openblas to
// use OpenBLAS instead of pure-Go gonum.
const GemmBackend = "gonum"

// GemmInfo describes the Gemm backend for logs.
func GemmInfo() string { return "gonum (pure Go)" }

// sgemm1 runs gonum's Sgemm, which deals its blocks of c to goroutines:
// which goroutine computes a block does not change its bits.
func sgemm1(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gonum.Implementation{}.Sgemm(trans(transA), trans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
