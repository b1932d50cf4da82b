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

// epochPlan is what one epoch does, decided before it starts.
type epochPlan struct {
	epoch int
	// fwd and bwd are the training pass's codecs per layer (raw without
	// compression).
	fwd, bwd []codec.Spec
	// separateEval: the accuracies do not come from the training pass
	// (dropout, or compression evaluated exactly) but from a pass of their
	// own, which runs where evaluated is set (EvalEvery), with raw
	// exchanges where evalRaw is set, else at the epoch's codecs.
	separateEval, evaluated, evalRaw bool
	// shareSelf: the two passes share the first layer's self term.
	shareSelf bool
}

// Epoch runs one forward, backward and optimizer step, and measures loss and
// accuracies. The accuracies come from the training forward pass, or from an
// extra evaluation pass where that one differs (dropout, or compression with
// exact evaluation), which EvalEvery may leave out. Evaluation traffic is
// counted apart from the training traffic that a communication budget is
// about. bytesBefore is the run's halo bytes before this epoch (for the
// record's running total).
func (t *Trainer) Epoch(epoch int, bytesBefore int64) (metrics.Epoch, error) {
	start := time.Now()
	clear(t.sums.v)
	st := t.newRecord(epoch)
	var meter *halo.Meter
	if t.Halo != nil {
		meter = t.Halo.Meter()
		meter.Reset()
	}
	inputBytes, err := t.cacheTrainingInput(epoch, meter, &st)
	if err != nil {
		return metrics.Epoch{}, err
	}
	p, err := t.planEpoch(epoch, &st)
	if err != nil {
		return metrics.Epoch{}, err
	}
	if p.separateEval && p.evaluated {
		if err := t.evaluationPass(&p, meter, &st); err != nil {
			return metrics.Epoch{}, err
		}
	}
	if err := t.trainingPass(&p); err != nil {
		return metrics.Epoch{}, err
	}
	t.meterTraining(meter, inputBytes, &st)
	if err := t.reduce(epoch, &st); err != nil {
		return metrics.Epoch{}, err
	}
	if err := t.record(&p, &st); err != nil {
		return metrics.Epoch{}, err
	}
	t.advance(&st)
	st.Seconds = time.Since(start).Seconds()
	st.Derive(bytesBefore)
	return st, nil
}

// newRecord is an epoch's record before anything ran: every layer raw.
func (t *Trainer) newRecord(epoch int) metrics.Epoch {
	layers := t.Model.Config.Layers
	st := metrics.Epoch{Epoch: epoch, Rates: make([]float64, layers), Bits: make([]int, layers),
		BytesFwdLayer: make([]int64, layers), BytesBwdLayer: make([]int64, layers), BytesEvalLayer: make([]int64, layers),
		CompError: make([]float64, layers)}
	for l := range layers {
		st.Rates[l], st.Bits[l] = 1, 32
	}
	return st
}

// planEpoch decides the epoch's rates and codecs (into st) and its passes.
func (t *Trainer) planEpoch(epoch int, st *metrics.Epoch) (epochPlan, error) {
	m := t.Model
	p := epochPlan{epoch: epoch, fwd: t.raw, bwd: t.raw}
	if t.schedule != nil {
		t.schedule.Rates(epoch, st.Rates)
		if m.first.trains {
			st.Rates[0] = 1 // what the layer reads crossed raw, once
		}
		if err := t.plan.Codecs(st.Rates, m.ExchangeWidths(), t.fwd, t.bwd, st.Bits); err != nil {
			return p, err
		}
		if t.Halo != nil {
			t.Halo.SetEpoch(m.Config.Seed, epoch)
		}
		p.fwd, p.bwd = t.fwd, t.bwd
	}
	dropout := m.Config.Dropout > 0 || m.Config.AttnDropout > 0
	p.separateEval = dropout || t.plan.ExactEval()
	p.evaluated = !p.separateEval || t.evaluates(epoch)
	// Under full communication and EvalExact the evaluation pass's rows
	// go raw; with dropout under the other modes, at the epoch's codecs.
	p.evalRaw = !t.plan.Enabled() || t.plan.Eval == compress.EvalExact
	// Without dropout both passes see the same input and weights: the
	// training pass takes the first layer's self term from the evaluation
	// (its whole output where the input is cached).
	p.shareSelf = p.separateEval && m.Config.Dropout == 0 && !m.first.trains
	return p, nil
}

