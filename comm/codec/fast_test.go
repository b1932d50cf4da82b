package codec

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withReference runs f on the Go reference encoders and decoders.
func withReference(f func()) {
	saved := fast
	fast = false
	defer func() { fast = saved }()
	f()
}

// The AVX2 path against the Go reference: every quant width and bf16, tern
// and tern(g), every width 0..257 (partial groups, batches of 8 groups),
// rows with NaN, infinities, signed zeros, subnormals, constants and the
// full float range; decoded from encoder output and from random bytes.
// rowFills are the kinds of row the fast path must code as the reference
// does: normal values, a mix with every special value, a constant row,
// rows far from 0 (quant's wider grid candidates), all NaN, a range that
// overflows, normal values among NaNs, and subnormal rows (tern's s a
// subnormal bf16, 1/s infinite).
func rowFills(r *rand.Rand) []func(row []float32) {
	specials := []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.SmallestNonzeroFloat32, -1e-40, math.MaxFloat32, -math.MaxFloat32, 1}
	return []func(row []float32){
		func(row []float32) {
			for j := range row {
				row[j] = float32(r.NormFloat64())
			}
		},
		func(row []float32) {
			for j := range row {
				row[j] = float32(r.NormFloat64() * 100)
				if r.IntN(3) == 0 {
					row[j] = specials[r.IntN(len(specials))]
				}
			}
		},
		func(row []float32) {
			for j := range row {
				row[j] = -2.5
			}
		},
		func(row []float32) { // far from 0: quant's wider grid candidates
			o := float32([]float64{5, -1000, 4, 0x1p-97}[r.IntN(4)])
			for j := range row {
				row[j] = o + o*0.25*float32(r.Float64())
			}
		},
		func(row []float32) {
			for j := range row {
				row[j] = float32(math.NaN())
			}
		},
		func(row []float32) {
			for j := range row {
				row[j] = float32(r.Float64()*2-1) * math.MaxFloat32
			}
		},
		func(row []float32) { // normal values, some NaN: a NaN must lose to every lane's largest
			for j := range row {
				row[j] = float32(r.NormFloat64())
				if r.IntN(6) == 0 {
					row[j] = float32(math.NaN())
				}
			}
		},
		func(row []float32) { // subnormal, some zeros and NaNs
			for j := range row {
				row[j] = float32(r.NormFloat64() * 1e-41)
				if r.IntN(8) == 0 {
					row[j] = []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN())}[r.IntN(3)]
				}
			}
		},
	}
}

func TestFastPath(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build: the reference is all there is")
	}
	t.Logf("encoder: %s", FastPath())
	r := rand.New(rand.NewPCG(21, 22))
	fills := rowFills(r)
	for _, c := range []Spec{Quant(1), Quant(2), Quant(3), Quant(4), Quant(5), Quant(6), Quant(7), Quant(8), Quant(16),
		Tern(), Tern().Grouped(2), Tern().Grouped(4)} {
		for cols := 0; cols <= 257; cols++ {
			for k, fill := range fills {
				const rows = 3
				x := make([]float32, rows*cols)
				for i := range rows {
					fill(x[i*cols : (i+1)*cols])
				}
				got := sameAsReference(t, fmt.Sprintf("%d columns, fill %d", cols, k), c, x, rows, cols, r.Uint64())
				for _, p := range [][]byte{got, randomBytes(r, len(got))} {
					sameDecode(t, fmt.Sprintf("%d columns", cols), c, p, rows, cols)
				}
			}
		}
	}
}

// sameDecode decodes p with the fast path and with the reference and fails
// unless the values are the same bits (NaN payloads included).
func sameDecode(t *testing.T, what string, c Spec, p []byte, rows, cols int) {
	t.Helper()
	y, wy := make([]float32, rows*cols), make([]float32, rows*cols)
	c.Decode(y, p, rows, cols)
	withReference(func() { c.Decode(wy, p, rows, cols) })
	for e := range y {
		if math.Float32bits(y[e]) != math.Float32bits(wy[e]) {
			t.Fatalf("%s, %s: decoded %d = %v (%08x), reference %v (%08x)", c.Name(), what, e, y[e], math.Float32bits(y[e]), wy[e], math.Float32bits(wy[e]))
		}
	}
}

// Tern rows wider than the fast path's chunk of 640 columns (a chunk's
// codes joined five to a byte, then the next), ungrouped and grouped,
// encoded and decoded, from encoder output and random bytes.
func TestFastPathTernWide(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build")
	}
	r := rand.New(rand.NewPCG(27, 28))
	fills := rowFills(r)
	for _, c := range []Spec{Tern(), Tern().Grouped(3)} {
		for _, cols := range []int{639, 640, 641, 645, 1279, 1280, 1283, 2001} {
			for k, fill := range fills {
				const rows = 4
				x := make([]float32, rows*cols)
				for i := range rows {
					fill(x[i*cols : (i+1)*cols])
				}
				got := sameAsReference(t, fmt.Sprintf("%d columns, fill %d", cols, k), c, x, rows, cols, r.Uint64())
				for _, p := range [][]byte{got, randomBytes(r, len(got))} {
					sameDecode(t, fmt.Sprintf("%d columns", cols), c, p, rows, cols)
				}
			}
		}
	}
}

