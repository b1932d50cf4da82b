package gnn

import (
	"reflect"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

func TestParamShapes(t *testing.T) {
	ds := randomDataset(t, 50, 6, 3, 1)
	for _, model := range []string{"sage", "gcn", "gat"} {
		local, err := SingleProcess(ds, "s", model)
		if err != nil {
			t.Fatal(err)
		}
		dev := kernels.NewCPU(1)
		cfg := ModelConfig{Model: model, Layers: 3, Hidden: 4, InDim: 6, Classes: 3}
		if model == "gat" {
			cfg.Heads, cfg.OutHeads = 3, 2
		}
		m, err := NewModel(cfg, local, dev)
		dev.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []ParamShape
		for _, p := range m.Params {
			got = append(got, ParamShape{p.Name, p.Rows, p.Cols})
		}
		if want := cfg.ParamShapes(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: model has %v, ParamShapes gives %v", model, got, want)
		}
	}
}

// TestResume: a trainer given another's parameters, moments and history
// after 4 epochs continues exactly as the uninterrupted run (with dropout,
// whose masks are drawn per epoch; GAT also with coefficient dropout).
func TestResume(t *testing.T) {
	for _, mc := range []ModelConfig{
		{Model: "sage", Layers: 2, Hidden: 8, InDim: 12, Classes: 5, Dropout: 0.3, Seed: 4},
		{Model: "gat", Layers: 2, Hidden: 4, Heads: 3, OutHeads: 2, InDim: 12, Classes: 5, Dropout: 0.3, AttnDropout: 0.3, Seed: 4},
	} {
		t.Run(mc.Model, func(t *testing.T) { testResume(t, mc) })
	}
}

func testResume(t *testing.T, mc ModelConfig) {
	ds := randomDataset(t, 300, 12, 5, 2)
	newTrainer := func() *Trainer {
		local, err := SingleProcess(ds, "s", mc.Model)
		if err != nil {
			t.Fatal(err)
		}
		dev := kernels.NewCPU(1)
		t.Cleanup(dev.Close)
		m, err := NewModel(mc, local, dev)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultTrainConfig()
		cfg.Epochs = 8
		tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	var all []metrics.Epoch
	keep := func(s *metrics.Epoch) error {
		s.ClearTimes()
		all = append(all, *s)
		return nil
	}
	want, err := newTrainer().Run(keep)
	if err != nil {
		t.Fatal(err)
	}
	first := newTrainer()
	for e := range 4 {
		if _, err := first.Epoch(e, 0); err != nil {
			t.Fatal(err)
		}
	}
	resumed := newTrainer()
	for i, p := range resumed.Model.Params {
		q := first.Model.Params[i]
		copy(p.W, q.W)
		copy(p.M, q.M)
		copy(p.V, q.V)
	}
	if err := resumed.Resume(first.Step(), all[:4]); err != nil {
		t.Fatal(err)
	}
	uninterrupted := all
	all = nil
	got, err := resumed.Run(keep)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, uninterrupted[4:]) {
		t.Errorf("resumed epochs differ:\n%+v\nuninterrupted:\n%+v", all, uninterrupted[4:])
	}
	got.Seconds, want.Seconds = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resumed summary %+v, uninterrupted %+v", got, want)
	}
}
