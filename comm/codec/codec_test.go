package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// allCodecs lists one codec of every kind and width.
// mix64 is the hash the reference encoders below draw from.
var mix64 = rng.Mix64

func allCodecs() []Spec {
	cs := []Spec{None(), Trunc(1), Trunc(1.5), Trunc(4), Trunc(300)}
	for _, b := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16, 32} {
		cs = append(cs, Quant(b))
	}
	return cs
}

// testShapes covers empty, single-column and non-multiple-of-8 widths.
var testShapes = [][2]int{{0, 0}, {0, 5}, {3, 0}, {1, 1}, {4, 1}, {3, 3}, {5, 7}, {2, 8}, {6, 9}, {3, 255}, {2, 256}}

func randRows(rng *rand.Rand, rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// roundTrip encodes and decodes x, checking through canaries that neither
// side writes past its buffer, and returns the payload and the decoded rows.
func roundTrip(t *testing.T, c Spec, x []float32, rows, cols int, seed uint64) ([]byte, []float32) {
	t.Helper()
	ws := c.WireSize(rows, cols)
	buf := make([]byte, ws+16)
	for i := range buf {
		buf[i] = 0xA5
	}
	c.Encode(buf[:ws], x, rows, cols, seed)
	for i, v := range buf[ws:] {
		if v != 0xA5 {
			t.Fatalf("%s %dx%d: Encode wrote byte %d past WireSize %d", c.Name(), rows, cols, i, ws)
		}
	}
	out := make([]float32, rows*cols+4)
	canary := float32(12345.5)
	for i := range out {
		out[i] = canary
	}
	c.Decode(out[:rows*cols], buf[:ws], rows, cols)
	for i, v := range out[rows*cols:] {
		if v != canary {
			t.Fatalf("%s %dx%d: Decode wrote value %d past the rows", c.Name(), rows, cols, i)
		}
	}
	return buf[:ws], out[:rows*cols]
}

func TestCodecNames(t *testing.T) {
	want := map[string]Spec{
		"none": None(), "trunc(r=4)": Trunc(4), "trunc(r=1.5)": Trunc(1.5),
		"quant(b=4)": Quant(4), "quant(b=1)": Quant(1), "quant(b=16,bf16)": Quant(16),
	}
	for name, c := range want {
		if c.Name() != name {
			t.Errorf("Name() = %q, want %q", c.Name(), name)
		}
	}
	if Quant(32) != None() {
		t.Errorf("Quant(32) is %s, want none (its bytes are raw float32)", Quant(32).Name())
	}
}

func TestCodecWireSize(t *testing.T) {
	for _, s := range testShapes {
		r, f := s[0], s[1]
		check := func(c Spec, want int) {
			if got := c.WireSize(r, f); got != want {
				t.Errorf("%s WireSize(%d, %d) = %d, want %d", c.Name(), r, f, got, want)
			}
		}
		check(None(), 4*r*f)
		check(Quant(32), 4*r*f)
		check(Quant(16), 2*r*f)
		for b := 1; b <= 8; b++ {
			check(Quant(b), r*(3+(f*b+7)/8))
		}
		check(Trunc(1), 4*r*f)
	}
}

func TestCodecNoneRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []Spec{None(), Quant(32)} {
		for _, s := range testShapes {
			x := randRows(rng, s[0], s[1])
			if len(x) > 0 {
				x[0] = float32(math.NaN())
				x[len(x)-1] = float32(math.Inf(-1))
			}
			_, y := roundTrip(t, c, x, s[0], s[1], 7)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
					t.Fatalf("%s %v: value %d: %v -> %v", c.Name(), s, i, x[i], y[i])
				}
			}
		}
	}
}

