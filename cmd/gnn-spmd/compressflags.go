package main

import (
	"flag"
	"slices"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
)

// compressFlags are --compress, a preset, and the expert flags that each
// replace one field of the preset's plan, whatever their order on the
// command line: the plan is the preset with exactly the fields given
// changed, and nothing else follows from one of them.
type compressFlags struct {
	preset      string
	presetGiven bool
	edits       map[string]func(*compress.Plan)
}

// compressExpert are the expert flags, in the order --help-all lists them.
var compressExpert = []string{"codec", "codec-bwd", "schedule", "ratio", "ratio-max", "ratio-min", "slope", "kappa",
	"bits-bwd", "residual", "residual-skip", "residual-refresh", "grad-skip", "group-width", "raw-last-layer", "cache-input", "eval"}

func (c *compressFlags) register(fs *flag.FlagSet) {
	c.edits = map[string]func(*compress.Plan){}
	c.preset = compress.PresetNone
	fs.Func("compress", "halo compression: none (default), recommended (also --codec quant alone), or authors (the VARCO authors' setting)", func(v string) error {
		c.preset, c.presetGiven = v, true
		return nil
	})
	edit := func(name, usage string, parse func(string) (func(*compress.Plan), error)) {
		fs.Func(name, usage, func(v string) error {
			e, err := parse(v)
			if err == nil {
				c.edits[name] = e
			}
			return err
		})
	}
	boolean := func(name, usage string, set func(*compress.Plan, bool)) {
		fs.BoolFunc(name, usage, func(v string) error {
			b, err := strconv.ParseBool(v)
			if err == nil {
				c.edits[name] = func(p *compress.Plan) { set(p, b) }
			}
			return err
		})
	}
	number := func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }
	edit("codec", "codec of the activations: none, trunc (leading columns) or quant (stochastic b-bit); also of the gradients unless --codec-bwd",
		field(codec.ParseKind, func(p *compress.Plan, k codec.Kind) { p.Fwd = k }))
	edit("codec-bwd", "codec of the gradients returned to the rows' owners: none, trunc or quant",
		field(codec.ParseKind, func(p *compress.Plan, k codec.Kind) { p.Bwd = k }))
	edit("schedule", "rate over epochs: fixed (--ratio), varco (--ratio-max down to --ratio-min, --slope) or adaptive (--kappa; docs/VARCO.md)",
		field(compress.ParseSchedule, func(p *compress.Plan, s compress.ScheduleKind) { p.Schedule = s }))
	edit("ratio", "fixed: the rate r >= 1 (quant: 32/r bits per value; trunc: 1/r of the columns)", field(number, func(p *compress.Plan, x float64) { p.Ratio = x }))
	edit("ratio-max", "varco and adaptive: the first epoch's rate (default 128)", field(number, func(p *compress.Plan, x float64) { p.RatioMax = x }))
	edit("ratio-min", "varco: the last rate (default 1.5)", field(number, func(p *compress.Plan, x float64) { p.RatioMin = x }))
	edit("slope", "varco: s in r(t) = max(rmax - s*t*(rmax-rmin)/(T-2), rmin) (default 5)", field(number, func(p *compress.Plan, x float64) { p.Slope = x }))
	edit("kappa", "adaptive: the relative halo error allowed at the largest gradient norm (default 2)", field(number, func(p *compress.Plan, x float64) { p.Kappa = x }))
	edit("bits-bwd", "quant bits of the returned gradients on every compressed layer (0: from the layer's rate)", field(strconv.Atoi, func(p *compress.Plan, n int) { p.BitsBwd = n }))
	edit("residual", "residual coding with error feedback: on (activations and gradients), forward (activations) or off",
		field(compress.ParseResidual, func(p *compress.Plan, r compress.ResidualMode) { p.Residual = r }))
	edit("residual-skip", "with residual coding: leave out a row whose residual is at most this fraction of its largest value (0: send every row)", field(number, func(p *compress.Plan, x float64) { p.ResidualSkip = x }))
	edit("residual-refresh", "with --residual-skip: send every row at least once every this many epochs (0: a row stays out while its residual is small)", field(strconv.Atoi, func(p *compress.Plan, n int) { p.ResidualRefresh = n }))
	edit("grad-skip", "leave out of the lossy backward exchanges a gradient row (with residual coding: a row whose residual) is below this fraction of its message's mean squared norm (0: none)", field(number, func(p *compress.Plan, x float64) { p.GradSkip = x }))
	edit("group-width", "quant rows of a layer narrower than this many values share one header per ceil(this/width) rows (0: a header per row)", field(strconv.Atoi, func(p *compress.Plan, n int) { p.GroupWidth = n }))
	boolean("raw-last-layer", "send the last layer's rows raw whatever the schedule, as the VARCO authors' code does", func(p *compress.Plan, b bool) { p.RawLastLayer = b })
	boolean("cache-input", "without dropout, send the first layer's input once, raw, and keep its aggregation (by default it crosses every epoch, through the codec, as in the VARCO authors' code)", func(p *compress.Plan, b bool) { p.CacheInput = b })
	edit("eval", "how a compressed run measures accuracy: confirm (from the training pass; the best epoch's and the final parameters at full precision after the last epoch), exact (a raw pass every epoch) or compressed (the VARCO authors')",
		field(compress.ParseEval, func(p *compress.Plan, e compress.Eval) { p.Eval = e }))
}

