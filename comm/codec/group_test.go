package codec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGrouped: a grouped quant payload is the ungrouped payload of its
// whole groups as wide rows, then the rest as one row drawn with ^seed,
// and it decodes to what those payloads decode to; the codecs without a
// row header ignore grouping.
func TestGrouped(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, b := range []int{1, 2, 3, 4, 8} {
		for _, tc := range []struct{ rows, cols, g int }{
			{13, 5, 13}, {14, 5, 13}, {25, 5, 13}, {7, 32, 2}, {1, 8, 8}, {0, 5, 4}, {9, 0, 4}, {40, 3, 22},
		} {
			c := Quant(b).Grouped(tc.g)
			if c.Group() != tc.g || c.Ungrouped() != Quant(b) {
				t.Fatalf("%s: group %d, ungrouped %s", c.Name(), c.Group(), c.Ungrouped().Name())
			}
			src := make([]float32, tc.rows*tc.cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64()) * float32(1+i%7)
			}
			if len(src) > 3 {
				src[2], src[3] = float32(math.NaN()), float32(math.Inf(1))
			}
			const seed = 0x1234
			dst := make([]byte, c.WireSize(tc.rows, tc.cols))
			c.Encode(dst, src, tc.rows, tc.cols, seed)
			whole, rest := tc.rows/tc.g, tc.rows%tc.g
			w := tc.g * tc.cols
			want := make([]byte, Quant(b).WireSize(whole, w))
			Quant(b).Encode(want, src[:whole*w], whole, w, seed)
			if rest > 0 {
				tail := make([]byte, Quant(b).WireSize(1, rest*tc.cols))
				Quant(b).Encode(tail, src[whole*w:], 1, rest*tc.cols, ^uint64(seed))
				want = append(want, tail...)
			}
			if !bytes.Equal(dst, want) {
				t.Fatalf("%s, %d x %d: the payload is not the wide rows' and the rest's", c.Name(), tc.rows, tc.cols)
			}
			got, ref := make([]float32, len(src)), make([]float32, len(src))
			c.Decode(got, dst, tc.rows, tc.cols)
			Quant(b).Decode(ref[:whole*w], want[:Quant(b).WireSize(whole, w)], whole, w)
			if rest > 0 {
				Quant(b).Decode(ref[whole*w:], want[Quant(b).WireSize(whole, w):], 1, rest*tc.cols)
			}
			if !slices.EqualFunc(got, ref, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				t.Fatalf("%s, %d x %d: decodes differently from its parts", c.Name(), tc.rows, tc.cols)
			}
			if c.DeltaFused() {
				t.Fatalf("%s: a grouped codec must not run fused per-row kernels", c.Name())
			}
		}
	}
	// A narrow row's header dominates; grouped, the header is shared.
	if got, want := Quant(2).Grouped(13).WireSize(26, 5), 2*(3+17); got != want {
		t.Errorf("quant(2) grouped by 13, 26 rows of 5: %d bytes, want %d", got, want)
	}
	for _, c := range []Spec{None(), Trunc(2), Quant(16)} {
		if c.Grouped(8) != c {
			t.Errorf("%s grouped: %s, want it unchanged", c.Name(), c.Grouped(8).Name())
		}
	}
}
