//go:build openblas

package kernels

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/cgo/openblas"
)

// GemmBackend names the BLAS that Gemm calls.
const GemmBackend = "openblas"

// GemmInfo describes the Gemm backend for logs, including the core kernel
// OpenBLAS picked at run time.
func GemmInfo() string {
	return fmt.Sprintf("openblas (core %s)", openblas.CoreName())
}

func init() {
	// Gemm runs single-threaded BLAS calls on its own pool (see gemm.go).
	openblas.SetThreads(1)
}

// sgemm1 runs cblas_sgemm on the calling thread.
func sgemm1(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	openblas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
