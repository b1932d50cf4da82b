package hosttwin

// The kernels' routines, compiled for the host, against the Go code they
// mirror: codecs (comm/codec, the halo exchange's host rows), dense,
// sparse and attention kernels (kernels.CPU). Equality is of bits, except
// where the GPU by design sums in another order than the CPU (said at each
// such check).

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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
	// Far from 0 on either side, and at the boundary of the grid multiple's
	// range (4 spans): the wider grid candidates of quant.
	{"offset", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = 5 + 0.3*float32(r.Float64())
		}
	}},
	{"negative offset", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = -1000 - float32(r.Float64())
		}
	}},
	{"edge offset", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = 4 + float32(r.Float64())
		}
	}},
	{"tiny", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.NormFloat64() * 0x1p-97)
		}
	}},
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

// ternKinds are rowKinds and the ternary code's own edge cases: the
// largest finite bf16 and values that round up past it (s capped), a
// largest magnitude whose bf16 rounding carries, values whose x/s + u
// meets the codes' bounds +-1/2 exactly, and subnormal largest magnitudes
// (1/s overflows).
var ternKinds = append(rowKinds[:len(rowKinds):len(rowKinds)], []struct {
	name string
	fill func(r *rand.Rand, row []float32)
}{
	{"huge", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.Float64()*2-1) * 3.39e38
		}
		if len(row) > 0 {
			row[r.IntN(len(row))] = math.Float32frombits(0x7f7f0001) // above the largest bf16
		}
	}},
	{"largest bf16", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.NormFloat64()) * 1e37
		}
		if len(row) > 0 {
			row[r.IntN(len(row))] = -math.Float32frombits(0x7f7f0000)
		}
	}},
	{"carry", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = float32(r.Float64()*2-1) * 1.9999
		}
		if len(row) > 0 {
			row[r.IntN(len(row))] = math.Float32frombits(0x3fffffff) // bf16 up: 2
		}
	}},
	{"grid", func(r *rand.Rand, row []float32) { // s = 2, x/s on the 1/512 grid of u: v = +-1/2 exactly
		for j := range row {
			row[j] = float32(r.IntN(1025)-512) / 256
		}
		if len(row) > 0 {
			row[r.IntN(len(row))] = 2
		}
	}},
	{"subnormal max", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = math.Float32frombits(uint32(r.IntN(4))) * float32(1-2*(j&1))
		}
	}},
	{"Inf and NaN", func(r *rand.Rand, row []float32) {
		for j := range row {
			row[j] = []float32{float32(math.Inf(1)), float32(math.NaN()), 2.5, float32(math.Copysign(0, -1))}[r.IntN(4)]
		}
	}},
}...)

