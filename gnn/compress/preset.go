package compress

import (
	"fmt"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
)

// The presets (--compress). Each is a whole Plan: the same name runs the
// same algorithm and sends the same bytes on every device.
const (
	// PresetNone is full communication. Its schedule parameters are the
	// defaults that expert settings start from (the VARCO authors' ramp,
	// DefaultKappa).
	PresetNone = "none"
	// PresetRecommended is residual coding with error feedback of the
	// activations and of the returned gradients, on every layer and epoch,
	// at 2 bits or more as the adaptive rule asks (docs/VARCO.md, "The
	// recommended setting"): a row's error shrinks with every exchange and
	// vanishes as the row stops changing, and a layer whose measured error
	// breaks the descent bound gets more bits. A row whose residual is at most 0.5% of its size stays
	// out, but each row goes at least every 8 epochs; rows narrower than 64
	// values share headers.
	// (--ratio-max 20 starts it from ternary codes instead: fewer bytes,
	// but outside the margin on two check members; docs/VARCO.md.)
	PresetRecommended = "recommended"
	// PresetAuthors is the VARCO authors' setting: truncation on their ramp
	// from 128 down to 1.5 with slope 5, the last layer raw, accuracies
	// read under compression.
	PresetAuthors = "authors"
)

// Presets lists the preset names, the default first.
var Presets = []string{PresetNone, PresetRecommended, PresetAuthors}

// Preset returns the named preset's plan.
func Preset(name string) (Plan, error) {
	p := Plan{Fwd: codec.KindNone, Bwd: codec.KindNone, Schedule: ScheduleFixed, Ratio: 1,
		RatioMax: 128, RatioMin: 1.5, Slope: 5, Kappa: DefaultKappa, Residual: ResidualOff, Eval: EvalConfirm}
	switch name {
	case PresetNone:
	case PresetRecommended:
		p.Fwd, p.Bwd, p.Schedule, p.RatioMax = codec.KindQuant, codec.KindQuant, ScheduleAdaptive, 16
		p.Residual, p.ResidualSkip, p.ResidualRefresh, p.GroupWidth = ResidualOn, 0.005, 8, 64
	case PresetAuthors:
		p.Fwd, p.Bwd, p.Schedule, p.RawLastLayer, p.Eval = codec.KindTrunc, codec.KindTrunc, ScheduleVarco, true, EvalCompressed
	default:
		return Plan{}, fmt.Errorf("compress: got %q, expected %s", name, strings.Join(Presets, ", "))
	}
	return p, nil
}

// MustPreset is Preset for a name known to exist.
func MustPreset(name string) Plan {
	p, err := Preset(name)
	if err != nil {
		panic(err)
	}
	return p
}

// ParseSchedule reads a schedule's name.
func ParseSchedule(name string) (ScheduleKind, error) {
	switch k := ScheduleKind(name); k {
	case ScheduleFixed, ScheduleVarco, ScheduleAdaptive:
		return k, nil
	}
	return "", fmt.Errorf("got %q, expected fixed, varco or adaptive", name)
}

// ParseEval reads an evaluation mode's name.
func ParseEval(name string) (Eval, error) {
	switch e := Eval(name); e {
	case EvalConfirm, EvalExact, EvalCompressed:
		return e, nil
	}
	return "", fmt.Errorf("got %q, expected confirm, exact or compressed", name)
}

// ParseResidual reads a residual mode's name.
func ParseResidual(name string) (ResidualMode, error) {
	switch r := ResidualMode(name); r {
	case ResidualOff, ResidualForward, ResidualOn:
		return r, nil
	}
	return "", fmt.Errorf("got %q, expected on, forward or off", name)
}

// UnmarshalText reads a schedule, an evaluation mode and a residual mode
// by name (a checkpoint's attributes), refusing any other.
func (k *ScheduleKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseSchedule(string(b))
	return err
}

func (e *Eval) UnmarshalText(b []byte) (err error) {
	*e, err = ParseEval(string(b))
	return err
}

func (r *ResidualMode) UnmarshalText(b []byte) (err error) {
	*r, err = ParseResidual(string(b))
	return err
}
