//go:build cpu

package main

import (
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// The CPU build: --device cpu only.
const defaultDevice = "cpu"

func newAccelerator(string, int) (rankDevice, error) {
	panic("unreachable: trainFlags.check refuses --device cuda in the CPU build")
}

func acceleratorHalo(comm.Comm, kernels.Device, *data.Shard, int, bool) (gnn.Halo, gnn.Reducer, func(), error) {
	panic("unreachable: the CPU build has no accelerator")
}
