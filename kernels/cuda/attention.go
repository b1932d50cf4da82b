//go:build !cpu

package cuda

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Launchers of the kernels in attention.cu: GAT's attention passes, its
// source and destination terms and ELU. Each mirrors the CPU method of the
// same name (kernels/attention.go), with the CPU's argument checks, and
// gives its bits (kernels/cuda/hosttwin holds the kernels' routines to
// the Go twins).

var _ kernels.AttentionDevice = (*Device)(nil)

// attnArgs are the kernels' layer arguments after the rows (heads, width,
// mean, drop, slope, scale, thr, key, row_ids): the CPU task's dropout
// parameters, from DropoutParams and Mix64(Seed) as it derives them.
func (d *Device) attnArgs(at *kernels.Attention, rows int, train bool) []uint64 {
	drop := train && at.Dropout > 0
	scale, thr, key, ids := float32(1), uint32(0), uint64(0), uint64(0)
	if drop {
		scale, thr = kernels.DropoutParams(at.Dropout, rows, nil)
		key = rng.Mix64(at.Seed)
		ids = d.Ints(at.RowIDs)
	}
	return []uint64{i32(at.Heads), i32(at.Width), i32(b2i(at.Mean)), i32(b2i(drop)), f32(at.Slope), f32(scale),
		uint64(thr), key, ids}
}

// optMat is mat, or NULL for a nil matrix (alpha when recomputed).
func optMat(m *kernels.Mat) uint64 {
	if m == nil {
		return 0
	}
	return mat(m)
}

// AttentionForward: see kernels.AttentionDevice. A thread per (row, head)
// for the statistics and coefficients, then a warp per row for the output.
func (d *Device) AttentionForward(at *kernels.Attention, a *kernels.Adj, q, dst, stats, alpha, out *kernels.Mat, train bool) {
	kernels.CheckAttention("cuda: AttentionForward", at, a, q, dst, stats, alpha, train)
	if out.Rows != a.Rows || out.Cols != at.OutCols() {
		panic(fmt.Sprintf("cuda: AttentionForward: output %dx%d, expected %dx%d", out.Rows, out.Cols, a.Rows, at.OutCols()))
	}
	if a.Rows == 0 {
		return
	}
	g := d.adj(a)
	d.launch(kAttnForwardStats, a.Rows*at.Heads, false, i32(a.Rows), i32(at.Heads), i32(at.Width), f32(at.Slope),
		dptr(g.ptr), dptr(g.col), mat(q), mat(dst), mat(stats), optMat(alpha))
	args := append([]uint64{i32(a.Rows)}, d.attnArgs(at, a.Rows, train)...)
	d.launch(kAttnForwardOut, a.Rows, true, append(args, dptr(g.ptr), dptr(g.col), mat(q), mat(dst), mat(stats),
		optMat(alpha), mat(out))...)
}

// AttentionBackward: see kernels.AttentionDevice. The pass by destination
// a thread per (row, head), then the pass by source a warp per row of q.
func (d *Device) AttentionBackward(at *kernels.Attention, a *kernels.Adj, e *kernels.EdgesBySource, q, dst, stats, alpha, dOut, rec, dq, dDst *kernels.Mat, train bool) {
	kernels.CheckAttention("cuda: AttentionBackward", at, a, q, dst, stats, alpha, train)
	if rec.Rows != a.Rows || rec.Cols != at.RecordCols() {
		panic(fmt.Sprintf("cuda: AttentionBackward: record %dx%d, expected %dx%d", rec.Rows, rec.Cols, a.Rows, at.RecordCols()))
	}
	shape("AttentionBackward dq", q, dq)
	shape("AttentionBackward dDst", dst, dDst)
	if dOut.Rows != a.Rows || dOut.Cols != at.OutCols() {
		panic(fmt.Sprintf("cuda: AttentionBackward: d(out) %dx%d, expected %dx%d", dOut.Rows, dOut.Cols, a.Rows, at.OutCols()))
	}
	if len(e.Ptr) != a.Cols+1 || e.Ptr[a.Cols] != a.Ptr[a.Rows] {
		panic(fmt.Sprintf("cuda: AttentionBackward: edges by source of %d sources and %d edges, expected %d and %d",
			len(e.Ptr)-1, len(e.Dst), a.Cols, a.Ptr[a.Rows]))
	}
	layer := d.attnArgs(at, a.Rows, train)
	if a.Rows > 0 {
		g := d.adj(a)
		args := append([]uint64{i32(a.Rows)}, layer...)
		d.launch(kAttnBackwardDst, a.Rows*at.Heads, false, append(args, dptr(g.ptr), dptr(g.col), mat(q), mat(dst),
			mat(stats), optMat(alpha), mat(dOut), mat(rec), mat(dDst))...)
	}
	if a.Cols > 0 {
		g := d.edgesBySource(e)
		args := append([]uint64{i32(a.Cols)}, layer...)
		d.launch(kAttnBackwardSrc, a.Cols, true, append(args, dptr(g.ptr), dptr(g.dst), dptr(g.rank), mat(q),
			mat(rec), mat(dq))...)
	}
}

