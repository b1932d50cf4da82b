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
type AttentionDevice interface {
	// AttentionForward computes, for every row i of a, the softmax
	// coefficients of its edges (alpha: nnz x Heads, before dropout) and
	// the output row out_i (rows of a x OutCols); train applies the
	// coefficient dropout.
	AttentionForward(at *Attention, a *Adj, q, dst, alpha, out *Mat, train bool)
	// AttentionBackward takes d(out) and the forward's alpha and returns
	// d(q) for every row of q (the rows of halo sources included, for their
	// owners) and d(dst); dz (nnz x Heads) is scratch that ends holding the
	// scores' gradients. e lists a's edges by source (NewEdgesBySource).
	AttentionBackward(at *Attention, a *Adj, e *EdgesBySource, q, dst, alpha, dOut, dz, dq, dDst *Mat, train bool)
	// AttentionTerms and AttentionTermsBackward: the source and
	// destination terms from the projected features, and back.
	AttentionTerms(at *Attention, p, aSrc, aDst, q, t *Mat)
	AttentionTermsBackward(at *Attention, p, aSrc, aDst, dq, dt, dP, daSrc, daDst *Mat)
	// ELU and ELUBackward: the activation between attention layers.
	ELU(x, y *Mat)
	ELUBackward(y, dy, dx *Mat)
}

var _ AttentionDevice = (*CPU)(nil)

// EdgesBySource lists the edges of an Adj by source: those of source j are
// entries Ptr[j]..Ptr[j+1]-1, each its destination row and its index in
// the Adj's arrays, ascending by destination.
type EdgesBySource struct {
	Ptr  []int64
	Dst  []int32
	Edge []int64
}

// NewEdgesBySource builds a's edge lists by source (a counting sort).
func NewEdgesBySource(a *Adj) *EdgesBySource {
	nnz := a.Ptr[a.Rows]
	e := &EdgesBySource{Ptr: make([]int64, a.Cols+1), Dst: make([]int32, nnz), Edge: make([]int64, nnz)}
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
			e.Dst[fill[c]], e.Edge[fill[c]] = int32(i), k
			fill[c]++
		}
	}
	return e
}

type attentionTask struct {
	at                               *Attention
	a                                *Adj
	e                                *EdgesBySource
	q, dst, alpha, out, dOut, dz, dq *Mat
	dDst                             *Mat
	drop                             bool
	h                                uint64 // the dropout hash's key
	thr                              uint32
	scale                            float32
	backward                         bool // the backward's first pass (by destination)
	bounds                           []int
}

func checkAttention(op string, at *Attention, a *Adj, q, dst, alpha *Mat, train bool) {
	switch {
	case at.Heads < 1 || at.Width < 1:
		panic(fmt.Sprintf("kernels: %s: %d heads of width %d", op, at.Heads, at.Width))
	case q.Cols != at.SourceCols() || q.Rows != a.Cols:
		panic(fmt.Sprintf("kernels: %s: sources %dx%d, expected %dx%d", op, q.Rows, q.Cols, a.Cols, at.SourceCols()))
	case dst.Rows != a.Rows || dst.Cols != at.Heads:
		panic(fmt.Sprintf("kernels: %s: destination terms %dx%d, expected %dx%d", op, dst.Rows, dst.Cols, a.Rows, at.Heads))
	case int64(alpha.Rows) != a.Ptr[a.Rows] || alpha.Cols != at.Heads:
		panic(fmt.Sprintf("kernels: %s: coefficients %dx%d, expected %dx%d", op, alpha.Rows, alpha.Cols, a.Ptr[a.Rows], at.Heads))
	case train && at.Dropout > 0 && at.RowIDs != nil && len(at.RowIDs) != a.Rows:
		panic(fmt.Sprintf("kernels: %s: %d row ids for %d rows", op, len(at.RowIDs), a.Rows))
	}
}

func (p *CPU) attention(t *attentionTask, at *Attention, a *Adj, train bool) {
	t.at, t.a = at, a
	t.scale, t.thr, t.h, t.drop = 1, 0, 0, train && at.Dropout > 0
	if t.drop {
		t.scale, t.thr = DropoutParams(at.Dropout, a.Rows, nil)
		t.h = rng.Mix64(at.Seed)
	}
	nc := p.chunks(int(a.Ptr[a.Rows]+int64(a.Rows)) * at.Heads * at.Width)
	t.bounds = splitByWeight(t.bounds, a.Ptr, nc)
	p.run(t, nc)
}

