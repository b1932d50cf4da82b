package compress

import (
	"math"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
)

// TestPresets: every preset is valid, says what it runs, and the
// recommended one hands the exchange residual coding of both directions
// with its row skip and refresh.
func TestPresets(t *testing.T) {
	for name, want := range map[string]string{
		PresetNone:        "full communication",
		PresetRecommended: "halo compression quant forward, quant backward, schedule adaptive(quant,kappa=2,rmax=16), residual coding (rows skipped below 0.005 of their size, each sent at least every 8 epochs), rows narrower than 64 values sharing headers",
		PresetAuthors:     "halo compression trunc forward, trunc backward, schedule varco(rmax=128,rmin=1.5,slope=5,T=80), last layer raw, evaluation compressed",
	} {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(80); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := p.Describe(80); got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
	rec := MustPreset(PresetRecommended)
	if got, want := rec.HaloResidual(), (halo.Residual{Forward: true, Backward: true, Skip: 0.005, Refresh: 8}); got != want {
		t.Errorf("recommended: the exchange gets %+v, want %+v", got, want)
	}
	if !rec.Confirms() || !rec.CodesResiduals() || rec.ExactEval() {
		t.Errorf("recommended: confirms %v, residuals %v, exact evaluation %v", rec.Confirms(), rec.CodesResiduals(), rec.ExactEval())
	}
	if none := MustPreset(PresetNone); none.Enabled() || none.Confirms() || none.HaloResidual().Any() {
		t.Errorf("none: %+v compresses", none)
	}
	if _, err := Preset("best"); err == nil || !strings.Contains(err.Error(), "expected none, recommended, authors") {
		t.Errorf("an unknown preset: %v", err)
	}
}

// TestValidate names the setting at fault.
func TestValidate(t *testing.T) {
	quant := func(edit func(p *Plan)) Plan {
		p := MustPreset(PresetNone)
		p.Fwd, p.Bwd, p.Ratio = codec.KindQuant, codec.KindQuant, 16
		edit(&p)
		return p
	}
	for _, c := range []struct {
		plan Plan
		want string // "" for valid
	}{
		{quant(func(p *Plan) {}), ""},
		{quant(func(p *Plan) { p.Residual = ResidualOn; p.ResidualSkip = 0.05 }), ""},
		{quant(func(p *Plan) { p.Ratio = 0.5 }), "ratio: got 0.5"},
		{quant(func(p *Plan) { p.Schedule = ScheduleVarco; p.RatioMin = 0.5 }), "ratio-min: got 0.5"},
		{quant(func(p *Plan) { p.Schedule = ScheduleAdaptive; p.Kappa = 0 }), "kappa: got 0"},
		{quant(func(p *Plan) { p.Fwd = codec.KindNone; p.Schedule = ScheduleAdaptive }), "codec: the adaptive schedule needs quant or trunc"},
		{quant(func(p *Plan) { p.Schedule = "sometimes" }), `schedule: got "sometimes"`},
		{quant(func(p *Plan) { p.Eval = "never" }), `eval: got "never"`},
		{quant(func(p *Plan) { p.Residual = "sometimes" }), `residual: got "sometimes"`},
		{func() Plan { p := MustPreset(PresetNone); p.Residual = ResidualOn; return p }(), "residual: on needs a codec"},
		{quant(func(p *Plan) { p.Residual = ResidualOn; p.ResidualSkip = 1 }), "residual-skip: got 1"},
		{quant(func(p *Plan) { p.Residual = ResidualOn; p.ResidualSkip = math.NaN() }), "residual-skip: got NaN"},
		{quant(func(p *Plan) { p.ResidualSkip = 0.1 }), "residual-skip: got 0.1, but residual coding is off"},
		{quant(func(p *Plan) { p.GradSkip = 1.5 }), "grad-skip: got 1.5"},
		{quant(func(p *Plan) { p.GradSkip = math.NaN() }), "grad-skip: got NaN"},
		{quant(func(p *Plan) { p.Bwd = codec.KindNone; p.GradSkip = 0.1 }), "grad-skip: the gradients go raw"},
		{quant(func(p *Plan) { p.BitsBwd = 9 }), "bits-bwd: got 9"},
		{quant(func(p *Plan) { p.Bwd = codec.KindTrunc; p.BitsBwd = 1 }), "bits-bwd: the gradients' codec is trunc"},
		{quant(func(p *Plan) { p.GroupWidth = -2 }), "group-width: got -2"},
		{quant(func(p *Plan) { p.GroupWidth = codec.MaxGroup + 1 }), "group-width: got 4097"},
	} {
		err := c.plan.Validate(10)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.plan, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error starting %q", c.plan, err, c.want)
		}
	}
}

