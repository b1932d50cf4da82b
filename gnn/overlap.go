package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Overlap of the halo exchanges with aggregation (as AdaQP does).
//
// Forward: the rows whose neighbours are all owned ("interior") need no
// halo row, so they are aggregated while the exchange is in flight, and only
// the boundary rows wait for it.
//
// Backward: the gradient's halo rows (A^T's rows past the owned ones) are
// computed first and sent; the owned rows and the self weight's gradient
// are computed while they travel, and what peers return is added after.
//
// The self term of GraphSAGE (x Ws forward) reads no halo row either, so
// the forward pass computes it first, during the exchange.
//
// Every row is computed by the same kernel in the same order as without
// overlap, so the result is bit-identical.

// rowSpMM is a device that can aggregate a subset of rows (the CPU): the
// forward overlap needs one.
type rowSpMM interface {
	SpMMRows(a *kernels.Adj, s *kernels.RowSet, x, y *kernels.Mat, accumulate bool)
}

// split lists the interior and the boundary rows of the aggregation.
type split struct {
	interior, boundary *kernels.RowSet
}

// splitAdj sorts a's rows by whether they read any column >= owned.
func splitAdj(a *kernels.Adj, owned int) *split {
	var in, bd []int32
	for i := 0; i < a.Rows; i++ {
		dst := &in
		for _, c := range a.Col[a.Ptr[i]:a.Ptr[i+1]] {
			if int(c) >= owned {
				dst = &bd
				break
			}
		}
		*dst = append(*dst, int32(i))
	}
	return &split{interior: kernels.NewRowSet(a, in), boundary: kernels.NewRowSet(a, bd)}
}

// overlapped fills x's halo rows through halo.Forward on the calling
// goroutine (MPI wants its calls on the main thread) while another
// goroutine runs self (if set) and aggregates the interior rows into y;
// then it aggregates the boundary rows.
func (m *Model) overlapped(ex halo.Exchanger, layer int, x, y *kernels.Mat, acc bool, self func()) error {
	done := make(chan struct{})
	go func() {
		if self != nil {
			self()
		}
		m.rows.SpMMRows(m.view.Adj, m.split.interior, x, y, acc)
		close(done)
	}()
	err := ex.Forward(layer, x)
	<-done
	if err != nil {
		return err
	}
	m.rows.SpMMRows(m.view.Adj, m.split.boundary, x, y, acc)
	return nil
}

// backAggregate computes g = A^T dz into its owned rows gOwn and halo rows
// gHalo, returns the halo rows to their owners and adds what the peers
// return into the owned rows. ownTerms, when set, first writes the owned
// rows' other terms, which the aggregation then adds to; alongside, when
// set, is other work that reads no halo row. With overlap the owned rows
// and alongside run while the exchange is in flight (host devices only: a
// GPU device belongs to one goroutine).
func (m *Model) backAggregate(ex halo.Exchanger, l int, overlap bool, dz, gOwn, gHalo *kernels.Mat, alongside, ownTerms func()) error {
	d := m.dev
	d.SpMM(m.atHalo, dz, gHalo, false)
	ownRows := func() {
		if alongside != nil {
			alongside()
		}
		if ownTerms != nil {
			ownTerms()
		}
		d.SpMM(m.atOwn, dz, gOwn, ownTerms != nil)
	}
	var err error
	if overlap {
		done := make(chan struct{})
		go func() {
			ownRows()
			close(done)
		}()
		err = ex.BackwardSend(l, gHalo)
		<-done
	} else {
		ownRows()
		if ex != nil {
			err = ex.BackwardSend(l, gHalo)
		}
	}
	if err == nil && ex != nil {
		err = ex.BackwardAdd(l, gOwn)
	}
	if err != nil {
		return fmt.Errorf("layer %d backward halo exchange: %w", l, err)
	}
	return nil
}