// AttentionForward: see AttentionDevice. Row-parallel; every row's sums run
// in edge order, so the bits do not depend on the thread count.
func (p *CPU) AttentionForward(at *Attention, a *Adj, q, dst, alpha, out *Mat, train bool) {
	checkAttention("AttentionForward", at, a, q, dst, alpha, train)
	if out.Rows != a.Rows || out.Cols != at.OutCols() {
		panic(fmt.Sprintf("kernels: AttentionForward: output %dx%d, expected %dx%d", out.Rows, out.Cols, a.Rows, at.OutCols()))
	}
	t := &p.attn
	t.q, t.dst, t.alpha, t.out, t.backward = q, dst, alpha, out, false
	p.attention(t, at, a, train)
	*t = attentionTask{bounds: t.bounds}
}

// AttentionBackward: see AttentionDevice. Two row-parallel passes: by
// destination (the coefficients' and scores' gradients, d(dst)), then by
// source over EdgesBySource (d(q)), so that no two threads add into one
// row.
func (p *CPU) AttentionBackward(at *Attention, a *Adj, e *EdgesBySource, q, dst, alpha, dOut, dz, dq, dDst *Mat, train bool) {
	checkAttention("AttentionBackward", at, a, q, dst, alpha, train)
	sameShape("AttentionBackward dz", alpha, dz)
	sameShape("AttentionBackward dq", q, dq)
	sameShape("AttentionBackward dDst", dst, dDst)
	if dOut.Rows != a.Rows || dOut.Cols != at.OutCols() || len(e.Ptr) != a.Cols+1 {
		panic(fmt.Sprintf("kernels: AttentionBackward: d(out) %dx%d, expected %dx%d", dOut.Rows, dOut.Cols, a.Rows, at.OutCols()))
	}
	t := &p.attn
	t.q, t.dst, t.alpha, t.dOut, t.dz, t.dDst, t.backward = q, dst, alpha, dOut, dz, dDst, true
	p.attention(t, at, a, train)
	// Second pass, by source.
	t.e, t.dq, t.backward = e, dq, false
	nc := p.chunks(int(e.Ptr[a.Cols]+int64(a.Cols)) * at.Heads * at.Width)
	t.bounds = splitByWeight(t.bounds, e.Ptr, nc)
	p.attnSrc.attentionTask = t
	p.run(&p.attnSrc, nc)
	p.attnSrc.attentionTask = nil
	*t = attentionTask{bounds: t.bounds}
}

// keep is the dropout factor of edge k (the k-th of row i) and head h.
func (t *attentionTask) keep(i int, k int64, h int) float32 {
	if !t.drop {
		return 1
	}
	id := int32(i)
	if t.at.RowIDs != nil {
		id = t.at.RowIDs[i]
	}
	u := uint32(rng.Mix64(t.h^(uint64(uint32(id))<<32|uint64(uint32(int(k)*t.at.Heads+h)))) >> 40)
	if u >= t.thr {
		return t.scale
	}
	return 0
}

func leaky(z, slope float32) float32 {
	if z > 0 {
		return z
	}
	return z * slope
}

func (t *attentionTask) do(c int) {
	if t.backward {
		t.backwardRows(c)
		return
	}
	at, a, q := t.at, t.a, t.q
	heads, w, qc := at.Heads, at.Width, t.q.Cols
	oc := at.OutCols()
	for i := t.bounds[c]; i < t.bounds[c+1]; i++ {
		k0, k1 := a.Ptr[i], a.Ptr[i+1]
		out := t.out.Data[i*oc : (i+1)*oc]
		clear(out)
		ti := t.dst.Data[i*heads : (i+1)*heads]
		for h := 0; h < heads; h++ {
			// Softmax over the row's scores, shifted by their maximum.
			m := float32(math.Inf(-1))
			for k := k0; k < k1; k++ {
				j := int(a.Col[k])
				e := leaky(ti[h]+q.Data[j*qc+heads*w+h], at.Slope)
				t.alpha.Data[k*int64(heads)+int64(h)] = e
				m = max(m, e)
			}
			var sum float64
			for k := k0; k < k1; k++ {
				x := &t.alpha.Data[k*int64(heads)+int64(h)]
				*x = float32(math.Exp(float64(*x - m)))
				sum += float64(*x)
			}
			inv := 1 / sum
			dst := out
			if !at.Mean {
				dst = out[h*w : (h+1)*w]
			}
			for k := k0; k < k1; k++ {
				x := &t.alpha.Data[k*int64(heads)+int64(h)]
				*x = float32(float64(*x) * inv)
				coef := *x * t.keep(i, k-k0, h)
				if coef != 0 {
					j := int(a.Col[k])
					axpy(coef, q.Data[j*qc+h*w:j*qc+(h+1)*w], dst)
				}
			}
		}
		if at.Mean && heads > 1 {
			s := 1 / float32(heads)
			for f := range out {
				out[f] *= s
			}
		}
	}
}

