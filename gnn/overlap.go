package gnn

import "github.com/gnn-spmd/gnn-spmd/kernels"

// Overlap of the forward halo exchange with aggregation (as AdaQP does):
// the rows whose neighbours are all owned ("interior") need no halo row, so
// they are aggregated while the exchange is in flight, and only the
// boundary rows wait for it. The two passes add each row's terms in the
// order of the full SpMM, starting from zero, so the result is bit-identical.

// split is the aggregation matrix cut in two: interior has the boundary
// rows emptied, boundary the interior rows. Neither needs a transpose
// (only forward passes use them).
type split struct {
	interior, boundary *kernels.Adj
	rows               int // boundary rows, for the metrics
}

// splitAdj cuts a by whether a row reads any column >= owned.
func splitAdj(a *kernels.Adj, owned int) *split {
	in := &kernels.Adj{Rows: a.Rows, Cols: a.Cols, Ptr: make([]int64, a.Rows+1)}
	bd := &kernels.Adj{Rows: a.Rows, Cols: a.Cols, Ptr: make([]int64, a.Rows+1)}
	s := &split{interior: in, boundary: bd}
	for i := 0; i < a.Rows; i++ {
		lo, hi := a.Ptr[i], a.Ptr[i+1]
		dst := in
		for _, c := range a.Col[lo:hi] {
			if int(c) >= owned {
				dst = bd
				s.rows++
				break
			}
		}
		dst.Col = append(dst.Col, a.Col[lo:hi]...)
		if a.Val != nil {
			dst.Val = append(dst.Val, a.Val[lo:hi]...)
		}
		in.Ptr[i+1], bd.Ptr[i+1] = int64(len(in.Col)), int64(len(bd.Col))
	}
	return s
}

// overlapped fills x's halo rows through halo.Forward on the calling
// goroutine (MPI wants its calls on the main thread) while another
// goroutine aggregates the interior rows into y; then it aggregates the
// boundary rows. Only host devices take this path: a GPU device belongs to
// one goroutine.
func (m *Model) overlapped(halo Halo, layer int, x, y *kernels.Mat) error {
	done := make(chan struct{})
	go func() {
		m.dev.SpMM(m.split.interior, x, y, false)
		close(done)
	}()
	err := halo.Forward(layer, x)
	<-done
	if err != nil {
		return err
	}
	m.dev.SpMM(m.split.boundary, x, y, true)
	return nil
}
