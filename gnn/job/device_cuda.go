//go:build !cpu

package job

import (
	"fmt"
	"io"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe"
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/halo/gpu"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// DefaultDevice is where the kernels run unless --device says otherwise:
// the GPU build trains on the GPU.
const DefaultDevice = "cuda"

// Devices prints what this binary finds for the GPU build here: the
// driver and its GPUs, and where the CUDA libraries are (gnn-spmd
// devices). Without a GPU, cudaprobe prints it before gorgonia.org/cu's
// init could end the process.
func Devices(w io.Writer) error { return cudaprobe.Report(w) }

// newAccelerator binds a GPU to the calling goroutine: --gpu, else the
// node-local rank modulo the GPUs this process sees, and logs which.
func (j *job) newAccelerator(c comm.Comm, localRank int) (rankDevice, error) {
	ord, err := cudaprobe.Ordinal(localRank, j.spec.GPU, cudaprobe.Count())
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	d, err := cuda.New(ord)
	if err != nil {
		return nil, err
	}
	rank := 0
	if c != nil {
		rank = c.Rank()
	}
	info := d.Info()
	j.rankLog(rank).Info("GPU bound", "gpu", ord, "visible", cudaprobe.Count(), "local_rank", localRank,
		"name", info.Name, "pci", info.PCI, "memory", fmt.Sprintf("%.1f GiB", float64(info.Memory)/(1<<30)))
	return d, nil
}

// deviceReducer sums gradients in device memory through the device
// transport and the metrics through the host communicator.
type deviceReducer struct {
	host comm.Comm
	t    comm.DeviceTransport
	next *comm.Op // the label of the next call
}

func (r *deviceReducer) Label(op *comm.Op) { r.next = op }

func (r *deviceReducer) AllReduceFloat64(x []float64) error {
	comm.Label(r.host, r.next)
	return r.host.AllReduceFloat64(x)
}

func (r *deviceReducer) AllReduceMat(x *kernels.Mat) error {
	comm.Label(r.t, r.next)
	return r.t.AllReduceMat(x)
}

// acceleratorHalo builds the GPU halo exchange and gradient reducer of one
// rank: NCCL between processes, device copies between the goroutine ranks
// of one process (NCCL refuses two ranks on one GPU).
func acceleratorHalo(c comm.Comm, dev rankDevice, v *gnn.View, layers int, inProcess bool) (*acceleratorComm, error) {
	cd := dev.(*cuda.Device)
	var tr comm.DeviceTransport
	a := &acceleratorComm{release: func() {}}
	if inProcess {
		tr = comm.NewSharedGPU(c, cd)
	} else {
		n, err := comm.NewNCCL(c, cd)
		if err != nil {
			return nil, err
		}
		tr, a.release = n, func() { n.Close() }
	}
	x, err := gpu.NewExchange(v.Plan, cd, tr, layers)
	if err != nil {
		a.release()
		return nil, err
	}
	a.halo, a.reduce = x, &deviceReducer{host: c, t: tr}
	return a, nil
}
