//go:build !cpu

package gpu

// The CUDA memory against its CPU twin (halo.Host): every codec's payload
// is byte-identical (so each side decodes the other's), decoding and the
// error measure match, and rows are gathered through an index list as the
// exchange does, constant rows included. Without a GPU the cudaprobe
// import makes this binary print SKIP and exit 0.

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

func TestMemoryMatchesHost(t *testing.T) {
	dev, err := cuda.New(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	g, h := CUDA{dev}, &halo.Host{}
	rng := rand.New(rand.NewPCG(15, 16))
	specs := []codec.Spec{codec.None(), codec.Quant(16), codec.Trunc(1), codec.Trunc(3), codec.Trunc(128)}
	for b := 1; b <= 8; b++ {
		specs = append(specs, codec.Quant(b))
	}
	for _, s := range [][2]int{{0, 5}, {1, 1}, {1, 33}, {7, 3}, {31, 64}, {100, 7}, {257, 100}, {1000, 129}} {
		rows, cols := s[0], s[1]
		src := kernels.NewMat(rows+2, cols)
		for i := range src.Data {
			src.Data[i] = float32(rng.NormFloat64())
		}
		if rows > 3 {
			for j := range cols {
				src.Data[2*cols+j] = 1.5 // a constant row
			}
		}
		gsrc := dev.NewMat(src.Rows, cols)
		dev.Upload(gsrc, src.Data)
		ids := make([]int32, rows)
		for i := range ids {
			ids[i] = int32(rows + 1 - i)
		}
		for _, c := range specs {
			what := fmt.Sprintf("%s %v", c.Name(), s)
			n := c.WireSize(rows, cols)
			want := make([]byte, n)
			h.EncodeRows(c, src, ids, want, 99)
			buf := dev.NewBytes(n)
			g.EncodeRows(c, gsrc, ids, buf, 99)
			got := make([]byte, n)
			dev.DownloadBytes(got, buf)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: payload byte %d is %#x, CPU %#x", what, i, got[i], want[i])
				}
			}
			dec := kernels.NewMat(rows, cols)
			h.Decode(c, want, dec, 0, rows)
			gdec := dev.NewMat(rows, cols)
			g.Decode(c, buf, gdec, 0, rows)
			gotDec := make([]float32, gdec.Len())
			dev.Download(gotDec, gdec)
			for i, v := range gotDec {
				if w := dec.Data[i]; math.Float32bits(v) != math.Float32bits(w) && !(v != v && w != w) {
					t.Fatalf("%s decode: element %d is %v, CPU %v", what, i, v, w)
				}
			}
			e, nrm := g.SqDiff(ids, gsrc, gdec, 0)
			we, wn := h.SqDiff(ids, src, dec, 0)
			if math.Abs(e-we) > 1e-9*max(we, 1e-30) || math.Abs(nrm-wn) > 1e-9*max(wn, 1e-30) {
				t.Fatalf("%s: SqDiff %v %v, CPU %v %v", what, e, nrm, we, wn)
			}
			dev.Free(buf)
		}
	}
}
