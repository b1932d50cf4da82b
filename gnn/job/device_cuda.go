//go:build !cpu

package job

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
	info := d.Info()
	j.rankLog(c.Rank()).Info("GPU bound", "gpu", ord, "visible", cudaprobe.Count(), "local_rank", localRank,
		"name", info.Name, "pci", info.PCI, "memory", fmt.Sprintf("%.1f GiB", float64(info.Memory)/(1<<30)))
	return d, nil
}

// acceleratorFailed is a rank's setup error before its device transport:
// under MPI its peers wait for it in the transport's setup exchange
// (gatherGPUs), which it joins before returning err (a job of one rank
// sets up none).
func (j *job) acceleratorFailed(c comm.Comm, inProcess bool, err error) error {
	if c.Size() == 1 || inProcess || j.spec.Device == "cpu" {
		return err
	}
	_, err = gatherGPUs(c, nil, err)
	return err
}

var opGPUSetup = comm.Op{Name: "GPU transport setup (every rank's GPU)"}

// gatherGPUs is the MPI ranks' first step to their device transport: every
// rank sends every rank its GPU (dev's node and PCI bus id), or that its
// setup failed (setupErr), so that all decide alike. Where one failed,
// every rank stops before any transport's setup, which could otherwise
// wait for it: that rank returns setupErr, the others an *Exit (it
// reports).
func gatherGPUs(c comm.Comm, dev *cuda.Device, setupErr error) ([]gpuIdentity, error) {
	q := c.Size()
	mine := make([]byte, gpuRecordBytes)
	if setupErr != nil {
		encodeGPURecord(mine, gpuIdentity{}, true)
	} else {
		host, err := os.Hostname()
		if err != nil {
			setupErr = fmt.Errorf("--gpu-transport: the host name, which tells GPUs of different nodes apart: %w", err)
		}
		encodeGPURecord(mine, gpuIdentity{Host: host, PCI: dev.Info().PCI}, setupErr != nil)
	}
	send, recv := make([][]byte, q), make([][]byte, q)
	for p := range q {
		send[p], recv[p] = mine, make([]byte, gpuRecordBytes)
	}
	comm.Label(c, &opGPUSetup)
	if err := c.AllToAllV(send, recv); err != nil {
		if setupErr != nil {
			return nil, setupErr
		}
		return nil, err
	}
	if setupErr != nil {
		return nil, setupErr
	}
	gpus := make([]gpuIdentity, q)
	for p := range q {
		var failed bool
		if gpus[p], failed = decodeGPURecord(recv[p]); failed {
			return nil, &Exit{Code: ExitFailure} // the failed rank reports why
		}
	}
	return gpus, nil
}

// ncclWait bounds a rank's wait in ncclCommInitRank: half the comm
// timeout, so that peers that waited for a failed rank reach the setup
// agreement before that rank's watchdog ends the job (0: no bound, as
// --comm-timeout 0 asks).
func ncclWait(commTimeout time.Duration) time.Duration { return commTimeout / 2 }

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
// rank: device copies between the goroutine ranks of one process (NCCL
// refuses two ranks on one GPU); between processes the transport
// --gpu-transport picks: NCCL, or MPI through host memory.
func (j *job) acceleratorHalo(c comm.Comm, dev rankDevice, v *gnn.View, layers int, inProcess bool) (*acceleratorComm, error) {
	cd := dev.(*cuda.Device)
	var tr comm.DeviceTransport
	a := &acceleratorComm{release: func() {}}
	abort := func() {}
	if inProcess {
		tr = comm.NewSharedGPU(c, cd)
		a.transport = "halo transport: device copies between the goroutine ranks of this process"
		if j.spec.GPUTransport != GPUTransportAuto {
			a.transport += " (--gpu-transport applies to MPI ranks)"
		}
	} else {
		gpus, err := gatherGPUs(c, cd, nil)
		if err != nil {
			return nil, err
		}
		choice := chooseGPUTransport(j.spec.GPUTransport, gpus)
		a.transport = "halo transport: " + choice.String()
		if choice.Name == GPUTransportMPI {
			tr = comm.NewHostStaged(c, cd)
		} else {
			n, err := comm.NewNCCL(c, cd, ncclWait(j.spec.CommTimeout))
			var pe *comm.NCCLPeerError
			switch {
			case errors.As(err, &pe):
				return nil, &Exit{Code: ExitFailure} // the failed rank reports why, in the setup agreement
			case err != nil && choice.Shared != "":
				return nil, fmt.Errorf("%w (%s, which NCCL refuses: --gpu-transport mpi or auto moves the payloads through host memory)", err, choice.Shared)
			case err != nil:
				return nil, err
			}
			tr, a.release, abort = n, func() { n.Close() }, n.Abort
		}
	}
	x, err := gpu.NewExchange(v.Plan, cd, tr, layers)
	if err != nil {
		abort() // the peers are not waiting on this communicator
		return nil, err
	}
	a.halo, a.reduce = x, &deviceReducer{host: c, t: tr}
	return a, nil
}
