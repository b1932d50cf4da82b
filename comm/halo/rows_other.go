//go:build !amd64 || !cgo

package halo

var fast = false

func residualSubFast(d, m, s []float32, idx []int32, cols int, dmax, mmax []uint32) bool {
	return false
}

func scatterAddFast(dst []float32, idx []int32, src []float32, cols int) bool { return false }
