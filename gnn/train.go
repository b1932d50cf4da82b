package gnn

import (
	"fmt"
	"math"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TrainConfig holds the optimisation settings.
type TrainConfig struct {
	Epochs      int
	LR          float32
	WeightDecay float32
	Beta1       float32
	Beta2       float32
	Eps         float32
}

// DefaultTrainConfig follows the VARCO authors: Adam, lr 0.01, 300 epochs.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Epochs: 300, LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Validate checks the settings a user chooses, naming the offending one.
func (c TrainConfig) Validate() error {
	switch {
	case c.Epochs < 1:
		return fmt.Errorf("epochs: got %d, expected at least 1", c.Epochs)
	case !(c.LR > 0) || math.IsInf(float64(c.LR), 0):
		return fmt.Errorf("lr: got %v, expected a positive finite number", c.LR)
	case !(c.WeightDecay >= 0) || math.IsInf(float64(c.WeightDecay), 0):
		return fmt.Errorf("weight-decay: got %v, expected a finite number >= 0", c.WeightDecay)
	}
	return nil
}

// Trainer runs full-batch training of one model on one rank.
type Trainer struct {
	Model  *Model
	Config TrainConfig
	// Halo and Reduce reach the other ranks; both are nil for a run of
	// one rank.
	Halo   halo.Exchanger
	Reduce Reducer
	// plan is the halo compression; schedule its rates, nil without
	// compression.
	plan     compress.Plan
	schedule compress.Schedule
	step     int
	// next is the first epoch Run trains and past the summary of the
	// epochs before it (both set by Resume).
	next int
	past metrics.Summary
	// Stop, if set, is called by every rank once per epoch, before the
	// epoch's results are reduced over ranks; when it returns true on any
	// rank, every rank finishes the epoch and Run returns a *StoppedError
	// (unless it was the last epoch). The answer travels in the epoch's
	// metrics all-reduce, so all ranks stop after the same epoch.
	Stop func(epoch int) bool
	// EvalEvery > 1 runs a separate evaluation pass (see Epoch) only every
	// EvalEvery epochs and at the last; the epochs between are not
	// evaluated (their accuracies NaN). Training does not change: the
	// pass reads the parameters and leaves every other state alone. All
	// ranks must use the same value (the pass exchanges halo rows).
	EvalEvery int
	// The watchdog's names of the per-epoch all-reduces (comm.Label).
	gradOps   []comm.Op
	metricsOp comm.Op
	sums      *sums
	// Per-layer codecs of the epoch, reused.
	fwd, bwd, raw []codec.Spec
	// evalOnce is the bytes, over all ranks, of the exact input's one
	// exchange for evaluation (exchangeExactInput), for the summary, and
	// resumeInput that of the training's (cacheInput) in a resumed run.
	evalOnce, resumeInput int64
	// cacheInput: a distributed run whose first layer's input crosses once
	// (Model.CacheTrainingInput, compress.Plan.CacheInput), not every epoch.
	cacheInput bool
	// best keeps the best epochs' parameters.
	best *bestParams
}

// sums is what an epoch adds up over the ranks, in one vector so that one
// all-reduce carries it, with a named view of every part.
type sums struct {
	v                        []float64
	loss, train, valid, test *float64
	stop                     *float64 // ranks that asked to stop
	once                     *float64 // bytes of the exact input's one exchange (exchangeExactInput)
	resumed                  *float64 // bytes of a resumed run's input exchange (cacheInput)
	fwd, bwd, eval           []float64
	errSq, normSq            []float64 // per layer: the forward payloads' compression error
	valHist, testHist        []float64 // score histograms, two-class tasks only
}

func newSums(layers int, binary bool) *sums {
	n := 7 + 5*layers
	if binary {
		n += 2 * 2 * kernels.ScoreBins
	}
	s := &sums{v: make([]float64, n)}
	s.loss, s.train, s.valid, s.test, s.stop, s.once, s.resumed = &s.v[0], &s.v[1], &s.v[2], &s.v[3], &s.v[4], &s.v[5], &s.v[6]
	rest := s.v[7:]
	next := func(k int) []float64 { b := rest[:k:k]; rest = rest[k:]; return b }
	s.fwd, s.bwd, s.eval, s.errSq, s.normSq = next(layers), next(layers), next(layers), next(layers), next(layers)
	if binary {
		s.valHist, s.testHist = next(2*kernels.ScoreBins), next(2*kernels.ScoreBins)
	}
	return s
}

// NewTrainer checks the settings and ties a model to its communication
// (x and r nil for a run of one rank).
func NewTrainer(m *Model, cfg TrainConfig, plan compress.Plan, x halo.Exchanger, r Reducer) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := plan.Validate(cfg.Epochs); err != nil {
		return nil, err
	}
	if m.view.GlobalTrain == 0 {
		return nil, fmt.Errorf("the split has no training nodes")
	}
	layers := m.Config.Layers
	t := &Trainer{Model: m, Config: cfg, Halo: x, Reduce: r, plan: plan,
		sums: newSums(layers, m.Config.Classes == 2), past: metrics.NewSummary(),
		metricsOp: comm.Op{Name: "metrics all-reduce"}, cacheInput: x != nil && plan.CacheInput,
		fwd: make([]codec.Spec, layers), bwd: make([]codec.Spec, layers), raw: make([]codec.Spec, layers)}
	if m.grads != nil {
		t.gradOps = []comm.Op{{Name: "gradient all-reduce"}}
	} else {
		for _, p := range m.Params {
			t.gradOps = append(t.gradOps, comm.Op{Name: "gradient all-reduce of " + p.Name})
		}
	}
	if r := plan.HaloResidual(); x != nil && r.Any() {
		if err := x.SetResidual(r); err != nil {
			return nil, fmt.Errorf("residual: %w", err)
		}
	}
	if plan.Enabled() {
		t.schedule = plan.NewSchedule(cfg.Epochs)
	}
	t.best = newBestParams(m)
	return t, nil
}

