package gnn

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Predictions is one rank's share of a forward pass at full precision over
// the whole graph: a row for every node it owns.
type Predictions struct {
	// IDs are the rows' node ids (the dataset's).
	IDs []int32
	// Logits are the output scores, Classes per row; Embeddings, where
	// asked for, the output of one hidden layer, EmbedCols per row.
	Logits     []float32
	Classes    int
	Embeddings []float32
	EmbedCols  int
	// Train, Val and Test are the accuracies over all ranks, counted as the
	// trainer counts them (the first highest score is the prediction).
	Train, Val, Test float64
}

// Predict runs one forward pass with the model's current parameters at
// full precision (raw exchanges, no dropout) and returns this rank's rows:
// the logits and, for embed >= 0, the output of layer embed (after its
// activation), which must be a hidden layer. On a host device they are the
// model's own matrices, valid until its next pass. Every rank calls it.
func (t *Trainer) Predict(embed int) (*Predictions, error) {
	m := t.Model
	if last := m.Config.Layers - 1; embed >= last {
		return nil, fmt.Errorf("embeddings: layer %d is not a hidden layer of a %d-layer model (expected 0 to %d)", embed, m.Config.Layers, last-1)
	}
	if err := t.exchangeAs(t.raw, t.raw, false); err != nil {
		return nil, err
	}
	m.first.forgetPassState()
	if t.Halo != nil {
		t.Halo.Meter().Reset()
	}
	r, err := t.exactPass(nil)
	if err != nil {
		return nil, err
	}
	m.first.forgetPassState()
	p := &Predictions{IDs: m.view.GlobalIDs[:m.view.NumOwned], Classes: r.logits.Cols, Train: r.train, Val: r.val, Test: r.test}
	p.Logits = m.hostRows(r.logits)
	if embed >= 0 {
		y := m.layerOutput(embed)
		p.Embeddings, p.EmbedCols = m.hostRows(y), y.Cols
	}
	return p, nil
}

// hostRows is y's values in host memory: y's own on a host device (the
// caller may change them: the model computes them anew), else a copy.
func (m *Model) hostRows(y *kernels.Mat) []float32 {
	if m.dev.Host() && y.Cols*y.Rows == len(y.Data) {
		return y.Data
	}
	out := make([]float32, y.Len())
	m.dev.Download(out, y)
	return out
}

// layerOutput is layer l's output after the last forward pass (owned rows,
// after the activation of a hidden layer).
func (m *Model) layerOutput(l int) *kernels.Mat {
	if m.gat != nil {
		return m.gat.layers[l].y
	}
	return m.layers[l].y
}

// UseKept loads the kept parameters of the best epoch by criterion ("acc"
// or "auc") into the model, replacing its own, and returns that epoch.
func (t *Trainer) UseKept(criterion string) (int, error) {
	for _, k := range t.best.sets {
		if k.criterion != criterion {
			continue
		}
		if k.epoch < 0 {
			break
		}
		for i, p := range t.Model.Params {
			t.Model.dev.Copy(p.w, k.w[i])
		}
		t.Model.first.forgetPassState()
		return k.epoch, nil
	}
	return 0, fmt.Errorf("no best %s epoch is kept: no epoch was evaluated", criterion)
}

// Predicted is the class of every row of logits (classes per row): the
// first of its highest scores, as the trainer counts them.
func Predicted(logits []float32, classes int) []int32 {
	out := make([]int32, len(logits)/classes)
	for i := range out {
		x := logits[i*classes : (i+1)*classes]
		best := 0
		for j := 1; j < len(x); j++ {
			if x[j] > x[best] {
				best = j
			}
		}
		out[i] = int32(best)
	}
	return out
}

// Softmax turns every row of logits (classes per row) into probabilities,
// in place, computed in float64 from the row's largest score.
func Softmax(logits []float32, classes int) {
	for i := 0; i+classes <= len(logits); i += classes {
		x := logits[i : i+classes]
		hi := math.Inf(-1)
		for _, v := range x {
			hi = math.Max(hi, float64(v))
		}
		var sum float64
		for _, v := range x {
			sum += math.Exp(float64(v) - hi)
		}
		for j, v := range x {
			x[j] = float32(math.Exp(float64(v)-hi) / sum)
		}
	}
}
