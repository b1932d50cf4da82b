package kernels

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Attention is one graph-attention layer (Veličković et al., GAT) as the
// attention kernels see it: Heads heads of Width values over the edges of
// an Adj (row i lists the sources of the edges into i). Row j of the source
// matrix q is [P_j | s_j]: the projected features P_j (Heads*Width, head
// after head) and the per-head source terms s_j = <a_src, P_j> (Heads); the
// destination terms t_i = <a_dst, P_i> are a matrix of their own (rows of
// the Adj x Heads). Edge k = (j -> i) of head h scores
// e = LeakyReLU(t_i[h] + s_j[h]), the scores of each destination's edges go
// through a softmax, and the output row is the coefficient-weighted sum of
// the sources' P, heads concatenated or averaged.
type Attention struct {
	Heads, Width int
	Mean         bool    // average the heads (an output layer) instead of concatenating them
	Slope        float32 // LeakyReLU's slope below zero
	// Dropout on the coefficients while training (0: none), drawn like
	// Dropout's masks with seed Seed, row = RowIDs[i] (the destination's
	// global id) and column = k*Heads + h for the k-th edge of the row.
	Dropout float32
	Seed    uint64
	RowIDs  []int32
}

// SourceCols is the width of q: the projected features and the source terms.
func (at *Attention) SourceCols() int { return at.Heads*at.Width + at.Heads }

// OutCols is the width of the output: Heads*Width, or Width when averaged.
func (at *Attention) OutCols() int {
	if at.Mean {
		return at.Width
	}
	return at.Heads * at.Width
}

// AttentionDevice is a Device with the attention kernels (the CPU).
//
// The forward keeps per destination row and head the softmax's statistics
// (stats: rows x 2 Heads, the scores' maximum and 1 / the sum of their
// exponentials), from which a coefficient is exp(e - max) / sum again.
// alpha (one row per edge) may be nil: the backward then recomputes the
// coefficients it would have read, for an exponential per edge and head
// instead of edges x Heads floats per layer. Stored or recomputed, the
// bits are the same. The backward's pass by source always recomputes
// them: it visits the edges out of their order.
type AttentionDevice interface {
	// AttentionForward computes, for every row i of a, the softmax
	// statistics, the coefficients of its edges (into alpha, before
	// dropout, when it is not nil) and the output row out_i (rows of a x
	// OutCols); train applies the coefficient dropout.
	AttentionForward(at *Attention, a *Adj, q, dst, stats, alpha, out *Mat, train bool)
	// AttentionBackward takes d(out) and the forward's statistics and
	// alpha and returns d(q) for every row of q (the rows of halo sources
	// included, for their owners) and d(dst). rec (rows of a x
	// RecordCols) is scratch. e lists a's edges by source
	// (NewEdgesBySource).
	AttentionBackward(at *Attention, a *Adj, e *EdgesBySource, q, dst, stats, alpha, dOut, rec, dq, dDst *Mat, train bool)
	// AttentionTerms and AttentionTermsBackward: the source and
	// destination terms from the projected features, and back.
	AttentionTerms(at *Attention, p, aSrc, aDst, q, t *Mat)
	AttentionTermsBackward(at *Attention, p, aSrc, aDst, dq, dt, dP, daSrc, daDst *Mat)
	// ELU and ELUBackward: the activation between attention layers.
	ELU(x, y *Mat)
	ELUBackward(y, dy, dx *Mat)
}

var _ AttentionDevice = (*CPU)(nil)

// StatsCols is the width of the softmax statistics.
func (at *Attention) StatsCols() int { return 2 * at.Heads }

// RecordCols is the width of the backward's record of a destination: its
// terms, statistics and sum alpha d(alpha) per head, and d(out).
func (at *Attention) RecordCols() int { return 4*at.Heads + at.OutCols() }