func TestCodecTruncKeep(t *testing.T) {
	cases := []struct {
		cols int
		r    float64
		k    int
	}{
		{0, 4, 0}, {1, 1, 1}, {1, 4, 1}, {3, 4, 1}, {4, 4, 1}, {7, 4, 1}, {8, 4, 2}, {256, 4, 64},
		{255, 4, 63}, {9, 1.5, 6}, {10, 3, 3}, {128, 1, 128}, {128, 1.0000001, 127}, {5, 1000, 1},
		{5, math.Inf(1), 1}, {100, 2.5, 40},
	}
	for _, tc := range cases {
		if got := Trunc(tc.r).Keep(tc.cols); got != tc.k {
			t.Errorf("Trunc(%v) keeps %d of %d columns, want %d", tc.r, got, tc.cols, tc.k)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range []float64{1, 1.5, 2, 3, 4, 7.5, 16, 64, 1000} {
		c := Trunc(r)
		for _, s := range testShapes {
			rows, cols := s[0], s[1]
			k := c.Keep(cols)
			if cols > 0 && (k < 1 || k > cols || (float64(cols)/r >= 1 && k != int(math.Floor(float64(cols)/r)))) {
				t.Fatalf("%s: k = %d for %d columns", c.Name(), k, cols)
			}
			x := randRows(rng, rows, cols)
			p, y := roundTrip(t, c, x, rows, cols, 0)
			if len(p) != 4*rows*k {
				t.Fatalf("%s: payload %d bytes for %dx%d, k = %d", c.Name(), len(p), rows, cols, k)
			}
			for i := range rows {
				for j := range cols {
					want := x[i*cols+j]
					if j >= k {
						want = 0
					}
					if y[i*cols+j] != want {
						t.Fatalf("%s %dx%d: (%d,%d) = %v, want %v", c.Name(), rows, cols, i, j, y[i*cols+j], want)
					}
				}
			}
		}
	}
}

// checkQuantRow checks the guarantees of quant(b) for one row: the grid
// [origin, origin + n*scale] holds the row, its span at least hi-lo and, for
// a row holding 0, at most 32/31 of it (plus the bf16 rounding), for a row
// whose min is 0 at most the bf16 rounding above it; every value
// decodes inside it and within one step of the input; a zero row exactly.
func checkQuantRow(t *testing.T, c Spec, x, y []float32, hdr []byte) {
	t.Helper()
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	b := c.Bits()
	n := float32(int(1)<<b - 1)
	origin, scale := quantHeaderOf(hdr, b)
	top := quantTop(hdr, b)
	if origin > lo || top < hi {
		t.Fatalf("%s: grid [%v, %v] does not hold the row [%v, %v]", c.Name(), origin, top, lo, hi)
	}
	want := (hi - lo) / n
	if scale < want || (lo <= 0 && hi >= 0 && scale > want*(32.0/31)*(1+1.0/128)) || (lo == 0 && scale > want*(1+1.0/128)) {
		t.Fatalf("%s: scale %v, (hi-lo)/n = %v", c.Name(), scale, want)
	}
	for j := range x {
		if y[j] < origin || y[j] > top {
			t.Fatalf("%s: %v decoded to %v outside [%v, %v]", c.Name(), x[j], y[j], origin, top)
		}
		// One step, plus the rounding of origin + q*scale to float32.
		ulp := math.Abs(float64(math.Nextafter32(max(-origin, top), float32(math.Inf(1)))) - float64(max(-origin, top)))
		if d := math.Abs(float64(y[j]) - float64(x[j])); d > float64(scale)*(1+1e-5)+ulp {
			t.Fatalf("%s: %v decoded to %v, more than a step %v away", c.Name(), x[j], y[j], scale)
		}
		if lo == 0 && hi == 0 && y[j] != x[j] {
			t.Fatalf("%s: zero row value %v decoded to %v", c.Name(), x[j], y[j])
		}
	}
}

func TestCodecQuantRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for b := 1; b <= 8; b++ {
		c := Quant(b)
		st := func(cols int) int { return quantStride(cols, uint(b)) }
		for _, s := range testShapes {
			rows, cols := s[0], s[1]
			x := randRows(rng, rows, cols)
			if rows > 1 { // a constant row
				for j := range cols {
					x[cols+j] = -0.375
				}
			}
			if rows > 2 && cols > 2 { // a shifted, narrow range
				for j := range cols {
					x[2*cols+j] = 1000 + x[2*cols+j]*1e-3
				}
			}
			if rows > 3 { // ReLU outputs: the min is 0
				for j := range cols {
					x[3*cols+j] = max(x[3*cols+j], 0)
				}
				x[3*cols] = 0
			}
			p, y := roundTrip(t, c, x, rows, cols, uint64(b))
			for i := range rows {
				if cols > 0 {
					checkQuantRow(t, c, x[i*cols:(i+1)*cols], y[i*cols:(i+1)*cols], p[i*st(cols):])
				}
			}
		}
	}
}

// refQuant is a plain transcription of the quant(b) format, bit by bit, to
// check the optimised pack and unpack loops against.
func refQuant(x []float32, rows, cols, b int, seed uint64) []byte {
	stride := 3 + (cols*b+7)/8
	out := make([]byte, rows*stride)
	n := float32(int(1)<<b - 1)
	h := mix64(seed)
	for i := range rows {
		row := x[i*cols : (i+1)*cols]
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range row {
			if !math.IsNaN(float64(v)) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		scale, k := refGrid(lo, hi, n)
		lo = float32(float32(k) * (float32(n*scale) / 32))
		inv := float32(0)
		if scale != 0 {
			inv = 1 / scale
		}
		o := out[i*stride:]
		sb := math.Float32bits(scale)
		if sb&0xffff != 0 {
			panic("refQuant: the scale is not a bf16")
		}
		o[0], o[1], o[2] = byte(sb>>16), byte(sb>>24), byte(int8(k))
		for j, v := range row {
			f := (v - lo) * (inv * 256)
			if math.IsNaN(float64(f)) || f < 0 {
				f = 0
			}
			f = min(f, n*256)
			g := int(math.RoundToEven(float64(f)))
			q := (g + int(refDraw(h, i, j))) / 256
			for bit := range b {
				if q>>bit&1 == 1 {
					pos := j*b + bit
					o[3+pos/8] |= 1 << (pos % 8)
				}
			}
		}
	}
	return out
}

// refBF16Up rounds s >= 0 up to a bf16 with float64 arithmetic: the
// multiple of its bf16 spacing (8 significant bits, 2^-133 at the bottom)
// at or above it, at most the largest finite bf16.
func refBF16Up(s float32) float32 {
	v := float64(s)
	if v == 0 {
		return s
	}
	_, e := math.Frexp(v)
	ulp := math.Ldexp(1, max(e-8, -133))
	return float32(min(3.3895313892515355e38, math.Ceil(v/ulp)*ulp))
}

// refGrid is the scale and grid multiple k of a row [lo, hi] (lo > hi:
// no values) as the quant(b) spec lists them, candidate by candidate.
func refGrid(lo, hi, n float32) (scale float32, k int) {
	if lo > hi || (math.Abs(float64(lo)) < 0x1p-96 && math.Abs(float64(hi)) < 0x1p-96) {
		return 0, 0
	}
	lo, hi = lo+0, hi+0
	w := hi - lo
	if math.IsInf(float64(w), 0) {
		w = math.MaxFloat32
	}
	sMax := math.Float32frombits(math.Float32bits(math.MaxFloat32/(5*n)) >> 16 << 16)
	fits := func(s float32) (int, bool) {
		u := float32(n*s) / 32
		if u == 0 {
			return 0, lo == 0 && hi == 0
		}
		f := math.Floor(float64(lo / u))
		if float32(float32(f)*u) > lo {
			f--
		}
		f = min(max(f, -128), 127)
		return int(f), float32(float32(f)*u) <= lo && float32(float32(f+32)*u) >= hi
	}
	cands := []float32{w / n, w / (n * 31 / 32)}
	if lo > 0 {
		cands = append(cands, hi/(n*159/32))
	} else if hi < 0 {
		cands = append(cands, -lo/(n*4))
	}
	ok := false
	for _, c := range cands {
		scale = min(refBF16Up(c), sMax)
		if k, ok = fits(scale); ok {
			break
		}
	}
	for !ok && scale < sMax {
		scale = min(refBF16Up(2*scale), sMax)
		k, ok = fits(scale)
	}
	if scale == 0 || 1/scale > math.MaxFloat32/256 {
		return 0, 0
	}
	return scale, k
}

func refDequant(p []byte, rows, cols, b int) []float32 {
	stride := 3 + (cols*b+7)/8
	y := make([]float32, rows*cols)
	for i := range rows {
		o := p[i*stride:]
		scale := math.Float32frombits(uint32(o[0])<<16 | uint32(o[1])<<24)
		n := float32(int(1)<<b - 1)
		lo := float32(float32(int8(o[2])) * (float32(n*scale) / 32))
		for j := range cols {
			q := 0
			for bit := range b {
				pos := j*b + bit
				q |= int(o[3+pos/8]>>(pos%8)&1) << bit
			}
			m := float32(float32(q) * scale) // rounded, as the GPU's -fmad=false
			y[i*cols+j] = lo + m
		}
	}
	return y
}

func TestCodecQuantReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for b := 1; b <= 8; b++ {
		c := Quant(b)
		for _, cols := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256} {
			rows := 3
			x := randRows(rng, rows, cols)
			if cols > 3 {
				x[1] = float32(math.NaN()) // ignored by min/max, decodes to lo
				x[cols+1] = 7              // constant row 1
				for j := range cols {
					x[cols+j] = 7
				}
			}
			want := refQuant(x, rows, cols, b, 99)
			got, y := roundTrip(t, c, x, rows, cols, 99)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s cols %d: payload differs from the reference\n got %x\nwant %x", c.Name(), cols, got, want)
			}
			// Decode arbitrary bytes too, to exercise every code value.
			for i := range got {
				if i%(len(got)/rows) >= 3 {
					got[i] = byte(rng.Uint32())
				}
			}
			c.Decode(y, got, rows, cols)
			wantY := refDequant(got, rows, cols, b)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(wantY[i]) {
					t.Fatalf("%s cols %d: decoded %d = %v, reference %v", c.Name(), cols, i, y[i], wantY[i])
				}
			}
		}
	}
}

