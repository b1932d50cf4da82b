package gnn

import (
	"math"
	"reflect"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// TestConfirm: a compressed run in the confirm mode trains as the other
// modes do, reports each epoch's accuracies under compression (those of
// EvalCompressed), and ends with the accuracies at full precision of the
// epoch its compressed validation score chose and of its final parameters:
// those an EvalExact run measures at that epoch, and at the epoch after the
// last in a run one epoch longer. A trainer given the run's state and kept
// parameters after its last epoch confirms the same. Two classes add the
// AUC's own best epoch.
func TestConfirm(t *testing.T) {
	for _, classes := range []int{4, 2} {
		t.Run(map[int]string{4: "four-classes", 2: "two-classes"}[classes], func(t *testing.T) { testConfirm(t, classes) })
	}
}

func testConfirm(t *testing.T, classes int) {
	const q, epochs = 2, 10
	run := func(eval compress.Eval, epochs int) ([]*Trainer, []metrics.Epoch, metrics.Summary) {
		cfg := DefaultTrainConfig()
		cfg.Epochs = epochs
		trainers, comms := rankTrainersWith(t, q, cfg, 2, classes, coarse(eval))
		errs, stats, sums := runAllSummaries(trainers, comms)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s rank %d: %v", eval, r, err)
			}
		}
		if sums[1].TestAtBestVal != sums[0].TestAtBestVal || sums[1].FinalTestAcc != sums[0].FinalTestAcc {
			t.Fatalf("%s: the ranks' summaries differ: %+v, %+v", eval, sums[0], sums[1])
		}
		return trainers, stats[0], sums[0]
	}
	_, exact, _ := run(compress.EvalExact, epochs+1)
	_, compressed, _ := run(compress.EvalCompressed, epochs)
	trainers, got, sum := run(compress.EvalConfirm, epochs)

	for e := range got {
		g, c, x := got[e], compressed[e], exact[e]
		if g.Loss != x.Loss || g.Loss != c.Loss {
			t.Fatalf("epoch %d: loss %v, exact mode's %v, compressed mode's %v: training must not depend on the mode", e, g.Loss, x.Loss, c.Loss)
		}
		if g.ValAcc != c.ValAcc || g.TestAcc != c.TestAcc || g.BytesEvalLayer[0]+g.BytesEvalLayer[1] != 0 {
			t.Fatalf("epoch %d: val %v test %v, eval bytes %v; want the compressed mode's val %v test %v and none", e, g.ValAcc, g.TestAcc, g.BytesEvalLayer, c.ValAcc, c.TestAcc)
		}
	}
	if !sum.Confirmed || sum.ConfirmBytes <= 0 {
		t.Fatalf("summary %+v: want confirmed, with the confirming passes' bytes", sum)
	}
	best := 0
	for e := range got {
		if got[e].ValAcc > got[best].ValAcc {
			best = e
		}
	}
	// The exact mode's pass and the confirming one sum in the same order
	// but not always through the same kernels (its cached input): allow a
	// node's worth.
	near := func(what string, a, b, tol float64) {
		t.Helper()
		if math.Abs(a-b) > tol {
			t.Errorf("%s: %v, the exact mode measured %v", what, a, b)
		}
	}
	tol := 1.5 / 400 // a node of the 20% of 2000 in each of valid and test
	if sum.BestEpoch != best || sum.SelectedValAcc != got[best].ValAcc {
		t.Errorf("best epoch %d chosen at %v, want %d at %v (the compressed validation accuracy)", sum.BestEpoch, sum.SelectedValAcc, best, got[best].ValAcc)
	}
	if math.Abs(got[best].ValAcc-exact[best].ValAcc) <= tol && math.Abs(got[best].TestAcc-exact[best].TestAcc) <= tol {
		t.Fatalf("epoch %d: compression moved no accuracy past %v: nothing tells the confirmed accuracies from the compressed", best, tol)
	}
	near("confirmed validation accuracy", sum.BestValAcc, exact[best].ValAcc, tol)
	near("confirmed test accuracy", sum.TestAtBestVal, exact[best].TestAcc, tol)
	near("final test accuracy", sum.FinalTestAcc, exact[epochs].TestAcc, tol)
	if classes == 2 {
		bestAUC := 0
		for e := range got {
			if *got[e].ValAUC > *got[bestAUC].ValAUC {
				bestAUC = e
			}
		}
		if sum.TestAtBestValAUC == nil || sum.SelectedValAUC == nil || *sum.SelectedValAUC != *got[bestAUC].ValAUC {
			t.Fatalf("summary %+v: want the AUC chosen at epoch %d's %v", sum, bestAUC, *got[bestAUC].ValAUC)
		}
		near("confirmed test AUC", *sum.TestAtBestValAUC, *exact[bestAUC].TestAUC, 1e-3)
	}

	// Resumed after the last epoch: the kept parameters are all there is
	// of the best epoch.
	cfg := DefaultTrainConfig()
	cfg.Epochs = epochs
	resumed, comms := rankTrainersWith(t, q, cfg, 2, classes, coarse(compress.EvalConfirm))
	for r, tr := range resumed {
		for i, p := range tr.Model.Params {
			from := trainers[r].Model.Params[i]
			copy(p.W, from.W)
			copy(p.M, from.M)
			copy(p.V, from.V)
		}
		if err := tr.Resume(trainers[r].Step(), got); err != nil {
			t.Fatal(err)
		}
		if err := tr.RestoreKept(got, trainers[r].Kept()); err != nil {
			t.Fatal(err)
		}
	}
	errs, _, sums := runAllSummaries(resumed, comms)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("resumed rank %d: %v", r, err)
		}
	}
	again := sums[0]
	again.Seconds, sum.Seconds = 0, 0
	if !reflect.DeepEqual(again, sum) {
		t.Errorf("resumed after the last epoch:\n%+v\nwant\n%+v", again, sum)
	}
	// Kept parameters that disagree with the history are refused.
	wrong := trainers[0].Kept()
	wrong[0].Epoch = (wrong[0].Epoch + 1) % epochs
	if err := resumed[0].RestoreKept(got, wrong); err == nil {
		t.Error("kept parameters of another epoch than the history's best: no error")
	}
}

// coarse is 1-bit quantization without residual coding, whose error moves
// the accuracies, in the given evaluation mode.
func coarse(eval compress.Eval) compress.Plan {
	cc := fixedRate("quant", 32)
	cc.Eval = eval
	return cc
}
