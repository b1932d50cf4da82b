package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
)

// CompressConfig is a run's halo compression (VARCO): a codec kind per
// direction and the schedule of its rate, for every layer's exchange
// including the last (RawLastLayer keeps the VARCO authors' raw last layer).
type CompressConfig struct {
	Codec    string // the forward activations: none, trunc or quant
	CodecBwd string // the returned gradients; "" means Codec
	// Schedule is fixed (Ratio), varco (RatioMax down to RatioMin),
	// adaptive, or recommended: for quant fixed at RecommendedQuantRatio,
	// for trunc the VARCO authors' varco ramp.
	Schedule string
	// Ratio is the fixed rate; RatioMax the first rate of varco and
	// adaptive, RatioMin varco's last; Slope varco's s in
	// r(t) = max(RatioMax - s*t*(RatioMax-RatioMin)/(T-2), RatioMin).
	Ratio, RatioMax, RatioMin, Slope float64
	// Kappa is adaptive's relative halo error allowed at the largest
	// gradient norm (see Adaptive).
	Kappa float64
	// Eval is how a compressed run measures accuracy: EvalConfirm (the
	// default; "" means it too), EvalExact or EvalCompressed.
	Eval string
	// RawLastLayer sends the last layer's halo rows (its input activations
	// and their gradients) raw whatever the schedule says, as the VARCO
	// authors' code does; by default the last layer is compressed at the
	// rate its schedule gives it like every other layer.
	RawLastLayer bool
	// Residual is residual coding with error feedback (halo.Residual): on
	// (both directions), forward (the activations only), off, or auto (the
	// recommended quant setting's choice, else off).
	Residual string
	// ResidualSkip is the threshold below which a row's residual is not
	// sent (halo.Residual.Skip; 0 sends every row). -1, the default, is
	// RecommendedResidualSkip under the recommended quant setting, else 0.
	ResidualSkip float64
	// GradSkip leaves out of the lossy backward exchanges that code no
	// residuals every gradient row whose squared norm is below GradSkip
	// times the mean of its message's rows (halo.Residual.SkipGrad; 0 sends
	// every row). -1, the default, is RecommendedGradSkip under the
	// recommended quant setting, else 0.
	GradSkip float64
	// GroupWidth makes the quant rows of a layer narrower than GroupWidth
	// values share one header per ceil(GroupWidth/width) consecutive rows
	// (codec.Spec.Grouped; 0 gives every row its own). -1, the default, is
	// RecommendedGroupWidth under the recommended quant setting, else 0.
	GroupWidth int
	// CacheInput has a distributed run without dropout send the first
	// layer's input features once, raw, and read their cached aggregation
	// from then on (Model.CacheInput): they never change. By default the
	// layer's rows cross every epoch, through its codec, as in the VARCO
	// authors' code (and SAR), so that full communication is the paper's.
	CacheInput bool
}

// DefaultCompressConfig is no compression, with the recommended schedule
// for when a codec is chosen and the VARCO authors' ramp (128 down to 1.5,
// slope 5) ready for the varco schedule.
func DefaultCompressConfig() CompressConfig {
	return CompressConfig{Codec: "none", Schedule: "recommended", Eval: EvalConfirm, Ratio: 1, RatioMax: 128, RatioMin: 1.5, Slope: 5, Kappa: DefaultKappa,
		Residual: "auto", ResidualSkip: -1, GradSkip: -1, GroupWidth: -1}
}

// The evaluation modes of a compressed run (CompressConfig.Eval).
const (
	// EvalConfirm reads every epoch's accuracies from the training pass,
	// under compression, and keeps the parameters of the epochs with the
	// best validation score; after the last epoch those and the final
	// parameters are evaluated once at full precision (Trainer.Run). The
	// run's reported accuracies are exact without an exact pass, and its
	// traffic, in every epoch.
	EvalConfirm = "confirm"
	// EvalExact evaluates every epoch (Trainer.EvalEvery) in a pass of its
	// own whose exchanges are raw.
	EvalExact = "exact"
	// EvalCompressed reads the accuracies from the training pass only, as
	// the VARCO authors did.
	EvalCompressed = "compressed"
)

