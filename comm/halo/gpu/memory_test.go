//go:build !cpu

package gpu

// The CUDA memory against its CPU twin (halo.Host): every codec's payload
// is byte-identical (so each side decodes the other's), decoding and the
// error measure match, for rows gathered through an index list (forward)
// and for a block of rows without one (backward), on constant rows, rows
// of special values and inputs past one pass of every kernel's loop.
// Without a GPU the cudaprobe import makes this binary print SKIP and exit 0.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

var dev *cuda.Device

// device is GPU 0, opened once for the package's tests.
func device(t *testing.T) *cuda.Device {
	t.Helper()
	if dev == nil {
		d, err := cuda.New(0)
		if err != nil {
			t.Fatal(err)
		}
		dev = d
	}
	if err := dev.MakeCurrent(); err != nil {
		t.Fatal(err)
	}
	return dev
}

func specs() []codec.Spec {
	out := []codec.Spec{codec.None(), codec.Quant(16), codec.Trunc(1), codec.Trunc(3), codec.Trunc(128)}
	for b := 1; b <= 8; b++ {
		out = append(out, codec.Quant(b))
	}
	// Rows sharing headers (the last group short, or alone).
	out = append(out, codec.Quant(2).Grouped(3), codec.Quant(1).Grouped(4), codec.Quant(8).Grouped(2))
	// The ternary code of residuals, alone and grouped.
	return append(out, codec.Tern(), codec.Tern().Grouped(2), codec.Tern().Grouped(3), codec.Tern().Grouped(7))
}

// specialRows are rows whose encoding the CPU codecs define: signed zeros,
// infinities, NaNs, subnormals, a range that overflows the quant scale,
// all NaN, all zeros of both signs.
func specialRows(cols int) [][]float32 {
	nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	vals := []float32{negz, 0, nan, -nan, inf, -inf, math.SmallestNonzeroFloat32, -1e-40, math.MaxFloat32, -math.MaxFloat32, 1.5, -2}
	rows := make([][]float32, 7)
	for i := range rows {
		rows[i] = make([]float32, cols)
	}
	for j := range cols {
		rows[0][j] = vals[j%len(vals)]
		rows[1][j] = nan
		rows[2][j] = []float32{negz, 0}[j%2]
		rows[3][j] = []float32{1e-40, -1e-41, math.SmallestNonzeroFloat32}[j%3]
		rows[4][j] = []float32{math.MaxFloat32, -math.MaxFloat32, 1}[j%3]
		rows[5][j] = []float32{inf, 3, nan}[j%3]
		rows[6][j] = 1.5 // constant
	}
	return rows
}

// input is a rows+2 x cols matrix of normal values with the special rows
// first, as many as fit.
func input(rng *rand.Rand, rows, cols int) *kernels.Mat {
	src := kernels.NewMat(rows+2, cols)
	for i := range src.Data {
		src.Data[i] = float32(rng.NormFloat64())
	}
	for i, r := range specialRows(cols) {
		if i < rows {
			copy(src.Row(i), r)
		}
	}
	return src
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i, v := range got {
		if w := want[i]; math.Float32bits(v) != math.Float32bits(w) && !(v != v && w != w) {
			t.Fatalf("%s: element %d is %v, CPU %v", what, i, v, w)
		}
	}
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: payload byte %d is %#x, CPU %#x", what, i, got[i], want[i])
		}
	}
}

// shapesFor are the shapes of the tests: edge cases, and one past a pass
// of every loop (warp per row: quant encode; grid-stride over elements or
// quads of columns; the error measure's capped reduction).
func shapesFor(d *cuda.Device) [][2]int {
	threads, warps, _ := d.GridPass()
	// The quant encoder gives a row quant_lanes(cols) lanes, so a warp
	// takes 32 rows of 8 columns, 2 of 129 and 1 of 513: the last three
	// shapes run its loop twice.
	return [][2]int{{0, 5}, {1, 1}, {1, 33}, {7, 3}, {31, 64}, {100, 7}, {257, 100}, {1000, 129}, {300, 257},
		{32*warps + 7, 8}, {2*warps + threads/128 + 7, 129}, {warps + 7, 513}}
}

