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
	// exchange for evaluation (cacheExactInput), for the summary, and
	// resumeInput that of the training's (cacheInput) in a resumed run.
	evalOnce, resumeInput int64
	// cacheInput: a distributed run whose first layer's input crosses once
	// (Model.CacheInput, compress.Plan.CacheInput), not every epoch.
	cacheInput bool
	// confirm keeps the best epochs' parameters of an EvalConfirm run; nil
	// for the other modes and full communication.
	confirm *confirmation
}

// sums is what an epoch adds up over the ranks, in one vector so that one
// all-reduce carries it, with a named view of every part.
type sums struct {
	v                        []float64
	loss, train, valid, test *float64
	stop                     *float64 // ranks that asked to stop
	once                     *float64 // bytes of the exact input's one exchange (cacheExactInput)
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
	if err := t.setResidual(true); err != nil {
		return nil, fmt.Errorf("residual: %w", err)
	}
	if plan.Enabled() {
		t.schedule = plan.NewSchedule(cfg.Epochs)
	}
	if plan.Confirms() {
		t.confirm = newConfirmation(m)
	}
	return t, nil
}

// setResidual turns the run's residual coding on (training passes) or off
// (evaluation passes, which are not part of the stream it codes).
func (t *Trainer) setResidual(on bool) error {
	r := t.plan.HaloResidual()
	if t.Halo == nil || !r.Any() {
		return nil
	}
	if !on {
		r = halo.Residual{}
	}
	return t.Halo.SetResidual(r)
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

// setCodecs switches every layer's exchange to the given codecs.
func (t *Trainer) setCodecs(fwd, bwd []codec.Spec) {
	if t.Halo == nil {
		return
	}
	for l := range fwd {
		t.Halo.SetCodecs(l, fwd[l], bwd[l])
	}
}

// Epoch runs one forward, backward and optimizer step, and measures loss and
// accuracies. The accuracies come from the training forward pass, or from an
// extra evaluation pass when that one differs (dropout, or compression with
// full-precision evaluation), which EvalEvery may leave out. Evaluation traffic is counted apart from the
// training traffic that a communication budget is about. bytesBefore is the
// run's halo bytes before this epoch (for the record's running total).
func (t *Trainer) Epoch(epoch int, bytesBefore int64) (metrics.Epoch, error) {
	start := time.Now()
	m, v, dev, s := t.Model, t.Model.view, t.Model.dev, t.sums
	layers := m.Config.Layers
	clear(s.v)
	st := metrics.Epoch{Epoch: epoch, Rates: make([]float64, layers), Bits: make([]int, layers)}
	for l := range st.Bits {
		st.Rates[l], st.Bits[l] = 1, 32
	}
	var meter *halo.Meter
	if t.Halo != nil {
		meter = t.Halo.Meter()
		meter.Reset()
	}
	inputBytes, err := t.cacheTrainingInput(epoch, meter, &st)
	if err != nil {
		return metrics.Epoch{}, err
	}
	if t.schedule != nil {
		t.schedule.Rates(epoch, st.Rates)
		if m.inputCached {
			st.Rates[0] = 1 // what the layer reads crossed raw, once
		}
		if err := t.plan.Codecs(st.Rates, m.ExchangeWidths(), t.fwd, t.bwd, st.Bits); err != nil {
			return metrics.Epoch{}, err
		}
		if t.Halo != nil {
			t.Halo.SetEpoch(m.Config.Seed, epoch)
		}
	}
	fwdCodecs, bwdCodecs := t.raw, t.raw
	if t.schedule != nil {
		fwdCodecs, bwdCodecs = t.fwd, t.bwd
	}
	// An evaluation pass exchanges raw rows under full communication and,
	// in compressed runs, only under EvalExact, which needs one every epoch.
	rawEval := !t.plan.Enabled() || t.plan.Eval == compress.EvalExact
	separateEval := m.Config.Dropout > 0 || m.Config.AttnDropout > 0 || t.plan.ExactEval()
	evaluate := !separateEval || t.evaluates(epoch)
	// Without dropout both passes see the same input and weights: the
	// training pass takes the first layer's self term from the evaluation
	// (its whole output where the input is cached, Model.y0Valid).
	m.ShareSelfTerm = separateEval && m.Config.Dropout == 0 && !m.inputCached
	if separateEval && evaluate {
		// An evaluation pass of its own, at the epoch's rates or raw.
		if rawEval {
			t.setCodecs(t.raw, t.raw)
		} else {
			t.setCodecs(fwdCodecs, bwdCodecs)
		}
		t.setResidual(false)
		if rawEval {
			if err := t.cacheExactInput(meter, &st); err != nil {
				return metrics.Epoch{}, err
			}
		}
		m.exactPass = rawEval
		logits, err := m.Forward(t.Halo, false, epoch)
		m.exactPass = false
		if err != nil {
			return metrics.Epoch{}, err
		}
		t.count(logits)
		if meter != nil {
			evalBytes, unused := make([]int64, layers), make([]int64, layers)
			meter.AddBytes(evalBytes, unused)
			st.HaloSeconds += meter.Seconds
			for l, b := range evalBytes {
				s.eval[l] = float64(b)
			}
			meter.Reset()
		}
	}
	t.setCodecs(fwdCodecs, bwdCodecs)
	t.setResidual(true) // validated by NewTrainer
	logits, err := m.Forward(t.Halo, true, epoch)
	if err != nil {
		return metrics.Epoch{}, err
	}
	if !separateEval {
		t.count(logits)
	}
	*s.loss = dev.SoftmaxCrossEntropy(logits, v.Labels, v.Train, float32(1/float64(v.GlobalTrain)), m.dlogits)
	if err := m.Backward(t.Halo, m.dlogits); err != nil {
		return metrics.Epoch{}, err
	}
	fwd, bwd := make([]int64, layers), make([]int64, layers)
	if meter != nil {
		meter.AddBytes(fwd, bwd)
		st.HaloSeconds += meter.Seconds
		for l := range layers {
			s.fwd[l], s.bwd[l] = float64(fwd[l]), float64(bwd[l])
		}
		s.fwd[0] += float64(inputBytes)
		meter.AddErrors(s.errSq, s.normSq)
		st.CodecSeconds = meter.CodecSeconds
	}
	// A GPU's queue still holds the backward pass: wait for it, so that
	// the all-reduces' time is theirs and not the backward's.
	if err := dev.Synchronize(); err != nil {
		return metrics.Epoch{}, err
	}
	reduceStart := time.Now()
	switch {
	case t.Reduce != nil && m.grads != nil:
		comm.Label(t.Reduce, &t.gradOps[0])
		if err := t.Reduce.AllReduceMat(m.grads); err != nil {
			return metrics.Epoch{}, fmt.Errorf("gradient all-reduce: %w", err)
		}
	case t.Reduce != nil:
		for i, p := range m.Params {
			comm.Label(t.Reduce, &t.gradOps[i])
			if err := t.Reduce.AllReduceMat(p.g); err != nil {
				return metrics.Epoch{}, fmt.Errorf("gradient all-reduce of %s: %w", p.Name, err)
			}
		}
	}
	reduceSeconds := time.Since(reduceStart).Seconds()
	for _, p := range m.Params {
		st.GradNorm += dev.SumSquares(p.g)
	}
	st.GradNorm = math.Sqrt(st.GradNorm)
	if t.Stop != nil && t.Stop(epoch) {
		*s.stop = 1
	}
	if t.Reduce != nil {
		reduceStart = time.Now()
		comm.Label(t.Reduce, &t.metricsOp)
		if err := t.Reduce.AllReduceFloat64(s.v); err != nil {
			return metrics.Epoch{}, fmt.Errorf("metrics all-reduce: %w", err)
		}
		reduceSeconds += time.Since(reduceStart).Seconds()
	}
	st.CommSeconds = st.HaloSeconds + reduceSeconds
	t.evalOnce += int64(*s.once)
	t.resumeInput += int64(*s.resumed)
	// Byte counts stay exact in float64 up to 2^53.
	st.BytesFwdLayer, st.BytesBwdLayer, st.BytesEvalLayer = fwd, bwd, make([]int64, layers)
	st.CompError = make([]float64, layers)
	for l := range layers {
		fwd[l], bwd[l], st.BytesEvalLayer[l] = int64(s.fwd[l]), int64(s.bwd[l]), int64(s.eval[l])
		st.CompError[l] = halo.CompError(s.errSq[l], s.normSq[l])
	}
	// The loss and the gradient are the same on every rank (all-reduced):
	// every rank stops at the same epoch, before Adam spoils the parameters.
	st.Loss = *s.loss / float64(v.GlobalTrain)
	if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
		return metrics.Epoch{}, &DivergedError{Epoch: epoch, What: "loss", Value: st.Loss}
	}
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return metrics.Epoch{}, &DivergedError{Epoch: epoch, What: "gradient norm", Value: st.GradNorm}
	}
	st.Stop = *s.stop > 0
	st.TrainAcc = *s.train / float64(v.GlobalTrain)
	st.ValAcc = *s.valid / float64(v.GlobalValid)
	st.TestAcc = *s.test / float64(v.GlobalTest)
	if s.valHist != nil {
		st.ValAUC, st.TestAUC = auc(s.valHist), auc(s.testHist)
	}
	if !evaluate {
		st.NotEvaluated()
	}
	if t.confirm != nil {
		t.confirm.observe(m, &st) // the parameters the epoch was evaluated with
	}
	t.step++
	c := t.Config
	for _, p := range m.Params {
		wd := float32(0)
		if p.Decay {
			wd = c.WeightDecay
		}
		dev.Adam(p.w, p.g, p.m, p.v, t.step, c.LR, c.Beta1, c.Beta2, c.Eps, wd)
	}
	if o, ok := t.schedule.(compress.Observer); ok {
		o.Observe(&st)
	}
	st.Seconds = time.Since(start).Seconds()
	st.Derive(bytesBefore)
	return st, nil
}

