package compress

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// TestAdaptiveRule drives the schedule with made-up measurements.
func TestAdaptiveRule(t *testing.T) {
	obs := func(s *Adaptive, rates []float64, errs []float64, grad, loss float64) []float64 {
		s.Observe(&metrics.Epoch{Rates: rates, CompError: errs, GradNorm: grad, Loss: loss})
		next := make([]float64, len(rates))
		s.Rates(1, next)
		return next
	}
	s := NewAdaptive(codec.KindQuant, 0.1, 128)
	first := make([]float64, 3)
	s.Rates(0, first)
	if fmt.Sprint(first) != "[128 128 128]" {
		t.Fatalf("first epoch rates %v, want RMax everywhere", first)
	}
	// 1 bit measured 0.5 and 0.05: bound 0.1 needs 0.5/(2^b-1) <= 0.1, b = 3
	// for layer 0; layer 1 may stay at 1 bit; layer 2 (raw) is never measured.
	r := obs(s, []float64{32, 32, 1}, []float64{0.5, 0.05, 0}, 10, 2)
	if bits := []int{codec.QuantBitsForRate(r[0]), codec.QuantBitsForRate(r[1])}; bits[0] != 3 || bits[1] != 1 || r[2] != 1 {
		t.Fatalf("rates %v (bits %v), want 3 and 1 bits and the unmeasured layer left as it was", r, bits)
	}
	// A loss spike that moves the gradient in proportion changes nothing.
	if r2 := obs(s, r, []float64{0.5 / 7, 0.05, 0}, 100, 20); fmt.Sprint(r2) != fmt.Sprint(r) {
		t.Fatalf("after a proportional spike rates %v, want %v", r2, r)
	}
	// The gradient falls 100x while the loss halves: the bound tightens
	// and more bits follow, up to bf16 and then raw.
	prev := r[0]
	for i, g := range []float64{5, 1, 0.3, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6, 1e-6, 1e-6} {
		r = obs(s, r, []float64{0.5 / float64(int(1)<<codec.QuantBitsForRate(r[0])-1), 0.05, 0}, g, 1)
		if r[0] > prev {
			t.Fatalf("step %d: rate rose from %v to %v while the gradient fell", i, prev, r[0])
		}
		prev = r[0]
	}
	if r[0] != 1 {
		t.Fatalf("with the bound far below bf16's error the rate is %v, want 1 (raw)", r[0])
	}
	// Every quant ladder rate selects the bit width it stands for.
	for _, rate := range s.ladder() {
		if b := codec.QuantBitsForRate(rate); rate != 1 && math.Abs(32/float64(b)-rate) > 1e-9 {
			t.Errorf("ladder rate %v selects %d bits", rate, b)
		}
	}
	// trunc, equal-energy model e(r) = e0 sqrt((1-1/r)/(1-1/r0)): from 0.5 at
	// r0 = 128, bound 0.4 allows 1-1/r <= 0.64*127/128, r = 2 (e = 0.355).
	tr := NewAdaptive(codec.KindTrunc, 0.4, 128)
	if r = obs(tr, []float64{128, 1}, []float64{0.5, 0}, 1, 1); r[0] != 2 {
		t.Fatalf("trunc chose rate %v, want 2", r[0])
	}
	if r = obs(tr, r, []float64{0.5, 0}, 0.5, 1); r[0] != 1 { // bound 0.2: e(2) = 0.5 > 0.2
		t.Fatalf("trunc chose rate %v, want 1", r[0])
	}
	if err := ValidateSchedule(NewAdaptive(codec.KindNone, 1, 128)); err == nil {
		t.Error("adaptive accepted codec none")
	}
	if err := ValidateSchedule(NewAdaptive(codec.KindQuant, 0, 128)); err == nil {
		t.Error("adaptive accepted kappa 0")
	}
}

// TestAdaptiveState: a schedule restored from another's state continues
// as that one does.
func TestAdaptiveState(t *testing.T) {
	st := func(loss, grad, err float64) *metrics.Epoch {
		return &metrics.Epoch{Loss: loss, GradNorm: grad, Rates: []float64{32, 1}, CompError: []float64{err, 0}}
	}
	a := NewAdaptive(codec.KindQuant, 2, 128)
	a.Observe(&metrics.Epoch{Loss: 2, GradNorm: 1, Rates: []float64{128, 1}, CompError: []float64{0.5, 0}})
	a.Observe(st(1.5, 0.6, 0.3))
	b := NewAdaptive(codec.KindQuant, 2, 128)
	if err := b.SetState(a.State()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*metrics.Epoch{st(1.2, 0.3, 0.2), st(1, 0.1, 0.25)} {
		a.Observe(s)
		b.Observe(s)
		ra, rb := make([]float64, 2), make([]float64, 2)
		a.Rates(0, ra)
		b.Rates(0, rb)
		if !reflect.DeepEqual(ra, rb) || !reflect.DeepEqual(a.State(), b.State()) {
			t.Fatalf("restored schedule diverged: rates %v vs %v, state %+v vs %+v", ra, rb, a.State(), b.State())
		}
	}
	if err := b.SetState(AdaptiveState{Rates: []float64{1}}); err == nil {
		t.Error("SetState accepted rates without reference errors")
	}
}

// TestAdaptiveTernRung: with residual coding the quant ladder holds the
// ternary rung (3 levels) between 1 and 2 bits, and predicts across it by
// the levels: from e0 measured at the rung, 2 bits err e0 * 2/3 and 3
// bits e0 * 2/7.
func TestAdaptiveTernRung(t *testing.T) {
	s := NewAdaptive(codec.KindQuant, 1, codec.TernRate)
	s.Tern = true
	if got := fmt.Sprint(s.ladder()); got != "[20 16 10.666666666666666 8 6.4 5.333333333333333 4.571428571428571 4 2 1]" {
		t.Fatalf("ladder %v", got)
	}
	s.Observe(&metrics.Epoch{Rates: []float64{codec.TernRate}, CompError: []float64{0.9}, GradNorm: 1, Loss: 1})
	if p := s.predict(0, 16); math.Abs(p-0.6) > 1e-12 {
		t.Errorf("2 bits predicted %v, want 0.6", p)
	}
	if p := s.predict(0, 32.0/3); math.Abs(p-0.9*2/7) > 1e-12 {
		t.Errorf("3 bits predicted %v, want %v", p, 0.9*2/7)
	}
	r := make([]float64, 1)
	if s.Rates(1, r); r[0] != codec.TernRate { // bound 1: the rung's 0.9 meets it
		t.Errorf("rate %v, want the rung's", r[0])
	}
	// q = ||g||/loss falls to 0.4 of its first value: the smoothed q is 0.7
	// of it, and so is the bound; 2 bits (0.6) meet it.
	s.Observe(&metrics.Epoch{Rates: r, CompError: []float64{0.9}, GradNorm: 0.4, Loss: 1})
	if s.Rates(2, r); r[0] != 16 {
		t.Errorf("rate %v after the bound fell to 0.7, want 16 (2 bits)", r[0])
	}
	plain := NewAdaptive(codec.KindQuant, 1, 128)
	for _, rate := range plain.ladder() {
		if rate == codec.TernRate {
			t.Fatal("the ladder without residual coding holds the ternary rung")
		}
	}
}
