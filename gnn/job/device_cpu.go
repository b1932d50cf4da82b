//go:build cpu

package job

import (
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// DefaultDevice is where the kernels run unless --device says otherwise:
// the CPU build has only the CPU.
const DefaultDevice = "cpu"

func newAccelerator(int) (rankDevice, error) {
	panic("unreachable: Spec.Validate refuses --device cuda in the CPU build")
}

func acceleratorHalo(comm.Comm, rankDevice, *gnn.View, int, bool) (*acceleratorComm, error) {
	panic("unreachable: the CPU build has no accelerator")
}