// TestCodecGolden pins the exact bytes of small payloads, the cross-check
// for other implementations (the GPU codecs).
func TestCodecGolden(t *testing.T) {
	x := []float32{0.5, -1.25, 3, 0.1, 2.2, 1e-3, -7, 7, 0, 0.25}
	cases := []struct {
		c    Spec
		want string
	}{
		{Quant(1), "8d40f61c6041f015"},
		{Quant(3), "213ff6cb670040f0c447"},
		{Quant(8), "8d3cf66d07fe56cf613df08000ff7f84"},
		{Quant(16), "003fa0bf4040cd3d0d40833ae0c0e0400000803e"},
		{Trunc(2.5), "0000003f0000a0bf6f12833a0000e0c0"},
	}
	for _, tc := range cases {
		p := make([]byte, tc.c.WireSize(2, 5))
		tc.c.Encode(p, x, 2, 5, 2024)
		if got := hex.EncodeToString(p); got != tc.want {
			t.Errorf("%s: payload %s, want %s", tc.c.Name(), got, tc.want)
		}
	}
	// One row of 9 inexact values: every draw matters.
	x = []float32{1.0 / 3, -2.0 / 3, 0.1, 0.7, 1e-5, 123.456, -0.3, 2.5e-3, 9.99}
	for _, tc := range []struct {
		c    Spec
		want string
	}{
		{Quant(4), "0941ff1011f01002"},
		{Quant(16), "aa3e2bbfcd3d333f2737f74299be243b2041"},
	} {
		p := make([]byte, tc.c.WireSize(1, len(x)))
		tc.c.Encode(p, x, 1, len(x), 7)
		if got := hex.EncodeToString(p); got != tc.want {
			t.Errorf("%s: payload %s, want %s", tc.c.Name(), got, tc.want)
		}
	}
}