// Step is the number of optimizer steps taken (Adam's t).
func (t *Trainer) Step() int { return t.step }

// Adaptive is the run's closed-loop schedule, nil for the others (whose
// rates depend on the epoch alone): its state is part of a checkpoint.
func (t *Trainer) Adaptive() *compress.Adaptive {
	a, _ := t.schedule.(*compress.Adaptive)
	return a
}

// Resume makes Run continue a run whose epochs in history are done: the
// caller has restored the parameters, Adam's moments and the schedule's
// state from that run; Resume sets Adam's step and accounts the history in
// the summary.
func (t *Trainer) Resume(step int, history []metrics.Epoch) error {
	if len(history) > t.Config.Epochs {
		return fmt.Errorf("resume after %d epochs of a %d-epoch run", len(history), t.Config.Epochs)
	}
	t.step, t.next = step, len(history)
	for _, st := range history {
		t.past.Add(st)
	}
	return nil
}

// DivergedError is Epoch's error when the epoch's loss or gradient is not
// finite. Every rank returns it for the same epoch, and the parameters stay
// those that entered the epoch.
type DivergedError struct {
	Epoch int
	What  string // "loss" or "gradient norm"
	Value float64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("epoch %d: %s is %v; lower --lr or check the input features", e.Epoch, e.What, e.Value)
}

// StoppedError is Run's error when a rank asked to stop (Trainer.Stop):
// Epochs epochs are done, on every rank, and the trainer holds the state
// after them.
type StoppedError struct{ Epochs int }

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped on request after %d epochs", e.Epochs)
}

// Run trains until Config.Epochs epochs are done (from the first, or after
// those given to Resume), calling report (if non-nil) after each; a report
// error stops training, and so does a stop request (Stop), after the
// epoch's report, with a *StoppedError. A finished run then evaluates at
// full precision what its summary reports (finish).
func (t *Trainer) Run(report func(*metrics.Epoch) error) (metrics.Summary, error) {
	start := time.Now()
	s := t.past
	for e := t.next; e < t.Config.Epochs; e++ {
		st, err := t.Epoch(e, s.BytesTotal)
		if err != nil {
			return s, err
		}
		s.Add(st)
		s.EvalBytesOnce, s.ResumeInputBytes = t.evalOnce, t.resumeInput
		if report != nil {
			if err := report(&st); err != nil {
				return s, err
			}
		}
		if st.Stop && e+1 < t.Config.Epochs {
			s.Seconds = time.Since(start).Seconds()
			return s, &StoppedError{Epochs: e + 1}
		}
	}
	if err := t.finish(&s); err != nil {
		return s, err
	}
	s.Seconds = time.Since(start).Seconds()
	return s, nil
}
