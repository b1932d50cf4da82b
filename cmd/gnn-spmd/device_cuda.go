//go:build !cpu

package main

import (
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/gpu"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// The GPU build trains on the GPU unless --device cpu.
const defaultDevice = "cuda"

// newAccelerator binds the rank's GPU to the calling goroutine.
func newAccelerator(kind string, ordinal int) (rankDevice, error) {
	return cuda.New(ordinal)
}

// deviceReducer sums gradients in device memory through t and everything
// else through the host communicator.
type deviceReducer struct {
	comm.Comm
	t gpu.Transport
}

func (r deviceReducer) AllReduceMat(x *kernels.Mat) error { return r.t.AllReduceMat(x) }

// acceleratorHalo builds the GPU halo exchange and gradient reducer of one
// rank: NCCL between processes, device copies between the goroutine ranks
// of one process. The returned func releases the transport.
func acceleratorHalo(c comm.Comm, dev kernels.Device, sh *data.Shard, layers int, inProcess bool) (gnn.Halo, gnn.Reducer, func(), error) {
	cd := dev.(*cuda.Device)
	var tr gpu.Transport
	release := func() {}
	if inProcess {
		tr = gpu.NewLocal(c, cd)
	} else {
		n, err := gpu.NewNCCL(c, cd)
		if err != nil {
			return nil, nil, nil, err
		}
		tr, release = n, func() { n.Close() }
	}
	x, err := gpu.NewExchange(tr, cd, len(sh.Owned), sh.Send, sh.RecvStart, layers)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return x, deviceReducer{c, tr}, release, nil
}
