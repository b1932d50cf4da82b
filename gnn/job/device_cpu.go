//go:build cpu

package job

import (
	"fmt"
	"io"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe/cudalib"
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// DefaultDevice is where the kernels run unless --device says otherwise:
// the CPU build has only the CPU.
const DefaultDevice = "cpu"

// Devices says that this build loads no CUDA library, and where the GPU
// build would look for them and what it would find there (gnn-spmd
// devices).
func Devices(w io.Writer) error {
	fmt.Fprintln(w, "CPU build (-tags cpu): it loads no CUDA library; the GPU build (make cuda) would search here:")
	dirs := cudalib.Default().Dirs()
	cudalib.WriteDirs(w, dirs)
	for _, lib := range []cudalib.Lib{cudalib.CuBLAS, cudalib.NCCL} {
		cudalib.WriteAttempts(w, lib, nil, lib.Find(dirs))
	}
	return nil
}

func (j *job) newAccelerator(comm.Comm, int) (rankDevice, error) {
	panic("unreachable: Spec.Validate refuses --device cuda in the CPU build")
}

func (j *job) acceleratorFailed(_ comm.Comm, _ bool, err error) error { return err }

func (j *job) acceleratorHalo(comm.Comm, rankDevice, *gnn.View, int, bool) (*acceleratorComm, error) {
	panic("unreachable: the CPU build has no accelerator")
}
