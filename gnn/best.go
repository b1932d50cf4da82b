package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Kept is a copy of the parameters of the epoch whose validation score is
// the best so far: Criterion "acc" (validation accuracy) or "auc"
// (validation AUC, two-class tasks). W holds one host slice per parameter,
// in Model.Params order. Every run keeps them, for a checkpoint, export and
// predict; a compressed run that confirms evaluates them at full precision
// after its last epoch.
type Kept struct {
	Criterion string
	Epoch     int
	W         [][]float32
}

// KeptCriteria are the criteria a run keeps parameters by: validation
// accuracy always, validation AUC on two-class tasks.
var KeptCriteria = []string{"acc", "auc"}

// kept is a Kept on the device, with the score that chose it.
type kept struct {
	criterion string
	epoch     int // -1: none yet
	score     float64
	w         []*kernels.Mat
}

// bestParams keeps the parameters of a run's best epochs, one set per
// criterion, and the scores they were chosen by.
type bestParams struct{ sets []*kept }

func newBestParams(m *Model) *bestParams {
	c := &bestParams{}
	criteria := KeptCriteria[:1]
	if m.Config.Classes == 2 {
		criteria = KeptCriteria
	}
	for _, name := range criteria {
		k := &kept{criterion: name, epoch: -1}
		for _, p := range m.Params {
			k.w = append(k.w, m.dev.NewMat(p.Rows, p.Cols))
		}
		c.sets = append(c.sets, k)
	}
	return c
}

// score is the epoch's value of a criterion (NaN-safe: an epoch that was
// not evaluated, or a split without both classes, has none).
func score(criterion string, st *metrics.Epoch) (float64, bool) {
	switch {
	case criterion == "acc" && st.Evaluated():
		return st.ValAcc, true
	case criterion == "auc" && st.ValAUC != nil:
		return *st.ValAUC, true
	}
	return 0, false
}

// offer makes st the set's epoch if its score beats the set's (the
// earliest epoch on ties, as metrics.Summary chooses), and says whether it
// did.
func (k *kept) offer(st *metrics.Epoch) bool {
	v, ok := score(k.criterion, st)
	if !ok || k.epoch >= 0 && v <= k.score {
		return false
	}
	k.epoch, k.score = st.Epoch, v
	return true
}

// observe copies the parameters, still those the epoch was evaluated
// with, into every set whose score the epoch beats.
func (c *bestParams) observe(m *Model, st *metrics.Epoch) {
	for _, k := range c.sets {
		if k.offer(st) {
			for i, p := range m.Params {
				m.dev.Copy(k.w[i], p.w)
			}
		}
	}
}

// Kept returns host copies of the kept parameters, for a checkpoint.
func (t *Trainer) Kept() []Kept {
	var out []Kept
	for _, k := range t.best.sets {
		if k.epoch < 0 {
			continue
		}
		c := Kept{Criterion: k.criterion, Epoch: k.epoch}
		for i, p := range t.Model.Params {
			w := make([]float32, p.Rows*p.Cols)
			t.Model.dev.Download(w, k.w[i])
			c.W = append(c.W, w)
		}
		out = append(out, c)
	}
	return out
}

// RestoreKept loads a checkpoint's kept parameters, which must agree with
// its history (the one given to Resume): each criterion's best epoch there.
func (t *Trainer) RestoreKept(history []metrics.Epoch, sets []Kept) error {
	for _, k := range t.best.sets {
		for i := range history {
			k.offer(&history[i])
		}
		want := k.epoch
		var got *Kept
		for i := range sets {
			if sets[i].Criterion == k.criterion {
				got = &sets[i]
			}
		}
		switch {
		case got == nil && want < 0:
			continue
		case got == nil:
			return fmt.Errorf("restore: the checkpoint has no parameters of the best %s epoch (%d)", k.criterion, want)
		case got.Epoch != want:
			return fmt.Errorf("restore: the checkpoint keeps epoch %d as the best %s, its history says %d", got.Epoch, k.criterion, want)
		case len(got.W) != len(t.Model.Params):
			return fmt.Errorf("restore: the checkpoint keeps %d parameters of the best %s epoch, the model has %d", len(got.W), k.criterion, len(t.Model.Params))
		}
		for i, p := range t.Model.Params {
			if len(got.W[i]) != p.Rows*p.Cols {
				return fmt.Errorf("restore: kept %s parameter %s has %d values, expected %d", k.criterion, p.Name, len(got.W[i]), p.Rows*p.Cols)
			}
			t.Model.dev.Upload(k.w[i], got.W[i])
		}
	}
	return nil
}

