package kernels

import (
	"fmt"
	"math"
)

type sceTask struct {
	logits, dlogits *Mat
	labels, rows    []int32
	scale           float64
	part            []float64 // loss sum of block b
	nb              int
}

// SoftmaxCrossEntropy: see the Device contract. The listed rows are cut
// into size-only blocks whose loss sums are added in block order, so the
// result does not depend on the thread count. rows must not repeat.
func (p *CPU) SoftmaxCrossEntropy(logits *Mat, labels []int32, rows []int32, scale float32, dlogits *Mat) float64 {
	sameShape("SoftmaxCrossEntropy", logits, dlogits)
	if len(labels) != logits.Rows {
		panic(fmt.Sprintf("kernels: SoftmaxCrossEntropy: %d labels for %d rows", len(labels), logits.Rows))
	}
	p.zeroSlice(dlogits.Data[:dlogits.Len()])
	if len(rows) == 0 {
		return 0
	}
	if logits.Cols == 0 {
		panic("kernels: SoftmaxCrossEntropy: no classes")
	}
	t := &p.sce
	t.logits, t.dlogits, t.labels, t.rows, t.scale = logits, dlogits, labels, rows, float64(scale)
	t.nb = blocks(len(rows) * logits.Cols)
	t.part = grow(t.part, t.nb)
	p.run(t, t.nb)
	var loss float64
	for _, s := range t.part {
		loss += s
	}
	t.logits, t.dlogits, t.labels, t.rows = nil, nil, nil, nil
	return loss
}

func (t *sceTask) do(c int) {
	lo, hi := span(len(t.rows), t.nb, c)
	f := t.logits.Cols
	var loss float64
	for _, i := range t.rows[lo:hi] {
		x := t.logits.Data[int(i)*f : int(i)*f+f]
		d := t.dlogits.Data[int(i)*f : int(i)*f+f]
		d = d[:len(x)]
		mx := x[0]
		for _, v := range x[1:] {
			if v > mx {
				mx = v
			}
		}
		var s float64
		for j, v := range x {
			e := math.Exp(float64(v) - float64(mx))
			d[j] = float32(e)
			s += e
		}
		label := t.labels[i]
		loss += math.Log(s) - (float64(x[label]) - float64(mx))
		k := t.scale / s
		for j := range d {
			d[j] = float32(float64(d[j]) * k)
		}
		d[label] = float32(float64(d[label]) - t.scale)
	}
	t.part[c] = loss
}

type correctTask struct {
	logits       *Mat
	labels, rows []int32
	part         []int
	nb           int
}

// CountCorrect: see the Device contract.
func (p *CPU) CountCorrect(logits *Mat, labels []int32, rows []int32) int {
	checkMat("CountCorrect", logits)
	if len(labels) != logits.Rows {
		panic(fmt.Sprintf("kernels: CountCorrect: %d labels for %d rows", len(labels), logits.Rows))
	}
	if len(rows) == 0 {
		return 0
	}
	t := &p.correct
	t.logits, t.labels, t.rows = logits, labels, rows
	t.nb = blocks(len(rows) * logits.Cols)
	t.part = grow(t.part, t.nb)
	p.run(t, t.nb)
	n := 0
	for _, k := range t.part {
		n += k
	}
	t.logits, t.labels, t.rows = nil, nil, nil
	return n
}

func (t *correctTask) do(c int) {
	lo, hi := span(len(t.rows), t.nb, c)
	f := t.logits.Cols
	n := 0
	for _, i := range t.rows[lo:hi] {
		x := t.logits.Data[int(i)*f : int(i)*f+f]
		best := 0
		for j := 1; j < len(x); j++ {
			if x[j] > x[best] {
				best = j
			}
		}
		if int32(best) == t.labels[i] {
			n++
		}
	}
	t.part[c] = n
}

// ScoreBins is the resolution of ScoreHistogram: ROC AUC computed from it
// differs from the exact one only through pairs whose scores fall in the
// same of these bins (counted as half-correct).
const ScoreBins = 1 << 13

// ScoreHistogram adds, for the listed rows of a two-class logits matrix,
// one count to bin floor(sigmoid(logits[i][1]-logits[i][0]) * ScoreBins)
// of hist[labels[i]*ScoreBins:]. The histograms of all ranks add up, so a
// distributed job computes its ROC AUC with one all-reduce.
func (p *CPU) ScoreHistogram(logits *Mat, labels []int32, rows []int32, hist []float64) {
	checkMat("ScoreHistogram", logits)
	if logits.Cols != 2 || len(labels) != logits.Rows || len(hist) != 2*ScoreBins {
		panic(fmt.Sprintf("kernels: ScoreHistogram: %dx%d logits, %d labels, %d bins", logits.Rows, logits.Cols, len(labels), len(hist)))
	}
	for _, i := range rows {
		d := float64(logits.Data[2*i+1]) - float64(logits.Data[2*i])
		b := int(ScoreBins / (1 + math.Exp(-d)))
		b = min(max(b, 0), ScoreBins-1)
		hist[int(labels[i])*ScoreBins+b]++
	}
}

// SumSquares returns the sum of x[i]^2, accumulated in float64.
func (p *CPU) SumSquares(m *Mat) float64 {
	s := 0.0
	for _, v := range m.Data[:m.Len()] {
		s += float64(v) * float64(v)
	}
	return s
}

// AUC returns the ROC AUC of a histogram written by ScoreHistogram: the
// probability that a positive row scores above a negative one, ties
// counting one half. It is NaN when either class is absent.
func AUC(hist []float64) float64 {
	neg, pos := hist[:ScoreBins], hist[ScoreBins:]
	var below, nNeg, nPos, sum float64
	for b := range neg {
		sum += pos[b] * (below + neg[b]/2)
		below += neg[b]
		nPos += pos[b]
	}
	nNeg = below
	if nNeg == 0 || nPos == 0 {
		return math.NaN()
	}
	return sum / (nNeg * nPos)
}