// ternEncodeTwin is the GPU memory's tern encode (comm/halo/gpu's encode
// and encodeGrouped) replayed on the twin: rows of x (idx's when not nil)
// as a tern payload; grouped, the rows gathered first, the whole groups
// as rows of g*cols values, then the rest as one row at restAt, its
// draws' row the number of whole groups.
func ternEncodeTwin(t *testing.T, c codec.Spec, x []float32, rows, cols int, idx []int32, seed uint64) []byte {
	t.Helper()
	dst := make([]byte, c.WireSize(rows, cols))
	h := rng.Mix64(seed)
	if c.Group() == 1 {
		if err := TernEncode(dst, x, rows, cols, 0, idx, TernKey, h); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	if idx != nil {
		g := make([]float32, rows*cols)
		for k, r := range idx {
			copy(g[k*cols:(k+1)*cols], x[int(r)*cols:(int(r)+1)*cols])
		}
		x = g
	}
	whole, rest, w, at := c.Groups(rows, cols)
	if err := TernEncode(dst, x[:whole*w], whole, w, 0, nil, TernKey, h); err != nil {
		t.Fatal(err)
	}
	if rest > 0 {
		if err := TernEncode(dst, x[whole*w:rows*cols], 1, rest*cols, whole, nil, at, h); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// ternDecodeTwin is the GPU memory's tern Decode replayed on the twin.
func ternDecodeTwin(c codec.Spec, src []byte, rows, cols int) []float32 {
	dst := make([]float32, rows*cols)
	whole, rest, w, at := c.Groups(rows, cols)
	TernDecode(dst[:whole*w], src, whole, w, 0, TernKey)
	if rest > 0 {
		TernDecode(dst[whole*w:], src, 1, rest*cols, whole, at)
	}
	return dst
}

// ternWidths are 0..70 (every residue of the 5-code bytes and the
// 16-column draw blocks; grouped, rows of up to 8*70 values: several
// 80-column chunks and lanes a row) and, ungrouped too, rows past one, two
// and 32 chunks.
var ternWidths = func() []int {
	w := make([]int, 0, 80)
	for c := range 71 {
		w = append(w, c)
	}
	return append(w, 79, 80, 81, 160, 161, 257, 2561)
}()

// TestTern: the ternary code's encoder and decoder against comm/codec's
// Tern() and Tern().Grouped(g), bit for bit, on ternWidths, every row kind
// (all rows of one, and mixed), with and without an index list, short last
// groups and payloads of the rest alone; and the decoders on random bytes
// (bytes above 242, any scale and key).
func TestTern(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const rows = 7
	seeds := []uint64{0, 1, ^uint64(0)}
	for _, g := range []int{1, 2, 3, 4, 7, 8} {
		c := codec.Tern().Grouped(g)
		for _, cols := range ternWidths {
			for ki, k := range ternKinds {
				for mixed := range 2 {
					x := make([]float32, rows*cols)
					for i := range rows {
						kind := k
						if mixed == 1 {
							kind = ternKinds[(ki+i*5)%len(ternKinds)]
						}
						kind.fill(r, x[i*cols:(i+1)*cols])
					}
					seed := r.Uint64()
					if ki == 0 && mixed == 0 {
						seed = seeds[cols%len(seeds)]
					}
					what := fmt.Sprintf("%s, %d columns, %s rows (mixed %d), seed %#x", c.Name(), cols, k.name, mixed, seed)
					for _, n := range []int{0, 1, 2, rows} { // n rows: none, only a rest (g > 2), ...
						want := make([]byte, c.WireSize(n, cols))
						c.Encode(want, x[:n*cols], n, cols, seed)
						got := ternEncodeTwin(t, c, x, n, cols, nil, seed)
						sameBytes(t, fmt.Sprintf("%s, %d rows", what, n), got, want)
						wantDec := make([]float32, n*cols)
						c.Decode(wantDec, want, n, cols)
						same(t, fmt.Sprintf("%s, %d rows, decoded", what, n), ternDecodeTwin(c, want, n, cols), wantDec)
					}
					idx := []int32{6, 0, 2, 2, 5, 1, 3, 4, 0}
					want := encodeRows(c, x, cols, idx, seed)
					got := ternEncodeTwin(t, c, x, len(idx), cols, idx, seed)
					sameBytes(t, what+", index list", got, want)
					wantDec := make([]float32, len(idx)*cols)
					c.Decode(wantDec, want, len(idx), cols)
					same(t, what+", index list, decoded", ternDecodeTwin(c, want, len(idx), cols), wantDec)
				}
			}
			// Random payloads: every byte value, scales of any bf16.
			for range 4 {
				n := 1 + r.IntN(rows)
				p := make([]byte, c.WireSize(n, cols))
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				wantDec := make([]float32, n*cols)
				c.Decode(wantDec, p, n, cols)
				same(t, fmt.Sprintf("%s, %d columns, %d random rows", c.Name(), cols, n), ternDecodeTwin(c, p, n, cols), wantDec)
			}
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

// TestResidualSub: residual_sub's differences and largest magnitudes
// equal Host.Residual's bit for bit (the skip decisions are made from them
// on the host by the same Go code), on every width and row kind, the
// state rows of another kind (NaN and infinite residuals included) or
// equal to the row (a zero residual, which the skip leaves out).
func TestResidualSub(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for cols := 0; cols <= maxWidth; cols++ {
		for ki, kind := range rowKinds {
			m := rows3(r, cols, kind.fill)
			s := rows3(r, cols, rowKinds[(ki+3)%len(rowKinds)].fill)
			if ki%2 == 0 { // a state equal to its row: a zero residual, a row the skip leaves out
				copy(s[:cols], m[2*cols:])
			}
			idx := []int32{2, 0, 2}
			d, dmax, mmax := make([]float32, 3*cols), make([]uint32, 3), make([]uint32, 3)
			ResidualSub(idx, cols, m, s, d, dmax, mmax)
			wd, wmax, wmm := kernels.NewMat(3, cols), make([]uint32, 3), make([]uint32, 3)
			new(halo.Host).Residual(idx, &kernels.Mat{Rows: 3, Cols: cols, Data: m}, &kernels.Mat{Rows: 3, Cols: cols, Data: s}, 0, wd, wmax, wmm)
			what := fmt.Sprintf("%d columns, %s rows", cols, kind.name)
			same(t, what+": differences", d, wd.Data)
			for k := range 3 {
				if dmax[k] != wmax[k] || mmax[k] != wmm[k] {
					t.Fatalf("%s: row %d maxima %#x %#x, Go %#x %#x", what, k, dmax[k], mmax[k], wmax[k], wmm[k])
				}
			}
		}
	}
}

// TestRowSqNorms: row_sq_norms equals Host.RowSqNorms bit for bit.
func TestRowSqNorms(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for cols := 0; cols <= maxWidth; cols++ {
		for _, kind := range rowKinds {
			x := rows3(r, cols, kind.fill)
			got, want := make([]float64, 2), make([]float64, 2)
			RowSqNorms(cols, x[cols:], got) // rows 1 and 2
			new(halo.Host).RowSqNorms(&kernels.Mat{Rows: 3, Cols: cols, Data: x}, 1, want)
			for k := range got {
				if math.Float64bits(got[k]) != math.Float64bits(want[k]) && !(got[k] != got[k] && want[k] != want[k]) {
					t.Fatalf("%d columns, %s rows: row %d %v, Go %v", cols, kind.name, k+1, got[k], want[k])
				}
			}
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

// ---- attention ----

// attnParams is what kernels/cuda's launchers derive from a layer.
func attnParams(at *kernels.Attention, rows int, train bool) *AttnParams {
	p := &AttnParams{Heads: at.Heads, Width: at.Width, Mean: at.Mean, Slope: at.Slope, Scale: 1}
	if train && at.Dropout > 0 {
		p.Drop = true
		p.Scale, p.Thr = kernels.DropoutParams(at.Dropout, rows, nil)
		p.Key = rng.Mix64(at.Seed)
		p.RowIDs = at.RowIDs
	}
	return p
}

// unwritten fills the twins' outputs: a value no pass computes, so that an
// element a kernel leaves alone differs from the CPU's (whose outputs start
// as NaN).
const unwritten = -7.75e33

func filled(n int, v float32) []float32 {
	s := make([]float32, n)
	fillAll(s, v)
	return s
}

// attnResult is everything one forward and backward writes.
type attnResult struct{ stats, alpha, out, rec, dq, dDst []float32 }

func newAttnResult(c *kerneltest.AttentionCase, stored bool, v float32) *attnResult {
	at, rows := &c.At, c.A.Rows
	r := &attnResult{stats: filled(rows*at.StatsCols(), v), out: filled(rows*at.OutCols(), v),
		rec: filled(rows*at.RecordCols(), v), dq: filled(c.Q.Len(), v), dDst: filled(rows*at.Heads, v)}
	if stored {
		r.alpha = filled(int(c.A.Ptr[rows])*at.Heads, v)
	}
	return r
}

func hostMat(rows, cols int, data []float32) *kernels.Mat {
	if data == nil {
		return nil
	}
	return &kernels.Mat{Rows: rows, Cols: cols, Data: data}
}

// cpuAttention is the CPU's forward and backward (its C loops, which
// kernels' TestAttentionCEqualsGo holds to the Go twins bit for bit).
func cpuAttention(c *kerneltest.AttentionCase, stored, train bool) *attnResult {
	at, a := &c.At, c.A
	r := newAttnResult(c, stored, float32(math.NaN()))
	stats, alpha := hostMat(a.Rows, at.StatsCols(), r.stats), hostMat(int(a.Ptr[a.Rows]), at.Heads, r.alpha)
	cpu.AttentionForward(at, a, c.Q, c.T, stats, alpha, hostMat(a.Rows, at.OutCols(), r.out), train)
	cpu.AttentionBackward(at, a, c.E, c.Q, c.T, stats, alpha, c.DOut, hostMat(a.Rows, at.RecordCols(), r.rec),
		hostMat(c.Q.Rows, c.Q.Cols, r.dq), hostMat(a.Rows, at.Heads, r.dDst), train)
	return r
}

// twinAttention is the kernels' forward and backward replayed on the host.
func twinAttention(c *kerneltest.AttentionCase, stored, train bool) *attnResult {
	a := c.A
	p := attnParams(&c.At, a.Rows, train)
	r := newAttnResult(c, stored, unwritten)
	AttentionForward(p, a.Ptr, a.Col, c.Q.Data, c.T.Data, r.stats, r.alpha, r.out)
	AttentionBackward(p, a.Ptr, a.Col, c.E.Ptr, c.E.Dst, c.E.Rank, c.Q.Data, c.T.Data, r.stats, r.alpha, c.DOut.Data,
		r.rec, r.dq, r.dDst)
	return r
}

func (r *attnResult) same(t *testing.T, what string, want *attnResult) {
	t.Helper()
	same(t, what+": stats", r.stats, want.stats)
	if want.alpha != nil {
		same(t, what+": alpha", r.alpha, want.alpha)
	}
	same(t, what+": out", r.out, want.out)
	same(t, what+": record", r.rec, want.rec)
	same(t, what+": d(dst)", r.dDst, want.dDst)
	same(t, what+": dq", r.dq, want.dq)
}

// The forward and backward kernels against the CPU on every shape of
// kernels' tests, with stored and recomputed coefficients, with and without
// coefficient dropout (row ids given and not, everything dropped), in
// training and not, on ordinary inputs and with special values.
func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, s := range kerneltest.AttentionShapes {
		for _, drop := range []float32{0, 0.4, 1} {
			for _, special := range []bool{false, true} {
				c := kerneltest.NewAttentionCase(r, 70, 90, s.Heads, s.Width, s.Mean, drop)
				if special {
					c.WithSpecials(r)
				}
				for _, ids := range []bool{true, false} {
					if !ids {
						if drop == 0 {
							continue
						}
						c.At.RowIDs = nil
					}
					for _, stored := range []bool{true, false} {
						for _, train := range []bool{true, false} {
							what := fmt.Sprintf("heads %d width %d mean %v dropout %v specials %v ids %v stored %v train %v",
								s.Heads, s.Width, s.Mean, drop, special, ids, stored, train)
							twinAttention(c, stored, train).same(t, what, cpuAttention(c, stored, train))
						}
					}
				}
			}
		}
	}
}

// Graphs without edges, without destinations and without sources.
func TestAttentionEmpty(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, dims := range [][2]int{{0, 5}, {5, 0}, {0, 0}, {1, 1}} {
		for _, s := range kerneltest.AttentionShapes[:3] {
			c := kerneltest.NewAttentionCase(r, dims[0], dims[1], s.Heads, s.Width, s.Mean, 0.4)
			for _, stored := range []bool{true, false} {
				what := fmt.Sprintf("%dx%d heads %d width %d stored %v", dims[0], dims[1], s.Heads, s.Width, stored)
				twinAttention(c, stored, true).same(t, what, cpuAttention(c, stored, true))
			}
		}
	}
}

// cancelling makes the terms' backward sums show how its blocks of rows
// are cut and combined: every d(s) and d(t) is 1, and at each boundary
// between two blocks (kernels' cut: block b starts at row b*rows/nb) the
// last row before it is 2^40 and the first after it -2^40. Their blocks'
// float64 partials then hold +-2^40 plus ordinary sums rounded to its
// 2^-12, which cancel differently when a cut or the order of the partials
// moves, by far more than the float32 totals' rounding.
func cancelling(P, dq, dt *kernels.Mat) {
	for i := range P.Rows {
		fillAll(dq.Row(i)[P.Cols:], 1)
		fillAll(dt.Row(i), 1)
	}
	nb := TermsBlocks(P.Len())
	if P.Rows < 2*nb {
		return
	}
	for b := 1; b < nb; b++ {
		lo := b * P.Rows / nb
		fillAll(P.Row(lo-1), 0x1p40)
		fillAll(P.Row(lo), -0x1p40)
	}
}

// The source and destination terms and their backward, with blocks of
// rows past one (kernels' grain: 2^14 values), row counts the blocks do
// not divide, more blocks than rows, special values, and sums that show
// where the blocks are cut.
func TestAttentionTerms(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	shapes := [][3]int{{0, 1, 1}, {1, 1, 1}, {70, 3, 5}, {70, 16, 9}, {33, 10, 17}, {20000, 1, 1}, {3000, 4, 6},
		{3001, 4, 6}, {999, 3, 7}, {2, 8, 5000}}
	for _, s := range shapes {
		rows, heads, width := s[0], s[1], s[2]
		hw := heads * width
		at := &kernels.Attention{Heads: heads, Width: width}
		for _, kind := range []string{"normal", "specials", "cancelling"} {
			P, aSrc, aDst := randMat(r, rows, hw), randMat(r, heads, width), randMat(r, heads, width)
			dq, dt := randMat(r, rows, at.SourceCols()), randMat(r, rows, heads)
			switch kind {
			case "specials":
				for _, m := range []*kernels.Mat{P, aSrc, aDst, dq, dt} {
					withSpecials(r, m)
				}
			case "cancelling":
				cancelling(P, dq, dt)
			}
			what := fmt.Sprintf("rows %d heads %d width %d %s", rows, heads, width, kind)

			q, tt := kernels.NewMat(rows, at.SourceCols()), kernels.NewMat(rows, heads)
			fillAll(q.Data, float32(math.NaN()))
			fillAll(tt.Data, float32(math.NaN()))
			cpu.AttentionTerms(at, P, aSrc, aDst, q, tt)
			gq, gt := filled(q.Len(), unwritten), filled(tt.Len(), unwritten)
			AttentionTerms(rows, heads, width, P.Data, aSrc.Data, aDst.Data, gq, gt)
			same(t, "AttentionTerms q "+what, gq, q.Data)
			same(t, "AttentionTerms t "+what, gt, tt.Data)

			dP, daSrc, daDst := kernels.NewMat(rows, hw), kernels.NewMat(heads, width), kernels.NewMat(heads, width)
			for _, m := range []*kernels.Mat{dP, daSrc, daDst} {
				fillAll(m.Data, float32(math.NaN()))
			}
			cpu.AttentionTermsBackward(at, P, aSrc, aDst, dq, dt, dP, daSrc, daDst)
			gdP, gdaSrc, gdaDst := filled(dP.Len(), unwritten), filled(hw, unwritten), filled(hw, unwritten)
			AttentionTermsBackward(rows, TermsBlocks(P.Len()), heads, width, P.Data, aSrc.Data, aDst.Data, dq.Data, dt.Data,
				gdP, gdaSrc, gdaDst)
			same(t, "AttentionTermsBackward dP "+what, gdP, dP.Data)
			same(t, "AttentionTermsBackward daSrc "+what, gdaSrc, daSrc.Data)
			same(t, "AttentionTermsBackward daDst "+what, gdaDst, daDst.Data)
		}
	}
}

// eluInputs: a million bit patterns spread over all 2^32, the specials,
// every float in steps of 2^-16 over [-2, 0] and the neighbours of
// Expm1's branch points (|x| = ln2/2, 1.5 ln2, 56 ln2, the exponents k =
// 2, 20, 56 of its reduction, 2^-54).
func eluInputs() []float32 {
	x := append([]float32(nil), specials...)
	for u := uint64(0); u < 1<<32; u += 4099 {
		x = append(x, math.Float32frombits(uint32(u)))
	}
	for v := float32(-2); v <= 0; v += 1.0 / 65536 {
		x = append(x, v)
	}
	for _, b := range []float64{0.5 * math.Ln2, 1.5 * math.Ln2, 56 * math.Ln2, 1.5 * math.Ln2, 19.5 * math.Ln2,
		20.5 * math.Ln2, 55.5 * math.Ln2, 0x1p-54, 88.7, 0.25} {
		c := math.Float32bits(float32(b))
		for d := uint32(0); d < 64; d++ {
			for _, s := range []float32{1, -1} {
				x = append(x, s*math.Float32frombits(c-32+d))
			}
		}
	}
	return x
}

func TestELU(t *testing.T) {
	x := eluInputs()
	xm := &kernels.Mat{Rows: 1, Cols: len(x), Data: x}
	want, got := kernels.NewMat(1, len(x)), make([]float32, len(x))
	cpu.ELU(xm, want)
	ELU(x, got)
	same(t, "ELU", got, want.Data)

	// The backward from ELU's outputs and from any value, special or not.
	r := rand.New(rand.NewPCG(27, 28))
	dy := withSpecials(r, randMat(r, 1, len(x)))
	dx, gdx := kernels.NewMat(1, len(x)), make([]float32, len(x))
	for _, y := range []*kernels.Mat{want, xm} {
		cpu.ELUBackward(y, dy, dx)
		ELUBackward(y.Data, dy.Data, gdx)
		same(t, "ELUBackward", gdx, dx.Data)
	}
}

// ELU on every float32 (a minute and a half on 2 cores, in either build):
// GNN_SPMD_ELU_EXHAUSTIVE=1.
func TestELUExhaustive(t *testing.T) {
	if os.Getenv("GNN_SPMD_ELU_EXHAUSTIVE") == "" {
		t.Skip("GNN_SPMD_ELU_EXHAUSTIVE is not set")
	}
	const n = 1 << 24
	x, got := make([]float32, n), make([]float32, n)
	want := kernels.NewMat(1, n)
	xm := &kernels.Mat{Rows: 1, Cols: n, Data: x}
	for base := uint64(0); base < 1<<32; base += n {
		for k := range x {
			x[k] = math.Float32frombits(uint32(base + uint64(k)))
		}
		cpu.ELU(xm, want)
		ELU(x, got)
		same(t, fmt.Sprintf("ELU from %#x", base), got, want.Data)
	}
}
