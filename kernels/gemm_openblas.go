//go:build openblas

package kernels

import (
	"fmt"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/cgo/openblas"
)

// GemmBackend names the BLAS that Gemm calls.
const GemmBackend = "openblas"

// GemmInfo describes the Gemm backend for logs, including the core kernel
// OpenBLAS picked at run time. (Its thread count is the device's, set at
// each device's first Gemm.)
func GemmInfo() string {
	return fmt.Sprintf("openblas (core %s)", openblas.CoreName())
}

// blasThreads is OpenBLAS's (process-wide) thread count as last set here.
var blasThreads atomic.Int64

// sgemm runs cblas_sgemm on as many OpenBLAS threads as the device has.
func (p *CPU) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if blasThreads.Load() != int64(p.threads) {
		openblas.SetThreads(p.threads)
		blasThreads.Store(int64(p.threads))
	}
	openblas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
