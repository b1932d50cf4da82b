// Package compress is a run's halo compression, decided once: the named
// presets, the typed Plan that a preset and a user's expert settings
// resolve to, and the rate schedules that give every layer's rate at each
// epoch. The trainer, the memory estimate, the run header, the checkpoint
// and the ranks' agreement all read the same Plan; nothing is resolved
// later or differently by device.
package compress

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
)

// ScheduleKind names a rate schedule.
type ScheduleKind string

// The rate schedules (Plan.NewSchedule).
const (
	// ScheduleFixed compresses at Plan.Ratio every epoch.
	ScheduleFixed ScheduleKind = "fixed"
	// ScheduleVarco is the VARCO authors' ramp from Plan.RatioMax down to
	// Plan.RatioMin (Varco).
	ScheduleVarco ScheduleKind = "varco"
	// ScheduleAdaptive is the closed loop on the measured error (Adaptive).
	ScheduleAdaptive ScheduleKind = "adaptive"
)

// Eval is how a compressed run measures accuracy.
type Eval string

// The evaluation modes of a compressed run.
const (
	// EvalConfirm reads every epoch's accuracies from the training pass,
	// under compression, and keeps the parameters of the epochs with the
	// best validation score; after the last epoch those and the final
	// parameters are evaluated once at full precision. The run's reported
	// accuracies are exact without an exact pass, and its traffic, in
	// every epoch.
	EvalConfirm Eval = "confirm"
	// EvalExact evaluates every epoch in a pass of its own whose exchanges
	// are raw.
	EvalExact Eval = "exact"
	// EvalCompressed reads the accuracies from the training pass only, as
	// the VARCO authors did.
	EvalCompressed Eval = "compressed"
)

// ResidualMode says which directions code residuals with error feedback
// (halo.Residual).
type ResidualMode string

// The residual modes.
const (
	ResidualOff     ResidualMode = "off"
	ResidualForward ResidualMode = "forward" // the activations
	ResidualOn      ResidualMode = "on"      // the activations and the returned gradients
)

// Plan is a run's halo compression, every field explicit. The zero value
// is not valid: start from a preset (Preset).
type Plan struct {
	// Fwd is the codec of the activations, Bwd that of the gradients that
	// return to their owners (codec.KindNone: raw).
	Fwd, Bwd codec.Kind
	// Schedule gives every layer's rate at each epoch: Ratio for fixed;
	// RatioMax down to RatioMin with slope Slope for varco; adaptive starts
	// at RatioMax and allows a relative error Kappa at the largest gradient.
	Schedule                         ScheduleKind
	Ratio, RatioMax, RatioMin, Slope float64
	Kappa                            float64
	// BitsBwd fixes the quant bits of the returned gradients on every layer
	// the schedule compresses; 0 takes them from the layer's rate.
	BitsBwd int
	// RawLastLayer sends the last layer's rows raw whatever the schedule
	// says, as the VARCO authors' code does.
	RawLastLayer bool
	// Residual codes the rows' differences from the receiver's copy
	// (halo.Residual), in the directions it names. ResidualSkip leaves out
	// a row whose residual is at most that fraction of its largest value (0
	// sends every row); ResidualRefresh > 0 sends every row at least once
	// every ResidualRefresh epochs all the same, so that no row's error
	// lasts (0: a row stays out while its residual is small).
	Residual        ResidualMode
	ResidualSkip    float64
	ResidualRefresh int
	// GradSkip leaves out of the lossy backward exchanges small gradient
	// rows against the mean squared norm of their message's rows (0 sends
	// every row): where they code no residuals, a row whose squared norm
	// is below GradSkip times that mean; where they do, also a row whose
	// residual's largest magnitude m has width·m² at most GradSkip times
	// it, its residual kept for later (halo.Residual.SkipGrad).
	GradSkip float64
	// GroupWidth makes the quant rows of a layer narrower than GroupWidth
	// values share one header per ceil(GroupWidth/width) rows (0: a header
	// per row).
	GroupWidth int
	// Eval is how a compressed run measures accuracy.
	Eval Eval
	// CacheInput has a distributed run without dropout send the first
	// layer's input features once, raw, and read their cached aggregation
	// from then on (they never change). Off, the layer's rows cross every
	// epoch, through its codec, as in the VARCO authors' code.
	CacheInput bool
}

// Enabled reports whether any exchange is compressed.
func (p *Plan) Enabled() bool { return p.Fwd != codec.KindNone || p.Bwd != codec.KindNone }