// field is an expert flag's edit: its value read by parse and set into
// a plan's field by set.
func field[T any](parse func(string) (T, error), set func(*compress.Plan, T)) func(string) (func(*compress.Plan), error) {
	return func(v string) (func(*compress.Plan), error) {
		x, err := parse(v)
		return func(p *compress.Plan) { set(p, x) }, err
	}
}

// scheduleKnobs are the flags that apply to some schedules only.
var scheduleKnobs = map[string][]compress.ScheduleKind{
	"ratio":     {compress.ScheduleFixed},
	"ratio-max": {compress.ScheduleVarco, compress.ScheduleAdaptive},
	"ratio-min": {compress.ScheduleVarco},
	"slope":     {compress.ScheduleVarco},
	"kappa":     {compress.ScheduleAdaptive},
}

// plan is the preset with the expert flags' fields replaced, checked: a
// schedule's knob given for another schedule, and a lossy codec at rate 1
// (which sends every row raw), are usage errors. --codec quant alone names
// the recommended preset: choosing the codec and nothing else leaves the
// rate to the method.
func (c *compressFlags) plan() (compress.Plan, error) {
	if c.quantAlone() {
		return compress.MustPreset(compress.PresetRecommended), nil
	}
	p, err := compress.Preset(c.preset)
	if err != nil {
		return p, cli.Usagef("train: --%v", err)
	}
	for _, name := range compressExpert {
		if e, ok := c.edits[name]; ok {
			e(&p)
		}
	}
	if _, ok := c.edits["codec"]; ok {
		if _, bwd := c.edits["codec-bwd"]; !bwd {
			p.Bwd = p.Fwd
		}
	}
	for _, name := range compressExpert {
		kinds, knob := scheduleKnobs[name]
		if _, given := c.edits[name]; !given || !knob {
			continue
		}
		if !slices.Contains(kinds, p.Schedule) {
			return p, cli.Usagef("train: --%s applies to --schedule %s; the schedule is %s (%s)", name, joinKinds(kinds), p.Schedule, c.scheduleSource())
		}
	}
	if p.Enabled() && p.Schedule == compress.ScheduleFixed && p.Ratio == 1 {
		return p, cli.Usagef("train: --codec %s at rate 1 sends every row raw: choose a rate (--ratio) or a preset (--compress recommended)", p.Fwd)
	}
	return p, nil
}

// quantAlone is whether --codec quant is the only compression flag given.
func (c *compressFlags) quantAlone() bool {
	e, ok := c.edits["codec"]
	if c.presetGiven || !ok || len(c.edits) != 1 {
		return false
	}
	var p compress.Plan
	e(&p)
	return p.Fwd == codec.KindQuant
}

// scheduleSource says where the plan's schedule came from.
func (c *compressFlags) scheduleSource() string {
	if _, ok := c.edits["schedule"]; ok {
		return "--schedule"
	}
	return "--compress " + c.preset
}

func joinKinds(kinds []compress.ScheduleKind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, " or ")
}
