package compress

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// Schedule gives the compression rate r >= 1 of every layer's halo
// exchange at each epoch (1 = full communication).
type Schedule interface {
	// Rates writes layer l's rate at epoch into rates[l].
	Rates(epoch int, rates []float64)
	Name() string
}

// Observer is a schedule that closes the loop: it sees what each finished
// epoch measured before choosing the next epoch's rates. Every rank sees
// the same all-reduced statistics, so every rank chooses the same rates.
type Observer interface {
	Observe(st *metrics.Epoch)
}

// Fixed compresses at the same rate every epoch (the authors' fixed-ratio
// baselines; r = 1 is full communication).
type Fixed struct{ R float64 }

func (s Fixed) Rates(_ int, rates []float64) { fill(rates, s.R) }
func (s Fixed) Name() string                 { return fmt.Sprintf("fixed(r=%g)", s.R) }

// Varco is the authors' linear ramp from RMax down to RMin:
// r(t) = max(RMax - Slope*t*(RMax-RMin)/(Epochs-2), RMin).
type Varco struct {
	RMax, RMin float64
	Slope      float64
	Epochs     int
}

// Rate is the ramp's value at epoch t, the same for every layer.
func (s Varco) Rate(t int) float64 {
	den := float64(s.Epochs - 2)
	if den <= 0 {
		return s.RMin
	}
	return math.Max(s.RMax-s.Slope*float64(t)*(s.RMax-s.RMin)/den, s.RMin)
}

func (s Varco) Rates(t int, rates []float64) { fill(rates, s.Rate(t)) }

func (s Varco) Name() string {
	return fmt.Sprintf("varco(rmax=%g,rmin=%g,slope=%g,T=%d)", s.RMax, s.RMin, s.Slope, s.Epochs)
}

func fill(rates []float64, r float64) {
	for l := range rates {
		rates[l] = r
	}
}

// ValidateSchedule checks a schedule's parameters, naming the offending flag.
func ValidateSchedule(s Schedule) error {
	switch s := s.(type) {
	case Fixed:
		if !(s.R >= 1) || math.IsInf(s.R, 0) {
			return fmt.Errorf("ratio: got %v, expected a finite rate >= 1", s.R)
		}
	case Varco:
		switch {
		case !(s.RMin >= 1) || math.IsInf(s.RMin, 0):
			return fmt.Errorf("ratio-min: got %v, expected a finite rate >= 1", s.RMin)
		case !(s.RMax >= s.RMin) || math.IsInf(s.RMax, 0):
			return fmt.Errorf("ratio-max: got %v, expected a finite rate >= ratio-min %v", s.RMax, s.RMin)
		case !(s.Slope > 0) || math.IsInf(s.Slope, 0):
			return fmt.Errorf("slope: got %v, expected a positive number", s.Slope)
		}
	case *Adaptive:
		return s.validate()
	}
	return nil
}
