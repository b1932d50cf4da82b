package gnn

import (
	"fmt"
	"math"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
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
		got := runRanks(t, ds, split, parts, 4, mc, 8, func() compress.Plan {
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
			comp := func() compress.Plan {
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
			comp := func() compress.Plan {
				c := fixedRate("quant", 1)
				c.Schedule = compress.ScheduleAdaptive
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

// TestResidualTraining: residual coding on real ranks repeats exactly,
// reaches the rows with a small fraction of plain 2-bit quantization's
// error at the same bytes, skips rows (fewer bytes) with a threshold, and
// at r = 1 leaves full communication's numbers bit for bit.
func TestResidualTraining(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	const epochs = 30
	run := func(residual compress.ResidualMode, skip, r float64) []metrics.Epoch {
		return runRanks(t, ds, split, parts, 4, mc, epochs, func() compress.Plan {
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
	comp := func() compress.Plan { // evaluated at full precision: a pass of its own
		c := fixedRate("quant", 16)
		c.CacheInput, c.Eval = cacheInput, compress.EvalExact
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