// EdgesBySource lists the edges of an Adj by source: those of source j are
// entries Ptr[j]..Ptr[j+1]-1, each its destination row and its rank among
// that row's entries, ascending by destination.
type EdgesBySource struct {
	Ptr  []int64
	Dst  []int32
	Rank []int32
}

// NewEdgesBySource builds a's edge lists by source (a counting sort).
func NewEdgesBySource(a *Adj) *EdgesBySource {
	nnz := a.Ptr[a.Rows]
	e := &EdgesBySource{Ptr: make([]int64, a.Cols+1), Dst: make([]int32, nnz), Rank: make([]int32, nnz)}
	for _, c := range a.Col[:nnz] {
		e.Ptr[c+1]++
	}
	for j := 0; j < a.Cols; j++ {
		e.Ptr[j+1] += e.Ptr[j]
	}
	fill := make([]int64, a.Cols)
	copy(fill, e.Ptr[:a.Cols])
	for i := 0; i < a.Rows; i++ {
		for k := a.Ptr[i]; k < a.Ptr[i+1]; k++ {
			c := a.Col[k]
			e.Dst[fill[c]], e.Rank[fill[c]] = int32(i), int32(k-a.Ptr[i])
			fill[c]++
		}
	}
	return e
}

// The passes of an attention task.
const (
	attnForward = iota
	attnBackwardDst
	attnBackwardSrc
)

type attentionTask struct {
	at                                   *Attention
	a                                    *Adj
	e                                    *EdgesBySource
	q, dst, stats, alpha, out, dOut, rec *Mat
	dq, dDst                             *Mat
	pass                                 int
	drop                                 bool
	key                                  uint64 // the dropout hash's key
	thr                                  uint32
	scale                                float32
	bounds                               []int
}

// CheckAttention panics, naming op, unless the shapes of the arguments the
// attention passes share fit at and a (the CUDA device checks with it too).
func CheckAttention(op string, at *Attention, a *Adj, q, dst, stats, alpha *Mat, train bool) {
	nnz := a.Ptr[a.Rows]
	switch {
	case at.Heads < 1 || at.Width < 1:
		panic(fmt.Sprintf("%s: %d heads of width %d", op, at.Heads, at.Width))
	case q.Cols != at.SourceCols() || q.Rows != a.Cols:
		panic(fmt.Sprintf("%s: sources %dx%d, expected %dx%d", op, q.Rows, q.Cols, a.Cols, at.SourceCols()))
	case dst.Rows != a.Rows || dst.Cols != at.Heads:
		panic(fmt.Sprintf("%s: destination terms %dx%d, expected %dx%d", op, dst.Rows, dst.Cols, a.Rows, at.Heads))
	case stats.Rows != a.Rows || stats.Cols != at.StatsCols():
		panic(fmt.Sprintf("%s: statistics %dx%d, expected %dx%d", op, stats.Rows, stats.Cols, a.Rows, at.StatsCols()))
	case alpha != nil && (int64(alpha.Rows) != nnz || alpha.Cols != at.Heads):
		panic(fmt.Sprintf("%s: coefficients %dx%d, expected %dx%d", op, alpha.Rows, alpha.Cols, nnz, at.Heads))
	case train && at.Dropout > 0 && at.RowIDs != nil && len(at.RowIDs) != a.Rows:
		panic(fmt.Sprintf("%s: %d row ids for %d rows", op, len(at.RowIDs), a.Rows))
	}
}

// checkMats checks that each matrix, where not nil, holds its elements.
func checkMats(op string, ms ...*Mat) {
	for _, m := range ms {
		if m != nil {
			checkMat(op, m)
		}
	}
}

