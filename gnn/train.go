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
	// Halo bytes handed to the transport, summed over ranks, per layer.
	BytesFwd, BytesBwd []int64
	// CommSeconds is this rank's time inside the transport (halo exchanges
	// and all-reduces), HaloSeconds the halo exchanges' part of it; the
	// rest of Seconds is computation.
	CommSeconds, HaloSeconds float64
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
}

// Trainer runs full-batch training of one model on one rank.
type Trainer struct {
	Model  *Model
	Config TrainConfig
	Halo   Halo
	Reduce Reducer
	step   int
	// scal holds the loss, the correct counts and the per-layer bytes,
	// reduced in one call.
	scal []float64
}

// Indices into Trainer.scal; per-layer bytes follow scalBytes.
const (
	scalLoss = iota
	scalTrain
	scalValid
	scalTest
	scalBytes
)

// NewTrainer checks cfg and ties a model to its communication.
func NewTrainer(m *Model, cfg TrainConfig, halo Halo, reduce Reducer) (*Trainer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if m.local.GlobalTrain == 0 {
		return nil, fmt.Errorf("the split has no training nodes")
	}
	return &Trainer{Model: m, Config: cfg, Halo: halo, Reduce: reduce, scal: make([]float64, scalBytes+2*m.Config.Layers)}, nil
}

// Epoch runs one forward, backward and optimizer step, and measures loss and
// accuracies (with an extra dropout-free forward when dropout is on).
func (t *Trainer) Epoch(epoch int) (EpochStats, error) {
	start := time.Now()
	m, loc, dev := t.Model, t.Model.local, t.Model.dev
	clear(t.scal)
	meter, metered := t.Halo.(Metered)
	if metered {
		meter.Reset()
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
	t.scal[scalLoss] = dev.SoftmaxCrossEntropy(logits, loc.Labels, loc.Train, float32(1/float64(loc.GlobalTrain)), m.dlogits)
	if err := m.Backward(t.Halo, m.dlogits); err != nil {
		return EpochStats{}, err
	}
	layers := m.Config.Layers
	fwd, bwd := make([]int64, layers), make([]int64, layers)
	haloSec := 0.0
	if metered {
		haloSec = meter.LayerBytes(fwd, bwd)
		for l := 0; l < layers; l++ {
			t.scal[scalBytes+l] = float64(fwd[l])
			t.scal[scalBytes+layers+l] = float64(bwd[l])
		}
	}
	reduceStart := time.Now()
	for _, p := range m.Params {
		if err := t.Reduce.AllReduceFloat32(p.G); err != nil {
			return EpochStats{}, fmt.Errorf("gradient all-reduce of %s: %w", p.Name, err)
		}
	}
	if err := t.Reduce.AllReduceFloat64(t.scal); err != nil {
		return EpochStats{}, fmt.Errorf("metrics all-reduce: %w", err)
	}
	commSec := haloSec + time.Since(reduceStart).Seconds()
	for l := 0; l < layers; l++ {
		// Byte counts stay exact in float64 up to 2^53.
		fwd[l], bwd[l] = int64(t.scal[scalBytes+l]), int64(t.scal[scalBytes+layers+l])
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
	loss := t.scal[scalLoss] / float64(loc.GlobalTrain)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return EpochStats{}, fmt.Errorf("epoch %d: loss is %v; lower --lr or check the input features", epoch, loss)
	}
	return EpochStats{
		Epoch:       epoch,
		Loss:        loss,
		TrainAcc:    t.scal[scalTrain] / float64(loc.GlobalTrain),
		ValAcc:      t.scal[scalValid] / float64(loc.GlobalValid),
		TestAcc:     t.scal[scalTest] / float64(loc.GlobalTest),
		Seconds:     time.Since(start).Seconds(),
		BytesFwd:    fwd,
		BytesBwd:    bwd,
		CommSeconds: commSec,
		HaloSeconds: haloSec,
	}, nil
}

func (t *Trainer) count(logits *kernels.Mat) {
	loc, dev := t.Model.local, t.Model.dev
	t.scal[scalTrain] = float64(dev.CountCorrect(logits, loc.Labels, loc.Train))
	t.scal[scalValid] = float64(dev.CountCorrect(logits, loc.Labels, loc.Valid))
	t.scal[scalTest] = float64(dev.CountCorrect(logits, loc.Labels, loc.Test))
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
		f, b := st.TotalBytes()
		s.BytesTotal += f + b
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
