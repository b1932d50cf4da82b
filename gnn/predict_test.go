package gnn

import (
	"math"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestPredictEmbeddings: Predict's logits and hidden-layer outputs are, bit
// for bit, what a training forward pass without dropout computes with the
// same parameters, for GraphSAGE, GCN and GAT; its accuracies are the
// trainer's counts; and a layer that is not hidden is refused.
func TestPredictEmbeddings(t *testing.T) {
	ds := randomDataset(t, 300, 12, 5, 1)
	for _, mc := range []ModelConfig{
		{Model: "sage", Layers: 3, Hidden: 16, InDim: 12, Classes: 5, Seed: 3},
		{Model: "gcn", Layers: 3, Hidden: 8, InDim: 12, Classes: 5, Seed: 3},
		{Model: "gat", Layers: 3, Hidden: 4, Heads: 2, OutHeads: 1, InDim: 12, Classes: 5, Seed: 3},
	} {
		t.Run(mc.Model, func(t *testing.T) {
			local, err := SingleProcess(ds, "s", mc.Model)
			if err != nil {
				t.Fatal(err)
			}
			dev := kernels.NewCPU(2)
			defer dev.Close()
			m, err := NewModel(mc, local, dev)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultTrainConfig()
			cfg.Epochs = 3
			tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := tr.Run(nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := tr.Predict(1)
			if err != nil {
				t.Fatal(err)
			}
			// On the CPU the predictions are the model's own rows: keep them.
			predLogits, predEmb := slices.Clone(p.Logits), slices.Clone(p.Embeddings)
			if p.Val != sum.FinalValAcc || p.Test != sum.FinalTestAcc {
				t.Errorf("predicted val %v test %v, the run's final parameters %v %v", p.Val, p.Test, sum.FinalValAcc, sum.FinalTestAcc)
			}
			logits, err := m.Forward(nil, Pass{Train: true, Epoch: 9})
			if err != nil {
				t.Fatal(err)
			}
			for name, c := range map[string][2][]float32{
				"logits":    {predLogits, logits.Data},
				"layer 1's": {predEmb, m.layerOutput(1).Data},
			} {
				if len(c[0]) != len(c[1]) {
					t.Fatalf("%s: %d values predicted, %d in the training pass", name, len(c[0]), len(c[1]))
				}
				for i := range c[0] {
					if math.Float32bits(c[0][i]) != math.Float32bits(c[1][i]) {
						t.Fatalf("%s value %d: %v predicted, %v in the training pass", name, i, c[0][i], c[1][i])
					}
				}
			}
			if _, err := tr.Predict(2); err == nil {
				t.Error("the output layer was accepted as a hidden layer")
			}
		})
	}
}

// TestPredicted: the class is the first highest score, as the trainer
// counts it; probabilities sum to one.
func TestPredicted(t *testing.T) {
	logits := []float32{1, 3, 3, -1, float32(math.Inf(-1)), 0, 2, 2, 2}
	if got := Predicted(logits, 3); got[0] != 1 || got[1] != 2 || got[2] != 0 {
		t.Errorf("Predicted = %v, want [1 2 0]", got)
	}
	Softmax(logits, 3)
	for r := range 3 {
		var s float64
		for _, v := range logits[3*r : 3*r+3] {
			s += float64(v)
		}
		if math.Abs(s-1) > 1e-6 {
			t.Errorf("row %d sums to %v", r, s)
		}
	}
}
