package hosttwin

// The kernels' routines, compiled for the host, against the Go code they
// mirror: codecs (comm/codec, the halo exchange's host rows), dense and
// sparse kernels (kernels.CPU). Equality is of bits, except where the GPU
// by design sums in another order than the CPU (said at each such check).

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/internal/kerneltest"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

var cpu = kernels.NewCPU(1)

// The shared inputs and comparison of the twin tests.
var (
	specials         = kerneltest.Specials
	randMat, randAdj = kerneltest.RandMat, kerneltest.RandAdj
	same             = kerneltest.Same
)

// rowKinds fill a row of width cols: the codecs' edge cases.
var rowKinds = []struct {
	name string
	fill func(r *rand.Rand, row []float32)
}{
	{"normal", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
	}},
	{"specials", func(r *rand.Rand, row []float32) {
		for j := range row {
			if r.IntN(3) == 0 {
				row[j] = specials[r.IntN(len(specials))]
			} else {
				row[j] = float32(r.NormFloat64() * 1e3)
			}
		}
	}},
	{"constant", func(r *rand.Rand, row []float32) { fillAll(row, 3.25) }},
	{"zeros", func(r *rand.Rand, row []float32) { fillAll(row, 0) }},
	{"negative zeros", func(r *rand.Rand, row []float32) { fillAll(row, float32(math.Copysign(0, -1))) }},
	{"NaN", func(r *rand.Rand, row []float32) { fillAll(row, float32(math.NaN())) }},
	{"NaN and one value", func(r *rand.Rand, row []float32) {
		fillAll(row, float32(math.NaN()))
		if len(row) > 0 {
			row[r.IntN(len(row))] = -2
		}
	}},
	{"infinities", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(math.Inf(1 - 2*(j&1)))
		}
	}},
	{"subnormals", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = math.Float32frombits(uint32(r.IntN(1<<23))) * float32(1-2*(j&1))
		}
	}},
	{"full range", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.Float64()*2-1) * math.MaxFloat32
		}
		if len(row) > 1 {
			row[0], row[1] = math.MaxFloat32, -math.MaxFloat32
		}
	}},
}

func fillAll(row []float32, v float32) {
	for j := range row {
		row[j] = v
	}
}

// rows3 is 3 rows of width cols of one kind (3: rows key their draws).
func rows3(r *rand.Rand, cols int, fill func(*rand.Rand, []float32)) []float32 {
	x := make([]float32, 3*cols)
	for i := range 3 {
		fill(r, x[i*cols:(i+1)*cols])
	}
	return x
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: byte %d is %#02x, Go %#02x", what, i, got[i], want[i])
		}
	}
}

func f32le(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// encodeRows is the halo exchange's encode of the listed rows of m (the
// forward exchange encodes straight from the owned rows on the GPU).
func encodeRows(c codec.Spec, x []float32, cols int, idx []int32, seed uint64) []byte {
	m := &kernels.Mat{Rows: len(x) / max(cols, 1), Cols: cols, Data: x}
	dst := make([]byte, c.WireSize(len(idx), cols))
	new(halo.Host).EncodeRows(c, m, idx, dst, seed)
	return dst
}

// widths 0..257: every residue of the 8-code groups, the 4-value quads and
// the 32 lanes, past a lane's second column.
const maxWidth = 257

// The quant(b) and bf16 encoders and decoders against comm/codec, on every
// width, every row kind, with and without an index list.
func TestQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16} {
		c := codec.Quant(b)
		for cols := 0; cols <= maxWidth; cols++ {
			for _, k := range rowKinds {
				x := rows3(r, cols, k.fill)
				seed := r.Uint64()
				want := make([]byte, c.WireSize(3, cols))
				c.Encode(want, x, 3, cols, seed)
				idx := []int32{2, 0, 2, 1}
				wantIdx := encodeRows(c, x, cols, idx, seed)
				what := fmt.Sprintf("%s, %d columns, %s rows", c.Name(), cols, k.name)
				got, gotIdx := encodeTwin(t, b, x, 3, cols, nil, seed), encodeTwin(t, b, x, 4, cols, idx, seed)
				sameBytes(t, what, got, want)
				sameBytes(t, what+", index list", gotIdx, wantIdx)

				dec, wantDec := make([]float32, 4*cols), make([]float32, 4*cols)
				c.Decode(wantDec, wantIdx, 4, cols)
				if b == 16 {
					BF16Decode(dec, bf16s(wantIdx))
				} else {
					QuantDecode(dec, wantIdx, 4, cols, b)
				}
				same(t, what+", decoded", dec, wantDec)
			}
		}
	}
}

