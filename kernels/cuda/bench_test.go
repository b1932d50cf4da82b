//go:build !cpu

package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"gorgonia.org/cu"
)

// GPU throughput next to the device's own copy bandwidth (the limit for
// these memory-bound kernels). Bytes per op count float32 input read, as in
// the CPU codec benchmarks; the copy counts the bytes copied (each read
// once and written once).

const benchRows, benchCols = 1 << 20, 128

func benchInput(b *testing.B) (*Device, *kernels.Mat) {
	d := device(b)
	rng := rand.New(rand.NewPCG(1, 1))
	return d, up(d, randMat(rng, benchRows, benchCols))
}

func wait(b *testing.B, d *Device) {
	if err := d.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// timed runs op b.N times and stops the clock only when the device has
// finished them: launches return before their kernels run, so a clock
// stopped at the last launch would measure the launch rate. (b.Loop stops
// the clock when the loop ends, before a wait after it.)
func timed(b *testing.B, d *Device, op func()) {
	wait(b, d) // the setup's work is not timed
	b.ResetTimer()
	for range b.N {
		op()
	}
	wait(b, d)
	b.StopTimer()
}

func BenchmarkCopy(b *testing.B) {
	d, x := benchInput(b)
	y := d.NewMat(x.Rows, x.Cols)
	b.SetBytes(int64(4 * x.Len()))
	timed(b, d, func() {
		fail("copy", cu.MemcpyDtoD(cu.DevicePtr(y.Ptr), cu.DevicePtr(x.Ptr), int64(4*x.Len())))
	})
}

func BenchmarkQuantEncode(b *testing.B) {
	for _, bits := range []int{1, 2, 4, 8} {
		b.Run(map[int]string{1: "b=1", 2: "b=2", 4: "b=4", 8: "b=8"}[bits], func(b *testing.B) {
			d, x := benchInput(b)
			out := d.NewBytes(codec.Quant(bits).WireSize(benchRows, benchCols))
			b.SetBytes(int64(4 * x.Len()))
			timed(b, d, func() { d.QuantEncode(bits, AllRows(), x, out.Ptr, 7) })
		})
	}
}

func BenchmarkQuantDecode(b *testing.B) {
	d, x := benchInput(b)
	out := d.NewBytes(codec.Quant(4).WireSize(benchRows, benchCols))
	d.QuantEncode(4, AllRows(), x, out.Ptr, 7)
	b.SetBytes(int64(4 * x.Len()))
	timed(b, d, func() { d.QuantDecode(4, out.Ptr, x) })
}

// BenchmarkSpMM: mean aggregation over a random graph of average degree
// 16; bytes are the gathered rows read (nnz x F x 4) plus the output.
func BenchmarkSpMM(b *testing.B) {
	d, x := benchInput(b)
	rng := rand.New(rand.NewPCG(2, 2))
	n, deg := benchRows, 16
	ptr := make([]int64, n+1)
	col := make([]int32, n*deg)
	for i := range n {
		for k := range deg {
			col[i*deg+k] = int32(rng.IntN(n))
		}
		ptr[i+1] = int64((i + 1) * deg)
	}
	a := kernels.NewAdj(n, n, ptr, col, nil)
	y := d.NewMat(n, benchCols)
	d.SpMM(a, x, y, false)
	b.SetBytes(int64(4 * benchCols * (n*deg + n)))
	timed(b, d, func() { d.SpMM(a, x, y, false) })
}
