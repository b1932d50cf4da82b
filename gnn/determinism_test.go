package gnn

import (
	"reflect"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestDeterministic holds that a seed fixes a run bit for bit, whatever the
// number of kernel threads, and that another seed gives another run.
func TestDeterministic(t *testing.T) {
	ds := randomDataset(t, 300, 12, 5, 1)
	run := func(threads int, seed uint64) []metrics.Epoch {
		local, err := SingleProcess(ds, "s", "sage")
		if err != nil {
			t.Fatal(err)
		}
		dev := kernels.NewCPU(threads)
		defer dev.Close()
		m, err := NewModel(ModelConfig{Model: "sage", Layers: 3, Hidden: 16, InDim: 12, Classes: 5, Dropout: 0.3, Seed: seed}, local, dev)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultTrainConfig()
		cfg.Epochs = 10
		tr, err := NewTrainer(m, cfg, DefaultCompressConfig(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []metrics.Epoch
		if _, err := tr.Run(func(s *metrics.Epoch) error {
			s.ClearTimes()
			out = append(out, *s)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b, c := run(1, 7), run(4, 7), run(2, 8)
	for e := range a {
		if !reflect.DeepEqual(a[e], b[e]) {
			t.Fatalf("epoch %d differs between 1 and 4 threads: %+v vs %+v", e, a[e], b[e])
		}
	}
	if a[len(a)-1].Loss == c[len(c)-1].Loss {
		t.Errorf("seeds 7 and 8 gave the same final loss %v", a[len(a)-1].Loss)
	}
}