// TestCodecs: a layer's codecs share headers where its rows are narrower
// than the group width, the gradients take BitsBwd, and the last layer goes
// raw with RawLastLayer.
func TestCodecs(t *testing.T) {
	for _, tc := range [][3]int{{64, 5, 13}, {64, 32, 2}, {64, 33, 2}, {64, 64, 1}, {64, 200, 1}, {0, 5, 1}, {64, 0, 1}} {
		if got := GroupFor(tc[0], tc[1]); got != tc[2] {
			t.Errorf("GroupFor(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
	p := MustPreset(PresetRecommended)
	fwd, bwd, bits := make([]codec.Spec, 3), make([]codec.Spec, 3), make([]int, 3)
	// BitsBwd 0 sends the gradients at the activations' bits.
	for _, bitsBwd := range []int{0, 1} {
		p.BitsBwd = bitsBwd
		want := bitsBwd
		if want == 0 {
			want = 2
		}
		if err := p.Codecs([]float64{16, 16, 16}, []int{64, 32, 5}, fwd, bwd, bits); err != nil {
			t.Fatal(err)
		}
		for l, g := range []int{1, 2, 13} {
			if fwd[l].Group() != g || bwd[l].Group() != g || fwd[l].Bits() != 2 || bwd[l].Bits() != want || bits[l] != 2 {
				t.Errorf("bits-bwd %d, layer %d: %s forward, %s backward (%d bits reported), want 2 and %d bits and %d rows per header", bitsBwd, l, fwd[l].Name(), bwd[l].Name(), bits[l], want, g)
			}
		}
	}
	p.RawLastLayer = true
	rates := []float64{16, 16, 16}
	if err := p.Codecs(rates, []int{64, 32, 5}, fwd, bwd, bits); err != nil {
		t.Fatal(err)
	}
	if rates[2] != 1 || !fwd[2].Raw() || !bwd[2].Raw() || bits[2] != 32 {
		t.Errorf("raw last layer: rate %v, %s forward, %s backward, %d bits", rates[2], fwd[2].Name(), bwd[2].Name(), bits[2])
	}
}

// TestTernRung: at rates 20 to 32 a quant exchange that codes residuals
// sends ternary codes, grouped like quant's below the group width; a plain
// one sends 1 bit, as do residual-coded exchanges at 32 and above.
func TestTernRung(t *testing.T) {
	p := MustPreset(PresetRecommended)
	fwd, bwd, bits := make([]codec.Spec, 2), make([]codec.Spec, 2), make([]int, 2)
	if err := p.Codecs([]float64{20, 32}, []int{64, 16}, fwd, bwd, bits); err != nil {
		t.Fatal(err)
	}
	if fwd[0] != codec.Tern() || bwd[0] != codec.Tern() || bits[0] != codec.TernBits {
		t.Errorf("rate 20, residual coding: %s and %s (%d bits), want tern", fwd[0].Name(), bwd[0].Name(), bits[0])
	}
	if fwd[1] != codec.Quant(1).Grouped(4) || bits[1] != 1 {
		t.Errorf("rate 32: %s (%d bits), want quant(b=1,g=4)", fwd[1].Name(), bits[1])
	}
	p.Residual = ResidualForward
	if err := p.Codecs([]float64{25, 25}, []int{64, 16}, fwd, bwd, bits); err != nil {
		t.Fatal(err)
	}
	if fwd[1] != codec.Tern().Grouped(4) || bwd[0] != codec.Quant(1) {
		t.Errorf("activations only: %s forward, %s backward, want tern(g=4) and quant(b=1)", fwd[1].Name(), bwd[0].Name())
	}
}
