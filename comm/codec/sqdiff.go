package codec

import "fmt"

// SqDiff is what an encode lost, for comp_error: over rows idx[k] of src
// (rows of cols values) against the decoded rows k of dec, the sums of
// (x - x^)^2 and of x^2, in float64. The terms go into 8 lanes, lane t
// taking the columns j = t mod 8 of every row in row order, and the lanes
// are added in order at the end: 8 independent sums run several times
// faster than one sequential sum, whose every add waits for the last. Each
// square is rounded before it is added (never fused), so every build and
// the AVX2 path give the same bits; a GPU's tree sum differs by rounding.
func SqDiff(src []float32, idx []int32, cols int, dec []float32) (errSq, normSq float64) {
	if len(dec) != len(idx)*cols {
		panic(fmt.Sprintf("codec: SqDiff: %d decoded values for %d rows of %d", len(dec), len(idx), cols))
	}
	for _, r := range idx {
		if r < 0 || (int(r)+1)*cols > len(src) {
			panic(fmt.Sprintf("codec: SqDiff: row %d of %d", r, len(src)/max(cols, 1)))
		}
	}
	if e, n, ok := sqDiffFast(src, idx, cols, dec); ok {
		return e, n
	}
	var e, n [8]float64
	for k, r := range idx {
		x, y := src[int(r)*cols:(int(r)+1)*cols], dec[k*cols:(k+1)*cols]
		for j, v := range x {
			x64 := float64(v)
			d := x64 - float64(y[j])
			e[j%8] += float64(d * d)
			n[j%8] += float64(x64 * x64)
		}
	}
	for t := range 8 {
		errSq += e[t]
		normSq += n[t]
	}
	return errSq, normSq
}
