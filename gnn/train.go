package gnn

import (
	"fmt"
	"math"
	"time"

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
}

// Trainer runs full-batch training of one model on one rank.
type Trainer struct {
	Model  *Model
	Config TrainConfig
	Halo   Halo
	Reduce Reducer
	step   int
	scal   []float64 // loss and correct counts, reduced in one call
}

// NewTrainer checks cfg and ties a model to its communication.
func NewTrainer(m *Model, cfg TrainConfig, halo Halo, reduce Reducer) (*Trainer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if m.local.GlobalTrain == 0 {
		return nil, fmt.Errorf("the split has no training nodes")
	}
	return &Trainer{Model: m, Config: cfg, Halo: halo, Reduce: reduce, scal: make([]float64, 4)}, nil
}

// Epoch runs one forward, backward and optimizer step, and measures loss and
// accuracies (with an extra dropout-free forward when dropout is on).
func (t *Trainer) Epoch(epoch int) (EpochStats, error) {
	start := time.Now()
	m, loc, dev := t.Model, t.Model.local, t.Model.dev
	for i := range t.scal {
		t.scal[i] = 0
	}
	if m.Config.Dropout > 0 {
		logits, err := m.Forward(t.Halo, false, epoch)
		if err != nil {
			return EpochStats{}, err
		}
		t.count(logits)
	}
	logits, err := m.Forward(t.Halo, true, epoch)
	if err != nil {
		return EpochStats{}, err
	}
	if m.Config.Dropout == 0 {
		t.count(logits)
	}
	t.scal[0] = dev.SoftmaxCrossEntropy(logits, loc.Labels, loc.Train, float32(1/float64(loc.GlobalTrain)), m.dlogits)
	if err := m.Backward(t.Halo, m.dlogits); err != nil {
		return EpochStats{}, err
	}
	for _, p := range m.Params {
		if err := t.Reduce.AllReduceFloat32(p.G); err != nil {
			return EpochStats{}, fmt.Errorf("gradient all-reduce of %s: %w", p.Name, err)
		}
	}
	if err := t.Reduce.AllReduceFloat64(t.scal); err != nil {
		return EpochStats{}, fmt.Errorf("metrics all-reduce: %w", err)
	}
	t.step++
	c := t.Config
	for _, p := range m.Params {
		wd := float32(0)
		if p.Decay {
			wd = c.WeightDecay
		}
		dev.Adam(p.W, p.G, p.M, p.V, t.step, c.LR, c.Beta1, c.Beta2, c.Eps, wd)
	}
	loss := t.scal[0] / float64(loc.GlobalTrain)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return EpochStats{}, fmt.Errorf("epoch %d: loss is %v; lower --lr or check the input features", epoch, loss)
	}
	return EpochStats{
		Epoch:    epoch,
		Loss:     loss,
		TrainAcc: t.scal[1] / float64(loc.GlobalTrain),
		ValAcc:   t.scal[2] / float64(loc.GlobalValid),
		TestAcc:  t.scal[3] / float64(loc.GlobalTest),
		Seconds:  time.Since(start).Seconds(),
	}, nil
}

func (t *Trainer) count(logits *kernels.Mat) {
	loc, dev := t.Model.local, t.Model.dev
	t.scal[1] = float64(dev.CountCorrect(logits, loc.Labels, loc.Train))
	t.scal[2] = float64(dev.CountCorrect(logits, loc.Labels, loc.Valid))
	t.scal[3] = float64(dev.CountCorrect(logits, loc.Labels, loc.Test))
}

// Run trains for Config.Epochs epochs, calling report (if non-nil) after
// each; a report error stops training.
func (t *Trainer) Run(report func(EpochStats) error) (Summary, error) {
	start := time.Now()
	s := Summary{BestValAcc: -1}
	for e := 0; e < t.Config.Epochs; e++ {
		st, err := t.Epoch(e)
		if err != nil {
			return s, err
		}
		if st.ValAcc > s.BestValAcc {
			s.BestValAcc, s.BestEpoch, s.TestAtBestVal = st.ValAcc, e, st.TestAcc
		}
		s.FinalTestAcc = st.TestAcc
		s.Epochs = e + 1
		if report != nil {
			if err := report(st); err != nil {
				return s, err
			}
		}
	}
	s.Seconds = time.Since(start).Seconds()
	return s, nil
}
