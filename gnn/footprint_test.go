package gnn

import (
	"runtime"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestFootprint holds Footprint to the bytes that NewModel, NewTrainer and
// two epochs of training on 2 goroutine ranks allocate: from 3% below (the
// trainer's own small state and the metrics, which it leaves out) to 15%
// above.
func TestFootprint(t *testing.T) {
	ds, err := gen.Generate(gen.Options{Nodes: 3000, Classes: 5, AvgDegree: 10, Homophily: 0.7, Features: 48, SNR: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]int32, ds.Graph.N)
	for i := range parts {
		parts[i] = int32(i % 2)
	}
	for _, c := range []struct {
		model   string
		hidden  int
		dropout float32
		cache   bool // --cache-input
	}{
		{"sage", 64, 0, false}, {"sage", 64, 0, true}, {"sage", 64, 0.5, false}, {"sage", 16, 0, false}, {"sage", 16, 0, true},
		{"gcn", 64, 0, true}, {"gcn", 16, 0.5, true}, {"gat", 8, 0, true}, {"gat", 16, 0.5, false},
	} {
		shards, err := partition.BuildShards(ds, "random", parts, 2)
		if err != nil {
			t.Fatal(err)
		}
		comms := comm.NewLocal(2)
		views := make([]*View, 2)
		devs := make([]*kernels.CPU, 2)
		for r := range views {
			if views[r], err = FromShard(shards[r], c.model); err != nil {
				t.Fatal(err)
			}
			devs[r] = kernels.NewCPU(1)
			defer devs[r].Close()
		}
		mc := ModelConfig{Model: c.model, Layers: 3, Hidden: c.hidden, InDim: ds.NumFeatures, Classes: ds.NumClasses, Dropout: c.dropout, Seed: 1}
		if c.model == "gat" {
			mc.Heads, mc.OutHeads, mc.AttnDropout = 4, 2, c.dropout
		}
		var est float64
		for _, v := range views {
			est += Footprint(mc, v.NumOwned, v.NumHalo, v.Plan.SendRows(), int(v.Adj.Ptr[v.NumOwned]), true, false, false, c.cache)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		trainers := make([]*Trainer, 2)
		for r, v := range views {
			m, err := NewModel(mc, v, devs[r])
			if err != nil {
				t.Fatal(err)
			}
			x, err := halo.NewHost(v.Plan, comms[r], mc.Layers)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultTrainConfig()
			cfg.Epochs = 2
			cc := fullComm()
			cc.CacheInput = c.cache
			if trainers[r], err = NewTrainer(m, cfg, cc, x, HostReducer(comms[r])); err != nil {
				t.Fatal(err)
			}
		}
		errs, _ := runAll(trainers, comms)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		got := float64(after.TotalAlloc - before.TotalAlloc)
		t.Logf("%s hidden %d dropout %v cache-input %v: estimate %.0f bytes, allocated %.0f (%.3f)", c.model, c.hidden, c.dropout, c.cache, est, got, est/got)
		if est < 0.97*got || est > 1.15*got {
			t.Errorf("%s hidden %d dropout %v cache-input %v: estimate %.0f bytes, but %.0f were allocated", c.model, c.hidden, c.dropout, c.cache, est, got)
		}
	}
}