func TestMemoryMatchesHost(t *testing.T) {
	d := device(t)
	g, h := &CUDA{Dev: d}, &halo.Host{}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range shapesFor(d) {
		rows, cols := s[0], s[1]
		src := input(rng, rows, cols)
		gsrc := d.NewMat(src.Rows, cols)
		d.Upload(gsrc, src.Data)
		ids := make([]int32, rows)
		for i := range ids {
			ids[i] = int32(rows + 1 - i)
		}
		for _, c := range specs() {
			what := fmt.Sprintf("%s %v", c.Name(), s)
			n := c.WireSize(rows, cols)
			want := make([]byte, n)
			h.EncodeRows(c, src, ids, want, 99)
			buf := d.NewBytes(n)
			g.EncodeRows(c, gsrc, ids, buf, 99)
			got := make([]byte, n)
			d.DownloadBytes(got, buf)
			sameBytes(t, what, got, want)

			dec := kernels.NewMat(rows, cols)
			h.Decode(c, want, dec, 0, rows)
			gdec := d.NewMat(rows, cols)
			g.Decode(c, buf, gdec, 0, rows)
			gotDec := make([]float32, gdec.Len())
			d.Download(gotDec, gdec)
			sameFloats(t, what+" decode", gotDec, dec.Data)

			e, nrm := g.SqDiff(ids, gsrc, gdec, 0)
			we, wn := h.SqDiff(ids, src, dec, 0)
			if !closeSum(e, we) || !closeSum(nrm, wn) {
				t.Fatalf("%s: SqDiff %v %v, CPU %v %v", what, e, nrm, we, wn)
			}

			// Without an index list (the backward pass): rows lo..hi.
			lo, hi := min(1, rows), rows
			n = c.WireSize(hi-lo, cols)
			want, got = make([]byte, n), make([]byte, n)
			h.Encode(c, src, lo, hi, want, 7)
			d.Free(buf)
			buf = d.NewBytes(n)
			g.Encode(c, gsrc, lo, hi, buf, 7)
			d.DownloadBytes(got, buf)
			sameBytes(t, what+" rows "+fmt.Sprint(lo, hi), got, want)
			d.Free(buf)
		}
	}
}

// closeSum compares sums of squares reduced in different orders; NaN and Inf
// sums must agree exactly.
func closeSum(got, want float64) bool {
	if math.IsNaN(want) || math.IsInf(want, 0) {
		return math.IsNaN(got) == math.IsNaN(want) && (math.IsNaN(got) || got == want)
	}
	return math.Abs(got-want) <= 1e-9*max(math.Abs(want), 1e-30)
}

// Growing a payload buffer or the stage frees what it replaces.
func TestGrowFrees(t *testing.T) {
	d := device(t)
	g := &CUDA{Dev: d}
	n0, _ := d.Allocated()
	var buf kernels.Bytes
	for _, n := range []int{10, 1000, 100, 1 << 20} {
		buf = g.Grow(buf, n)
		if buf.Len < n {
			t.Fatalf("Grow(%d) gave %d bytes", n, buf.Len)
		}
	}
	var stage kernels.Mat
	for _, r := range []int{1, 500, 20, 4000} {
		m := g.Scratch(&stage, r, 33)
		if m.Rows != r || m.Cols != 33 || stage.Len() < r*33 {
			t.Fatalf("Scratch(%d, 33): %dx%d over %d", r, m.Rows, m.Cols, stage.Len())
		}
	}
	if n, _ := d.Allocated(); n != n0+2 {
		t.Errorf("%d allocations after growing one buffer and one stage, want %d", n, n0+2)
	}
	d.Free(buf)
	d.Free(kernels.Bytes{Ptr: stage.Ptr, Len: 4 * stage.Len()})
}
