package gnn

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
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
	ds := coraNormalized(t)
	dev := kernels.NewCPU(0)
	defer dev.Close()
	for _, c := range []struct {
		model string
		min   float64
	}{{"gcn", 0.805}, {"sage", 0.79}} {
		cfg := DefaultTrainConfig()
		cfg.Epochs, cfg.WeightDecay = 200, 5e-4
		const seeds = 10
		mean, _ := meanTestAtBestVal(t, dev, ds, seeds, cfg, func(seed uint64) ModelConfig {
			return ModelConfig{Model: c.model, Layers: 2, Hidden: 16, InDim: ds.NumFeatures,
				Classes: ds.NumClasses, Dropout: 0.5, Seed: seed}
		})
		t.Logf("%s on cora/public: mean test accuracy at best validation over %d seeds: %.4f", c.model, seeds, mean)
		if mean < c.min {
			t.Errorf("%s on cora/public: mean test accuracy %.4f below %.3f", c.model, mean, c.min)
		}
	}
}

// coraNormalized is the shared Cora with row-normalised features.
func coraNormalized(t *testing.T) *data.Dataset {
	ds, err := ogb.Load(sharedData(t, "cora"), ogb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds.NormalizeFeatureRows()
	return ds
}

// meanTestAtBestVal trains the model mc gives for seeds 0..seeds-1 on the
// public split with cfg, one process, and returns the mean and standard
// deviation of the test accuracy at the best validation accuracy.
func meanTestAtBestVal(t *testing.T, dev kernels.Device, ds *data.Dataset, seeds int, cfg TrainConfig, mc func(seed uint64) ModelConfig) (mean, sd float64) {
	t.Helper()
	local, err := SingleProcess(ds, "public", mc(0).Model)
	if err != nil {
		t.Fatal(err)
	}
	var sum, sumSq float64
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		m, err := NewModel(mc(seed), local, dev)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tr.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		sum += s.TestAtBestVal
		sumSq += s.TestAtBestVal * s.TestAtBestVal
	}
	mean = sum / float64(seeds)
	return mean, math.Sqrt(max(0, sumSq/float64(seeds)-mean*mean))
}
