package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// attentionCase is one attention layer's inputs on a random graph.
type attentionCase struct {
	at         Attention
	a          *Adj
	e          *EdgesBySource
	q, t, dOut *Mat
}

// attentionShapes covers one head and several, fewer and more than a block
// of eight, widths below, at and above a vector, averaged and concatenated.
var attentionShapes = []struct {
	heads, width int
	mean         bool
}{{1, 1, true}, {1, 40, true}, {8, 8, false}, {3, 5, false}, {9, 3, false}, {4, 6, true}, {10, 17, true}, {16, 9, false}}

func newAttentionCase(rng *rand.Rand, heads, width int, mean bool, dropout float32) *attentionCase {
	rows, cols := 70, 90
	c := &attentionCase{a: randAdj(rng, rows, cols, 7, false)}
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(3*i + 1)
	}
	c.at = Attention{Heads: heads, Width: width, Mean: mean, Slope: 0.2, Dropout: dropout, Seed: rng.Uint64(), RowIDs: ids}
	c.e = NewEdgesBySource(c.a)
	c.q, c.t, c.dOut = randMat(rng, cols, c.at.SourceCols()), randMat(rng, rows, heads), randMat(rng, rows, c.at.OutCols())
	// Some scores far apart, so that exponentials underflow to zero.
	for j := 0; j < cols; j += 7 {
		c.q.Data[j*c.q.Cols+heads*width] = -200
	}
	return c
}

// attentionResult is everything one forward and backward writes.
type attentionResult struct{ stats, alpha, out, rec, dq, dDst *Mat }

func (c *attentionCase) run(p *CPU, stored, train bool) *attentionResult {
	nnz := int(c.a.Ptr[c.a.Rows])
	r := &attentionResult{stats: NewMat(c.a.Rows, c.at.StatsCols()), out: NewMat(c.a.Rows, c.at.OutCols()),
		rec: NewMat(c.a.Rows, c.at.RecordCols()), dq: NewMat(c.q.Rows, c.q.Cols), dDst: NewMat(c.a.Rows, c.at.Heads)}
	for _, m := range []*Mat{r.stats, r.out, r.rec, r.dq, r.dDst} {
		fillNaN(m) // every value must be written
	}
	if stored {
		r.alpha = NewMat(nnz, c.at.Heads)
		fillNaN(r.alpha)
	}
	p.AttentionForward(&c.at, c.a, c.q, c.t, r.stats, r.alpha, r.out, train)
	p.AttentionBackward(&c.at, c.a, c.e, c.q, c.t, r.stats, r.alpha, c.dOut, r.rec, r.dq, r.dDst, train)
	return r
}

func (r *attentionResult) same(t *testing.T, what string, want *attentionResult) {
	t.Helper()
	sameBits(t, what+" stats", r.stats.Data, want.stats.Data)
	sameBits(t, what+" out", r.out.Data, want.out.Data)
	sameBits(t, what+" dq", r.dq.Data, want.dq.Data)
	sameBits(t, what+" d(dst)", r.dDst.Data, want.dDst.Data)
	sameBits(t, what+" record", r.rec.Data, want.rec.Data)
	if r.alpha != nil && want.alpha != nil {
		sameBits(t, what+" alpha", r.alpha.Data, want.alpha.Data)
	}
}

// The C loops give their Go twins' bits, for both ISAs, stored and
// recomputed coefficients, with and without dropout; recomputation gives
// the stored run's bits, and so does any thread count.
func TestAttentionCEqualsGo(t *testing.T) {
	rng := newRNG(41)
	simdVariants(t, func(t *testing.T) {
		p1, p3 := NewCPU(1), NewCPU(3)
		defer p1.Close()
		defer p3.Close()
		for _, s := range attentionShapes {
			for _, drop := range []float32{0, 0.4} {
				c := newAttentionCase(rng, s.heads, s.width, s.mean, drop)
				name := fmt.Sprintf("heads %d width %d mean %v dropout %v", s.heads, s.width, s.mean, drop)
				want := c.run(p1, true, true)
				var twin *attentionResult
				goTwin(func() { twin = c.run(p1, true, true) })
				want.same(t, name+": Go twin", twin)
				goTwin(func() { twin = c.run(p1, false, true) })
				want.same(t, name+": Go twin recomputed", twin)
				c.run(p1, false, true).same(t, name+": recomputed", want)
				c.run(p3, true, true).same(t, name+": 3 threads", want)
				c.run(p3, false, true).same(t, name+": 3 threads recomputed", want)
			}
		}
	})
}

