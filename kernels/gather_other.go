//go:build !amd64

package kernels

func gatherAxpy(y, x []float32, f int, cols []int32, vals []float32, pf []int32) {
	gatherAxpyGo(y, x, f, cols, vals, pf)
}