// TestCodecQuantUnbiased averages the decode of one row over many seeds:
// the mean error of every value must stay within a few standard errors of
// zero and shrink like 1/sqrt(n). Each value decodes to one of its two grid
// neighbours, a step apart, the upper one with probability p, so one draw
// has standard deviation step*sqrt(p(1-p)).
func TestCodecQuantUnbiased(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const cols = 64
	x := randRows(rng, 1, cols)
	for _, c := range []Spec{Quant(1), Quant(2), Quant(4), Quant(8), Quant(16)} {
		var prevRMS float64
		for _, n := range []int{64, 4096} {
			p := make([]byte, c.WireSize(1, cols))
			y := make([]float32, cols)
			sum := make([]float64, cols)
			for s := range n {
				c.Encode(p, x, 1, cols, SeedFor(77, s, 0, 0, 0, 1))
				c.Decode(y, p, 1, cols)
				for j, v := range y {
					sum[j] += float64(v) - float64(x[j])
				}
			}
			var absBias, sigmas, rms float64
			for j := range cols {
				var step, prob float64
				if c.Bits() <= 8 {
					lo, scale := quantHeaderOf(p, c.Bits())
					f := float32((x[j] - lo) * (1 / scale))
					f = min(max(f, 0), float32(int(1)<<c.Bits()-1))
					step, prob = float64(scale), float64(f-float32(math.Floor(float64(f))))
				} else { // bf16
					w := math.Float32bits(x[j])
					down := math.Float32frombits(w &^ 0xffff)
					step = math.Abs(float64(math.Float32frombits(w&^0xffff+0x10000)) - float64(down))
					prob = float64(w&0xffff) / (1 << 16)
				}
				sigma := step * math.Sqrt(prob*(1-prob)/float64(n))
				bias := sum[j] / float64(n)
				if math.Abs(bias) > 5*sigma+1e-6 { // slack: float32 rounding of the grid
					t.Errorf("%s n=%d: value %v has bias %.3g, %.1f standard errors", c.Name(), n, x[j], bias, bias/sigma)
				}
				absBias += math.Abs(bias)
				sigmas += sigma
				rms += bias * bias
			}
			if absBias > 3*sigmas {
				t.Errorf("%s n=%d: mean absolute bias %.3g over the 3-sigma bound %.3g", c.Name(), n, absBias/cols, 3*sigmas/cols)
			}
			rms = math.Sqrt(rms / cols)
			t.Logf("%s n=%d: mean |bias| %.3g, mean sigma %.3g, RMS bias %.3g", c.Name(), n, absBias/cols, sigmas/cols, rms)
			if prevRMS > 0 && rms > prevRMS/3 { // 64x the draws: expect 1/8
				t.Errorf("%s: RMS bias %.3g with 64x the draws, was %.3g", c.Name(), rms, prevRMS)
			}
			prevRMS = rms
		}
	}
}

func TestCodecDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 17, 33
	x := randRows(rng, rows, cols)
	for _, c := range allCodecs() {
		ws := c.WireSize(rows, cols)
		a, b, d := make([]byte, ws), make([]byte, ws), make([]byte, ws)
		c.Encode(a, x, rows, cols, 5)
		c.Encode(b, x, rows, cols, 5)
		c.Encode(d, x, rows, cols, 6)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: same seed, different bytes", c.Name())
		}
		stochastic := c.Kind() == KindQuant
		if stochastic == bytes.Equal(a, d) {
			t.Errorf("%s: other seed changes the bytes: %v, want %v", c.Name(), !bytes.Equal(a, d), stochastic)
		}
		// Concurrent encodes of row blocks: the hash uses the row within the
		// call, so encoding the same block alone gives the same bytes.
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				p := make([]byte, ws)
				c.Encode(p, x, rows, cols, 5)
				if !bytes.Equal(p, a) {
					t.Errorf("%s: goroutine %d got other bytes", c.Name(), g)
				}
			})
		}
		wg.Wait()
	}
}

func TestCodecShapeMismatchPanics(t *testing.T) {
	for _, c := range allCodecs() {
		ws := c.WireSize(2, 3)
		cases := map[string]func(){
			"short dst":   func() { c.Encode(make([]byte, max(ws-1, 0)), make([]float32, 6), 2, 3, 0) },
			"long dst":    func() { c.Encode(make([]byte, ws+1), make([]float32, 6), 2, 3, 0) },
			"short src":   func() { c.Encode(make([]byte, ws), make([]float32, 5), 2, 3, 0) },
			"long pay":    func() { c.Decode(make([]float32, 6), make([]byte, ws+1), 2, 3) },
			"short out":   func() { c.Decode(make([]float32, 5), make([]byte, ws), 2, 3) },
			"neg shape":   func() { c.Decode(nil, nil, -1, 0) },
			"neg shape 2": func() { c.Encode(nil, nil, 0, -3, 0) },
		}
		for what, f := range cases {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s did not panic", c.Name(), what)
					}
				}()
				f()
			}()
		}
	}
}

func TestCodecConstructorsPanic(t *testing.T) {
	for what, f := range map[string]func(){
		"Trunc(0.5)": func() { Trunc(0.5) }, "Trunc(NaN)": func() { Trunc(math.NaN()) },
		"Quant(0)": func() { Quant(0) }, "Quant(9)": func() { Quant(9) }, "Quant(12)": func() { Quant(12) },
		"QuantBitsForRate(0)": func() { QuantBitsForRate(0) }, "QuantBitsForRate(NaN)": func() { QuantBitsForRate(math.NaN()) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", what)
				}
			}()
			f()
		}()
	}
}

