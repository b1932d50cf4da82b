package codec

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTernLayout: a payload is the key, then per row s's bf16 and the
// codes five to a byte; rows of s = 3 (bf16 4040) and 7 (bf16 40e0).
func TestTernLayout(t *testing.T) {
	x := []float32{0.5, -1.25, 3, 0.1, 2.2, 1e-3, -7, 7, 0, 0.25}
	c := Tern()
	p := make([]byte, c.WireSize(2, 5))
	if len(p) != 8+2*(2+1) {
		t.Fatalf("%d bytes, want 14", len(p))
	}
	c.Encode(p, x, 2, 5, 2024)
	key := drawKey(2024)
	if binary.LittleEndian.Uint32(p) != key[0] || binary.LittleEndian.Uint32(p[4:]) != key[1] {
		t.Fatalf("key %x, want %x", p[:8], key)
	}
	if h := hex.EncodeToString(p[8:10]) + hex.EncodeToString(p[11:13]); h != "4040e040" {
		t.Fatalf("row headers %s, want 4040 and e040", h)
	}
	// Each code is the nearest integer to x/s + u, from the draws.
	for i, s := range []float32{3, 7} {
		w := drawBlock(0, i, key)
		b := int(p[10+3*i])
		for j := range 5 {
			v := float64(x[5*i+j]/s) + float64(ternDither(draw(&w, j)))
			if want := int(math.Floor(v+0.5)) + 1; b%3 != want {
				t.Fatalf("row %d value %d: code %d, want %d", i, j, b%3, want)
			}
			b /= 3
		}
	}
	// Golden bytes: a change of the format or of the draws shows here.
	if got, want := hex.EncodeToString(p), "d5ec8ef8ec8f6d9f4040d3e0407f"; got != want {
		t.Fatalf("payload %s, want %s", got, want)
	}
}

// TestTernBound: every decoded value is within s/2 of its value, s the
// largest magnitude of its row (or group) rounded up to a bf16; NaN
// decodes within s/2 of 0; a payload of no rows is empty.
func TestTernBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, g := range []int{1, 3, 4} {
		c := Tern().Grouped(g)
		for _, cols := range []int{1, 4, 5, 6, 16, 17, 64, 67} {
			rows := 7
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Exp(4*rng.NormFloat64()))
			}
			x[3] = float32(math.NaN())
			whole, rest, w, at := c.Groups(rows, cols)
			size := 8 + whole*(2+(w+4)/5)
			if rest > 0 {
				size += 2 + (rest*cols+4)/5
			}
			if got := c.WireSize(rows, cols); got != size || at != 8+whole*(2+(w+4)/5) {
				t.Fatalf("%s %dx%d: WireSize %d, rest at %d; want %d", c.Name(), rows, cols, got, at, size)
			}
			p := make([]byte, size)
			c.Encode(p, x, rows, cols, rng.Uint64())
			y := make([]float32, len(x))
			c.Decode(y, p, rows, cols)
			for at := 0; at < len(x); at += w {
				part, dec := x[at:min(at+w, len(x))], y[at:min(at+w, len(x))]
				var m float32
				for _, v := range part {
					if v == v {
						m = max(m, float32(math.Abs(float64(v))))
					}
				}
				s := float64(bf16Up(m))
				for k, v := range part {
					if v != v {
						v = 0
					}
					if d := float64(dec[k]); math.Abs(d-float64(v)) > s*(0.5+1e-6) {
						t.Fatalf("%s %dx%d: %v decoded to %v, more than s/2 off (s = %v)", c.Name(), rows, cols, v, d, s)
					}
				}
			}
		}
	}
	if Tern().WireSize(0, 64) != 0 || Tern().Grouped(4).WireSize(0, 8) != 0 {
		t.Fatal("a payload of no rows is not empty")
	}
}

// TestTernUnbiased: over many keys the decoded values average to the
// values (the dither's mean is 0 up to its 8 bits).
func TestTernUnbiased(t *testing.T) {
	x := []float32{0.9, -0.33, 0.01, 0.5, -1, 0.77, 0.2}
	const n = 20000
	sum := make([]float64, len(x))
	p, y := make([]byte, Tern().WireSize(1, len(x))), make([]float32, len(x))
	for k := range n {
		Tern().Encode(p, x, 1, len(x), uint64(k))
		Tern().Decode(y, p, 1, len(x))
		for j, v := range y {
			sum[j] += float64(v)
		}
	}
	for j, v := range x {
		// The error is uniform over a step of 1 (s = 1): sd 0.29, so the
		// mean of n has sd 0.002.
		if mean := sum[j] / n; math.Abs(mean-float64(v)) > 0.01 {
			t.Errorf("value %v: mean decode %v", v, mean)
		}
	}
}

// TestTernNotACommandLineCodec: tern is quant's rung under residual
// coding, not a --codec.
func TestTernNotACommandLineCodec(t *testing.T) {
	if _, err := ParseKind("tern"); err == nil {
		t.Fatal("ParseKind accepted tern")
	}
	if got := Tern().Grouped(4).Name(); got != "tern(g=4)" {
		t.Errorf("name %q, want tern(g=4)", got)
	}
	if Tern().Grouped(4).Ungrouped() != Tern() {
		t.Error("Ungrouped of tern(g=4) is not tern")
	}
}