// RecommendedQuantRatio is the rate of the recommended quant setting: 2
// bits per value on every layer, every epoch. Chosen on validation accuracy
// against varco and adaptive (docs/VARCO.md, "The recommended setting").
const RecommendedQuantRatio = 16

// The rest of the recommended quant setting (docs/VARCO.md): residual
// coding of the activations, leaving out rows whose residual is at most
// RecommendedResidualSkip of their size, and the returned gradients at
// RecommendedQuantBitsBwd bits, plainly quantized (a 1-bit residual does
// not converge).
const (
	RecommendedResidual     = "forward"
	RecommendedResidualSkip = 0.02
	RecommendedQuantBitsBwd = 1
	// RecommendedGradSkip leaves out the gradient rows below a tenth of
	// their message's mean squared norm (docs/VARCO.md).
	RecommendedGradSkip = 0.1
	// RecommendedGroupWidth gives rows narrower than 64 values a shared
	// header (docs/VARCO.md).
	RecommendedGroupWidth = 64
)

// Backward is the codec kind of the returned gradients.
func (c CompressConfig) Backward() string {
	if c.CodecBwd == "" {
		return c.Codec
	}
	return c.CodecBwd
}

// Enabled reports whether any exchange is compressed.
func (c CompressConfig) Enabled() bool { return c.Codec != "none" || c.Backward() != "none" }

// Validate checks the codec kinds and the schedule's parameters for a run
// of the given length, naming the offending setting.
func (c CompressConfig) Validate(epochs int) error {
	_, err := c.build(epochs)
	return err
}

// Confirms reports whether a run of c keeps its best epochs' parameters
// and evaluates them at full precision after its last epoch: a valid
// compressed run in mode EvalConfirm.
func (c *Config) Confirms() bool {
	comp, err := c.CompressConfig.build(c.Epochs)
	return err == nil && comp != nil && comp.eval == EvalConfirm
}

// ScheduleName describes the rate schedule of a run of the given length,
// e.g. "varco(rmax=128,rmin=8,slope=5,T=60)" ("" if c is not valid).
func (c CompressConfig) ScheduleName(epochs int) string {
	if comp, err := c.build(epochs); err == nil && comp != nil {
		return comp.schedule.Name()
	}
	return ""
}

// compression is a validated CompressConfig, ready for the trainer.
type compression struct {
	fwd, bwd     codec.Kind
	schedule     Schedule
	eval         string // EvalConfirm, EvalExact or EvalCompressed
	rawLastLayer bool
	residual     halo.Residual
	bwdBits      int // the gradients' quant bits on lossy layers; 0: the schedule's rate
	groupWidth   int // quant rows narrower than this share headers; 0: none do
}

// build parses and validates c, returning nil when nothing is compressed.
func (c CompressConfig) build(epochs int) (*compression, error) {
	fwd, err := codec.ParseKind(c.Codec)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	bwd, err := codec.ParseKind(c.Backward())
	if err != nil {
		return nil, fmt.Errorf("codec-bwd: %w", err)
	}
	var s Schedule
	switch c.Schedule {
	case "recommended":
		s = Fixed{R: RecommendedQuantRatio}
		if fwd == codec.KindTrunc {
			s = Varco{RMax: c.RatioMax, RMin: c.RatioMin, Slope: c.Slope, Epochs: epochs}
		}
	case "fixed":
		s = Fixed{R: c.Ratio}
	case "varco":
		s = Varco{RMax: c.RatioMax, RMin: c.RatioMin, Slope: c.Slope, Epochs: epochs}
	case "adaptive":
		s = NewAdaptive(fwd, c.Kappa, c.RatioMax)
	default:
		return nil, fmt.Errorf("schedule: got %q, expected recommended, fixed, varco or adaptive", c.Schedule)
	}
	if err := ValidateSchedule(s); err != nil {
		return nil, err
	}
	eval := c.Eval
	switch eval {
	case "":
		eval = EvalConfirm
	case EvalConfirm, EvalExact, EvalCompressed:
	default:
		return nil, fmt.Errorf("eval: got %q, expected confirm, exact or compressed", c.Eval)
	}
	res, err := c.residual(fwd)
	if err != nil {
		return nil, err
	}
	if fwd == codec.KindNone && bwd == codec.KindNone {
		return nil, nil
	}
	gw, err := c.groupWidth(c.recommendedQuant(fwd))
	if err != nil {
		return nil, err
	}
	comp := &compression{fwd: fwd, bwd: bwd, schedule: s, eval: eval, rawLastLayer: c.RawLastLayer, residual: res, groupWidth: gw}
	if c.recommendedQuant(fwd) && bwd == codec.KindQuant {
		comp.bwdBits = RecommendedQuantBitsBwd
	}
	return comp, nil
}

