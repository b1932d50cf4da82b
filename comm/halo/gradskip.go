package halo

import (
	"math"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Gradient row skipping (Residual.SkipGrad). The gradients returned for
// halo rows are heavy-tailed: on Amazon Photo (GraphSAGE-64, Q = 4, random
// partition) the rows below a tenth of the mean squared norm are 26-49% of
// the rows early in training and 59-84% late, and hold 0.6-1.5% of the
// squared norm. A plainly coded backward exchange with SkipGrad > 0 leaves
// them out: a bitmap at the head of each peer's payload (one bit per row,
// counted in the bytes) says which rows follow, and the owner adds only
// those.
// It keeps no state, so nothing of it goes into a checkpoint. BackwardAdd
// adds the kept rows as it adds all of them without skipping.

// gradSkipOn reports whether a backward exchange under c leaves out small
// rows: a lossy codec that codes no residuals, with SkipGrad set.
func (x *Exchange[P]) gradSkipOn(c codec.Spec) bool {
	return x.res.SkipGrad > 0 && !c.Raw() && !x.residualOn(1, c)
}

// gradBitmap sets bit k of bitmap when row k of n = len(norms) is to be
// sent: its squared norm norms[k] is at least tau times the mean of the n
// rows', or the row is not finite (so that a diverging run shows at the
// owner). It clears the others and returns the number of bits set. The
// sums run in float64 in row order, so the choice depends on nothing but
// the values.
func gradBitmap(norms []float64, tau float32, bitmap []byte) int {
	clear(bitmap)
	var total float64
	for _, s := range norms {
		total += s
	}
	cut := float64(tau) * total / float64(max(len(norms), 1))
	kept := 0
	for k, s := range norms {
		// !(s < cut) keeps NaN rows; an infinite total keeps every row.
		if !(s < cut) || math.IsInf(total, 0) {
			bitmap[k>>3] |= 1 << (k & 7)
			kept++
		}
	}
	return kept
}

// rowSqNorms sets out[k] to the squared norm of row k of x (rows of f
// values), summed in float64 in column order. Four rows go at a time, so
// that four sums advance together instead of one waiting on its last add.
func rowSqNorms(x []float32, f int, out []float64) {
	k := 0
	for ; k+4 <= len(out); k += 4 {
		r0, r1, r2, r3 := x[k*f:(k+1)*f], x[(k+1)*f:(k+2)*f], x[(k+2)*f:(k+3)*f], x[(k+3)*f:(k+4)*f]
		var s0, s1, s2, s3 float64
		for j := range r0 {
			a, b, c, d := float64(r0[j]), float64(r1[j]), float64(r2[j]), float64(r3[j])
			s0 += a * a
			s1 += b * b
			s2 += c * c
			s3 += d * d
		}
		out[k], out[k+1], out[k+2], out[k+3] = s0, s1, s2, s3
	}
	for ; k < len(out); k++ {
		var s float64
		for _, v := range x[k*f : (k+1)*f] {
			s += float64(v) * float64(v)
		}
		out[k] = s
	}
}

// pick lists the entries of rows whose bit is set in bitmap, in order.
func (r *residualScratch[P]) pick(rows []int32, bitmap []byte) []int32 {
	r.keep = r.keep[:0]
	for k, i := range rows {
		if bitmap[k>>3]&(1<<(k&7)) != 0 {
			r.keep = append(r.keep, i)
		}
	}
	return r.keep
}

// skipGradSend is BackwardSend with gradient row skipping: each peer's
// payload is the bitmap of its rows, then the kept rows.
func skipGradSend[P any](x *Exchange[P], mem ResidualMemory[P], layer int, dh *kernels.Mat, c codec.Spec) error {
	pl, r, f, q := x.plan, &x.scratch, dh.Cols, x.plan.Size()
	r.prepare(q, max(pl.HaloRows(), pl.SendRows()))
	if cap(r.norms) < pl.HaloRows() {
		r.norms = make([]float64, pl.HaloRows())
	}
	x.stage = mem.Scratch(&x.stageBuf, pl.SendRows(), f)
	start, err := x.now()
	if err != nil {
		return err
	}
	// Every payload staged at its largest size (every row kept), its
	// bitmap at its head.
	r.wire = x.cut(r.wire, r.wireP, func(p int) int { return bitmapSize(pl.recvRows[p]) + c.WireSize(pl.recvRows[p], f) })
	r.bitsOut = cutBytes(r.bitsOut, r.outB, func(p int) int { return bitmapSize(pl.recvRows[p]) })
	for p := range q {
		n, lead, bitmap := pl.recvRows[p], bitmapSize(pl.recvRows[p]), r.outB[p]
		mem.RowSqNorms(dh, pl.RecvStart[p], r.norms[:n])
		kept := gradBitmap(r.norms[:n], x.res.SkipGrad, bitmap)
		x.sizes[p] = lead + c.WireSize(kept, f)
		x.sendB[p] = mem.Slice(r.wireP[p], 0, x.sizes[p])
		mem.Put(mem.Slice(r.wireP[p], 0, lead), bitmap)
		mem.EncodeOnce(c, dh, r.rows(bitmap, pl.RecvStart[p], n), mem.Slice(r.wireP[p], lead, x.sizes[p]-lead),
			codec.SeedFor(x.seed, x.epoch, layer, 1, pl.Rank, p))
	}
	x.wireIn = x.cut(x.wireIn, x.recvB, func(p int) int { return bitmapSize(pl.sendRows[p]) + c.WireSize(pl.sendRows[p], f) })
	if err := x.timed(start, &x.meter.CodecSeconds); err != nil {
		return err
	}
	return transportShort(x, mem, layer, 1, x.meter.Bwd[layer], pl.sendRows, c, f)
}