// Confirms reports whether the run keeps its best epochs' parameters and
// evaluates them at full precision after its last epoch (EvalConfirm).
func (p *Plan) Confirms() bool { return p.Enabled() && p.Eval == EvalConfirm }

// CodesResiduals reports whether the run keeps residual state.
func (p *Plan) CodesResiduals() bool { return p.Enabled() && p.Residual != ResidualOff }

// ExactEval reports whether a compressed run evaluates every epoch in a
// raw pass of its own.
func (p *Plan) ExactEval() bool { return p.Enabled() && p.Eval == EvalExact }

// Validate checks the plan for a run of the given length, naming the
// setting at fault by its flag's name.
func (p *Plan) Validate(epochs int) error {
	if p.Fwd > codec.KindQuant || p.Bwd > codec.KindQuant {
		return fmt.Errorf("codec: kinds %d and %d, expected none, trunc or quant", p.Fwd, p.Bwd)
	}
	switch p.Eval {
	case EvalConfirm, EvalExact, EvalCompressed:
	default:
		return fmt.Errorf("eval: got %q, expected confirm, exact or compressed", p.Eval)
	}
	switch p.Schedule {
	case ScheduleFixed, ScheduleVarco, ScheduleAdaptive:
	default:
		return fmt.Errorf("schedule: got %q, expected fixed, varco or adaptive", p.Schedule)
	}
	if err := ValidateSchedule(p.NewSchedule(epochs)); err != nil {
		return err
	}
	switch p.Residual {
	case ResidualOff:
	case ResidualForward, ResidualOn:
		if !p.Enabled() {
			return fmt.Errorf("residual: %s needs a codec (--codec)", p.Residual)
		}
	default:
		return fmt.Errorf("residual: got %q, expected on, forward or off", p.Residual)
	}
	switch s := p.ResidualSkip; {
	case !(s >= 0 && s < 1):
		return fmt.Errorf("residual-skip: got %v, expected a number in [0, 1)", s)
	case s > 0 && p.Residual == ResidualOff:
		return fmt.Errorf("residual-skip: got %v, but residual coding is off (--residual)", s)
	}
	switch k := p.ResidualRefresh; {
	case k < 0:
		return fmt.Errorf("residual-refresh: got %d, expected 0 (never) or a number of epochs", k)
	case k > 0 && p.ResidualSkip == 0:
		return fmt.Errorf("residual-refresh: got %d, but no row is skipped (--residual-skip 0)", k)
	}
	switch s := p.GradSkip; {
	case !(s >= 0 && s <= 1):
		return fmt.Errorf("grad-skip: got %v, expected a number in [0, 1]", s)
	case s > 0 && p.Bwd == codec.KindNone:
		return fmt.Errorf("grad-skip: the gradients go raw (codec-bwd none); it needs a lossy backward codec")
	case s > 0 && p.Residual == ResidualOn && p.ResidualSkip == 0:
		return fmt.Errorf("grad-skip: residual-coded gradients leave rows out through the skip's bitmap; it needs --residual-skip > 0")
	}
	switch b := p.BitsBwd; {
	case b == 0:
	case b < 0 || b > 8 && b != 16:
		return fmt.Errorf("bits-bwd: got %d, expected 0 (the schedule's rate), 1 to 8 or 16", b)
	case p.Bwd != codec.KindQuant:
		return fmt.Errorf("bits-bwd: the gradients' codec is %s; it applies to quant", p.Bwd)
	}
	if w := p.GroupWidth; w < 0 || w > codec.MaxGroup {
		return fmt.Errorf("group-width: got %d, expected 0 (a header per row) to %d values", w, codec.MaxGroup)
	}
	return nil
}

// NewSchedule is a fresh schedule of the plan's rates for a run of the
// given length (Adaptive keeps state).
func (p *Plan) NewSchedule(epochs int) Schedule {
	switch p.Schedule {
	case ScheduleVarco:
		return Varco{RMax: p.RatioMax, RMin: p.RatioMin, Slope: p.Slope, Epochs: epochs}
	case ScheduleAdaptive:
		a := NewAdaptive(p.Fwd, p.Kappa, p.RatioMax)
		a.Tern = p.Residual != ResidualOff
		return a
	}
	return Fixed{R: p.Ratio}
}