// ExactSummary reports whether the summary's accuracies are at full
// precision: always but under EvalCompressed, whose accuracies are those
// measured under compression.
func (t *Trainer) ExactSummary() bool {
	return !t.plan.Enabled() || t.plan.Eval != compress.EvalCompressed
}

// finish evaluates at full precision, after the last epoch, what the
// summary reports and no epoch measured exactly: the final parameters
// (an epoch measures those that enter it, not those its step leaves) and,
// where the epochs' accuracies were read under compression (EvalConfirm),
// the kept best ones, chosen by those compressed scores (kept as
// SelectedValAcc and SelectedValAUC). The passes leave the final
// parameters in place; their bytes, over all ranks, go to s.ConfirmBytes.
// Under EvalCompressed it evaluates nothing.
func (t *Trainer) finish(s *metrics.Summary) error {
	if !t.ExactSummary() {
		return nil
	}
	m, dev := t.Model, t.Model.dev
	final := make([]*kernels.Mat, len(m.Params))
	for i, p := range m.Params {
		final[i] = dev.NewMat(p.Rows, p.Cols)
		dev.Copy(final[i], p.w)
	}
	if err := t.exchangeAs(t.raw, t.raw, false); err != nil {
		return err
	}
	m.first.forgetPassState()
	if t.Halo != nil {
		t.Halo.Meter().Reset()
	}
	var bytes float64
	if t.plan.Confirms() {
		s.Confirmed = true
		s.SelectedValAcc = s.BestValAcc
		if a := s.BestValAUC; a != nil {
			v := *a
			s.SelectedValAUC = &v
		}
		for _, k := range t.best.sets {
			if k.epoch < 0 {
				continue
			}
			r, err := t.exactPass(k.w)
			if err != nil {
				return err
			}
			bytes += r.bytes
			switch k.criterion {
			case "acc":
				if k.epoch != s.BestEpoch {
					return fmt.Errorf("confirm: kept epoch %d as the best, the history says %d", k.epoch, s.BestEpoch)
				}
				s.BestValAcc, s.TestAtBestVal = r.val, r.test
			case "auc":
				s.BestValAUC, s.TestAtBestValAUC = r.valAUC, r.testAUC
			}
		}
	}
	r, err := t.exactPass(final)
	if err != nil {
		return err
	}
	s.FinalValAcc, s.FinalTestAcc = r.val, r.test
	s.ConfirmBytes = int64(bytes + r.bytes)
	m.first.forgetPassState()
	return nil
}

// exactResult is what one exact evaluation pass measured, over all ranks,
// and this rank's logits.
type exactResult struct {
	train, val, test float64
	logits           *kernels.Mat
	valAUC, testAUC  *float64
	bytes            float64
}

// exactPass evaluates the parameters w (nil: the model's own) at full
// precision (raw codecs set by the caller) and leaves them in the model.
func (t *Trainer) exactPass(w []*kernels.Mat) (exactResult, error) {
	m, v, s := t.Model, t.Model.view, t.sums
	for i, p := range m.Params {
		if w != nil {
			m.dev.Copy(p.w, w[i])
		}
	}
	logits, err := m.Forward(t.Halo, Pass{Epoch: t.Config.Epochs, Exact: true})
	if err != nil {
		return exactResult{}, fmt.Errorf("exact evaluation pass: %w", err)
	}
	clear(s.v)
	t.count(logits)
	if t.Halo != nil {
		fwd, unused := make([]int64, len(s.fwd)), make([]int64, len(s.fwd))
		meter := t.Halo.Meter()
		meter.AddBytes(fwd, unused)
		meter.Reset()
		// The sums' one-time slot carries the pass's bytes to the
		// all-reduce with its counts.
		for _, b := range fwd {
			*s.once += float64(b)
		}
	}
	if t.Reduce != nil {
		comm.Label(t.Reduce, &t.metricsOp)
		if err := t.Reduce.AllReduceFloat64(s.v); err != nil {
			return exactResult{}, fmt.Errorf("exact evaluation pass: metrics all-reduce: %w", err)
		}
	}
	r := exactResult{train: *s.train / float64(v.GlobalTrain), val: *s.valid / float64(v.GlobalValid), test: *s.test / float64(v.GlobalTest),
		bytes: *s.once, logits: logits}
	if s.valHist != nil {
		r.valAUC, r.testAUC = auc(s.valHist), auc(s.testHist)
	}
	return r, nil
}
