package gnn

import (
	"fmt"
	"math"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// compressedSetup is Cora on 4 METIS ranks, the smallest real case with halo
// traffic on every layer.
func compressedSetup(t *testing.T) (*data.Dataset, string, []int32, ModelConfig) {
	t.Helper()
	ds, err := ogb.Load(sharedData(t, "cora"), ogb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds.NormalizeFeatureRows()
	split := ds.SplitNames()[0]
	parts, err := partition.PartitionMETIS(ds.Graph, 4, 1, ds.Splits[split].Train)
	if err != nil {
		t.Fatal(err)
	}
	mc := ModelConfig{Model: "sage", Layers: 3, Hidden: 20, InDim: ds.NumFeatures, Classes: ds.NumClasses, Seed: 3}
	return ds, split, parts, mc
}

// TestCompressionAtRateOneIsFullCommunication: a schedule that stays at
// r = 1 must reproduce uncompressed training bit for bit.
func TestCompressionAtRateOneIsFullCommunication(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	want := runRanks(t, ds, split, parts, 4, mc, 8, nil)
	for _, kind := range []string{"quant", "trunc"} {
		got := runRanks(t, ds, split, parts, 4, mc, 8, func() CompressConfig {
			return fixedRate(kind, 1)
		})
		for e := range want {
			if got[e].Loss != want[e].Loss || got[e].TestAcc != want[e].TestAcc {
				t.Fatalf("%s at r=1, epoch %d: loss %v, uncompressed %v", kind, e, got[e].Loss, want[e].Loss)
			}
		}
	}
}

// TestCompressedTraining checks what a compressed run reports: the exact
// wire bytes of b-bit quantization per layer (every layer, or all but the
// last with RawLastLayer), a relative error that is positive on compressed
// layers and zero on a raw one, the same result twice (the random draws are
// seeded), and training that still learns.
func TestCompressedTraining(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	rows := haloRows(t, ds, split, parts, 4)
	full := runRanks(t, ds, split, parts, 4, mc, 30, nil)
	for _, tc := range []struct {
		bits    int
		rawLast bool
	}{{1, false}, {4, false}, {8, false}, {4, true}} {
		bits := tc.bits
		t.Run(fmt.Sprintf("quant%d rawLast=%v", bits, tc.rawLast), func(t *testing.T) {
			comp := func() CompressConfig {
				c := fixedRate("quant", 32/float64(bits))
				c.RawLastLayer = tc.rawLast
				return c
			}
			a := runRanks(t, ds, split, parts, 4, mc, 30, comp)
			b := runRanks(t, ds, split, parts, 4, mc, 30, comp)
			dims := mc.Dims()
			for e := range a {
				if a[e].Loss != b[e].Loss {
					t.Fatalf("epoch %d: loss %v, then %v with the same seed", e, a[e].Loss, b[e].Loss)
				}
			}
			last := a[len(a)-1]
			for l := 0; l < mc.Layers; l++ {
				w := min(dims[l], dims[l+1])
				want := rows * int64(w) * 4
				wantBits := 32
				lossy := l < mc.Layers-1 || !tc.rawLast
				if lossy {
					want = rows * (int64((w*bits+7)/8) + 3) // codes and the 3-byte row header
					wantBits = bits
				}
				if last.BytesFwdLayer[l] != want || last.Bits[l] != wantBits {
					t.Errorf("layer %d: %d bytes at %d bits, want %d at %d", l, last.BytesFwdLayer[l], last.Bits[l], want, wantBits)
				}
				if lossy != (last.CompError[l] > 0) {
					t.Errorf("layer %d: relative error %v", l, last.CompError[l])
				}
			}
			if bits == 8 && math.Abs(last.TestAcc-full[len(full)-1].TestAcc) > 0.03 {
				t.Errorf("8-bit test accuracy %.4f, full communication %.4f", last.TestAcc, full[len(full)-1].TestAcc)
			}
		})
	}
}

// TestAdaptiveTraining runs the closed-loop schedule on real ranks, for
// GraphSAGE and for GAT (whose halo rows carry the attention terms too):
// every rank must choose the same rates (runRanks checks their metrics
// agree), the run must repeat exactly, send fewer bytes than full
// communication, tighten its rates as the gradient falls, and still learn.
func TestAdaptiveTraining(t *testing.T) {
	ds, split, parts, sage := compressedSetup(t)
	gat := sage
	gat.Model, gat.Layers, gat.Hidden, gat.Heads, gat.OutHeads = "gat", 2, 8, 4, 1
	for _, mc := range []ModelConfig{sage, gat} {
		t.Run(mc.Model, func(t *testing.T) {
			full := runRanks(t, ds, split, parts, 4, mc, 40, nil)
			comp := func() CompressConfig {
				c := DefaultCompressConfig()
				c.Codec, c.Schedule = "quant", "adaptive"
				return c
			}
			a := runRanks(t, ds, split, parts, 4, mc, 40, comp)
			b := runRanks(t, ds, split, parts, 4, mc, 40, comp)
			var bytesA, bytesFull int64
			for e := range a {
				if a[e].Loss != b[e].Loss || fmt.Sprint(a[e].Rates) != fmt.Sprint(b[e].Rates) {
					t.Fatalf("epoch %d: loss %v rates %v, then %v %v", e, a[e].Loss, a[e].Rates, b[e].Loss, b[e].Rates)
				}
				bytesA += a[e].BytesFwd + a[e].BytesBwd
				bytesFull += full[e].BytesFwd + full[e].BytesBwd
			}
			if a[0].Rates[0] != 128 || a[len(a)-1].Rates[0] >= a[0].Rates[0] {
				t.Errorf("layer 0 rate %v at the start and %v at the end: expected 128, then lower", a[0].Rates[0], a[len(a)-1].Rates[0])
			}
			if bytesA >= bytesFull/2 {
				t.Errorf("adaptive sent %d bytes, full communication %d", bytesA, bytesFull)
			}
			if acc, ref := a[len(a)-1].TestAcc, full[len(full)-1].TestAcc; acc < ref-0.05 {
				t.Errorf("adaptive test accuracy %.4f, full communication %.4f", acc, ref)
			}
		})
	}
}

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

// The recommended schedule: 2-bit quant on every layer and epoch; for
// trunc the VARCO authors' ramp; nothing for no codec.
func TestRecommendedSchedule(t *testing.T) {
	for _, tc := range []struct{ codec, want string }{
		{"quant", "fixed(r=16)"},
		{"trunc", "varco(rmax=128,rmin=1.5,slope=5,T=80)"},
		{"none", ""},
	} {
		c := DefaultCompressConfig()
		c.Codec = tc.codec
		if got := c.ScheduleName(80); got != tc.want {
			t.Errorf("--codec %s alone: schedule %q, want %q", tc.codec, got, tc.want)
		}
	}
}

// TestResidualTraining: residual coding on real ranks repeats exactly,
// reaches the rows with a small fraction of plain 2-bit quantization's
// error at the same bytes, skips rows (fewer bytes) with a threshold, and
// at r = 1 leaves full communication's numbers bit for bit.
func TestResidualTraining(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	const epochs = 30
	run := func(residual string, skip, r float64) []metrics.Epoch {
		return runRanks(t, ds, split, parts, 4, mc, epochs, func() CompressConfig {
			c := fixedRate("quant", r)
			c.Residual, c.ResidualSkip = residual, skip
			return c
		})
	}
	lateError := func(run []metrics.Epoch) (e float64, bytes int64) {
		for _, st := range run[epochs/2:] {
			for _, v := range st.CompError {
				e += v
			}
			bytes += st.BytesFwd + st.BytesBwd
		}
		return e, bytes
	}
	plain, res := run("off", 0, 16), run("on", 0, 16)
	again := run("on", 0, 16)
	for e := range res {
		if res[e].Loss != again[e].Loss {
			t.Fatalf("epoch %d: loss %v, then %v with the same seed", e, res[e].Loss, again[e].Loss)
		}
	}
	ep, bp := lateError(plain)
	er, br := lateError(res)
	t.Logf("late epochs: comp_error %.4g plain, %.4g residual; bytes %d, %d", ep, er, bp, br)
	if !(er < ep/4) || br != bp {
		t.Errorf("residual: comp_error %v against plain %v, bytes %d against %d", er, ep, br, bp)
	}
	if last := res[epochs-1]; last.TrainAcc < 0.5 {
		t.Errorf("residual coding does not learn: train accuracy %.3f", last.TrainAcc)
	}
	if _, bs := lateError(run("on", 0.05, 16)); !(bs < br) {
		t.Errorf("skipping rows sent %d bytes, every row %d", bs, br)
	}
	full, raw := runRanks(t, ds, split, parts, 4, mc, 8, nil), run("on", 0.05, 1)
	for e := range full {
		if raw[e].Loss != full[e].Loss {
			t.Fatalf("residual at r=1, epoch %d: loss %v, full communication %v", e, raw[e].Loss, full[e].Loss)
		}
	}
}

// TestResidualSettings: the residual mode and threshold are checked, and
// auto means the recommended setting's choice.
func TestResidualSettings(t *testing.T) {
	for _, tc := range []struct {
		codec, schedule, residual string
		skip                      float64
		want                      string // "on", "off" or the error's start
	}{
		{"quant", "recommended", "auto", 0.05, "on"},
		{"quant", "fixed", "auto", 0.05, "off"},
		{"trunc", "recommended", "auto", 0.05, "off"},
		{"quant", "varco", "on", 0, "on"},
		{"none", "recommended", "on", 0, "residual: on needs a codec"},
		{"quant", "fixed", "sometimes", 0, `residual: got "sometimes"`},
		{"quant", "fixed", "on", 1, "residual-skip: got 1"},
		{"quant", "fixed", "on", math.NaN(), "residual-skip: got NaN"},
	} {
		c := DefaultCompressConfig()
		c.Codec, c.Schedule, c.Residual, c.ResidualSkip = tc.codec, tc.schedule, tc.residual, tc.skip
		got := map[bool]string{true: "on", false: "off"}[c.ResidualOn()]
		if err := c.Validate(10); err != nil {
			got = err.Error()
		}
		if len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
	// The default threshold, as a checkpoint records it.
	for schedule, want := range map[string]float64{"recommended": RecommendedResidualSkip, "fixed": 0} {
		c := DefaultCompressConfig()
		c.Codec, c.Schedule, c.Residual = "quant", schedule, "on"
		if got := c.WithResidualResolved(true); got.ResidualSkip != want || got.Residual != "on" {
			t.Errorf("schedule %s: threshold %v (%s), want %v", schedule, got.ResidualSkip, got.Residual, want)
		}
	}
}

// TestGradSkipSettings: the gradient skip threshold is checked, its
// default is the recommended setting's on host memory and 0 elsewhere, and
// it reaches the exchange whatever the residual mode.
func TestGradSkipSettings(t *testing.T) {
	for _, tc := range []struct {
		codec, bwd, schedule, residual string
		skip                           float64
		want                           string // the threshold resolved, or the error's start
	}{
		{"quant", "", "recommended", "auto", -1, "0.1"},
		{"quant", "", "fixed", "auto", -1, "0"},
		{"quant", "", "fixed", "off", 0.3, "0.3"},
		{"quant", "", "varco", "on", 0.3, "0.3"},
		{"none", "", "recommended", "auto", -1, "0"},
		{"quant", "", "fixed", "off", 1.5, "grad-skip: got 1.5"},
		{"quant", "", "fixed", "off", math.NaN(), "grad-skip: got NaN"},
		{"quant", "none", "fixed", "off", 0.1, "grad-skip: the gradients go raw"},
		{"none", "", "fixed", "off", 0.1, "grad-skip: the gradients go raw"},
	} {
		c := DefaultCompressConfig()
		c.Codec, c.CodecBwd, c.Schedule, c.Residual, c.GradSkip = tc.codec, tc.bwd, tc.schedule, tc.residual, tc.skip
		got := ""
		if err := c.Validate(10); err != nil {
			got = err.Error()
		} else {
			resolved := c.WithResidualResolved(true)
			got = fmt.Sprint(resolved.GradSkip)
			fwd, _ := codec.ParseKind(c.Codec)
			if r, _ := resolved.residual(fwd); float64(r.SkipGrad) != float64(float32(resolved.GradSkip)) {
				t.Errorf("%+v: the exchange gets %v, the run records %v", tc, r.SkipGrad, resolved.GradSkip)
			}
		}
		if len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
	// Not on a GPU, which cannot run it: the default resolves to 0 there.
	c := DefaultCompressConfig()
	c.Codec = "quant"
	if got := c.WithResidualResolved(false).GradSkip; got != 0 {
		t.Errorf("on a GPU the default threshold resolved to %v, want 0", got)
	}
}

// TestGroupWidthSettings: the header-sharing width is checked, its default
// is the recommended setting's on host memory and 0 elsewhere, and a
// layer's codecs share headers where its rows are narrower.
func TestGroupWidthSettings(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		width    int
		want     string
	}{
		{"recommended", -1, "64"},
		{"fixed", -1, "0"},
		{"fixed", 32, "32"},
		{"fixed", -2, "group-width: got -2"},
		{"fixed", codec.MaxGroup + 1, "group-width: got 4097"},
	} {
		c := DefaultCompressConfig()
		c.Codec, c.Schedule, c.Ratio, c.GroupWidth = "quant", tc.schedule, 16, tc.width
		got := ""
		if err := c.Validate(10); err != nil {
			got = err.Error()
		} else {
			got = fmt.Sprint(c.WithResidualResolved(true).GroupWidth)
		}
		if len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
	c := DefaultCompressConfig()
	c.Codec = "quant"
	if got := c.WithResidualResolved(false).GroupWidth; got != 0 {
		t.Errorf("on a GPU the default width resolved to %d, want 0", got)
	}
	for _, tc := range [][3]int{{64, 5, 13}, {64, 32, 2}, {64, 33, 2}, {64, 64, 1}, {64, 200, 1}, {0, 5, 1}, {64, 0, 1}} {
		if got := GroupFor(tc[0], tc[1]); got != tc[2] {
			t.Errorf("GroupFor(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
	comp, err := c.build(10)
	if err != nil {
		t.Fatal(err)
	}
	fwd, bwd, bits := make([]codec.Spec, 3), make([]codec.Spec, 3), make([]int, 3)
	if err := comp.codecs([]float64{16, 16, 16}, []int{64, 32, 5}, fwd, bwd, bits); err != nil {
		t.Fatal(err)
	}
	for l, g := range []int{1, 2, 13} {
		if fwd[l].Group() != g || bwd[l].Group() != g {
			t.Errorf("layer %d: %s forward, %s backward, want %d rows per header", l, fwd[l].Name(), bwd[l].Name(), g)
		}
	}
}

// TestEvalEvery: with the evaluation pass every 3 epochs (and at the
// last), training is what it was with one every epoch, bit for bit; the
// evaluated epochs measure the same accuracies and the others none, and
// the summary comes from the evaluated epochs. (The training passes after
// an evaluation take the first layer's self term from it, or its whole
// output with --cache-input, the others compute their own: the same bits.)
func TestEvalEvery(t *testing.T) {
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache-input=%v", cache), func(t *testing.T) { testEvalEvery(t, cache) })
	}
}

func testEvalEvery(t *testing.T, cacheInput bool) {
	ds, split, parts, mc := compressedSetup(t)
	const epochs = 8
	comp := func() CompressConfig { // evaluated at full precision: a pass of its own
		c := fixedRate("quant", 16)
		c.CacheInput, c.Eval = cacheInput, EvalExact
		return c
	}
	every := runRanks(t, ds, split, parts, 4, mc, epochs, comp)
	some := runRanksWith(t, ds, split, parts, 4, mc, epochs, comp, rankOptions{order: OrderNone, evalEvery: 3})
	want := metrics.NewSummary()
	for e := range every {
		if math.Float64bits(some[e].Loss) != math.Float64bits(every[e].Loss) || some[e].BytesCum != every[e].BytesCum {
			t.Fatalf("epoch %d: loss %v and %d bytes, with an evaluation every epoch %v and %d", e, some[e].Loss, some[e].BytesCum, every[e].Loss, every[e].BytesCum)
		}
		evaluated := (e+1)%3 == 0 || e == epochs-1
		if some[e].Evaluated() != evaluated {
			t.Fatalf("epoch %d: evaluated %v, expected %v", e, some[e].Evaluated(), evaluated)
		}
		if evaluated {
			if some[e].TrainAcc != every[e].TrainAcc || some[e].ValAcc != every[e].ValAcc || some[e].TestAcc != every[e].TestAcc {
				t.Fatalf("epoch %d: accuracies %v/%v/%v, every epoch %v/%v/%v", e, some[e].TrainAcc, some[e].ValAcc, some[e].TestAcc, every[e].TrainAcc, every[e].ValAcc, every[e].TestAcc)
			}
			want.Add(every[e])
		}
	}
	got := metrics.NewSummary()
	for _, e := range some {
		got.Add(e)
	}
	if got.BestValAcc != want.BestValAcc || got.BestEpoch != want.BestEpoch || got.TestAtBestVal != want.TestAtBestVal || got.FinalTestAcc != every[epochs-1].TestAcc {
		t.Fatalf("summary %+v, expected the evaluated epochs' %+v", got, want)
	}
}