// run runs one pass of t over rows split by ptr's weights.
func (p *CPU) attention(t *attentionTask, at *Attention, a *Adj, ptr []int64, train bool) {
	t.at, t.a = at, a
	t.scale, t.thr, t.key, t.drop = 1, 0, 0, train && at.Dropout > 0
	if t.drop {
		t.scale, t.thr = DropoutParams(at.Dropout, a.Rows, nil)
		t.key = rng.Mix64(at.Seed)
	}
	rows := len(ptr) - 1
	nc := p.chunks(int(ptr[rows]+int64(rows)) * at.Heads * at.Width)
	t.bounds = splitByWeight(t.bounds, ptr, nc)
	p.run(t, nc)
}

// AttentionForward: see AttentionDevice. Row-parallel; every row's sums run
// in edge order, so the bits do not depend on the thread count.
func (p *CPU) AttentionForward(at *Attention, a *Adj, q, dst, stats, alpha, out *Mat, train bool) {
	CheckAttention("kernels: AttentionForward", at, a, q, dst, stats, alpha, train)
	checkAdj("AttentionForward", a)
	checkMats("AttentionForward", q, dst, stats, alpha)
	if out.Rows != a.Rows || out.Cols != at.OutCols() {
		panic(fmt.Sprintf("kernels: AttentionForward: output %dx%d, expected %dx%d", out.Rows, out.Cols, a.Rows, at.OutCols()))
	}
	checkMat("AttentionForward", out)
	t := &p.attn
	t.q, t.dst, t.stats, t.alpha, t.out, t.pass = q, dst, stats, alpha, out, attnForward
	p.attention(t, at, a, a.Ptr, train)
	*t = attentionTask{bounds: t.bounds}
}

// AttentionBackward: see AttentionDevice. Two row-parallel passes: by
// destination (the softmax's sums, d(dst), the records), then by source over
// EdgesBySource (d(q)), so that no two threads add into one row.
// Both passes' sums run in edge order.
func (p *CPU) AttentionBackward(at *Attention, a *Adj, e *EdgesBySource, q, dst, stats, alpha, dOut, rec, dq, dDst *Mat, train bool) {
	CheckAttention("kernels: AttentionBackward", at, a, q, dst, stats, alpha, train)
	checkAdj("AttentionBackward", a)
	checkMats("AttentionBackward", q, dst, stats, alpha)
	if rec.Rows != a.Rows || rec.Cols != at.RecordCols() {
		panic(fmt.Sprintf("kernels: AttentionBackward: record %dx%d, expected %dx%d", rec.Rows, rec.Cols, a.Rows, at.RecordCols()))
	}
	checkMat("AttentionBackward", rec)
	sameShape("AttentionBackward dq", q, dq)
	sameShape("AttentionBackward dDst", dst, dDst)
	if dOut.Rows != a.Rows || dOut.Cols != at.OutCols() {
		panic(fmt.Sprintf("kernels: AttentionBackward: d(out) %dx%d, expected %dx%d", dOut.Rows, dOut.Cols, a.Rows, at.OutCols()))
	}
	if len(e.Ptr) != a.Cols+1 || e.Ptr[a.Cols] != a.Ptr[a.Rows] {
		panic(fmt.Sprintf("kernels: AttentionBackward: edges by source for %d sources and %d edges, expected %d and %d",
			len(e.Ptr)-1, e.Ptr[len(e.Ptr)-1], a.Cols, a.Ptr[a.Rows]))
	}
	checkMat("AttentionBackward", dOut)
	t := &p.attn
	t.q, t.dst, t.stats, t.alpha, t.dOut, t.rec, t.dDst, t.pass = q, dst, stats, alpha, dOut, rec, dDst, attnBackwardDst
	p.attention(t, at, a, a.Ptr, train)
	t.e, t.dq, t.pass = e, dq, attnBackwardSrc
	p.attention(t, at, a, e.Ptr, train)
	*t = attentionTask{bounds: t.bounds}
}

func (t *attentionTask) do(c int) {
	lo, hi := t.bounds[c], t.bounds[c+1]
	if !portable {
		t.c(lo, hi)
		return
	}
	switch t.pass {
	case attnForward:
		t.forwardRows(lo, hi)
	case attnBackwardDst:
		t.backwardDstRows(lo, hi)
	default:
		t.backwardSrcRows(lo, hi)
	}
}