func TestCodecQuantBitsForRate(t *testing.T) {
	for _, tc := range []struct {
		r float64
		b int
	}{
		{0.5, 32}, {1, 32}, {1.5, 16}, {2, 16}, {2.5, 8}, {3, 8}, {4, 8}, {4.5, 7}, {5, 6}, {6, 5},
		{7, 4}, {8, 4}, {10, 3}, {11, 2}, {16, 2}, {17, 1}, {32, 1}, {64, 1}, {128, 1}, {math.Inf(1), 1},
	} {
		if got := QuantBitsForRate(tc.r); got != tc.b {
			t.Errorf("QuantBitsForRate(%v) = %d, want %d", tc.r, got, tc.b)
		}
	}
}

// forRate is ForRate with the kind named as on the command line.
func forRate(kind string, r float64) (Spec, error) {
	k, err := ParseKind(kind)
	if err != nil {
		return Spec{}, err
	}
	return ForRate(k, r)
}

func TestCodecForRate(t *testing.T) {
	for _, tc := range []struct {
		kind string
		r    float64
		name string
	}{
		{"none", 0, "none"}, {"none", 8, "none"}, {"trunc", 1, "trunc(r=1)"}, {"trunc", 4, "trunc(r=4)"},
		{"quant", 1, "none"}, {"quant", 2, "quant(b=16,bf16)"}, {"quant", 4, "quant(b=8)"}, {"quant", 8, "quant(b=4)"},
	} {
		c, err := forRate(tc.kind, tc.r)
		if err != nil || c.Name() != tc.name {
			t.Errorf("ForRate(%q, %v) = %v, %v; want %s", tc.kind, tc.r, c, err, tc.name)
		}
	}
	for _, tc := range []struct {
		kind string
		r    float64
	}{{"zip", 2}, {"trunc", 0.5}, {"quant", math.NaN()}, {"", 1}, {"Quant", 2}} {
		if c, err := forRate(tc.kind, tc.r); err == nil {
			t.Errorf("ForRate(%q, %v) = %s, want an error", tc.kind, tc.r, c.Name())
		}
	}
	for _, k := range []string{"none", "trunc", "quant"} {
		if kind, err := ParseKind(k); err != nil || kind.String() != k {
			t.Errorf("ParseKind(%q) = %v, %v", k, kind, err)
		}
	}
	if _, err := ParseKind("trunc(r=4)"); err == nil {
		t.Error("ParseKind accepts a full codec name")
	}
}

func TestCodecSeedFor(t *testing.T) {
	base := SeedFor(1, 2, 3, 0, 4, 5)
	if base != SeedFor(1, 2, 3, 0, 4, 5) {
		t.Fatal("SeedFor is not deterministic")
	}
	seen := map[uint64]string{base: "base"}
	for what, s := range map[string]uint64{
		"seed": SeedFor(2, 2, 3, 0, 4, 5), "epoch": SeedFor(1, 3, 3, 0, 4, 5), "layer": SeedFor(1, 2, 4, 0, 4, 5),
		"dir": SeedFor(1, 2, 3, 1, 4, 5), "sender": SeedFor(1, 2, 3, 0, 5, 5), "receiver": SeedFor(1, 2, 3, 0, 4, 6),
		"swap": SeedFor(1, 2, 3, 0, 5, 4), "neg": SeedFor(1, -2, 3, 0, 4, 5),
	} {
		if prev, ok := seen[s]; ok {
			t.Errorf("changing %s gives the seed of %s", what, prev)
		}
		seen[s] = what
	}
}

func TestCodecBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	c := Quant(16)
	maxF := math.MaxFloat32
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(maxF), -float32(maxF),
		math.Float32frombits(0x7f7f8000), math.Float32frombits(0x7f7f0001), math.Float32frombits(1),
		math.Float32frombits(0x807fffff), 1e-40, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xff800001),
		math.Float32frombits(0x7fc00000)}
	x := append(special, randRows(rng, 1, 1000)...)
	for i := 0; i < 200; i++ { // wide exponents
		x = append(x, float32(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(70)-35))))
	}
	for seed := range uint64(50) {
		p, y := roundTrip(t, c, x, 1, len(x), seed)
		if want := refBF16(x, len(x), seed); !bytes.Equal(p, want) {
			t.Fatalf("seed %d: payload differs from the reference", seed)
		}
		for j, v := range x {
			w, g := math.Float32bits(v), math.Float32bits(y[j])
			switch {
			case v != v:
				if g&0x7fffffff <= 0x7f800000 || g>>31 != w>>31 {
					t.Fatalf("NaN %08x decoded to %08x", w, g)
				}
			case math.IsInf(float64(v), 0):
				if g != w {
					t.Fatalf("%v decoded to %v", v, y[j])
				}
			default:
				if g&0xffff != 0 {
					t.Fatalf("%v decoded to %v, not a bf16", v, y[j])
				}
				down := w &^ 0xffff
				up := down + 0x10000
				if down&0x7fffffff == 0x7f7f0000 {
					up = down // saturation at the largest finite bf16
				}
				if g != down && (g != up || w == down) {
					t.Fatalf("%v (%08x) decoded to %v (%08x), not a neighbour", v, w, y[j], g)
				}
				if math.IsInf(float64(y[j]), 0) || y[j] != y[j] {
					t.Fatalf("finite %v decoded to %v", v, y[j])
				}
			}
		}
	}
}

// refDraw transcribes the draw r(i, j) of the package doc, h = Mix64(seed).
func refDraw(h uint64, i, j int) uint32 {
	rowKey := rng.Hash32(uint32(i) ^ uint32(h))
	w := rng.Hash32(rowKey ^ (uint32(j/4)*0x9E3779B9 + uint32(h>>32)))
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], w)
	return uint32(b[j%4])
}

// refBF16 transcribes the bf16 format.
func refBF16(x []float32, cols int, seed uint64) []byte {
	out := make([]byte, 2*len(x))
	h := mix64(seed)
	for e, v := range x {
		i, j := e/cols, e%cols
		r := refDraw(h, i, j)*256 + 128
		w := math.Float32bits(v)
		var o uint32
		switch {
		case math.IsNaN(float64(v)):
			o = w>>16 | 0x40
		case math.IsInf(float64(v), 0):
			o = w >> 16
		default:
			o = (w + r) >> 16
			if math.IsInf(float64(math.Float32frombits(o<<16)), 0) {
				o--
			}
		}
		out[2*e], out[2*e+1] = byte(o), byte(o>>8)
	}
	return out
}

func TestCodecQuantNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	big := float32(math.MaxFloat32)
	rows := [][]float32{
		{nan, nan, nan},
		{nan, 1, 2},
		{1, nan, 2, 3},
		{inf, 1, 2},
		{-inf, 1, inf},
		{inf, inf},
		{-big, big, 0, 1},
		{-big, big / 2},
		{0, 1e-45, 2e-45},         // subnormal range
		{1e-38, 1.0000001e-38, 0}, // tiny range
		{big, big, big},
		{negZero, 0, negZero},
		{negZero, negZero},
	}
	for b := 1; b <= 8; b++ {
		c := Quant(b)
		for _, x := range rows {
			p, y := roundTrip(t, c, x, 1, len(x), 3)
			if want := refQuant(x, 1, len(x), b, 3); !bytes.Equal(p, want) {
				t.Errorf("%s %v: payload %x, reference %x", c.Name(), x, p, want)
			}
			finite := true
			lo, hi := nan, nan
			for _, v := range x {
				if math.IsInf(float64(v), 0) {
					finite = false
				}
				if v == v && (lo != lo || v < lo) {
					lo = v
				}
				if v == v && (hi != hi || v > hi) {
					hi = v
				}
			}
			if !finite {
				continue // no panic is all that is promised
			}
			pos := append([]float32(nil), x...) // -0 turned +0: the same bytes
			for j := range pos {
				pos[j] += 0
			}
			if p, q := mustEncode(c, x), mustEncode(c, pos); !bytes.Equal(p, q) {
				t.Errorf("%s %v: payload %x, with +0 for -0 %x", c.Name(), x, p, q)
			}
			origin, _ := quantHeaderOf(p, c.Bits())
			top := quantTop(p, c.Bits())
			// Rows beyond sMax's grid are clamped; tiny ones are sent as 0.
			if m := max(-lo, hi); m >= 0x1p-96 && m <= 1e37 && !(origin <= lo && top >= hi) {
				t.Errorf("%s %v: grid [%v, %v] does not hold [%v, %v]", c.Name(), x, origin, top, lo, hi)
			}
			for j, v := range y {
				if x[j] != x[j] {
					if v != origin {
						t.Errorf("%s %v: NaN decoded to %v, want the origin %v", c.Name(), x, v, origin)
					}
					continue
				}
				if !(v >= origin && v <= top) {
					t.Errorf("%s %v: %v decoded to %v outside [%v, %v]", c.Name(), x, x[j], v, origin, top)
				}
			}
		}
	}
}

