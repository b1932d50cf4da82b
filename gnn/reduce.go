package gnn

import (
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Reducer sums values over all ranks, leaving the same result on each: the
// per-epoch metrics on the host, the gradients where the device keeps them
// (NCCL's all-reduce on a GPU). It may be a comm.Labeler, for the
// watchdog's names of the calls.
type Reducer interface {
	AllReduceFloat64(x []float64) error
	AllReduceMat(x *kernels.Mat) error
}

// HostReducer is the Reducer of ranks whose matrices live in host memory:
// everything goes through the communicator.
func HostReducer(c comm.Comm) Reducer { return hostReducer{c} }

type hostReducer struct{ c comm.Comm }

func (r hostReducer) AllReduceFloat64(x []float64) error { return r.c.AllReduceFloat64(x) }
func (r hostReducer) AllReduceMat(x *kernels.Mat) error {
	return r.c.AllReduceFloat32(x.Data[:x.Len()])
}
func (r hostReducer) Label(op *comm.Op) { comm.Label(r.c, op) }
