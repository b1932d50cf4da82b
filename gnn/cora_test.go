package gnn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// sharedData returns ../shared/data/<name> or skips the test where the
// shared datasets are absent (as in a user's clone).
func sharedData(t testing.TB, name string) string {
	dir := filepath.Join("..", "..", "shared", "data", name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not found: the shared datasets live beside the repository in ../shared/data", dir)
	}
	return dir
}

// TestCoraKipfSetting trains Kipf & Welling's setting (2 layers, hidden 16,
// dropout 0.5, lr 0.01, weight decay 5e-4, 200 epochs, row-normalised
// features) on Cora's public split over 10 seeds and holds the mean test
// accuracy at the best validation accuracy to the published level: GCN at
// least 80.5%, GraphSAGE at least 79%.
func TestCoraKipfSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 20 models; skipped with -short")
	}
	ds, err := ogb.Load(sharedData(t, "cora"), ogb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds.NormalizeFeatureRows()
	dev := kernels.NewCPU(0)
	defer dev.Close()
	for _, c := range []struct {
		model string
		min   float64
	}{{"gcn", 0.805}, {"sage", 0.79}} {
		local, err := SingleProcess(ds, "public", c.model)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		const seeds = 10
		for seed := uint64(0); seed < seeds; seed++ {
			m, err := NewModel(ModelConfig{Model: c.model, Layers: 2, Hidden: 16, InDim: ds.NumFeatures,
				Classes: ds.NumClasses, Dropout: 0.5, Seed: seed}, local, dev)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultTrainConfig()
			cfg.Epochs, cfg.WeightDecay = 200, 5e-4
			tr, err := NewTrainer(m, cfg, DefaultCompressConfig(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := tr.Run(nil)
			if err != nil {
				t.Fatal(err)
			}
			sum += s.TestAtBestVal
		}
		mean := sum / seeds
		t.Logf("%s on cora/public: mean test accuracy at best validation over %d seeds: %.4f", c.model, seeds, mean)
		if mean < c.min {
			t.Errorf("%s on cora/public: mean test accuracy %.4f below %.3f", c.model, mean, c.min)
		}
	}
}