// HaloResidual is what the exchanges of training passes code: residuals
// and the rows they leave out.
func (p *Plan) HaloResidual() halo.Residual {
	if !p.Enabled() {
		return halo.Residual{}
	}
	r := halo.Residual{SkipGrad: float32(p.GradSkip)}
	if p.Residual != ResidualOff {
		r.Forward, r.Backward, r.Skip = true, p.Residual == ResidualOn, float32(p.ResidualSkip)
		r.Refresh = p.ResidualRefresh
	}
	return r
}

// Codecs writes the forward and backward codec of every layer at its rate
// (codec.None() = raw) and the figure the metrics report per layer: the
// bits per value for quant, the columns kept for trunc, 32 where raw.
// widths are the rows' widths per layer. With RawLastLayer it sets the
// last layer's rate to 1.
func (p *Plan) Codecs(rates []float64, widths []int, fwd, bwd []codec.Spec, bits []int) error {
	if p.RawLastLayer {
		rates[len(widths)-1] = 1
	}
	for l, r := range rates {
		fwd[l], bwd[l], bits[l] = codec.None(), codec.None(), 32
		if r == 1 {
			continue
		}
		var err error
		if fwd[l], err = codec.ForRate(p.Fwd, r); err != nil {
			return err
		}
		if bwd[l], err = codec.ForRate(p.Bwd, r); err != nil {
			return err
		}
		if p.BitsBwd > 0 {
			bwd[l] = codec.Quant(p.BitsBwd)
		}
		if ternRung(p.Fwd, r) && p.Residual != ResidualOff {
			fwd[l] = codec.Tern()
		}
		if ternRung(p.Bwd, r) && p.Residual == ResidualOn && p.BitsBwd == 0 {
			bwd[l] = codec.Tern()
		}
		g := GroupFor(p.GroupWidth, widths[l])
		fwd[l], bwd[l] = fwd[l].Grouped(g), bwd[l].Grouped(g)
		switch p.Fwd {
		case codec.KindQuant:
			bits[l] = fwd[l].Bits()
		case codec.KindTrunc:
			bits[l] = max(1, min(widths[l], int(float64(widths[l])/r))) // columns kept
		}
	}
	return nil
}

// ternRung reports whether an exchange of codec kind k at rate r is on
// quant's ternary rung, [TernRate, 32): where it codes residuals it sends
// ternary codes, where it does not 1 bit (floor(32/r)), as before the rung
// existed. Error feedback through 1-bit codes does not converge, through
// ternary ones it does (docs/VARCO.md).
func ternRung(k codec.Kind, r float64) bool {
	return k == codec.KindQuant && r >= codec.TernRate && r < 32
}

// GroupFor is the rows per header of a layer whose rows are width wide,
// under header-sharing width w.
func GroupFor(w, width int) int {
	if width <= 0 || width >= w {
		return 1
	}
	return min((w+width-1)/width, codec.MaxGroup)
}

// Describe is the plan for people, as the run header prints it: the
// codecs, the schedule for a run of the given length and each mechanism
// that is on.
func (p *Plan) Describe(epochs int) string {
	if !p.Enabled() {
		return "full communication"
	}
	out := fmt.Sprintf("halo compression %s forward, %s backward, schedule %s", p.Fwd, p.Bwd, p.NewSchedule(epochs).Name())
	if p.BitsBwd > 0 {
		out += fmt.Sprintf(" (gradients at %d bit)", p.BitsBwd)
	}
	if p.RawLastLayer {
		out += ", last layer raw"
	}
	switch p.Residual {
	case ResidualOn:
		out += ", residual coding"
	case ResidualForward:
		out += ", residual coding of the activations"
	}
	switch {
	case p.ResidualSkip > 0 && p.ResidualRefresh > 0:
		out += fmt.Sprintf(" (rows skipped below %g of their size, each sent at least every %d epochs)", p.ResidualSkip, p.ResidualRefresh)
	case p.ResidualSkip > 0:
		out += fmt.Sprintf(" (rows skipped below %g of their size)", p.ResidualSkip)
	}
	if p.GroupWidth > 0 {
		out += fmt.Sprintf(", rows narrower than %d values sharing headers", p.GroupWidth)
	}
	if p.GradSkip > 0 {
		out += fmt.Sprintf(", gradient rows (or their residuals) below %g of the mean squared norm left out", p.GradSkip)
	}
	if p.Eval != EvalConfirm {
		out += fmt.Sprintf(", evaluation %s", p.Eval)
	}
	return out
}
