//go:build !cpu

package cuda

// The attention kernels against the CPU's attention passes, terms and ELU,
// bit for bit (kernels/cuda/hosttwin holds their routines to the same bits
// on machines without a GPU).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/internal/kerneltest"
)

// unwritten fills the GPU's outputs before a call: a value no kernel
// computes, so that an element left alone differs from the CPU's.
const unwritten = -7.75e33

// upFilled is a device rows x cols matrix of v.
func upFilled(d *Device, rows, cols int, v float32) *kernels.Mat {
	h := make([]float32, rows*cols)
	for i := range h {
		h[i] = v
	}
	g := d.NewMat(rows, cols)
	d.Upload(g, h)
	return g
}

func hostFilled(rows, cols int, v float32) *kernels.Mat {
	m := kernels.NewMat(rows, cols)
	for i := range m.Data {
		m.Data[i] = v
	}
	return m
}

// attentionBoth runs a case's forward and backward on the CPU and the GPU
// and compares everything they write.
func attentionBoth(t *testing.T, d *Device, what string, c *kerneltest.AttentionCase, stored, train bool) {
	t.Helper()
	at, a := &c.At, c.A
	nnz := int(a.Ptr[a.Rows])
	nan := float32(math.NaN())
	stats, out, rec := hostFilled(a.Rows, at.StatsCols(), nan), hostFilled(a.Rows, at.OutCols(), nan), hostFilled(a.Rows, at.RecordCols(), nan)
	dq, dDst := hostFilled(c.Q.Rows, c.Q.Cols, nan), hostFilled(a.Rows, at.Heads, nan)
	gstats, gout, grec := upFilled(d, a.Rows, at.StatsCols(), unwritten), upFilled(d, a.Rows, at.OutCols(), unwritten),
		upFilled(d, a.Rows, at.RecordCols(), unwritten)
	gdq, gdDst := upFilled(d, c.Q.Rows, c.Q.Cols, unwritten), upFilled(d, a.Rows, at.Heads, unwritten)
	var alpha, galpha *kernels.Mat
	if stored {
		alpha, galpha = hostFilled(nnz, at.Heads, nan), upFilled(d, nnz, at.Heads, unwritten)
	}
	gq, gt, gdOut := up(d, c.Q), up(d, c.T), up(d, c.DOut)

	cpu.AttentionForward(at, a, c.Q, c.T, stats, alpha, out, train)
	d.AttentionForward(at, a, gq, gt, gstats, galpha, gout, train)
	cpu.AttentionBackward(at, a, c.E, c.Q, c.T, stats, alpha, c.DOut, rec, dq, dDst, train)
	d.AttentionBackward(at, a, c.E, gq, gt, gstats, galpha, gdOut, grec, gdq, gdDst, train)
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	same(t, what+": stats", down(d, gstats), stats.Data)
	if stored {
		same(t, what+": alpha", down(d, galpha), alpha.Data)
	}
	same(t, what+": out", down(d, gout), out.Data)
	same(t, what+": record", down(d, grec), rec.Data)
	same(t, what+": d(dst)", down(d, gdDst), dDst.Data)
	same(t, what+": dq", down(d, gdq), dq.Data)
}

// Every shape of kernels' tests, stored and recomputed coefficients, with
// and without dropout and special values; then a graph past one pass of
// a launch (more rows than a grid's warps, more (row, head) pairs than its
// threads).
func TestAttention(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range kerneltest.AttentionShapes {
		for _, drop := range []float32{0, 0.4} {
			for _, special := range []bool{false, true} {
				c := kerneltest.NewAttentionCase(rng, 70, 90, s.Heads, s.Width, s.Mean, drop)
				if special {
					c.WithSpecials(rng)
				}
				for _, stored := range []bool{true, false} {
					for _, train := range []bool{true, false} {
						attentionBoth(t, d, fmt.Sprintf("heads %d width %d mean %v dropout %v specials %v stored %v train %v",
							s.Heads, s.Width, s.Mean, drop, special, stored, train), c, stored, train)
					}
				}
			}
		}
	}
	threads, warps, _ := d.GridPass()
	rows := max(warps+1000, threads/3+7)
	c := kerneltest.NewAttentionCase(rng, rows, rows/2, 3, 5, false, 0.4)
	attentionBoth(t, d, "past a grid's pass", c, true, true)
	attentionBoth(t, d, "past a grid's pass, recomputed", c, false, true)
}