// exchangeAs sets every layer's exchange for the pass to come: its codecs,
// and residual coding for training passes (the other passes are not part
// of the stream it codes).
func (t *Trainer) exchangeAs(fwd, bwd []codec.Spec, training bool) error {
	if t.Halo == nil {
		return nil
	}
	for l := range fwd {
		t.Halo.SetCodecs(l, fwd[l], bwd[l])
	}
	r := t.plan.HaloResidual()
	if !r.Any() {
		return nil
	}
	if !training {
		r = halo.Residual{}
	}
	return t.Halo.SetResidual(r)
}

// evaluationPass measures the accuracies in a forward pass of their own;
// its bytes go to the record's evaluation bytes.
func (t *Trainer) evaluationPass(p *epochPlan, meter *halo.Meter, st *metrics.Epoch) error {
	fwd, bwd := p.fwd, p.bwd
	if p.evalRaw {
		fwd, bwd = t.raw, t.raw
	}
	if err := t.exchangeAs(fwd, bwd, false); err != nil {
		return err
	}
	if p.evalRaw {
		if err := t.exchangeExactInput(meter, st); err != nil {
			return err
		}
	}
	logits, err := t.Model.Forward(t.Halo, Pass{Epoch: p.epoch, Exact: p.evalRaw, ShareSelf: p.shareSelf})
	if err != nil {
		return err
	}
	t.count(logits)
	if meter != nil {
		bytes, unused := make([]int64, len(st.Rates)), make([]int64, len(st.Rates))
		meter.AddBytes(bytes, unused)
		st.HaloSeconds += meter.Seconds
		for l, b := range bytes {
			t.sums.eval[l] = float64(b)
		}
		meter.Reset()
	}
	return nil
}

// trainingPass runs the forward pass at the epoch's codecs, the loss and
// the backward pass; the accuracies come from it unless an evaluation pass
// measures them.
func (t *Trainer) trainingPass(p *epochPlan) error {
	m, v := t.Model, t.Model.view
	if err := t.exchangeAs(p.fwd, p.bwd, true); err != nil {
		return err
	}
	logits, err := m.Forward(t.Halo, Pass{Train: true, Epoch: p.epoch, ShareSelf: p.shareSelf})
	if err != nil {
		return err
	}
	if !p.separateEval {
		t.count(logits)
	}
	*t.sums.loss = m.dev.SoftmaxCrossEntropy(logits, v.Labels, v.Train, float32(1/float64(v.GlobalTrain)), m.dlogits)
	return m.Backward(t.Halo, m.dlogits)
}

// meterTraining takes the training passes' bytes (the input's one exchange,
// inputBytes, counted in the first layer's), compression error and time
// from the meter.
func (t *Trainer) meterTraining(meter *halo.Meter, inputBytes int64, st *metrics.Epoch) {
	if meter == nil {
		return
	}
	s := t.sums
	fwd, bwd := st.BytesFwdLayer, st.BytesBwdLayer // scratch until record
	meter.AddBytes(fwd, bwd)
	st.HaloSeconds += meter.Seconds
	for l := range fwd {
		s.fwd[l], s.bwd[l] = float64(fwd[l]), float64(bwd[l])
	}
	s.fwd[0] += float64(inputBytes)
	meter.AddErrors(s.errSq, s.normSq)
	st.CodecSeconds = meter.CodecSeconds
}

// reduce sums the gradients and the epoch's numbers over the ranks, with
// this rank's request to stop, and records the gradient's norm.
func (t *Trainer) reduce(epoch int, st *metrics.Epoch) error {
	m, s := t.Model, t.sums
	// A GPU's queue still holds the backward pass: wait for it, so that
	// the all-reduces' time is theirs and not the backward's.
	if err := m.dev.Synchronize(); err != nil {
		return err
	}
	start := time.Now()
	switch {
	case t.Reduce != nil && m.grads != nil:
		comm.Label(t.Reduce, &t.gradOps[0])
		if err := t.Reduce.AllReduceMat(m.grads); err != nil {
			return fmt.Errorf("gradient all-reduce: %w", err)
		}
	case t.Reduce != nil:
		for i, p := range m.Params {
			comm.Label(t.Reduce, &t.gradOps[i])
			if err := t.Reduce.AllReduceMat(p.g); err != nil {
				return fmt.Errorf("gradient all-reduce of %s: %w", p.Name, err)
			}
		}
	}
	seconds := time.Since(start).Seconds()
	for _, p := range m.Params {
		st.GradNorm += m.dev.SumSquares(p.g)
	}
	st.GradNorm = math.Sqrt(st.GradNorm)
	if t.Stop != nil && t.Stop(epoch) {
		*s.stop = 1
	}
	if t.Reduce != nil {
		start = time.Now()
		comm.Label(t.Reduce, &t.metricsOp)
		if err := t.Reduce.AllReduceFloat64(s.v); err != nil {
			return fmt.Errorf("metrics all-reduce: %w", err)
		}
		seconds += time.Since(start).Seconds()
	}
	st.CommSeconds = st.HaloSeconds + seconds
	return nil
}

