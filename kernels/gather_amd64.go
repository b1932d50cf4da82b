package kernels

// gatherAxpy computes, for each k in order, y += vals[k] * (row cols[k] of
// x, f wide), with vals == nil meaning 1, prefetching row pf[k] first. It is
// bit-identical to gatherAxpyGo; indices are not checked. See gather_amd64.s.
//
//go:noescape
func gatherAxpy(y, x []float32, f int, cols []int32, vals []float32, pf []int32)
