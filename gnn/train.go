package gnn

import (
	"fmt"
	"math"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
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

func (c TrainConfig) validate() error {
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

// EpochStats is what one epoch measured. Accuracies are over all ranks,
// for the parameters that entered the epoch (the same ones the loss saw).
type EpochStats struct {
	Epoch                     int
	Loss                      float64
	TrainAcc, ValAcc, TestAcc float64
	Seconds                   float64
	// Halo bytes handed to the transport, summed over ranks, per layer.
	BytesFwd, BytesBwd []int64
	// BytesEval counts the evaluation pass's forward exchanges, kept apart
	// so that budgets compare training traffic.
	BytesEval []int64
	// CommSeconds is this rank's time inside the transport (halo exchanges
	// and all-reduces), HaloSeconds the halo exchanges' part of it,
	// CodecSeconds its time encoding and decoding; the rest of Seconds is
	// computation.
	CommSeconds, HaloSeconds, CodecSeconds float64
	// Rates are the compression rates of this epoch per layer (1 = raw);
	// Bits the bits per value (quant) or columns kept (trunc) per layer, 32
	// when raw; CompError the relative error ||x - x^|| / ||x|| of the
	// forward training payloads per layer, over all ranks.
	Rates     []float64
	Bits      []int
	CompError []float64
	// GradNorm is the norm of the all-reduced parameter gradient (before
	// weight decay), which closed-loop schedules watch.
	GradNorm float64
	// ValAUC and TestAUC are the ROC AUC of two-class tasks (HasAUC).
	HasAUC          bool
	ValAUC, TestAUC float64
	// Stop says that a rank asked to stop (Trainer.Stop) during this epoch:
	// Run returns after it on every rank. Checkpoints do not store it.
	Stop bool
}

// TotalBytes returns the epoch's forward and backward halo bytes.
func (s EpochStats) TotalBytes() (fwd, bwd int64) {
	for l := range s.BytesFwd {
		fwd += s.BytesFwd[l]
		bwd += s.BytesBwd[l]
	}
	return fwd, bwd
}

// Summary is the result of a run: the test accuracy at the best validation
// accuracy (earliest epoch on ties) and at the last epoch.
type Summary struct {
	BestValAcc    float64
	BestEpoch     int
	TestAtBestVal float64
	FinalTestAcc  float64
	Epochs        int
	Seconds       float64
	BytesTotal    int64 // halo bytes over all epochs, ranks and directions
	// For two-class tasks: the test ROC AUC at the best validation AUC.
	BestValAUC, TestAtBestValAUC float64
}

// add accounts for one finished epoch.
func (s *Summary) add(st EpochStats) {
	if st.ValAcc > s.BestValAcc {
		s.BestValAcc, s.BestEpoch, s.TestAtBestVal = st.ValAcc, st.Epoch, st.TestAcc
	}
	if st.HasAUC && st.ValAUC > s.BestValAUC {
		s.BestValAUC, s.TestAtBestValAUC = st.ValAUC, st.TestAUC
	}
	s.FinalTestAcc = st.TestAcc
	f, b := st.TotalBytes()
	s.BytesTotal += f + b
	s.Epochs = st.Epoch + 1
}

// Trainer runs full-batch training of one model on one rank.
type Trainer struct {
	Model  *Model
	Config TrainConfig
	Halo   Halo
	Reduce Reducer
	// Compress, when set, encodes the halo exchanges of training passes
	// (and of evaluation passes with EvalCompressed) at its schedule's rate.
	Compress *Compression
	step     int
	// next is the first epoch Run trains and past the summary of the
	// epochs before it (both set by Resume).
	next int
	past Summary
	// Stop, if set, is called by every rank once per epoch, before the
	// epoch's results are reduced over ranks; when it returns true on any
	// rank, every rank finishes the epoch and Run returns a *StoppedError
	// (unless it was the last epoch). The answer travels in the epoch's
	// metrics all-reduce, so all ranks stop after the same epoch.
	Stop func(epoch int) bool
	// The watchdog's names of the per-epoch all-reduces (comm.Label).
	gradOps   []comm.Op
	metricsOp comm.Op
	// scal holds everything reduced over ranks once per epoch: loss,
	// correct counts, the stop flag, then per layer the training bytes (forward,
	// backward), the evaluation bytes, and the compression error sums.
	scal []float64
}

// Indices into Trainer.scal; per-layer blocks of Layers entries follow.
const (
	scalLoss = iota
	scalTrain
	scalValid
	scalTest
	scalStop   // ranks that asked to stop
	scalLayers // start of the per-layer blocks, in the order below
)

const (
	blockFwd = iota
	blockBwd
	blockEval
	blockErrSq
	blockNormSq
	numBlocks
)

// binary reports whether the task has two classes, for which the trainer
// also measures ROC AUC from score histograms appended to scal (validation
// then test, kernels.ScoreBins per class each).
func (t *Trainer) binary() bool { return t.Model.Config.Classes == 2 }

// hist returns the score histogram of split 0 (validation) or 1 (test).
func (t *Trainer) hist(split int) []float64 {
	start := scalLayers + numBlocks*t.Model.Config.Layers + split*2*kernels.ScoreBins
	return t.scal[start : start+2*kernels.ScoreBins]
}

// NewTrainer checks cfg and ties a model to its communication.
func NewTrainer(m *Model, cfg TrainConfig, halo Halo, reduce Reducer) (*Trainer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if m.local.GlobalTrain == 0 {
		return nil, fmt.Errorf("the split has no training nodes")
	}
	n := scalLayers + numBlocks*m.Config.Layers
	if m.Config.Classes == 2 {
		n += 2 * 2 * kernels.ScoreBins
	}
	t := &Trainer{Model: m, Config: cfg, Halo: halo, Reduce: reduce, scal: make([]float64, n),
		past: Summary{BestValAcc: -1, BestValAUC: -1}, metricsOp: comm.Op{Name: "metrics all-reduce"}}
	for _, p := range m.Params {
		t.gradOps = append(t.gradOps, comm.Op{Name: "gradient all-reduce of " + p.Name})
	}
	return t, nil
}

// Step is the number of optimizer steps taken (Adam's t).
func (t *Trainer) Step() int { return t.step }

// Resume makes Run continue a run whose epochs in history are done: the
// caller has restored the parameters, Adam's moments and the schedule's
// state from that run; Resume sets Adam's step and accounts the history in
// the summary.
func (t *Trainer) Resume(step int, history []EpochStats) error {
	if len(history) > t.Config.Epochs {
		return fmt.Errorf("resume after %d epochs of a %d-epoch run", len(history), t.Config.Epochs)
	}
	t.step, t.next = step, len(history)
	for _, st := range history {
		t.past.add(st)
	}
	return nil
}

// block returns layer-indexed block b of scal.
func (t *Trainer) block(b int) []float64 {
	n := t.Model.Config.Layers
	return t.scal[scalLayers+b*n : scalLayers+(b+1)*n]
}

// setCodecs switches every layer's exchange to the given codecs (nil: raw).
func (t *Trainer) setCodecs(fwd, bwd []comm.Codec) {
	cx, ok := t.Halo.(Compressible)
	if !ok {
		return
	}
	for l := 0; l < t.Model.Config.Layers; l++ {
		var f, b comm.Codec
		if fwd != nil {
			f, b = fwd[l], bwd[l]
		}
		cx.SetCodecs(l, f, b)
	}
}

// Epoch runs one forward, backward and optimizer step, and measures loss and
// accuracies. The accuracies come from the training forward pass, or from an
// extra evaluation pass when that one differs (dropout, or compression with
// full-precision evaluation). Evaluation traffic is counted apart from the
// training traffic that a communication budget is about.
func (t *Trainer) Epoch(epoch int) (EpochStats, error) {
	start := time.Now()
	m, loc, dev := t.Model, t.Model.local, t.Model.dev
	layers := m.Config.Layers
	clear(t.scal)
	st := EpochStats{Epoch: epoch, Rates: make([]float64, layers), Bits: make([]int, layers), HasAUC: t.binary()}
	for l := range st.Bits {
		st.Rates[l], st.Bits[l] = 1, 32
	}
	var fwdCodecs, bwdCodecs []comm.Codec
	if c := t.Compress; c != nil {
		c.Schedule.Rates(epoch, st.Rates)
		var err error
		if fwdCodecs, bwdCodecs, st.Bits, err = c.codecs(st.Rates, m.ExchangeWidths()); err != nil {
			return EpochStats{}, err
		}
		if cx, ok := t.Halo.(Compressible); ok {
			cx.SetEpoch(c.Seed, epoch)
		}
	}
	meter, metered := t.Halo.(Metered)
	if metered {
		meter.Reset()
	}
	separateEval := m.Config.Dropout > 0 || (fwdCodecs != nil && !t.Compress.EvalCompressed)
	if separateEval {
		if t.Compress != nil && t.Compress.EvalCompressed {
			t.setCodecs(fwdCodecs, bwdCodecs)
		} else {
			t.setCodecs(nil, nil)
		}
		logits, err := m.Forward(t.Halo, false, epoch)
		if err != nil {
			return EpochStats{}, err
		}
		t.count(logits)
		if metered {
			evalBytes, unused := make([]int64, layers), make([]int64, layers)
			st.HaloSeconds += meter.LayerBytes(evalBytes, unused)
			for l, b := range evalBytes {
				t.block(blockEval)[l] = float64(b)
			}
			meter.Reset()
		}
	}
	t.setCodecs(fwdCodecs, bwdCodecs)
	logits, err := m.Forward(t.Halo, true, epoch)
	if err != nil {
		return EpochStats{}, err
	}
	if !separateEval {
		t.count(logits)
	}
	t.scal[scalLoss] = dev.SoftmaxCrossEntropy(logits, loc.Labels, loc.Train, float32(1/float64(loc.GlobalTrain)), m.dlogits)
	if err := m.Backward(t.Halo, m.dlogits); err != nil {
		return EpochStats{}, err
	}
	fwd, bwd := make([]int64, layers), make([]int64, layers)
	if metered {
		st.HaloSeconds += meter.LayerBytes(fwd, bwd)
		for l := 0; l < layers; l++ {
			t.block(blockFwd)[l], t.block(blockBwd)[l] = float64(fwd[l]), float64(bwd[l])
		}
	}
	if cx, ok := t.Halo.(Compressible); ok {
		cx.CompErrors(t.block(blockErrSq), t.block(blockNormSq))
		st.CodecSeconds = cx.CodecSeconds()
	}
	reduceStart := time.Now()
	for i, p := range m.Params {
		comm.Label(t.Reduce, &t.gradOps[i])
		if err := allReduceGrad(t.Reduce, dev, p); err != nil {
			return EpochStats{}, fmt.Errorf("gradient all-reduce of %s: %w", p.Name, err)
		}
		st.GradNorm += dev.SumSquares(p.g)
	}
	st.GradNorm = math.Sqrt(st.GradNorm)
	if t.Stop != nil && t.Stop(epoch) {
		t.scal[scalStop] = 1
	}
	comm.Label(t.Reduce, &t.metricsOp)
	if err := t.Reduce.AllReduceFloat64(t.scal); err != nil {
		return EpochStats{}, fmt.Errorf("metrics all-reduce: %w", err)
	}
	st.CommSeconds = st.HaloSeconds + time.Since(reduceStart).Seconds()
	// Byte counts stay exact in float64 up to 2^53.
	st.BytesFwd, st.BytesBwd, st.BytesEval = fwd, bwd, make([]int64, layers)
	st.CompError = make([]float64, layers)
	for l := 0; l < layers; l++ {
		fwd[l], bwd[l] = int64(t.block(blockFwd)[l]), int64(t.block(blockBwd)[l])
		st.BytesEval[l] = int64(t.block(blockEval)[l])
		st.CompError[l] = comm.CompError(t.block(blockErrSq)[l], t.block(blockNormSq)[l])
	}
	// The loss and the gradient are the same on every rank (all-reduced):
	// every rank stops at the same epoch, before Adam spoils the parameters.
	st.Loss = t.scal[scalLoss] / float64(loc.GlobalTrain)
	if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
		return EpochStats{}, &DivergedError{Epoch: epoch, What: "loss", Value: st.Loss}
	}
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return EpochStats{}, &DivergedError{Epoch: epoch, What: "gradient norm", Value: st.GradNorm}
	}
	st.Stop = t.scal[scalStop] > 0
	t.step++
	c := t.Config
	for _, p := range m.Params {
		wd := float32(0)
		if p.Decay {
			wd = c.WeightDecay
		}
		dev.Adam(p.w, p.g, p.m, p.v, t.step, c.LR, c.Beta1, c.Beta2, c.Eps, wd)
	}
	st.TrainAcc = t.scal[scalTrain] / float64(loc.GlobalTrain)
	st.ValAcc = t.scal[scalValid] / float64(loc.GlobalValid)
	st.TestAcc = t.scal[scalTest] / float64(loc.GlobalTest)
	if st.HasAUC {
		st.ValAUC, st.TestAUC = kernels.AUC(t.hist(0)), kernels.AUC(t.hist(1))
	}
	if o, ok := t.Compress.schedule().(Observer); ok {
		o.Observe(st)
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

func (t *Trainer) count(logits *kernels.Mat) {
	loc, dev := t.Model.local, t.Model.dev
	t.scal[scalTrain] = float64(dev.CountCorrect(logits, loc.Labels, loc.Train))
	t.scal[scalValid] = float64(dev.CountCorrect(logits, loc.Labels, loc.Valid))
	t.scal[scalTest] = float64(dev.CountCorrect(logits, loc.Labels, loc.Test))
	if t.binary() {
		dev.ScoreHistogram(logits, loc.Labels, loc.Valid, t.hist(0))
		dev.ScoreHistogram(logits, loc.Labels, loc.Test, t.hist(1))
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
// epoch's report, with a *StoppedError.
func (t *Trainer) Run(report func(EpochStats) error) (Summary, error) {
	start := time.Now()
	s := t.past
	for e := t.next; e < t.Config.Epochs; e++ {
		st, err := t.Epoch(e)
		if err != nil {
			return s, err
		}
		s.add(st)
		if report != nil {
			if err := report(st); err != nil {
				return s, err
			}
		}
		if st.Stop && e+1 < t.Config.Epochs {
			s.Seconds = time.Since(start).Seconds()
			return s, &StoppedError{Epochs: e + 1}
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s, nil
}