// record fills the epoch's numbers in from the reduced sums, and refuses
// an epoch whose loss or gradient is not finite: every rank stops at the
// same epoch (both are all-reduced), before Adam spoils the parameters.
func (t *Trainer) record(p *epochPlan, st *metrics.Epoch) error {
	s, v := t.sums, t.Model.view
	t.evalOnce += int64(*s.once)
	t.resumeInput += int64(*s.resumed)
	// Byte counts stay exact in float64 up to 2^53.
	for l := range st.Rates {
		st.BytesFwdLayer[l], st.BytesBwdLayer[l], st.BytesEvalLayer[l] = int64(s.fwd[l]), int64(s.bwd[l]), int64(s.eval[l])
		st.CompError[l] = halo.CompError(s.errSq[l], s.normSq[l])
	}
	st.Loss = *s.loss / float64(v.GlobalTrain)
	if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
		return &DivergedError{Epoch: p.epoch, What: "loss", Value: st.Loss}
	}
	if math.IsNaN(st.GradNorm) || math.IsInf(st.GradNorm, 0) {
		return &DivergedError{Epoch: p.epoch, What: "gradient norm", Value: st.GradNorm}
	}
	st.Stop = *s.stop > 0
	st.TrainAcc = *s.train / float64(v.GlobalTrain)
	st.ValAcc = *s.valid / float64(v.GlobalValid)
	st.TestAcc = *s.test / float64(v.GlobalTest)
	if s.valHist != nil {
		st.ValAUC, st.TestAUC = auc(s.valHist), auc(s.testHist)
	}
	if !p.evaluated {
		st.NotEvaluated()
	}
	return nil
}

// advance keeps the parameters the epoch was evaluated with where they
// score best so far, takes Adam's step, and lets a closed-loop schedule
// see the epoch.
func (t *Trainer) advance(st *metrics.Epoch) {
	m, c := t.Model, t.Config
	t.best.observe(m, st)
	t.step++
	for _, p := range m.Params {
		wd := float32(0)
		if p.Decay {
			wd = c.WeightDecay
		}
		m.dev.Adam(p.w, p.g, p.m, p.v, t.step, c.LR, c.Beta1, c.Beta2, c.Eps, wd)
	}
	if o, ok := t.schedule.(compress.Observer); ok {
		o.Observe(st)
	}
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

// exchangeExactInput has the model exchange and aggregate the exact input
// features once for the exact passes (Model.exchangeExactInput). Those
// bytes go to the run's summary (EvalBytesOnce), not to the epoch's
// evaluation bytes, so that every epoch's metrics stay those of a run that
// did not stop and resume; the time counts in the epoch's halo time.
func (t *Trainer) exchangeExactInput(meter *halo.Meter, st *metrics.Epoch) error {
	// The evaluations of the whole run (those evaluates picks), not those
	// left: a resumed run decides as the uninterrupted one did, so its
	// metrics stay the same.
	evals := t.Config.Epochs
	if k := t.EvalEvery; k > 1 {
		evals = (t.Config.Epochs + k - 1) / k // every k-th, and the last
	}
	did, err := t.Model.exchangeExactInput(t.Halo, evals, false)
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
// training (Model.CacheTrainingInput) in the first epoch a distributed run
// trains, and returns the bytes this rank sent for it, which count as the
// epoch's forward bytes of that layer. A resumed run does it again in its
// first epoch; that epoch's bytes stay those of the uninterrupted run, and
// the exchange goes to the summary (ResumeInputBytes) instead. Where the
// model does not cache (dropout, a first layer that projects first from
// features wider than the run's training exchanges of it would send, or on
// a GPU, or GAT), it does not try again.
func (t *Trainer) cacheTrainingInput(epoch int, meter *halo.Meter, st *metrics.Epoch) (int64, error) {
	m := t.Model
	if !t.cacheInput || m.first.trains {
		return 0, nil
	}
	if err := t.exchangeAs(t.raw, t.raw, false); err != nil {
		return 0, err
	}
	did, err := m.CacheTrainingInput(t.Halo, 2*t.Config.Epochs) // forward and backward, every epoch
	t.cacheInput = m.first.trains
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

// count adds the logits' correct predictions (and score histograms) of
// every split to the epoch's sums.
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