// backwardRows is the first backward pass over destinations i: with
// g = d(out_i) for head h (divided by Heads when averaged) and c_k the
// coefficient after dropout, d(c_k) = <g, P_j>; the softmax's
// d(e_k) = alpha_k (d(alpha_k) - sum_l alpha_l d(alpha_l)) with
// d(alpha_k) = d(c_k) * keep_k; then dz_k = d(e_k) * LeakyReLU'(z_k),
// and d(t_i[h]) sums dz over the row.
func (t *attentionTask) backwardRows(c int) {
	at, a, q := t.at, t.a, t.q
	heads, w, qc := at.Heads, at.Width, q.Cols
	oc := at.OutCols()
	hd := int64(heads)
	for i := t.bounds[c]; i < t.bounds[c+1]; i++ {
		k0, k1 := a.Ptr[i], a.Ptr[i+1]
		g := t.dOut.Data[i*oc : (i+1)*oc]
		ti := t.dst.Data[i*heads : (i+1)*heads]
		dti := t.dDst.Data[i*heads : (i+1)*heads]
		for h := 0; h < heads; h++ {
			gh := g
			if !at.Mean {
				gh = g[h*w : (h+1)*w]
			}
			// d(alpha_k), kept in dz, and their alpha-weighted sum.
			var dot float64
			for k := k0; k < k1; k++ {
				j := int(a.Col[k])
				pj := q.Data[j*qc+h*w : j*qc+(h+1)*w]
				var s float32
				for f, v := range gh {
					s += float32(v * pj[f])
				}
				if at.Mean && heads > 1 {
					s /= float32(heads)
				}
				da := s * t.keep(i, k-k0, h)
				t.dz.Data[k*hd+int64(h)] = da
				dot += float64(t.alpha.Data[k*hd+int64(h)]) * float64(da)
			}
			var dt float32
			for k := k0; k < k1; k++ {
				j := int(a.Col[k])
				x := &t.dz.Data[k*hd+int64(h)]
				de := t.alpha.Data[k*hd+int64(h)] * float32(float64(*x)-dot)
				if ti[h]+q.Data[j*qc+heads*w+h] <= 0 {
					de *= at.Slope
				}
				*x = de
				dt += de
			}
			dti[h] = dt
		}
	}
}

// attentionSourceTask is the second backward pass, over sources j: d(P_j)
// for head h sums c_k g_i over j's edges k = (j -> i), and d(s_j[h]) their
// dz_k.
type attentionSourceTask struct{ *attentionTask }

func (t *attentionSourceTask) do(c int) {
	at, e := t.at, t.e
	heads, w, qc := at.Heads, at.Width, t.q.Cols
	oc := at.OutCols()
	hd := int64(heads)
	for j := t.bounds[c]; j < t.bounds[c+1]; j++ {
		dq := t.dq.Data[j*qc : (j+1)*qc]
		clear(dq)
		for x := e.Ptr[j]; x < e.Ptr[j+1]; x++ {
			i, k := int(e.Dst[x]), e.Edge[x]
			g := t.dOut.Data[i*oc : (i+1)*oc]
			kr := k - t.a.Ptr[i]
			for h := 0; h < heads; h++ {
				coef := t.alpha.Data[k*hd+int64(h)] * t.keep(i, kr, h)
				if at.Mean && heads > 1 {
					coef /= float32(heads)
				}
				gh := g
				if !at.Mean {
					gh = g[h*w : (h+1)*w]
				}
				if coef != 0 {
					axpy(coef, gh, dq[h*w:(h+1)*w])
				}
				dq[heads*w+h] += t.dz.Data[k*hd+int64(h)]
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
