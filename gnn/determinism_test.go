package gnn

import (
	"reflect"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// trainSingle trains mc on ds's split "s" in one process on dev for the
// given epochs and returns every epoch's metrics without their times;
// after, if set, runs after each epoch with the model.
func trainSingle(t *testing.T, ds *data.Dataset, mc ModelConfig, dev kernels.Device, epochs int, after func(*Model)) []metrics.Epoch {
	t.Helper()
	local, err := SingleProcess(ds, "s", "sage")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(mc, local, dev)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultTrainConfig()
	cfg.Epochs = epochs
	tr, err := NewTrainer(m, cfg, fullComm(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []metrics.Epoch
	if _, err := tr.Run(func(s *metrics.Epoch) error {
		s.ClearTimes()
		out = append(out, *s)
		if after != nil {
			after(m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeterministic holds that a seed fixes a run bit for bit, whatever the
// number of kernel threads, and that another seed gives another run.
func TestDeterministic(t *testing.T) {
	ds := randomDataset(t, 300, 12, 5, 1)
	run := func(threads int, seed uint64) []metrics.Epoch {
		dev := kernels.NewCPU(threads)
		defer dev.Close()
		mc := ModelConfig{Model: "sage", Layers: 3, Hidden: 16, InDim: 12, Classes: 5, Dropout: 0.3, Seed: seed}
		return trainSingle(t, ds, mc, dev, 10, nil)
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

// TestFirstAggregationOnce: in a run of one rank without dropout the first
// layer aggregates its input once; every epoch's metrics equal, bit for bit,
// those of a run that aggregates it anew every epoch. Its hidden layers stay
// wider than the input, so that the first layer aggregates its input (and
// not its product, which changes with the weights).
func TestFirstAggregationOnce(t *testing.T) {
	ds := randomDataset(t, 300, 12, 5, 1)
	run := func(fresh bool) ([]metrics.Epoch, float64) {
		cpu := kernels.NewCPU(2)
		defer cpu.Close()
		dev := kernels.NewPhaseTimer(cpu)
		mc := ModelConfig{Model: "sage", Layers: 3, Hidden: 16, InDim: 12, Classes: 5, Seed: 3}
		out := trainSingle(t, ds, mc, dev, 8, func(m *Model) {
			if m.layers[0].projectFirst {
				t.Fatal("the first layer projects first: the test needs it to aggregate its input")
			}
			if fresh {
				m.first.ownAggregate = false
			}
		})
		return out, dev.Bytes[kernels.Aggregation]
	}
	once, onceBytes := run(false)
	fresh, freshBytes := run(true)
	for e := range once {
		if !reflect.DeepEqual(once[e], fresh[e]) {
			t.Fatalf("epoch %d: %+v aggregating once, %+v aggregating every epoch", e, once[e], fresh[e])
		}
	}
	if onceBytes >= freshBytes {
		t.Errorf("aggregation moved %.0f bytes aggregating once, %.0f aggregating every epoch", onceBytes, freshBytes)
	}
}
