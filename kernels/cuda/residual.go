//go:build !cpu

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"gorgonia.org/cu"
)

// Launchers of the kernels in residual.cu: residual coding's sender-side
// row pass and gradient row skipping's row norms. What the host needs to
// decide which rows go (a few bytes per row) comes back to it; the rows
// stay on the device.

// ResidualSub writes d's first len(idx) rows = m's rows idx minus s's
// first rows, and sets dmax[k] and mmax[k] to the largest magnitudes, as
// float32 bits without the sign, of d's row k and of m's row idx[k]
// (comm/halo's Host.Residual). It waits for the kernel.
func (d *Device) ResidualSub(idx []int32, m, s, dst *kernels.Mat, dmax, mmax []uint32) {
	n := len(idx)
	if m.Cols != s.Cols || m.Cols != dst.Cols || s.Rows < n || dst.Rows < n || len(dmax) < n || len(mmax) < n {
		panic(fmt.Sprintf("cuda: ResidualSub: %d rows of %dx%d against %dx%d into %dx%d, %d and %d maxima",
			n, m.Rows, m.Cols, s.Rows, s.Cols, dst.Rows, dst.Cols, len(dmax), len(mmax)))
	}
	if n == 0 {
		return
	}
	if m.Cols == 0 {
		clear(dmax[:n])
		clear(mmax[:n])
		return
	}
	buf := d.scratchBuf(int64(8 * n))
	d.launch(kResidualSub, n, true, i32(n), i32(m.Cols), d.Ints(idx), mat(m), mat(s), mat(dst),
		dptr(buf), dptr(buf)+uint64(4*n))
	d.download(unsafe.Pointer(&dmax[0]), buf, int64(4*n))
	d.download(unsafe.Pointer(&mmax[0]), buf+cu.DevicePtr(4*n), int64(4*n))
}

// RowSqNorms sets out[k] to the squared norm of x's row k, k < len(out),
// summed in float64 in column order (comm/halo's rowSqNorms). It waits
// for the kernel.
func (d *Device) RowSqNorms(x *kernels.Mat, out []float64) {
	n := len(out)
	if x.Rows < n {
		panic(fmt.Sprintf("cuda: RowSqNorms: %d norms of a %dx%d matrix", n, x.Rows, x.Cols))
	}
	if n == 0 {
		return
	}
	buf := d.scratchBuf(int64(8 * n))
	d.launch(kRowSqNorms, n, false, i32(n), i32(x.Cols), mat(x), dptr(buf))
	d.download(unsafe.Pointer(&out[0]), buf, int64(8*n))
}