// auc is the ROC AUC of a score histogram, nil where it is undefined (a
// split without one of the classes).
func auc(hist []float64) *float64 {
	a := kernels.AUC(hist)
	if math.IsNaN(a) {
		return nil
	}
	return &a
}

// evaluates reports whether an epoch whose evaluation needs a pass of its
// own runs it (EvalEvery).
func (t *Trainer) evaluates(epoch int) bool {
	return t.EvalEvery <= 1 || (epoch+1)%t.EvalEvery == 0 || epoch == t.Config.Epochs-1
}

// cacheExactInput has the model exchange and aggregate the exact input
// features once for the evaluation passes (Model.cacheExactInput). Those
// bytes go to the run's summary (EvalBytesOnce), not to the epoch's
// evaluation bytes, so that every epoch's metrics stay those of a run that
// did not stop and resume; the time counts in the epoch's halo time.
func (t *Trainer) cacheExactInput(meter *halo.Meter, st *metrics.Epoch) error {
	// The evaluations of the whole run (those evaluates picks), not those
	// left: a resumed run decides as the uninterrupted one did, so its
	// metrics stay the same.
	evals := t.Config.Epochs
	if k := t.EvalEvery; k > 1 {
		evals = (t.Config.Epochs + k - 1) / k // every k-th, and the last
	}
	did, err := t.Model.cacheExactInput(t.Halo, evals, false)
	if err != nil || !did {
		return err
	}
	*t.sums.once = float64(t.inputExchange(meter, st))
	return nil
}

