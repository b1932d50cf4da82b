package compress

import (
	"math"
	"testing"
)

func TestVarcoSchedule(t *testing.T) {
	s := Varco{RMax: 128, RMin: 1.5, Slope: 5, Epochs: 300}
	// The authors' defaults reach r_min at t = (T-2)/s = 59.6, so at epoch 60.
	for _, c := range []struct {
		t    int
		want float64
	}{{0, 128}, {1, 128 - 5*126.5/298}, {59, 128 - 5*59*126.5/298}, {60, 1.5}, {299, 1.5}} {
		if got := s.Rate(c.t); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("r(%d) = %v, want %v", c.t, got, c.want)
		}
	}
	for e := 1; e < 300; e++ {
		if s.Rate(e) > s.Rate(e-1) {
			t.Fatalf("rate rises at epoch %d", e)
		}
	}
}

func TestScheduleValidation(t *testing.T) {
	for _, s := range []Schedule{Fixed{0.5}, Varco{RMax: 1, RMin: 2, Slope: 5, Epochs: 10}, Varco{RMax: 8, RMin: 1, Slope: 0, Epochs: 10}, Varco{RMax: 8, RMin: 0.9, Slope: 1, Epochs: 10}} {
		if ValidateSchedule(s) == nil {
			t.Errorf("%s: accepted", s.Name())
		}
	}
	for _, s := range []Schedule{Fixed{1}, Fixed{32}, Varco{RMax: 128, RMin: 1.5, Slope: 5, Epochs: 300}} {
		if err := ValidateSchedule(s); err != nil {
			t.Errorf("%s: %v", s.Name(), err)
		}
	}
}
