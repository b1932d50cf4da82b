package codec

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// A halo block of 100k rows of 256 features (102 MB of float32). Throughput
// is reported in input float32 bytes per second, against a plain copy.
const benchRows, benchCols = 100_000, 256

var benchData = sync.OnceValues(func() ([]float32, []float32) {
	y := make([]float32, benchRows*benchCols)
	for i := range y { // fault the pages in before timing
		y[i] = 1
	}
	return randRows(rand.New(rand.NewPCG(1, 2)), benchRows, benchCols), y
})

func benchCodecs() []Spec {
	return []Spec{None(), Trunc(4), Quant(1), Quant(2), Quant(3), Quant(4), Quant(8), Quant(16), Tern(), Tern().Grouped(4)}
}

func BenchmarkCodecCopy(b *testing.B) {
	x, y := benchData()
	b.SetBytes(4 * int64(len(x)))
	for b.Loop() {
		copy(y, x)
	}
}

func BenchmarkCodecEncode(b *testing.B) {
	x, _ := benchData()
	for _, c := range benchCodecs() {
		b.Run(c.Name(), func(b *testing.B) {
			p := make([]byte, c.WireSize(benchRows, benchCols))
			c.Encode(p, x, benchRows, benchCols, 0) // fault the pages in
			b.SetBytes(4 * int64(len(x)))
			seed := uint64(0)
			for b.Loop() {
				seed++
				c.Encode(p, x, benchRows, benchCols, seed)
			}
		})
	}
}

// BenchmarkCodecEncodeWidth is Encode on the same bytes cut into narrower
// rows, the widths halo rows have (hidden 32-128, a few classes): the
// per-row work (the header) weighs more there.
func BenchmarkCodecEncodeWidth(b *testing.B) {
	x, _ := benchData()
	for _, cols := range []int{8, 32, 64, 128} {
		rows := len(x) / cols
		for _, c := range []Spec{Quant(1), Quant(2), Tern()} {
			b.Run(c.Name()+"/cols="+strconv.Itoa(cols), func(b *testing.B) {
				p := make([]byte, c.WireSize(rows, cols))
				c.Encode(p, x, rows, cols, 0)
				b.SetBytes(4 * int64(len(x)))
				seed := uint64(0)
				for b.Loop() {
					seed++
					c.Encode(p, x, rows, cols, seed)
				}
			})
		}
	}
}

func BenchmarkCodecDecode(b *testing.B) {
	x, y := benchData()
	for _, c := range benchCodecs() {
		b.Run(c.Name(), func(b *testing.B) {
			p := make([]byte, c.WireSize(benchRows, benchCols))
			c.Encode(p, x, benchRows, benchCols, 1)
			b.SetBytes(4 * int64(len(x)))
			for b.Loop() {
				c.Decode(y, p, benchRows, benchCols)
			}
		})
	}
}

// BenchmarkCodecDelta is residual coding's fused sender (DeltaEncode:
// residual, skip test, code, the reference's update and comp_error in one
// pass) over the block against references near it, every row sent (skip
// 0) or most left out (skip 0.02). Bytes as above: the rows' float32s.
func BenchmarkCodecDelta(b *testing.B) {
	x, _ := benchData()
	for _, c := range []Spec{Quant(1), Quant(2), Quant(4), Quant(8), Tern()} {
		for _, skip := range []float32{0, 0.02} {
			b.Run(c.Name()+"/skip="+map[bool]string{false: "0", true: "0.02"}[skip > 0], func(b *testing.B) {
				benchDelta(b, c, x, benchCols, skip)
			})
		}
	}
}

// BenchmarkCodecDeltaWidth is DeltaEncode at quant(2) and tern, every row
// sent, on the same bytes cut into the narrower rows halo exchanges have,
// as EncodeWidth is Encode.
func BenchmarkCodecDeltaWidth(b *testing.B) {
	x, _ := benchData()
	for _, c := range []Spec{Quant(2), Tern()} {
		for _, cols := range []int{8, 32, 64, 128} {
			name := "cols=" + strconv.Itoa(cols)
			if c.Kind() == KindTern {
				name = c.Name() + "/" + name
			}
			b.Run(name, func(b *testing.B) { benchDelta(b, c, x, cols, 0) })
		}
	}
}

// benchDelta times DeltaEncode of every row of x (cols values each), in
// order, against a reference 1% off the rows, reset before each call.
func benchDelta(b *testing.B, c Spec, x []float32, cols int, skip float32) {
	if !c.DeltaFused() {
		b.Skip("no fused delta kernel on this machine or build")
	}
	rows := len(x) / cols
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	p := make([]byte, c.WireSize(rows, cols))
	ref, buf := make([]float32, len(x)), make([]float32, DeltaScratch(cols))
	var bitmap []byte
	if skip > 0 {
		bitmap = make([]byte, (rows+7)/8)
	}
	b.SetBytes(4 * int64(len(x)))
	seed := uint64(0)
	for b.Loop() {
		b.StopTimer()
		for i, v := range x {
			ref[i] = v * 0.99
		}
		b.StartTimer()
		seed++
		c.DeltaEncode(p, x, idx, cols, ref, Skip{Tau: skip}, bitmap, seed, buf)
	}
}