// recommendedQuant reports whether c is the recommended quant setting
// (forward codec fwd), whose defaults the thresholds resolve to.
func (c CompressConfig) recommendedQuant(fwd codec.Kind) bool {
	return c.Schedule == "recommended" && fwd == codec.KindQuant
}

// BackwardBits is the quant bits of the returned gradients where a layer
// is compressed, when a setting fixes them apart from the schedule's rate
// (the recommended quant setting); 0 otherwise.
func (c CompressConfig) BackwardBits(epochs int) int {
	if comp, err := c.build(epochs); err == nil && comp != nil {
		return comp.bwdBits
	}
	return 0
}

// residual resolves the residual mode: auto is the recommended setting's
// choice under recommended quant, off otherwise.
func (c CompressConfig) residual(fwd codec.Kind) (halo.Residual, error) {
	recommended := c.recommendedQuant(fwd)
	skip, err := c.skip(recommended)
	if err != nil {
		return halo.Residual{}, err
	}
	mode := c.Residual
	if mode == "auto" {
		mode = "off"
		if recommended {
			mode = RecommendedResidual
		}
	}
	gradSkip, err := c.gradSkip(recommended)
	if err != nil {
		return halo.Residual{}, err
	}
	r := halo.Residual{Skip: float32(skip), SkipGrad: float32(gradSkip)}
	switch mode {
	case "on":
		r.Forward, r.Backward = true, true
	case "forward":
		r.Forward = true
	case "off":
		r.Skip = 0
		if r.SkipGrad == 0 {
			return halo.Residual{}, nil
		}
		return r, nil
	default:
		return halo.Residual{}, fmt.Errorf("residual: got %q, expected auto, on, forward or off", c.Residual)
	}
	if !c.Enabled() {
		return halo.Residual{}, fmt.Errorf("residual: %s needs a codec (--codec)", mode)
	}
	return r, nil
}

// groupWidth is the header-sharing width, the default (-1) resolved.
func (c CompressConfig) groupWidth(recommended bool) (int, error) {
	switch w := c.GroupWidth; {
	case w == -1 && recommended:
		return RecommendedGroupWidth, nil
	case w == -1:
		return 0, nil
	case w < 0 || w > codec.MaxGroup:
		return 0, fmt.Errorf("group-width: got %d, expected 0 (a header per row) to %d values", w, codec.MaxGroup)
	default:
		return w, nil
	}
}

// GroupFor is the rows per header of a layer whose rows are width wide,
// under header-sharing width w.
func GroupFor(w, width int) int {
	if width <= 0 || width >= w {
		return 1
	}
	return min((w+width-1)/width, codec.MaxGroup)
}

