package gnn

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// rankTrainers builds q goroutine-rank trainers of a small generated graph.
func rankTrainers(t *testing.T, q int, cfg TrainConfig, layers int) ([]*Trainer, []*comm.Local) {
	t.Helper()
	return rankTrainersWith(t, q, cfg, layers, 4, fullComm())
}

// rankTrainersWith is rankTrainers for a graph of the given classes and
// with the given compression.
func rankTrainersWith(t *testing.T, q int, cfg TrainConfig, layers, classes int, cc compress.Plan) ([]*Trainer, []*comm.Local) {
	t.Helper()
	ds, err := gen.Generate(gen.Options{Nodes: 2000, Classes: classes, AvgDegree: 20, Homophily: 0.7, Features: 16, SNR: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	split := ds.SplitNames()[0]
	parts, err := partition.PartitionRandom(ds.Graph, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := partition.BuildShards(ds, split, parts, q)
	if err != nil {
		t.Fatal(err)
	}
	comms := comm.NewLocal(q)
	trainers := make([]*Trainer, q)
	for r, sh := range shards {
		local, err := FromShard(sh, "sage")
		if err != nil {
			t.Fatal(err)
		}
		dev := kernels.NewCPU(1)
		t.Cleanup(dev.Close)
		mc := ModelConfig{Model: "sage", Layers: layers, Hidden: 8, InDim: ds.NumFeatures, Classes: ds.NumClasses}
		m, err := NewModel(mc, local, dev)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := halo.NewHost(local.Plan, comms[r], layers)
		if err != nil {
			t.Fatal(err)
		}
		if trainers[r], err = NewTrainer(m, cfg, cc, ex, HostReducer(comms[r])); err != nil {
			t.Fatal(err)
		}
	}
	return trainers, comms
}

// runAll runs every trainer on its own goroutine and returns their errors
// and epochs.
func runAll(trainers []*Trainer, comms []*comm.Local) ([]error, [][]metrics.Epoch) {
	errs, stats, _ := runAllSummaries(trainers, comms)
	return errs, stats
}

// runAllSummaries is runAll with every rank's summary.
func runAllSummaries(trainers []*Trainer, comms []*comm.Local) ([]error, [][]metrics.Epoch, []metrics.Summary) {
	errs := make([]error, len(trainers))
	stats := make([][]metrics.Epoch, len(trainers))
	sums := make([]metrics.Summary, len(trainers))
	var wg sync.WaitGroup
	for r := range trainers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = trainers[r].Run(func(s *metrics.Epoch) error { stats[r] = append(stats[r], *s); return nil })
			if errs[r] != nil {
				comms[r].Fail(errs[r])
			}
		}()
	}
	wg.Wait()
	return errs, stats, sums
}

// TestStopAgreed: a stop request on one rank stops every rank after the
// same epoch, with a *StoppedError.
func TestStopAgreed(t *testing.T) {
	cfg := DefaultTrainConfig()
	cfg.Epochs = 20
	trainers, comms := rankTrainers(t, 3, cfg, 2)
	trainers[2].Stop = func(epoch int) bool { return epoch == 4 }
	errs, stats := runAll(trainers, comms)
	for r, err := range errs {
		var se *StoppedError
		if !errors.As(err, &se) || se.Epochs != 5 {
			t.Fatalf("rank %d: %v, want a stop after 5 epochs", r, err)
		}
		if len(stats[r]) != 5 || !stats[r][4].Stop || stats[r][3].Stop {
			t.Errorf("rank %d reported %d epochs, stop flags wrong", r, len(stats[r]))
		}
		if trainers[r].Step() != 5 {
			t.Errorf("rank %d took %d steps, want 5", r, trainers[r].Step())
		}
	}
	// A stop at the last epoch is a finished run.
	trainers, comms = rankTrainers(t, 2, cfg, 2)
	trainers[1].Stop = func(epoch int) bool { return epoch == cfg.Epochs-1 }
	if errs, _ := runAll(trainers, comms); errs[0] != nil || errs[1] != nil {
		t.Errorf("a stop at the last epoch: %v", errs)
	}
}

// TestDivergedKeepsState: an absurd learning rate makes the loss overflow;
// every rank returns a *DivergedError for the same epoch, before Adam's
// step, so the parameters stay finite.
func TestDivergedKeepsState(t *testing.T) {
	cfg := DefaultTrainConfig()
	cfg.Epochs, cfg.LR = 100, 1e20
	trainers, comms := rankTrainers(t, 2, cfg, 3)
	errs, _ := runAll(trainers, comms)
	var d0, d1 *DivergedError
	if !errors.As(errs[0], &d0) || !errors.As(errs[1], &d1) || d0.Epoch != d1.Epoch {
		t.Fatalf("errors %v and %v, want a *DivergedError for the same epoch on both ranks", errs[0], errs[1])
	}
	t.Log(d0)
	if trainers[0].Step() != d0.Epoch {
		t.Errorf("%d steps taken, want %d (none in the diverged epoch)", trainers[0].Step(), d0.Epoch)
	}
	for _, p := range trainers[0].Model.Params {
		for _, x := range p.W {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s holds %v after the divergence", p.Name, x)
			}
		}
	}
}