// inputExchange is the bytes this rank sent in the input's one exchange,
// the meter's only one since its last reset; its time goes to the epoch's
// halo time, and the meter is reset for the passes to come.
func (t *Trainer) inputExchange(meter *halo.Meter, st *metrics.Epoch) int64 {
	layers := t.Model.Config.Layers
	b, unused := make([]int64, layers), make([]int64, layers)
	meter.AddBytes(b, unused)
	st.HaloSeconds += meter.Seconds
	meter.Reset()
	return b[0]
}

// cacheTrainingInput has the model cache the first layer's input for
// training (Model.CacheInput) in the first epoch a distributed run trains,
// and returns the bytes this rank sent for it, which count as the epoch's
// forward bytes of that layer. A resumed run does it again in its first
// epoch; that epoch's bytes stay those of the uninterrupted run, and the
// exchange goes to the summary (ResumeInputBytes) instead. Where the model
// does not cache (dropout, a first layer that projects first from features
// wider than the run's training exchanges of it would send, or on a GPU, or
// GAT), it does not try again.
func (t *Trainer) cacheTrainingInput(epoch int, meter *halo.Meter, st *metrics.Epoch) (int64, error) {
	m := t.Model
	if !t.cacheInput || m.inputCached {
		return 0, nil
	}
	t.setCodecs(t.raw, t.raw)
	t.setResidual(false)
	did, err := m.CacheInput(t.Halo, 2*t.Config.Epochs) // forward and backward, every epoch
	t.cacheInput = m.inputCached
	if err != nil || !did {
		return 0, err
	}
	b := t.inputExchange(meter, st)
	if epoch > 0 {
		*t.sums.resumed = float64(b)
		return 0, nil
	}
	return b, nil
}

func (t *Trainer) count(logits *kernels.Mat) {
	v, dev, s := t.Model.view, t.Model.dev, t.sums
	*s.train = float64(dev.CountCorrect(logits, v.Labels, v.Train))
	*s.valid = float64(dev.CountCorrect(logits, v.Labels, v.Valid))
	*s.test = float64(dev.CountCorrect(logits, v.Labels, v.Test))
	if s.valHist != nil {
		dev.ScoreHistogram(logits, v.Labels, v.Valid, s.valHist)
		dev.ScoreHistogram(logits, v.Labels, v.Test, s.testHist)
	}
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
// epoch's report, with a *StoppedError. A run that confirms (EvalConfirm)
// then evaluates its kept parameters at full precision for the summary
// (confirmBest).
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
	if t.confirm != nil {
		if err := t.confirmBest(&s); err != nil {
			return s, err
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s, nil
}