// AttentionTerms: see kernels.AttentionDevice; a thread per (row, head).
func (d *Device) AttentionTerms(at *kernels.Attention, pm, aSrc, aDst, q, t *kernels.Mat) {
	hw := at.Heads * at.Width
	if pm.Cols != hw || q.Cols != at.SourceCols() || q.Rows != pm.Rows || t.Rows != pm.Rows || t.Cols != at.Heads ||
		aSrc.Len() != hw || aDst.Len() != hw {
		panic(fmt.Sprintf("cuda: AttentionTerms: P %dx%d, q %dx%d, t %dx%d, a %d and %d values for %d heads of %d",
			pm.Rows, pm.Cols, q.Rows, q.Cols, t.Rows, t.Cols, aSrc.Len(), aDst.Len(), at.Heads, at.Width))
	}
	if pm.Rows == 0 || at.Heads <= 0 {
		return
	}
	d.launch(kAttnTerms, pm.Rows*at.Heads, false, i32(pm.Rows), i32(at.Heads), i32(at.Width), mat(pm), mat(aSrc),
		mat(aDst), mat(q), mat(t))
}

// Reduction blocks of the CPU (kernels' grain and maxBlocks): the terms'
// backward sums daSrc and daDst in termsBlocks(rows*Heads*Width) blocks of
// rows, as the CPU's blocks() cuts them.
const (
	cpuGrain     = 1 << 14
	cpuMaxBlocks = 256
)

func termsBlocks(work int) int { return max(1, min(cpuMaxBlocks, (work+cpuGrain-1)/cpuGrain)) }

// AttentionTermsBackward: see kernels.AttentionDevice. dP element-wise; the
// daSrc and daDst sums as the CPU cuts and combines them: a thread per
// (block of rows, column) sums its block in double, then a thread per
// column adds the blocks in order. dP must not alias dq.
func (d *Device) AttentionTermsBackward(at *kernels.Attention, pm, aSrc, aDst, dq, dt, dP, daSrc, daDst *kernels.Mat) {
	hw := at.Heads * at.Width
	shape("AttentionTermsBackward dP", pm, dP)
	if dq.Rows != pm.Rows || dq.Cols != at.SourceCols() || dt.Rows != pm.Rows || dt.Cols != at.Heads ||
		daSrc.Len() != hw || daDst.Len() != hw {
		panic(fmt.Sprintf("cuda: AttentionTermsBackward: P %dx%d, dq %dx%d, dt %dx%d", pm.Rows, pm.Cols, dq.Rows, dq.Cols, dt.Rows, dt.Cols))
	}
	if hw <= 0 {
		return
	}
	if n := pm.Rows * hw; n > 0 {
		d.launch(kAttnTermsDP, n, false, i32(pm.Rows), i32(at.Heads), i32(at.Width), mat(aSrc), mat(aDst), mat(dq),
			mat(dt), mat(dP))
	}
	nb := termsBlocks(pm.Len())
	part := d.scratchBuf(int64(8 * nb * 2 * hw))
	d.launch(kAttnTermsPartial, nb*2*hw, false, i32(pm.Rows), i32(nb), i32(at.Heads), i32(at.Width), mat(pm),
		mat(dq), mat(dt), dptr(part))
	d.launch(kAttnTermsFinish, 2*hw, false, i32(nb), i32(at.Heads), i32(at.Width), dptr(part), mat(daSrc), mat(daDst))
}

// ELU computes y = x > 0 ? x : exp(x) - 1 (y may be x), as the CPU's
// float32(math.Expm1(float64(x))).
func (d *Device) ELU(x, y *kernels.Mat) {
	shape("ELU", x, y)
	if n := x.Len(); n > 0 {
		d.launch(kELU, n, false, i64(n), mat(x), mat(y))
	}
}

// ELUBackward computes dx = dy * ELU'(x) from y (dx may be dy).
func (d *Device) ELUBackward(y, dy, dx *kernels.Mat) {
	shape("ELUBackward", y, dy)
	shape("ELUBackward", y, dx)
	if n := y.Len(); n > 0 {
		d.launch(kELUBackward, n, false, i64(n), mat(y), mat(dy), mat(dx))
	}
}
