package gnn

import (
	"fmt"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestCoraGATSetting trains the GAT paper's Cora setting (8 heads of 8 in
// the hidden layer, one output head, dropout 0.6 on the inputs and on the
// coefficients, lr 0.005, weight decay 5e-4, row-normalised features) on
// the public split for 300 epochs over 10 seeds and holds the mean test
// accuracy at the best validation accuracy to at least 82.0% (the paper
// reports 83.0 +- 0.7 with early stopping).
func TestCoraGATSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 10 models; skipped with -short")
	}
	ds := coraNormalized(t)
	dev := kernels.NewCPU(0)
	defer dev.Close()
	cfg := DefaultTrainConfig()
	cfg.Epochs, cfg.LR, cfg.WeightDecay = 300, 0.005, 5e-4
	const seeds = 10
	mean, sd := meanTestAtBestVal(t, dev, ds, seeds, cfg, func(seed uint64) ModelConfig {
		return ModelConfig{Model: "gat", Layers: 2, Hidden: 8, Heads: 8, OutHeads: 1, InDim: ds.NumFeatures,
			Classes: ds.NumClasses, Dropout: 0.6, AttnDropout: 0.6, Seed: seed}
	})
	t.Logf("gat on cora/public: mean test accuracy at best validation over %d seeds: %.4f (sd %.4f)", seeds, mean, sd)
	if mean < 0.82 {
		t.Errorf("gat on cora/public: mean test accuracy %.4f below 0.820", mean)
	}
}

// TestDistributedGATEqualsSingle: with full communication, GAT (two heads
// concatenated, two averaged, input and coefficient dropout) on Q goroutine
// ranks equals one process within the distributed tolerance, random and
// METIS parts, and every layer's exchange carries each halo row's projected
// features and source terms once each way.
func TestDistributedGATEqualsSingle(t *testing.T) {
	epochs := 30
	if testing.Short() {
		epochs = 8
	}
	ds := coraNormalized(t)
	split := ds.SplitNames()[0]
	mc := ModelConfig{Model: "gat", Layers: 3, Hidden: 8, Heads: 2, OutHeads: 2, InDim: ds.NumFeatures, Classes: ds.NumClasses,
		Dropout: 0.2, AttnDropout: 0.2, Seed: 4}
	want := runSingle(t, ds, split, mc, epochs)
	for _, method := range []string{"random", "metis"} {
		for _, q := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("%s/Q%d", method, q), func(t *testing.T) {
				parts := partitionBy(t, ds, split, method, q)
				got := runRanks(t, ds, split, parts, q, mc, epochs, nil)
				sameTraining(t, got, want, q)
				last := got[epochs-1]
				rows := haloRows(t, ds, split, parts, q)
				for l := 0; l < mc.Layers; l++ {
					h, w := mc.gatHeads(l)
					wantBytes := rows * int64(h*w+h) * 4
					if last.BytesFwdLayer[l] != wantBytes || last.BytesBwdLayer[l] != wantBytes {
						t.Errorf("layer %d: counted %d/%d bytes fwd/bwd, analytic %d", l, last.BytesFwdLayer[l], last.BytesBwdLayer[l], wantBytes)
					}
				}
			})
		}
	}
}

// TestGATRecomputeSameBits: recomputing the coefficients in the backward
// pass trains to the same bits as keeping them, with coefficient dropout.
func TestGATRecomputeSameBits(t *testing.T) {
	ds := randomDataset(t, 60, 6, 4, 2)
	view, err := SingleProcess(ds, "s", "gat")
	if err != nil {
		t.Fatal(err)
	}
	var losses [2][]float64
	for i, recompute := range []bool{false, true} {
		dev := kernels.NewCPU(2)
		defer dev.Close()
		m, err := NewModel(ModelConfig{Model: "gat", Layers: 2, Hidden: 4, Heads: 3, OutHeads: 2, InDim: 6, Classes: 4,
			Dropout: 0.3, AttnDropout: 0.4, Seed: 1, Recompute: recompute}, view, dev)
		if err != nil {
			t.Fatal(err)
		}
		if recompute != (m.gat.layers[0].alpha == nil) {
			t.Fatalf("recompute %v: the layers keep their coefficients: %v", recompute, m.gat.layers[0].alpha != nil)
		}
		cfg := DefaultTrainConfig()
		cfg.Epochs = 10
		tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(func(e *metrics.Epoch) error { losses[i] = append(losses[i], e.Loss); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for e := range losses[0] {
		if losses[0][e] != losses[1][e] {
			t.Fatalf("epoch %d: loss %v kept, %v recomputed", e, losses[0][e], losses[1][e])
		}
	}
}