func TestAttentionTerms(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(17, 18))
	threads, _, _ := d.GridPass()
	for _, s := range [][3]int{{0, 1, 1}, {1, 1, 1}, {70, 3, 5}, {70, 16, 9}, {3001, 4, 6}, {2, 8, 5000}, {threads/4 + 3, 2, 3}} {
		rows, heads, width := s[0], s[1], s[2]
		at := &kernels.Attention{Heads: heads, Width: width}
		hw := heads * width
		what := fmt.Sprintf("rows %d heads %d width %d", rows, heads, width)
		P, aSrc, aDst := randMat(rng, rows, hw), randMat(rng, heads, width), randMat(rng, heads, width)
		gP, gaSrc, gaDst := up(d, P), up(d, aSrc), up(d, aDst)

		q, tt := kernels.NewMat(rows, at.SourceCols()), kernels.NewMat(rows, heads)
		gq, gt := upFilled(d, rows, at.SourceCols(), unwritten), upFilled(d, rows, heads, unwritten)
		cpu.AttentionTerms(at, P, aSrc, aDst, q, tt)
		d.AttentionTerms(at, gP, gaSrc, gaDst, gq, gt)
		same(t, "AttentionTerms q "+what, down(d, gq), q.Data)
		same(t, "AttentionTerms t "+what, down(d, gt), tt.Data)

		dq, dt := randMat(rng, rows, at.SourceCols()), randMat(rng, rows, heads)
		dP, daSrc, daDst := kernels.NewMat(rows, hw), kernels.NewMat(heads, width), kernels.NewMat(heads, width)
		gdP, gdaSrc, gdaDst := upFilled(d, rows, hw, unwritten), upFilled(d, heads, width, unwritten), upFilled(d, heads, width, unwritten)
		cpu.AttentionTermsBackward(at, P, aSrc, aDst, dq, dt, dP, daSrc, daDst)
		d.AttentionTermsBackward(at, gP, gaSrc, gaDst, up(d, dq), up(d, dt), gdP, gdaSrc, gdaDst)
		same(t, "AttentionTermsBackward dP "+what, down(d, gdP), dP.Data)
		same(t, "AttentionTermsBackward daSrc "+what, down(d, gdaSrc), daSrc.Data)
		same(t, "AttentionTermsBackward daDst "+what, down(d, gdaDst), daDst.Data)
	}
}

// ELU on a million bit patterns spread over all 2^32, the specials and
// [-2, 0] in steps of 2^-16; the backward from its outputs and from any
// value.
func TestELU(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(19, 20))
	x := append([]float32(nil), specials...)
	for u := uint64(0); u < 1<<32; u += 4099 {
		x = append(x, math.Float32frombits(uint32(u)))
	}
	for v := float32(-2); v <= 0; v += 1.0 / 65536 {
		x = append(x, v)
	}
	xm := &kernels.Mat{Rows: 1, Cols: len(x), Data: x}
	y, gy := kernels.NewMat(1, len(x)), d.NewMat(1, len(x))
	cpu.ELU(xm, y)
	d.ELU(up(d, xm), gy)
	same(t, "ELU", down(d, gy), y.Data)

	dy := randMat(rng, 1, len(x))
	for i := range dy.Data {
		if rng.IntN(3) == 0 {
			dy.Data[i] = specials[rng.IntN(len(specials))]
		}
	}
	gdy := up(d, dy)
	for _, in := range []*kernels.Mat{y, xm} {
		dx, gdx := kernels.NewMat(1, len(x)), d.NewMat(1, len(x))
		cpu.ELUBackward(in, dy, dx)
		d.ELUBackward(up(d, in), gdy, gdx)
		same(t, "ELUBackward", down(d, gdx), dx.Data)
	}
}