func encodeTwin(t *testing.T, b int, x []float32, rows, cols int, idx []int32, seed uint64) []byte {
	t.Helper()
	h := rng.Mix64(seed)
	if b == 16 {
		out := make([]uint16, rows*cols)
		BF16Encode(out, x, rows, cols, idx, h)
		p := make([]byte, 2*len(out))
		for i, v := range out {
			binary.LittleEndian.PutUint16(p[2*i:], v)
		}
		return p
	}
	out := make([]byte, rows*QuantStride(cols, b))
	if err := QuantEncode(out, x, rows, cols, b, idx, h); err != nil {
		t.Fatal(err)
	}
	return out
}

func bf16s(p []byte) []uint16 {
	v := make([]uint16, len(p)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(p[2*i:])
	}
	return v
}

func TestTrunc(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, rate := range []float64{1, 2, 3.5, 4, 8, 64} {
		c := codec.Trunc(rate)
		for cols := 0; cols <= maxWidth; cols++ {
			k := c.Keep(cols)
			x := rows3(r, cols, rowKinds[1].fill)
			idx := []int32{1, 1, 0}
			want := encodeRows(c, x, cols, idx, 7)
			got := make([]float32, 3*k)
			TruncEncode(got, x, 3, cols, k, idx)
			what := fmt.Sprintf("%s, %d columns", c.Name(), cols)
			sameBytes(t, what, f32le(got), want)
			dec, wantDec := make([]float32, 3*cols), make([]float32, 3*cols)
			c.Decode(wantDec, want, 3, cols)
			TruncDecode(dec, got, 3, cols, k)
			same(t, what+", decoded", dec, wantDec)
		}
	}
}

// The compression error's terms, summed in the host exchange's order.
func TestSqDiff(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, cols := range []int{0, 1, 7, 64, 257} {
		x := rows3(r, cols, rowKinds[0].fill)
		dec := rows3(r, cols, rowKinds[0].fill)
		idx := []int32{2, 0, 1}
		src := &kernels.Mat{Rows: 3, Cols: cols, Data: x}
		e, n := new(halo.Host).SqDiff(idx, src, &kernels.Mat{Rows: 3, Cols: cols, Data: dec}, 0)
		ge, gn := SqDiff(3, cols, idx, x, dec)
		if ge != e || gn != n {
			t.Fatalf("%d columns: (%v, %v), Go (%v, %v)", cols, ge, gn, e, n)
		}
	}
}

// withSpecials sets about a third of m's values to special ones.
func withSpecials(r *rand.Rand, m *kernels.Mat) *kernels.Mat {
	for i := range m.Data {
		if r.IntN(3) == 0 {
			m.Data[i] = specials[r.IntN(len(specials))]
		}
	}
	return m
}

var shapes = [][2]int{{0, 5}, {1, 1}, {1, 33}, {7, 3}, {31, 64}, {100, 7}, {257, 100}, {3, 257}}