// quantHeaderOf is the grid origin and the scale of a quant(b) payload row.
func quantHeaderOf(p []byte, b int) (origin, scale float32) {
	n := float32(int(1)<<b - 1)
	scale = math.Float32frombits(uint32(binary.LittleEndian.Uint16(p)) << 16)
	return float32(float32(int8(p[2])) * (float32(n*scale) / 32)), scale
}

// quantTop is origin + n*scale of a quant(b) payload row: its largest value.
func quantTop(p []byte, b int) float32 {
	lo, scale := quantHeaderOf(p, b)
	return lo + float32(float32(int(1)<<b-1)*scale)
}

func mustEncode(c Spec, x []float32) []byte {
	p := make([]byte, c.WireSize(1, len(x)))
	c.Encode(p, x, 1, len(x), 0)
	return p
}

func TestCodecAllocs(t *testing.T) {
	const rows, cols = 8, 37
	x := randRows(rand.New(rand.NewPCG(1, 1)), rows, cols)
	y := make([]float32, rows*cols)
	for _, c := range allCodecs() {
		p := make([]byte, c.WireSize(rows, cols))
		if n := testing.AllocsPerRun(10, func() {
			c.Encode(p, x, rows, cols, 1)
			c.Decode(y, p, rows, cols)
		}); n != 0 {
			t.Errorf("%s: %v allocations per encode+decode", c.Name(), n)
		}
	}
}

// ExampleForRate shows the codec a VARCO rate maps to.
func ExampleForRate() {
	for _, r := range []float64{1, 2, 4, 8, 32} {
		q, _ := ForRate(KindQuant, r)
		tr, _ := ForRate(KindTrunc, r)
		fmt.Printf("r=%g: %s %d B, %s %d B\n", r, q.Name(), q.WireSize(1, 256), tr.Name(), tr.WireSize(1, 256))
	}
	// Output:
	// r=1: none 1024 B, trunc(r=1) 1024 B
	// r=2: quant(b=16,bf16) 512 B, trunc(r=2) 512 B
	// r=4: quant(b=8) 259 B, trunc(r=4) 256 B
	// r=8: quant(b=4) 131 B, trunc(r=8) 128 B
	// r=32: quant(b=1) 35 B, trunc(r=32) 32 B
}

// TestDrawsUniform checks the draws of one message for what stochastic
// rounding needs: every byte value equally likely, and no dependence
// between neighbouring columns, between a column and the next word's, or
// between neighbouring rows (chi-square over 256 cells, 255 degrees of
// freedom: mean 255, standard deviation 22.6; the bound is 6 of them).
func TestDrawsUniform(t *testing.T) {
	const rows, cols = 1024, 256
	key := drawKey(2024)
	r := make([][]uint32, rows)
	for i := range r {
		r[i] = make([]uint32, cols)
		for p := range cols / 16 {
			w := drawBlock(p, i, key)
			for j := 16 * p; j < 16*p+16; j++ {
				r[i][j] = draw(&w, j)
			}
		}
	}
	chi2 := func(name string, cell func(i, j int) uint32) {
		var hist [256]float64
		for i := range rows {
			for j := range cols {
				hist[cell(i, j)]++
			}
		}
		e := float64(rows*cols) / 256
		var x float64
		for _, h := range hist {
			x += (h - e) * (h - e) / e
		}
		if x > 255+6*22.6 {
			t.Errorf("%s: chi-square %.1f over 255 degrees of freedom", name, x)
		}
	}
	// Pairs: the high 4 bits of each draw make one cell.
	pair := func(a, b uint32) uint32 { return a>>4<<4 | b>>4 }
	chi2("bytes", func(i, j int) uint32 { return r[i][j] })
	chi2("column j, j+1", func(i, j int) uint32 { return pair(r[i][j], r[i][(j+1)%cols]) })
	chi2("column j, j+4", func(i, j int) uint32 { return pair(r[i][j], r[i][(j+4)%cols]) })
	chi2("row i, i+1", func(i, j int) uint32 { return pair(r[i][j], r[(i+1)%rows][j]) })
}
