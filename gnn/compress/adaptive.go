package compress

import (
	"fmt"
	"math"
	"slices"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// Adaptive is a closed-loop rate schedule. VARCO's convergence argument
// needs the error that compression adds to the gradient to stay below the
// gradient itself. To first order, a relative error e in the halo
// activations moves the gradient by about C * e * loss: the per-node loss
// gradients (softmax minus one-hot) that multiply the error shrink with
// the cross-entropy loss, while the full gradient, their sum, shrinks
// faster as the per-node terms cancel near a solution. The condition
// C * e * loss <= ||g|| therefore reads
//
//	e_l(r) <= Kappa * rho_t,  rho_t = min_{s<=t} q_s / max_{s<=t} q_s,  q = ||g|| / loss
//
// for every layer l and epoch t, where Kappa stands for 1/C in units of
// the first epochs (chosen on validation accuracy) and q is smoothed over
// epochs. Adaptive picks the largest rate of its ladder whose predicted
// relative payload error e_l(r) meets the bound. The running minimum keeps
// compression noise, which inflates the measured gradient, from loosening
// the bound; dividing by the loss keeps a loss spike from setting the scale.
//
// The prediction starts from the last measured error e0 at a lossy rate r0
// of the same layer: for quant, rounding error scales with the step,
// e(L) = e0 (L0 - 1) / (L - 1) for grids of L = 2^b points (b <= 8 bits)
// or 3 (the ternary rung), bf16 is taken as
// its rounding error 2^-9, raw as 0; for trunc, dropped columns are taken
// to carry equal energy, e(r)^2 = e0^2 (1 - 1/r) / (1 - 1/r0). The loop
// corrects a poor prediction one epoch later, because the next measurement
// replaces it.
type Adaptive struct {
	Codec codec.Kind // quant or trunc: selects the ladder and the error model
	Kappa float64    // relative payload error allowed at the largest gradient
	RMax  float64    // rate of the first epoch, before anything is measured
	// Tern puts quant's ternary rung (codec.TernRate: 3 levels) on the
	// ladder, between 1 and 2 bits: the exchanges code residuals, which
	// the rung's codes are for (Plan.Codecs).
	Tern bool

	smoothed, gmin, gmax float64
	rates                []float64 // chosen for the next epoch
	refErr, refRate      []float64 // last lossy measurement per layer
}

// DefaultKappa is the error bound at the largest gradient; chosen on
// validation accuracy (docs/VARCO.md says how).
const DefaultKappa = 2

// gradSmoothing is the weight of the newest ||g|| / loss in the moving
// average; full-batch gradients are not noisy, so a short memory suffices.
const gradSmoothing = 0.5

// bf16Error is the relative rounding error of bfloat16 (8 mantissa bits).
const bf16Error = 1.0 / 512

// NewAdaptive returns the closed-loop schedule for a codec kind.
func NewAdaptive(kind codec.Kind, kappa, rmax float64) *Adaptive {
	return &Adaptive{Codec: kind, Kappa: kappa, RMax: rmax}
}

func (s *Adaptive) validate() error {
	switch {
	case s.Codec == codec.KindNone:
		return fmt.Errorf("codec: the adaptive schedule needs quant or trunc, got %q", s.Codec)
	case !(s.Kappa > 0) || math.IsInf(s.Kappa, 0):
		return fmt.Errorf("kappa: got %v, expected a positive number", s.Kappa)
	case !(s.RMax >= 1) || math.IsInf(s.RMax, 0):
		return fmt.Errorf("ratio-max: got %v, expected a finite rate >= 1", s.RMax)
	}
	return nil
}

func (s *Adaptive) Name() string {
	return fmt.Sprintf("adaptive(%s,kappa=%g,rmax=%g)", s.Codec, s.Kappa, s.RMax)
}

// Rates returns the rates chosen from the last observation; before the
// first one, RMax everywhere (as VARCO starts).
func (s *Adaptive) Rates(_ int, rates []float64) {
	if len(s.rates) != len(rates) {
		fill(rates, s.RMax)
		return
	}
	copy(rates, s.rates)
}

// AdaptiveState is what an Adaptive schedule has learned from the epochs
// so far: the smoothed ||g|| / loss with its running minimum and maximum,
// and per layer the rate chosen for the next epoch and the last lossy
// measurement (error and rate). The slices are empty before the first
// observation.
type AdaptiveState struct {
	Smoothed, GMin, GMax   float64
	Rates, RefErr, RefRate []float64
}

// State returns a copy of the schedule's state, for a checkpoint.
func (s *Adaptive) State() AdaptiveState {
	return AdaptiveState{s.smoothed, s.gmin, s.gmax, slices.Clone(s.rates), slices.Clone(s.refErr), slices.Clone(s.refRate)}
}

// SetState restores a state taken by State (copying it), so that the
// schedule continues as the one it was taken from.
func (s *Adaptive) SetState(st AdaptiveState) error {
	n := len(st.Rates)
	if len(st.RefErr) != n || len(st.RefRate) != n {
		return fmt.Errorf("adaptive schedule state: %d rates, %d reference errors and %d reference rates, expected equal counts", n, len(st.RefErr), len(st.RefRate))
	}
	s.smoothed, s.gmin, s.gmax = st.Smoothed, st.GMin, st.GMax
	s.rates, s.refErr, s.refRate = slices.Clone(st.Rates), slices.Clone(st.RefErr), slices.Clone(st.RefRate)
	return nil
}

// ladder lists the rates Adaptive chooses from, most compressed first.
func (s *Adaptive) ladder() []float64 {
	var r []float64
	if s.Codec == codec.KindQuant {
		for _, b := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16} {
			if rb := 32 / float64(b); rb <= s.RMax {
				r = append(r, rb)
			}
			if b == 1 && s.Tern && codec.TernRate <= s.RMax {
				r = append(r, codec.TernRate)
			}
		}
	} else {
		for rb := 128.0; rb >= 2; rb /= 2 {
			if rb <= s.RMax {
				r = append(r, rb)
			}
		}
	}
	return append(r, 1)
}