// ReLU on a million bit patterns spread over all 2^32, and the specials.
func TestReLUBits(t *testing.T) {
	const step = 4099
	x := kernels.NewMat(1, 0)
	x.Data = append(x.Data, specials...)
	for u := uint64(0); u < 1<<32; u += step {
		x.Data = append(x.Data, math.Float32frombits(uint32(u)))
	}
	x.Cols = len(x.Data)
	want, got := kernels.NewMat(1, x.Cols), make([]float32, x.Cols)
	cpu.ReLU(x, want)
	ReLU(x.Data, got)
	same(t, "ReLU", got, want.Data)
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range shapes {
		x, dy := withSpecials(r, randMat(r, s[0], s[1])), withSpecials(r, randMat(r, s[0], s[1]))
		b := withSpecials(r, randMat(r, 1, s[1]))
		what := fmt.Sprint(s)

		want := kernels.NewMat(s[0], s[1])
		cpu.Copy(want, x)
		cpu.AddBias(want, b)
		got := append([]float32(nil), x.Data...)
		AddBias(got, s[0], s[1], b.Data)
		same(t, "AddBias "+what, got, want.Data)

		y := kernels.NewMat(s[0], s[1])
		cpu.ReLU(x, y)
		dx, gdx := kernels.NewMat(s[0], s[1]), make([]float32, x.Len())
		cpu.ReLUBackward(y, dy, dx)
		ReLUBackward(y.Data, dy.Data, gdx)
		same(t, "ReLUBackward "+what, gdx, dx.Data)
		cpu.ReLUBackward(x, dy, dx) // y with -0, NaN, infinities
		ReLUBackward(x.Data, dy.Data, gdx)
		same(t, "ReLUBackward of specials "+what, gdx, dx.Data)

		cpu.Mul(x, dy, dx)
		Mul(x.Data, dy.Data, gdx)
		same(t, "Mul "+what, gdx, dx.Data)

		if g, w := SumSquares(x.Data), cpu.SumSquares(x); g != w && !(g != g && w != w) {
			t.Fatalf("SumSquares %s: %v, Go %v", what, g, w)
		}
	}
}

// BiasGrad: one chunk sums as the CPU's one block does; with several, the
// GPU's fixed chunks of rows differ from the CPU's blocks by rounding only.
func TestBiasGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range append(shapes, [2]int{9000, 3}, [2]int{5000, 40}) {
		for _, acc := range []bool{false, true} {
			dy := randMat(r, s[0], s[1])
			db := randMat(r, 1, s[1])
			got := append([]float32(nil), db.Data...)
			cpu.BiasGrad(dy, db, acc)
			const rowsPerChunk = 4096 // kernels/cuda's
			BiasGrad(dy.Data, s[0], s[1], rowsPerChunk, got, acc)
			what := fmt.Sprintf("BiasGrad %v accumulate=%v", s, acc)
			if s[0]*s[1] <= 1<<14 && s[0] <= rowsPerChunk { // one CPU block, one chunk
				same(t, what, got, db.Data)
				continue
			}
			for j := range got {
				if d := math.Abs(float64(got[j] - db.Data[j])); d > 1e-5*max(1, math.Abs(float64(db.Data[j]))) {
					t.Fatalf("%s: column %d is %v, Go %v", what, j, got[j], db.Data[j])
				}
			}
		}
	}
}

func TestDropout(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range shapes {
		for _, p := range []float32{0, 0.1, 0.5, 0.9, 1} {
			for _, withIDs := range []bool{false, true} {
				x := withSpecials(r, randMat(r, s[0], s[1]))
				var ids []int32
				if withIDs {
					ids = make([]int32, s[0])
					for i := range ids {
						ids[i] = int32(r.Uint32())
					}
				}
				y, m := kernels.NewMat(s[0], s[1]), kernels.NewMat(s[0], s[1])
				cpu.Dropout(x, y, m, p, 42, ids)
				scale, thr := kernels.DropoutParams(p, s[0], ids)
				gy, gm := make([]float32, x.Len()), make([]float32, x.Len())
				Dropout(x.Data, gy, gm, s[0], s[1], rng.Mix64(42), ids, thr, scale, p == 0)
				what := fmt.Sprintf("Dropout %v p=%v ids=%v", s, p, withIDs)
				same(t, what, gy, y.Data)
				same(t, what+" mask", gm, m.Data)
			}
		}
	}
}

func TestAdam(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 33, 10000} {
		for _, wd := range []float32{0, 5e-4} {
			p, m, v := randMat(r, 1, n), kernels.NewMat(1, n), kernels.NewMat(1, n)
			gp, gm, gv := append([]float32(nil), p.Data...), make([]float32, n), make([]float32, n)
			for step := 1; step <= 5; step++ {
				g := randMat(r, 1, n)
				if step == 3 {
					withSpecials(r, g) // infinities and NaN spread as on the CPU
				}
				cpu.Adam(p, g, m, v, step, 0.01, 0.9, 0.999, 1e-8, wd)
				stepSize, bc2Sqrt := kernels.AdamCorrections(step, 0.01, 0.9, 0.999)
				Adam(gp, g.Data, gm, gv, 0.9, 0.999, 1e-8, wd, stepSize, bc2Sqrt)
			}
			what := fmt.Sprintf("Adam n=%d wd=%v", n, wd)
			same(t, what+" p", gp, p.Data)
			same(t, what+" m", gm, m.Data)
			same(t, what+" v", gv, v.Data)
		}
	}
}

