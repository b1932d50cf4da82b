package kernels

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Dropout draws are counter-based, so any device can reproduce them in any
// order. For element (i, j) with r = rowID(i):
//
//	h   = rng.Mix64(seed)                                  (once per call)
//	u   = float32(rng.Mix64(h ^ (uint64(uint32(r))<<32 | uint64(uint32(j)))) >> 40) * 2^-24
//	keep  iff  u >= p
//
// where mix64 is the project's counter-based hash (rng.Mix64, splitmix64's
// finaliser).
//
// (all uint64 arithmetic mod 2^64, >> logical). u is a multiple of 2^-24 in
// [0, 1), exact in float32. Kept elements get mask = float32(1/(1-float64(p)))
// and y = x*mask; dropped ones get mask = 0 and y = 0.

type dropoutTask struct {
	x, y, mask *Mat
	p, scale   float32
	h          uint64
	thr        uint32 // ceil(p * 2^24)
	rowIDs     []int32
	nc         int
}

// Dropout: see the Device contract and the hash above. p = 0 copies x and
// sets mask to 1; p = 1 drops everything; p outside [0, 1] panics.
func (p *CPU) Dropout(x, y, mask *Mat, prob float32, seed uint64, rowIDs []int32) {
	sameShape("Dropout", x, y)
	sameShape("Dropout", x, mask)
	t := &p.drop
	t.scale, t.thr = DropoutParams(prob, x.Rows, rowIDs)
	t.x, t.y, t.mask, t.p, t.h, t.rowIDs = x, y, mask, prob, rng.Mix64(seed), rowIDs
	t.nc = p.chunks(x.Rows * x.Cols)
	p.run(t, t.nc)
	t.x, t.y, t.mask, t.rowIDs = nil, nil, nil, nil
}

func (t *dropoutTask) do(c int) {
	lo, hi := span(t.x.Rows, t.nc, c)
	f := t.x.Cols
	x, y, m := t.x.Data[lo*f:hi*f], t.y.Data[lo*f:hi*f], t.mask.Data[lo*f:hi*f]
	y, m = y[:len(x)], m[:len(x)]
	if t.p == 0 {
		copy(y, x)
		for i := range m {
			m[i] = 1
		}
		return
	}
	// u >= p exactly when the 24-bit integer behind u reaches
	// ceil(p * 2^24); comparing integers without a branch avoids a
	// mispredicted jump on every other element, which dominated the cost.
	thr := t.thr
	scaleBits := math.Float32bits(t.scale)
	for i := lo; i < hi; i++ {
		id := int32(i)
		if t.rowIDs != nil {
			id = t.rowIDs[i]
		}
		o := (i - lo) * f
		xr, yr, mr := x[o:o+f], y[o:o+f], m[o:o+f]
		key := t.h ^ uint64(uint32(id))<<32
		for j, v := range xr {
			u := uint32(rng.Mix64(key^uint64(uint32(j))) >> 40)
			// All ones if u >= thr, else 0 (u, thr <= 2^24): masking the
			// bits gives an exact +0 for dropped elements.
			keep := ((u - thr) >> 31) - 1
			mr[j] = math.Float32frombits(scaleBits & keep)
			yr[j] = math.Float32frombits(math.Float32bits(v*t.scale) & keep)
		}
	}
}

// DropoutParams checks p and the row IDs of a dropout over rows rows, and
// returns what every device draws the same masks from: the survivors'
// scale 1/(1-p) (0 when p = 1) and the threshold ceil(p * 2^24) that a
// 24-bit draw must reach to keep an element.
func DropoutParams(p float32, rows int, rowIDs []int32) (scale float32, thr uint32) {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("kernels: Dropout: p = %v not in [0, 1]", p))
	}
	if rowIDs != nil && len(rowIDs) != rows {
		panic(fmt.Sprintf("kernels: Dropout: %d row IDs for %d rows", len(rowIDs), rows))
	}
	if p < 1 {
		scale = float32(1 / (1 - float64(p)))
	}
	return scale, uint32(math.Ceil(float64(p) * (1 << 24)))
}