// The Go twins of attention.c's loops: the same operations in the same
// order, heads in blocks of eight lanes, each lane on its own.

// lanes is one value per head of a block of eight.
type lanes [8]float32

// expNonPos is attention.c's exp_nonpos.
func expNonPos(x float32) float32 {
	if x != x {
		return x
	}
	if x < -87 {
		return 0
	}
	if x > 0 {
		x = 0
	}
	y := float32(x * 1.44269504088896341)
	n := -int32(float32(0.5 - y))
	nf := float32(n)
	r := float32(x-float32(nf*0.693359375)) - float32(nf*-2.12194440e-4)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	z := float32(r * r)
	p = float32(p * z)
	p += r
	p++
	return float32(p * math.Float32frombits(uint32(n+127)<<23))
}

func leaky(z, slope float32) float32 {
	if z > 0 {
		return z
	}
	return float32(z * slope)
}

func slopeAt(z, slope float32) float32 {
	if z > 0 {
		return 1
	}
	return slope
}

// dot8 is attention.c's dot_lanes and hsum8: eight lane sums, then a
// fixed tree.
func dot8(x, y []float32) float32 {
	var s lanes
	w := len(x)
	f := 0
	for ; f+8 <= w; f += 8 {
		for l := range s {
			s[l] += float32(x[f+l] * y[f+l])
		}
	}
	if f < w {
		var tail lanes
		for l := 0; f+l < w; l++ {
			tail[l] = float32(x[f+l] * y[f+l])
		}
		for l := range s {
			s[l] += tail[l]
		}
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// keep is the dropout factor of edge kr (of row i) and head h.
func (t *attentionTask) keep(i, kr, h int) float32 {
	if !t.drop {
		return 1
	}
	id := int32(i)
	if t.at.RowIDs != nil {
		id = t.at.RowIDs[i]
	}
	u := uint32(rng.Mix64(t.key^(uint64(uint32(id))<<32|uint64(uint32(kr*t.at.Heads+h)))) >> 40)
	if u >= t.thr {
		return t.scale
	}
	return 0
}

// dAlpha is attention.c's dalpha for head h.
func (t *attentionTask) dAlpha(g, qj []float32, i, kr, h int) float32 {
	at := t.at
	w := at.Width
	gh := g
	if !at.Mean {
		gh = g[h*w : (h+1)*w]
	}
	d := dot8(gh, qj[h*w:(h+1)*w])
	if at.Mean && at.Heads > 1 {
		d /= float32(at.Heads)
	}
	if t.drop {
		d = float32(d * t.keep(i, kr, h))
	}
	return d
}

// coefficient is attention.c's coefficients: the coefficient of score z
// from its row's maximum m and 1 / sum inv.
func coefficient(z, m, inv, slope float32) float32 {
	return float32(expNonPos(leaky(z, slope)-m) * inv)
}

func (t *attentionTask) forwardRows(lo, hi int) {
	at, a, q := t.at, t.a, t.q.Data
	H, W := at.Heads, at.Width
	hw, qc, oc, hd := H*W, H*W+H, at.OutCols(), int64(H)
	for i := lo; i < hi; i++ {
		k0, k1 := a.Ptr[i], a.Ptr[i+1]
		out := t.out.Data[i*oc : (i+1)*oc]
		clear(out)
		st := t.stats.Data[i*2*H : (i+1)*2*H]
		ti := t.dst.Data[i*H : (i+1)*H]
		for h0 := 0; h0 < H; h0 += 8 {
			n := min(8, H-h0)
			var m lanes
			for l := range n {
				m[l] = float32(math.Inf(-1))
			}
			for k := k0; k < k1; k++ {
				s := q[int(a.Col[k])*qc+hw+h0:]
				for l := range n {
					if e := leaky(ti[h0+l]+s[l], at.Slope); e > m[l] || e != e {
						m[l] = e
					}
				}
			}
			var sum [8]float64
			for k := k0; k < k1; k++ {
				s := q[int(a.Col[k])*qc+hw+h0:]
				for l := range n {
					x := expNonPos(leaky(ti[h0+l]+s[l], at.Slope) - m[l])
					if t.alpha != nil {
						t.alpha.Data[k*hd+int64(h0+l)] = x
					}
					sum[l] += float64(x)
				}
			}
			for l := range n {
				st[h0+l], st[H+h0+l] = m[l], float32(1/sum[l])
			}
			for k := k0; k < k1; k++ {
				j := int(a.Col[k])
				qj := q[j*qc : (j+1)*qc]
				for l := range n {
					h := h0 + l
					var x float32
					if t.alpha != nil {
						x = t.alpha.Data[k*hd+int64(h)]
					} else {
						x = expNonPos(leaky(ti[h]+qj[hw+h], at.Slope) - m[l])
					}
					al := float32(x * st[H+h])
					if t.alpha != nil {
						t.alpha.Data[k*hd+int64(h)] = al
					}
					c := al
					if t.drop {
						c = float32(al * t.keep(i, int(k-k0), h))
					}
					if c != 0 {
						dst := out
						if !at.Mean {
							dst = out[h*W : (h+1)*W]
						}
						axpy(c, qj[h*W:(h+1)*W], dst)
					}
				}
			}
		}
		if at.Mean && H > 1 {
			s := 1 / float32(H)
			for f := range out {
				out[f] *= s
			}
		}
	}
}

func (t *attentionTask) backwardDstRows(lo, hi int) {
	at, a, q := t.at, t.a, t.q.Data
	H := at.Heads
	hw, qc, oc, rc, hd := H*at.Width, H*at.Width+H, at.OutCols(), at.RecordCols(), int64(H)
	for i := lo; i < hi; i++ {
		k0, k1 := a.Ptr[i], a.Ptr[i+1]
		g := t.dOut.Data[i*oc : (i+1)*oc]
		st := t.stats.Data[i*2*H : (i+1)*2*H]
		ti := t.dst.Data[i*H : (i+1)*H]
		rec := t.rec.Data[i*rc : (i+1)*rc]
		copy(rec[4*H:], g)
		for h0 := 0; h0 < H; h0 += 8 {
			n := min(8, H-h0)
			var sa, sb, sc [8]float64
			for k := k0; k < k1; k++ {
				j := int(a.Col[k])
				qj := q[j*qc : (j+1)*qc]
				for l := range n {
					h := h0 + l
					z := ti[h] + qj[hw+h]
					var al float32
					if t.alpha != nil {
						al = t.alpha.Data[k*hd+int64(h)]
					} else {
						al = coefficient(z, st[h], st[H+h], at.Slope)
					}
					da := t.dAlpha(g, qj, i, int(k-k0), h)
					ald, lam := float64(al), float64(slopeAt(z, at.Slope))
					ad := float64(ald * float64(da))
					sa[l] += ad
					sb[l] += float64(ad * lam)
					sc[l] += float64(ald * lam)
				}
			}
			for l := range n {
				h := h0 + l
				rec[h], rec[H+h], rec[2*H+h], rec[3*H+h] = ti[h], st[h], st[H+h], float32(sa[l])
				t.dDst.Data[i*H+h] = float32(sb[l] - float64(sa[l]*sc[l]))
			}
		}
	}
}

func (t *attentionTask) backwardSrcRows(lo, hi int) {
	at, e, q := t.at, t.e, t.q.Data
	H, W := at.Heads, at.Width
	hw, qc, rc := H*W, H*W+H, at.RecordCols()
	for j := lo; j < hi; j++ {
		qj := q[j*qc : (j+1)*qc]
		dq := t.dq.Data[j*qc : (j+1)*qc]
		clear(dq)
		for x := e.Ptr[j]; x < e.Ptr[j+1]; x++ {
			i := int(e.Dst[x])
			rec := t.rec.Data[i*rc : (i+1)*rc]
			g := rec[4*H:]
			for h0 := 0; h0 < H; h0 += 8 {
				for h := h0; h < min(h0+8, H); h++ {
					z := rec[h] + qj[hw+h]
					al := coefficient(z, rec[H+h], rec[2*H+h], at.Slope)
					c := al
					if t.drop {
						c = float32(al * t.keep(i, int(e.Rank[x]), h))
					}
					if at.Mean && H > 1 {
						c /= float32(H)
					}
					da := t.dAlpha(g, qj, i, int(e.Rank[x]), h)
					dz := float32(float32(al*(da-rec[3*H+h])) * slopeAt(z, at.Slope))
					if c != 0 {
						gh := g
						if !at.Mean {
							gh = g[h*W : (h+1)*W]
						}
						axpy(c, gh, dq[h*W:(h+1)*W])
					}
					dq[hw+h] += dz
				}
			}
		}
	}
}

// AttentionTerms writes, for every row i of p (rows x Heads*Width, the
// projected features), q's row i = [P_i | <aSrc_h, P_i,h> for every head h]
// and t's row i = <aDst_h, P_i,h>; aSrc and aDst are Heads x Width.
func (p *CPU) AttentionTerms(at *Attention, pm, aSrc, aDst, q, t *Mat) {
	hw := at.Heads * at.Width
	if pm.Cols != hw || q.Cols != at.SourceCols() || q.Rows != pm.Rows || t.Rows != pm.Rows || t.Cols != at.Heads ||
		aSrc.Len() != hw || aDst.Len() != hw {
		panic(fmt.Sprintf("kernels: AttentionTerms: P %dx%d, q %dx%d, t %dx%d, a %d and %d values for %d heads of %d",
			pm.Rows, pm.Cols, q.Rows, q.Cols, t.Rows, t.Cols, aSrc.Len(), aDst.Len(), at.Heads, at.Width))
	}
	k := &p.terms
	k.at, k.p, k.aSrc, k.aDst, k.q, k.t, k.backward = at, pm, aSrc, aDst, q, t, false
	k.nc = p.chunks(pm.Len())
	p.run(k, k.nc)
	*k = termsTask{part: k.part}
}

// AttentionTermsBackward is AttentionTerms' backward: from d(q)'s and
// d(t)'s rows it writes dP_i = d(q_i)[:Heads*Width] + d(s_i,h) aSrc_h +
// d(t_i,h) aDst_h, and sets daSrc_h = sum_i d(s_i,h) P_i,h and daDst_h =
// sum_i d(t_i,h) P_i,h (size-only blocks of rows summed in float64, added in
// block order: the bits do not depend on the thread count).
func (p *CPU) AttentionTermsBackward(at *Attention, pm, aSrc, aDst, dq, dt, dP, daSrc, daDst *Mat) {
	hw := at.Heads * at.Width
	sameShape("AttentionTermsBackward dP", pm, dP)
	if dq.Rows != pm.Rows || dq.Cols != at.SourceCols() || dt.Rows != pm.Rows || dt.Cols != at.Heads ||
		daSrc.Len() != hw || daDst.Len() != hw {
		panic(fmt.Sprintf("kernels: AttentionTermsBackward: P %dx%d, dq %dx%d, dt %dx%d", pm.Rows, pm.Cols, dq.Rows, dq.Cols, dt.Rows, dt.Cols))
	}
	k := &p.terms
	k.at, k.p, k.aSrc, k.aDst, k.q, k.t, k.dP, k.backward = at, pm, aSrc, aDst, dq, dt, dP, true
	k.nc = blocks(pm.Len())
	k.part = grow(k.part, k.nc*2*hw)
	p.run(k, k.nc)
	for h := 0; h < 2*hw; h++ {
		var s float64
		for b := 0; b < k.nc; b++ {
			s += k.part[b*2*hw+h]
		}
		if h < hw {
			daSrc.Data[h] = float32(s)
		} else {
			daDst.Data[h-hw] = float32(s)
		}
	}
	*k = termsTask{part: k.part}
}

type termsTask struct {
	at                      *Attention
	p, aSrc, aDst, q, t, dP *Mat
	backward                bool
	nc                      int
	part                    []float64 // backward: block b's sums of daSrc then daDst at [b*2*Heads*Width, ...)
}

func (k *termsTask) do(c int) {
	heads, w := k.at.Heads, k.at.Width
	hw, qc := heads*w, k.q.Cols
	lo, hi := span(k.p.Rows, k.nc, c)
	if !k.backward {
		for i := lo; i < hi; i++ {
			pi := k.p.Data[i*hw : (i+1)*hw]
			qi := k.q.Data[i*qc : (i+1)*qc]
			copy(qi, pi)
			for h := 0; h < heads; h++ {
				var s, d float32
				for f, v := range pi[h*w : (h+1)*w] {
					s += float32(v * k.aSrc.Data[h*w+f])
					d += float32(v * k.aDst.Data[h*w+f])
				}
				qi[hw+h], k.t.Data[i*heads+h] = s, d
			}
		}
		return
	}
	part := k.part[c*2*hw : (c+1)*2*hw]
	clear(part)
	for i := lo; i < hi; i++ {
		pi := k.p.Data[i*hw : (i+1)*hw]
		dqi := k.q.Data[i*qc : (i+1)*qc]
		dpi := k.dP.Data[i*hw : (i+1)*hw]
		copy(dpi, dqi[:hw])
		for h := 0; h < heads; h++ {
			ds, dd := dqi[hw+h], k.t.Data[i*heads+h]
			for f := h * w; f < (h+1)*w; f++ {
				dpi[f] += float32(ds*k.aSrc.Data[f]) + float32(dd*k.aDst.Data[f])
				part[f] += float64(ds) * float64(pi[f])
				part[hw+f] += float64(dd) * float64(pi[f])
			}
		}
	}
}

type eluTask struct {
	x, y, dy, dx []float32
	backward     bool
	nc           int
}

// ELU computes y = x > 0 ? x : exp(x) - 1 (y may be x).
func (p *CPU) ELU(x, y *Mat) {
	sameShape("ELU", x, y)
	n := x.Len()
	t := &p.elu
	t.x, t.y, t.backward, t.nc = x.Data[:n], y.Data[:n], false, p.chunks(n)
	p.run(t, t.nc)
	*t = eluTask{}
}

// ELUBackward computes dx = dy * ELU'(x) from the output y: 1 where y > 0,
// else y + 1 (= exp(x)); dx may be dy.
func (p *CPU) ELUBackward(y, dy, dx *Mat) {
	sameShape("ELUBackward", y, dy)
	sameShape("ELUBackward", y, dx)
	n := y.Len()
	t := &p.elu
	t.y, t.dy, t.dx, t.backward, t.nc = y.Data[:n], dy.Data[:n], dx.Data[:n], true, p.chunks(n)
	p.run(t, t.nc)
	*t = eluTask{}
}

func (t *eluTask) do(c int) {
	if t.backward {
		lo, hi := span(len(t.y), t.nc, c)
		for i := lo; i < hi; i++ {
			if y := t.y[i]; y > 0 {
				t.dx[i] = t.dy[i]
			} else {
				t.dx[i] = t.dy[i] * (y + 1)
			}
		}
		return
	}
	lo, hi := span(len(t.x), t.nc, c)
	for i := lo; i < hi; i++ {
		if v := t.x[i]; !(v > 0) {
			t.y[i] = float32(math.Expm1(float64(v)))
		} else {
			t.y[i] = v
		}
	}
}