// The loss's gradient and counts bit for bit; the loss itself only up to
// log's rounding (C's log against Go's math.Log).
func TestLossAndCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 7, 1000} {
		for _, c := range []int{1, 2, 7, 47} {
			logits := randMat(r, n, c)
			for i := range logits.Data {
				logits.Data[i] *= 30 // exp's range, past where its result rounds to 0
			}
			if n > 1 {
				logits.Data[0] = -1e30
			}
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(r.IntN(c))
			}
			var rows []int32
			for i := range n {
				if r.IntN(3) > 0 {
					rows = append(rows, int32(i))
				}
			}
			what := fmt.Sprintf("n=%d c=%d", n, c)
			dl, gdl := kernels.NewMat(n, c), make([]float32, n*c)
			want := cpu.SoftmaxCrossEntropy(logits, labels, rows, 0.25, dl)
			got := SoftmaxCrossEntropy(logits.Data, c, labels, rows, 0.25, gdl)
			if math.Abs(got-want) > 1e-12*max(math.Abs(want), 1) {
				t.Fatalf("SoftmaxCrossEntropy %s: loss %v, Go %v", what, got, want)
			}
			same(t, "dlogits "+what, gdl, dl.Data)
			if g, w := CountCorrect(logits.Data, c, labels, rows), cpu.CountCorrect(logits, labels, rows); g != w {
				t.Fatalf("CountCorrect %s: %d, Go %d", what, g, w)
			}
			if c == 2 {
				hg, hc := make([]float64, 2*kernels.ScoreBins), make([]float64, 2*kernels.ScoreBins)
				ScoreHistogram(logits.Data, labels, rows, kernels.ScoreBins, hg)
				cpu.ScoreHistogram(logits, labels, rows, hc)
				for i := range hg {
					if hg[i] != hc[i] {
						t.Fatalf("ScoreHistogram %s: bin %d is %v, Go %v", what, i, hg[i], hc[i])
					}
				}
			}
		}
	}
}

// SpMM and its transpose on widths past a lane's tiles (32*4 columns).
func TestSpMM(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, s := range append(shapes, [2]int{50, 129}, [2]int{20, 300}) {
		for _, weighted := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				a := randAdj(r, s[0], s[0]+3, weighted)
				for _, m := range []*kernels.Adj{a, a.T} {
					x, y := withSpecials(r, randMat(r, m.Cols, s[1])), randMat(r, m.Rows, s[1])
					got := append([]float32(nil), y.Data...)
					cpu.SpMM(m, x, y, acc)
					SpMM(s[1], m.Ptr, m.Col, m.Val, x.Data, got, acc)
					same(t, fmt.Sprintf("SpMM %dx%d F=%d weighted=%v acc=%v", m.Rows, m.Cols, s[1], weighted, acc), got, y.Data)
				}
			}
		}
	}
}

func TestGatherScatter(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, s := range shapes {
		if s[0] == 0 {
			continue
		}
		src := randMat(r, s[0], s[1])
		ids := make([]int32, max(1, s[0]/2))
		for i := range ids {
			ids[i] = int32(r.IntN(s[0]))
		}
		got, want := make([]float32, len(ids)*s[1]), kernels.NewMat(len(ids), s[1])
		GatherRows(ids, s[1], src.Data, got)
		for k, row := range ids {
			copy(want.Row(k), src.Row(int(row)))
		}
		same(t, fmt.Sprint("GatherRows ", s), got, want.Data)

		dst := randMat(r, s[0], s[1])
		gdst := append([]float32(nil), dst.Data...)
		ScatterAddRows(ids, s[1], got, gdst)
		new(halo.Host).ScatterAdd(ids, want, 0, dst) // repeated ids add twice, in order
		same(t, fmt.Sprint("ScatterAddRows ", s), gdst, dst.Data)
	}
}
