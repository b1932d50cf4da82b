package kernels

import (
	"fmt"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gnn-spmd/gnn-spmd/cgo/cblas"
)

// The BLAS behind Gemm: a CBLAS library loaded at run time (OpenBLAS, BLIS
// or MKL; cgo/cblas), else gonum's pure-Go sgemm. Either runs one piece of
// a product on one thread (gemm.go cuts products for the pool).
var cblasLib, cblasErr = cblas.Load()

// GemmBackend names the BLAS that Gemm calls: openblas, blis, mkl, cblas
// (another CBLAS) or gonum.
func GemmBackend() string {
	if cblasLib == nil {
		return "gonum"
	}
	for _, v := range []string{"openblas", "blis", "mkl"} {
		if strings.Contains(strings.ToLower(cblasLib.Path+cblasLib.Name), v) {
			return v
		}
	}
	return "cblas"
}

// GemmInfo describes the Gemm backend for logs: the library and where it
// was loaded from, or why none was.
func GemmInfo() string {
	if cblasLib == nil {
		return fmt.Sprintf("gonum (pure Go; %v)", cblasErr)
	}
	if cblasLib.Detail != "" {
		return fmt.Sprintf("%s (%s, %s)", GemmBackend(), cblasLib.Detail, cblasLib.Path)
	}
	return fmt.Sprintf("%s (%s)", GemmBackend(), cblasLib.Path)
}

// sgemm1 runs one single-threaded sgemm. The gonum fallback first packs a
// transposed operand into scratch (*pack, grown as needed): gonum's kernels
// for transposed operands run at a quarter of its plain product's speed.
func sgemm1(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, pack *[]float32) {
	if cblasLib != nil {
		cblas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if transA || transB {
		sizeA, sizeB := 0, 0
		if transA {
			sizeA = m * k
		}
		if transB {
			sizeB = k * n
		}
		*pack = grow(*pack, sizeA+sizeB)
		if transA { // op(a)[i][l] = a[l*lda+i]
			pa := (*pack)[:sizeA]
			for l := range k {
				row := a[l*lda : l*lda+m]
				for i, v := range row {
					pa[i*k+l] = v
				}
			}
			a, lda, transA = pa, max(k, 1), false
		}
		if transB { // op(b)[l][j] = b[j*ldb+l]
			pb := (*pack)[sizeA : sizeA+sizeB]
			for j := range n {
				row := b[j*ldb : j*ldb+k]
				for l, v := range row {
					pb[l*n+j] = v
				}
			}
			b, ldb, transB = pb, max(n, 1), false
		}
	}
	gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