// Observe updates the gradient trend and each layer's reference error,
// then picks the next epoch's rates.
func (s *Adaptive) Observe(st *metrics.Epoch) {
	n := len(st.Rates)
	if len(s.rates) != n {
		s.rates, s.refErr, s.refRate = make([]float64, n), make([]float64, n), make([]float64, n)
		copy(s.rates, st.Rates)
	}
	q := 0.0
	if st.Loss > 0 {
		q = st.GradNorm / st.Loss
	}
	if s.smoothed == 0 {
		s.smoothed = q
	} else {
		s.smoothed = gradSmoothing*q + (1-gradSmoothing)*s.smoothed
	}
	if s.gmax == 0 || s.smoothed > s.gmax {
		s.gmax = s.smoothed
	}
	if s.gmin == 0 || s.smoothed < s.gmin {
		s.gmin = s.smoothed
	}
	bound := s.Kappa
	if s.gmax > 0 {
		bound *= s.gmin / s.gmax
	}
	for l := range n {
		if r := st.Rates[l]; r > 1 && s.lossy(r) {
			s.refErr[l], s.refRate[l] = st.CompError[l], r
		}
		if s.refRate[l] == 0 {
			continue // never measured (no payload yet): keep the start rate
		}
		for _, r := range s.ladder() {
			if s.predict(l, r) <= bound {
				s.rates[l] = r
				break
			}
		}
	}
}

// lossy reports whether rate r gives a measurement the model can scale:
// quant at 8 bits or fewer, or any truncation.
func (s *Adaptive) lossy(r float64) bool {
	return s.Codec == codec.KindTrunc || codec.QuantBitsForRate(r) <= 8
}

// predict is layer l's expected relative payload error at rate r.
func (s *Adaptive) predict(l int, r float64) float64 {
	e0, r0 := s.refErr[l], s.refRate[l]
	if r <= 1 {
		return 0
	}
	if s.Codec == codec.KindTrunc {
		return e0 * math.Sqrt((1-1/r)/(1-1/r0))
	}
	switch b := codec.QuantBitsForRate(r); {
	case b >= 32:
		return 0
	case b == 16:
		return bf16Error
	}
	return e0 * float64(s.levels(r0)-1) / float64(s.levels(r)-1)
}

// levels is the quant grid's points at rate r: 3 on the ternary rung,
// else 2^b.
func (s *Adaptive) levels(r float64) int {
	if s.Tern && r >= codec.TernRate && r < 32 {
		return 3
	}
	return 1 << codec.QuantBitsForRate(r)
}
