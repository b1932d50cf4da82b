//go:build !cpu

package cuda

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Launchers of the kernels in sparse.cu: aggregation over a CSR, and row
// gathers and scatter-adds (the halo exchange's raw rows).

// SpMM computes y = A x (y += A x when accumulate), a warp per row.
func (d *Device) SpMM(a *kernels.Adj, x, y *kernels.Mat, accumulate bool) {
	if x.Rows != a.Cols || y.Rows != a.Rows || x.Cols != y.Cols {
		panic(fmt.Sprintf("cuda: SpMM: A %dx%d, x %dx%d, y %dx%d", a.Rows, a.Cols, x.Rows, x.Cols, y.Rows, y.Cols))
	}
	if a.Rows == 0 || x.Cols == 0 {
		return
	}
	g := d.adj(a)
	d.launch(kSpMM, a.Rows, true, i32(a.Rows), i32(x.Cols), dptr(g.ptr), dptr(g.col), dptr(g.val),
		mat(x), mat(y), i32(b2i(accumulate)))
}

// GatherRows copies src's listed rows (rows, a list) into dst's first
// rows, in order.
func (d *Device) GatherRows(rows Rows, src, dst *kernels.Mat) {
	idx := rows.mustList("GatherRows")
	if src.Cols != dst.Cols || dst.Rows < len(idx) {
		panic(fmt.Sprintf("cuda: GatherRows: %d rows of width %d into %dx%d", len(idx), src.Cols, dst.Rows, dst.Cols))
	}
	if len(idx) > 0 && src.Cols > 0 {
		d.launch(kGather, len(idx)*src.Cols, false, i32(len(idx)), i32(src.Cols), rows.ptr(d), mat(src), mat(dst))
	}
}

// ScatterAddRows adds src's first rows into dst's listed rows (rows, a
// list without repeats).
func (d *Device) ScatterAddRows(rows Rows, src, dst *kernels.Mat) {
	idx := rows.mustList("ScatterAddRows")
	if src.Cols != dst.Cols || src.Rows < len(idx) {
		panic(fmt.Sprintf("cuda: ScatterAddRows: %d rows of width %d from %dx%d", len(idx), dst.Cols, src.Rows, src.Cols))
	}
	if len(idx) > 0 && src.Cols > 0 {
		d.launch(kScatterAdd, len(idx)*src.Cols, false, i32(len(idx)), i32(src.Cols), rows.ptr(d), mat(src), mat(dst))
	}
}