// gradSkip is the gradient skip threshold, the default (-1) resolved.
func (c CompressConfig) gradSkip(recommended bool) (float64, error) {
	switch s := c.GradSkip; {
	case s == -1 && recommended:
		return RecommendedGradSkip, nil
	case s == -1 || s == 0:
		return 0, nil
	case !(s > 0 && s <= 1):
		return 0, fmt.Errorf("grad-skip: got %v, expected a number in [0, 1]", s)
	case c.Backward() == "none":
		return 0, fmt.Errorf("grad-skip: the gradients go raw (codec %q, codec-bwd %q); it needs a lossy backward codec", c.Codec, c.CodecBwd)
	default:
		return s, nil
	}
}

// skip is the residual skip threshold, the default (-1) resolved.
func (c CompressConfig) skip(recommended bool) (float64, error) {
	switch s := c.ResidualSkip; {
	case s == -1 && recommended:
		return RecommendedResidualSkip, nil
	case s == -1:
		return 0, nil
	case !(s >= 0 && s < 1):
		return 0, fmt.Errorf("residual-skip: got %v, expected a number in [0, 1)", s)
	default:
		return s, nil
	}
}

// WithResidualResolved returns c with an auto residual mode and default
// thresholds made what they mean, so that a checkpoint records what ran:
// the recommended setting's choice where residual coding and gradient
// skipping can run (host memory; not on a GPU yet), else off.
func (c CompressConfig) WithResidualResolved(host bool) CompressConfig {
	fwd, _ := codec.ParseKind(c.Codec)
	r, err := c.residual(fwd)
	recommended := c.recommendedQuant(fwd)
	if skip, serr := c.skip(recommended); serr == nil {
		c.ResidualSkip = skip
	}
	if w, werr := c.groupWidth(recommended); werr == nil {
		c.GroupWidth = hostDefault(c.GroupWidth, w, host)
	}
	if g, gerr := c.gradSkip(recommended); gerr == nil {
		c.GradSkip = hostDefault(c.GradSkip, g, host)
	}
	if c.Residual == "auto" {
		c.Residual = "off"
		switch {
		case err != nil || !r.On() || !host:
		case r.Backward:
			c.Residual = "on"
		default:
			c.Residual = "forward"
		}
	}
	return c
}

// hostDefault is a host-only part's setting once resolved: what its flag
// set, or where the flag was left at the default (-1), the resolved value
// on host memory and off (0) elsewhere.
func hostDefault[T int | float64](set, resolved T, host bool) T {
	switch {
	case set != -1:
		return set
	case host:
		return resolved
	}
	return 0
}

// ResidualOn reports whether the run codes residuals (whatever the run's
// length, which only the schedule depends on).
func (c CompressConfig) ResidualOn() bool {
	fwd, err := codec.ParseKind(c.Codec)
	if err != nil {
		return false
	}
	r, err := c.residual(fwd)
	return err == nil && r.On()
}

// codecs returns the forward and backward codec of every layer at its rate
// (codec.None() = raw), and the per-layer figure the metrics report: the
// bits per value for quant, the columns kept for trunc, 32 bits when raw.
// With rawLastLayer it sets the last layer's rate to 1.
func (c *compression) codecs(rates []float64, widths []int, fwd, bwd []codec.Spec, bits []int) error {
	if c.rawLastLayer {
		rates[len(widths)-1] = 1
	}
	for l, r := range rates {
		fwd[l], bwd[l], bits[l] = codec.None(), codec.None(), 32
		if r == 1 {
			continue
		}
		var err error
		if fwd[l], err = codec.ForRate(c.fwd, r); err != nil {
			return err
		}
		if bwd[l], err = codec.ForRate(c.bwd, r); err != nil {
			return err
		}
		if c.bwdBits > 0 {
			bwd[l] = codec.Quant(c.bwdBits)
		}
		g := GroupFor(c.groupWidth, widths[l])
		fwd[l], bwd[l] = fwd[l].Grouped(g), bwd[l].Grouped(g)
		switch c.fwd {
		case codec.KindQuant:
			bits[l] = codec.QuantBitsForRate(r)
		case codec.KindTrunc:
			bits[l] = max(1, min(widths[l], int(float64(widths[l])/r))) // columns kept
		}
	}
	return nil
}