// Rows of up to 64 values share their vector passes of draws with the rows
// after them (draw_rows: 8, 4 or 2 rows a pass), and every row its grid's
// computation with 7 others (quant_params8, whose odd lanes take the
// scalar path), which TestFastPath's 3 rows do not fill: here 7 to 27
// rows, each of its own kind, so that every row of a pass must give the
// reference's bytes whatever its neighbours hold. Tern shares the draws'
// passes (decoding too), and tern(g)'s rest row draws as the row after
// the whole groups, a pass of its own.
func TestFastPathRowBatches(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build")
	}
	r := rand.New(rand.NewPCG(25, 26))
	fills := rowFills(r)
	specs := []Spec{Tern(), Tern().Grouped(2), Tern().Grouped(3)}
	for b := 1; b <= 8; b++ {
		specs = append(specs, Quant(b))
	}
	for _, c := range specs {
		for _, cols := range []int{0, 1, 3, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 128} {
			for _, rows := range []int{7, 8, 9, 16, 27} {
				for trial := range 4 {
					x := make([]float32, rows*cols)
					for i := range rows {
						fill := fills[0]
						if trial > 0 { // every row a kind of its own
							fill = fills[r.IntN(len(fills))]
						}
						fill(x[i*cols : (i+1)*cols])
					}
					p := sameAsReference(t, fmt.Sprintf("%d rows of %d, trial %d", rows, cols, trial), c, x, rows, cols, r.Uint64())
					if c.Kind() == KindTern {
						sameDecode(t, fmt.Sprintf("%d rows of %d, trial %d", rows, cols, trial), c, p, rows, cols)
					}
				}
			}
		}
	}
}

// sameAsReference encodes x with the fast path and with the reference,
// fails unless the payloads are equal, and returns the payload.
func sameAsReference(t *testing.T, what string, c Spec, x []float32, rows, cols int, seed uint64) []byte {
	t.Helper()
	got, want := make([]byte, c.WireSize(rows, cols)), make([]byte, c.WireSize(rows, cols))
	c.Encode(got, x, rows, cols, seed)
	withReference(func() { c.Encode(want, x, rows, cols, seed) })
	if !bytes.Equal(got, want) {
		t.Fatalf("%s, %s: payload\n%x, reference\n%x", c.Name(), what, got, want)
	}
	return got
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// SqDiff's AVX2 path against the reference: the same lanes, the same bits.
func TestFastSqDiff(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build")
	}
	r := rand.New(rand.NewPCG(23, 24))
	for cols := 0; cols <= 70; cols++ {
		for _, rows := range []int{0, 1, 5} {
			src := randRows(r, 7, cols)
			dec := randRows(r, rows, cols)
			idx := make([]int32, rows)
			for k := range idx {
				idx[k] = int32(r.IntN(7))
			}
			e, n := SqDiff(src, idx, cols, dec)
			var we, wn float64
			withReference(func() { we, wn = SqDiff(src, idx, cols, dec) })
			if math.Float64bits(e) != math.Float64bits(we) || math.Float64bits(n) != math.Float64bits(wn) {
				t.Fatalf("%d rows of %d: (%v, %v), reference (%v, %v)", rows, cols, e, n, we, wn)
			}
		}
	}
}

// TestEncodeGather: coding rows where they lie (out of order, repeated, a
// batch of 8 rows and a remainder) gives the bytes of coding them gathered,
// on the AVX2 path and the reference, for every quant width, bf16, tern,
// shared headers and trunc, widths 0..129, every kind of row.
func TestEncodeGather(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	fills := rowFills(r)
	const srcRows = 13
	idx := []int32{12, 0, 5, 5, 7, 1, 11, 3, 2, 9, 12} // 11 rows: a batch of 8 and 3
	specs := []Spec{Quant(16), Quant(2).Grouped(3), Trunc(4), Tern(), Tern().Grouped(3)}
	for b := 1; b <= 8; b++ {
		specs = append(specs, Quant(b))
	}
	for _, ref := range []bool{false, true} {
		for _, c := range specs {
			for cols := 0; cols <= 129; cols++ {
				src := make([]float32, srcRows*cols)
				for i := range srcRows {
					fills[i%len(fills)](src[i*cols : (i+1)*cols])
				}
				rows := make([]float32, 0, len(idx)*cols)
				for _, i := range idx {
					rows = append(rows, src[int(i)*cols:(int(i)+1)*cols]...)
				}
				seed := r.Uint64()
				want, got := make([]byte, c.WireSize(len(idx), cols)), make([]byte, c.WireSize(len(idx), cols))
				run := func(f func()) {
					if ref {
						withReference(f)
					} else {
						f()
					}
				}
				run(func() { c.Encode(want, rows, len(idx), cols, seed) })
				run(func() { c.EncodeGather(got, src, idx, cols, seed, nil) })
				if !bytes.Equal(got, want) {
					t.Fatalf("%s, %d columns, reference %v: coded where they lie %x, gathered %x", c.Name(), cols, ref, got, want)
				}
			}
		}
	}
}
