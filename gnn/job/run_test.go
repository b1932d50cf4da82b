package job

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// genData writes a generated 2000-node, 4-class graph and returns its path.
func genData(t *testing.T) string {
	t.Helper()
	ds, err := gen.Generate(gen.Options{Nodes: 2000, Classes: 4, AvgDegree: 20, Homophily: 0.7, Features: 16,
		SNR: 1, TrainFrac: 0.6, ValidFrac: 0.2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.h5")
	if err := datafile.Write(path, ds); err != nil {
		t.Fatal(err)
	}
	return path
}

// stallingObserver keeps rank 0 out of the communicator for a while after
// one epoch, as a hung rank would be.
type stallingObserver struct {
	quiet
	epoch  int
	stall  time.Duration
	epochs int
	at     time.Time
}

func (o *stallingObserver) Epoch(e *metrics.Epoch) error {
	o.epochs++
	if e.Epoch == o.epoch {
		o.at = time.Now()
		time.Sleep(o.stall)
	}
	return nil
}

// TestCommTimeoutLocal: goroutine rank 0 stops calling the communicator
// after epoch 2; the other ranks' watchdogs fail the job within the
// timeout plus a second, with an error naming the operation they waited in
// and the timeout.
func TestCommTimeoutLocal(t *testing.T) {
	s := DefaultSpec()
	s.Data, s.Ranks, s.Run.Epochs, s.Run.Hidden, s.CommTimeout = genData(t), 3, 10, 8, time.Second
	obs := &stallingObserver{epoch: 2, stall: 3 * time.Second}
	err := Run(s, Env{Observer: obs})
	took := time.Since(obs.at)
	t.Logf("%v, %v after the stall", err, took)
	var te *comm.TimeoutError
	if !errors.As(err, &te) || ExitCode(err) != ExitFailure {
		t.Fatalf("Run returned %v (exit %d), want a timeout, exit %d", err, ExitCode(err), ExitFailure)
	}
	for _, w := range []string{"did not complete within the 1s timeout: waited 1", "(rank 0 did not arrive)", "(--comm-timeout)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if te.Rank == 0 {
		t.Errorf("the stalled rank reported the timeout: %v", err)
	}
	if obs.epochs != 3 {
		t.Errorf("%d epochs reported, want 3 (0, 1 and 2)", obs.epochs)
	}
	// The group fails at the timeout; rank 0 returns when its stall ends.
	if te.Elapsed < time.Second || te.Elapsed > 2*time.Second || took > obs.stall+time.Second {
		t.Errorf("timed out after waiting %v, returned %v after the stall: want a wait within [1s, 2s], a return < the stall + 1s", te.Elapsed, took)
	}
}

// recorder keeps every epoch's record, without its timings.
type recorder struct {
	quiet
	epochs []metrics.Epoch
}

func (r *recorder) Epoch(e *metrics.Epoch) error {
	c := *e
	c.ClearTimes()
	r.epochs = append(r.epochs, c)
	return nil
}

// TestThreadsBitIdentical: --threads 1, 2 and 8 train to the same bits,
// on one rank and on two goroutine ranks with compression and dropout:
// every kernel splits its work by the sizes alone.
func TestThreadsBitIdentical(t *testing.T) {
	data := genData(t)
	for _, ranks := range []int{1, 2} {
		var want []metrics.Epoch
		for _, threads := range []int{1, 2, 8} {
			s := DefaultSpec()
			s.Data, s.Ranks, s.Threads, s.Run.Epochs, s.Run.Hidden, s.Run.Dropout = data, ranks, threads, 4, 300, 0.2
			if ranks > 1 {
				s.Run.Compress.Fwd, s.Run.Compress.Bwd, s.Run.Compress.Schedule = codec.KindQuant, codec.KindQuant, compress.ScheduleVarco
			}
			rec := &recorder{}
			if err := Run(s, Env{Observer: rec}); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = rec.epochs
				continue
			}
			for e := range want {
				if !reflect.DeepEqual(rec.epochs[e], want[e]) {
					t.Errorf("%d ranks, %d threads, epoch %d: %+v, with 1 thread %+v", ranks, threads, e, rec.epochs[e], want[e])
				}
			}
		}
	}
}

// The run header says what the halo traffic is.
func TestCommunicationLine(t *testing.T) {
	spec := func(preset string, noComm bool) *Spec {
		s := DefaultSpec()
		s.Run.Compress, s.NoComm = compress.MustPreset(preset), noComm
		return &s
	}
	for _, c := range []struct {
		s    *Spec
		want string
	}{
		{spec(compress.PresetNone, false), "full communication"},
		{spec(compress.PresetNone, true), "no communication (cut edges dropped)"},
		{spec(compress.PresetRecommended, false), "halo compression quant forward, quant backward, schedule adaptive(quant,kappa=2,rmax=16), residual coding (rows skipped below 0.005 of their size, each sent at least every 8 epochs), rows narrower than 64 values sharing headers"},
	} {
		if got := communication(c.s); got != c.want {
			t.Errorf("got %q\nwant %q", got, c.want)
		}
	}
}

// TestReorderOneProcess: a run of one rank on the whole graph trains on
// its rows in the --reorder order, as the ranks of a distributed run do:
// rcm changes the floating-point order of the sums (the bits of the
// losses) but not what they are.
func TestReorderOneProcess(t *testing.T) {
	data := genData(t)
	run := func(ranks int, order string) []metrics.Epoch {
		s := DefaultSpec()
		s.Data, s.Ranks, s.Run.Epochs, s.Run.Hidden, s.Reorder = data, ranks, 3, 8, order
		rec := &recorder{}
		if err := Run(s, Env{Observer: rec}); err != nil {
			t.Fatal(err)
		}
		return rec.epochs
	}
	for _, ranks := range []int{1, 2} {
		none, rcm := run(ranks, gnn.OrderNone), run(ranks, gnn.OrderRCM)
		if reflect.DeepEqual(none, rcm) {
			t.Errorf("%d ranks: --reorder rcm trained to the same bits as --reorder none: the rows were not reordered", ranks)
		}
		for e := range none {
			if d := math.Abs(none[e].Loss - rcm[e].Loss); d > 1e-5*none[e].Loss {
				t.Errorf("%d ranks, epoch %d: loss %v in rcm order, %v as given: more than float order apart", ranks, e, rcm[e].Loss, none[e].Loss)
			}
		}
	}
}

// summaryOf keeps the run's summary.
type summaryOf struct {
	quiet
	s *metrics.Summary
}

func (o *summaryOf) Done(s *metrics.Summary) { o.s = s }

// TestFinalCheckpoint: a finished run's last checkpoint records the
// full-precision accuracies its summary reports, of the kept best
// parameters and of the final ones, which are those the run ends with (an
// epoch measures the parameters that enter it); resuming that checkpoint
// with another --checkpoint writes it there too.
func TestFinalCheckpoint(t *testing.T) {
	data := genData(t)
	dir := t.TempDir()
	for _, ranks := range []int{1, 2} {
		ck := filepath.Join(dir, fmt.Sprintf("ck%d.h5", ranks))
		s := DefaultSpec()
		s.Data, s.Ranks, s.Run.Epochs, s.Run.Hidden, s.Checkpoint = data, ranks, 4, 8, ck
		obs := &summaryOf{}
		if err := Run(s, Env{Observer: obs}); err != nil {
			t.Fatal(err)
		}
		c, err := ckpt.Read(ck)
		if err != nil {
			t.Fatal(err)
		}
		sum := obs.s
		want := ckpt.Accuracies{BestVal: sum.BestValAcc, BestTest: sum.TestAtBestVal, FinalVal: sum.FinalValAcc, FinalTest: sum.FinalTestAcc}
		if c.Exact == nil || *c.Exact != want || c.Epoch != 4 {
			t.Errorf("%d ranks: the checkpoint of epoch %d records %+v, the summary %+v", ranks, c.Epoch, c.Exact, want)
		}
		last := c.History[len(c.History)-1]
		t.Logf("%d ranks: final test accuracy %.4f, the last epoch's (its parameters before their step) %.4f", ranks, sum.FinalTestAcc, last.TestAcc)
		again := filepath.Join(dir, fmt.Sprintf("again%d.h5", ranks))
		s.Resume, s.Checkpoint = ck, again
		if err := Run(s, Env{Observer: &summaryOf{}}); err != nil {
			t.Fatal(err)
		}
		if c2, err := ckpt.Read(again); err != nil || c2.Exact == nil || *c2.Exact != want {
			t.Errorf("%d ranks: resuming a finished run wrote %v (%v), want its accuracies %+v", ranks, c2, err, want)
		}
	}
}