// naiveAttention is the forward in float64, straight from the definition.
func naiveAttention(c *attentionCase, train bool) []float64 {
	at, a, q := &c.at, c.a, c.q
	H, W, qc := at.Heads, at.Width, q.Cols
	task := attentionTask{at: at, drop: train && at.Dropout > 0}
	if task.drop {
		task.scale, task.thr = DropoutParams(at.Dropout, a.Rows, nil)
		task.key = rng.Mix64(at.Seed)
	}
	out := make([]float64, a.Rows*at.OutCols())
	for i := 0; i < a.Rows; i++ {
		for h := 0; h < H; h++ {
			k0, k1 := a.Ptr[i], a.Ptr[i+1]
			e := make([]float64, k1-k0)
			m := math.Inf(-1)
			for k := k0; k < k1; k++ {
				z := float64(c.t.Data[i*H+h]) + float64(q.Data[int(a.Col[k])*qc+H*W+h])
				if z < 0 {
					z *= float64(at.Slope)
				}
				e[k-k0], m = z, math.Max(m, z)
			}
			var sum float64
			for x := range e {
				e[x] = math.Exp(e[x] - m)
				sum += e[x]
			}
			for k := k0; k < k1; k++ {
				coef := e[k-k0] / sum * float64(task.keep(i, int(k-k0), h))
				j := int(a.Col[k])
				for f := 0; f < W; f++ {
					o := i*at.OutCols() + h*W + f
					if at.Mean {
						o = i*at.OutCols() + f
					}
					v := coef * float64(q.Data[j*qc+h*W+f])
					if at.Mean {
						v /= float64(H)
					}
					out[o] += v
				}
			}
		}
	}
	return out
}

// The forward is the definition, to float32 rounding.
func TestAttentionForwardNaive(t *testing.T) {
	rng := newRNG(43)
	p := NewCPU(2)
	defer p.Close()
	for _, s := range attentionShapes {
		for _, drop := range []float32{0, 0.4} {
			c := newAttentionCase(rng, s.heads, s.width, s.mean, drop)
			r := c.run(p, false, true)
			close32(t, fmt.Sprintf("heads %d width %d mean %v dropout %v", s.heads, s.width, s.mean, drop), r.out.Data, naiveAttention(c, true), 1e-5)
		}
	}
}

// expNonPos against math.Exp over its domain, and at its edges.
func TestExpNonPos(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 0; x += 1.0 / 1024 {
		want := math.Exp(float64(x))
		worst = math.Max(worst, math.Abs(float64(expNonPos(x))-want)/want)
	}
	if worst > 3e-7 {
		t.Errorf("expNonPos: worst relative error %.3g over [-87, 0]", worst)
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {float32(math.Copysign(0, -1)), 1}, {-87.5, 0}, {float32(math.Inf(-1)), 0}, {3, 1}} {
		if got := expNonPos(c.x); got != c.want {
			t.Errorf("expNonPos(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := expNonPos(float32(math.NaN())); got == got {
		t.Errorf("expNonPos(NaN) = %v", got)
	}
}

// The attention kernels allocate nothing per call, like the others
// (TestNoAllocs).
// TestAttentionBadColumn: a source column outside q panics instead of
// reaching the C gather.
func TestAttentionBadColumn(t *testing.T) {
	c := newAttentionCase(newRNG(48), 2, 4, false, 0)
	c.a.Col[len(c.a.Col)-1] = int32(c.q.Rows)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an out-of-range column")
		}
	}()
	c.run(NewCPU(1), true, false)
}

func TestAttentionNoAllocs(t *testing.T) {
	rng := newRNG(47)
	p := NewCPU(4)
	defer p.Close()
	c := newAttentionCase(rng, 8, 8, false, 0.3)
	r := c.run(p, true, true)
	pm := randMat(rng, c.q.Rows, c.at.Heads*c.at.Width)
	aSrc, aDst := randMat(rng, c.at.Heads, c.at.Width), randMat(rng, c.at.Heads, c.at.Width)
	daSrc, daDst, dP := NewMat(c.at.Heads, c.at.Width), NewMat(c.at.Heads, c.at.Width), NewMat(pm.Rows, pm.Cols)
	dst := NewMat(c.q.Rows, c.at.Heads)
	for _, k := range []struct {
		name string
		f    func()
	}{
		{"AttentionForward", func() { p.AttentionForward(&c.at, c.a, c.q, c.t, r.stats, r.alpha, r.out, true) }},
		{"AttentionForward recomputed", func() { p.AttentionForward(&c.at, c.a, c.q, c.t, r.stats, nil, r.out, true) }},
		{"AttentionBackward", func() {
			p.AttentionBackward(&c.at, c.a, c.e, c.q, c.t, r.stats, r.alpha, c.dOut, r.rec, r.dq, r.dDst, true)
		}},
		{"AttentionTerms", func() { p.AttentionTerms(&c.at, pm, aSrc, aDst, r.dq, dst) }},
		{"AttentionTermsBackward", func() { p.AttentionTermsBackward(&c.at, pm, aSrc, aDst, r.dq, dst, dP, daSrc, daDst) }},
		{"ELU", func() { p.ELU(pm, dP) }},
		{"ELUBackward", func() { p.ELUBackward(dP, pm, pm) }},
	} {
		if allocs := testing.AllocsPerRun(20, k.f); allocs != 0 {
			t.Errorf("%s: %v allocations per call", k.name, allocs)
		}
	}
}
