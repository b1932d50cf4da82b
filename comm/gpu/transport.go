//go:build !cpu

// Package gpu is the halo exchange of the GPU build: rows are gathered,
// encoded and decoded by CUDA kernels in the wire formats of comm's codecs,
// and payloads travel between device buffers, by NCCL between processes or
// by device-to-device copies between the ranks of one process sharing a GPU.
package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/cgo/nccl"
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// Transport moves device payloads: send[p] to rank p and recv[p] from it,
// sizes agreed by both sides. It also sums device matrices over the ranks.
type Transport interface {
	Rank() int
	Size() int
	AllToAllV(send, recv []cuda.Bytes) error
	AllReduceMat(x *kernels.Mat) error
}

// Local is the transport of ranks that are goroutines of one process on
// one GPU (NCCL refuses two ranks on one device): the ranks trade the
// device addresses of their payloads over the host communicator and copy
// from each other's buffers. All copies go to the context's default
// stream, after the peers' encodes issued before the address exchange.
type Local struct {
	host  comm.Comm
	dev   *cuda.Device
	addrs [][]byte // per peer: address and length of its payload for us
	mine  [][]byte
}

// NewLocal wraps one goroutine rank's host communicator (a comm.Local).
func NewLocal(host comm.Comm, dev *cuda.Device) *Local {
	q := host.Size()
	l := &Local{host: host, dev: dev, addrs: make([][]byte, q), mine: make([][]byte, q)}
	for p := range q {
		l.addrs[p], l.mine[p] = make([]byte, 16), make([]byte, 16)
	}
	return l
}

func (l *Local) Rank() int { return l.host.Rank() }
func (l *Local) Size() int { return l.host.Size() }

func (l *Local) AllToAllV(send, recv []cuda.Bytes) error {
	for p, b := range send {
		binary.LittleEndian.PutUint64(l.mine[p], uint64(b.Ptr))
		binary.LittleEndian.PutUint64(l.mine[p][8:], uint64(b.Len))
	}
	if err := l.host.AllToAllV(l.mine, l.addrs); err != nil {
		return err
	}
	for p, b := range recv {
		src, n := uintptr(binary.LittleEndian.Uint64(l.addrs[p])), int(binary.LittleEndian.Uint64(l.addrs[p][8:]))
		if n != b.Len {
			return fmt.Errorf("gpu: rank %d sends %d bytes, rank %d expects %d", p, n, l.Rank(), b.Len)
		}
		l.dev.CopyBytes(b.Ptr, src, n)
	}
	// No rank may reuse its send buffers before every peer's copy is
	// issued (the stream then orders the copies first).
	return l.host.Barrier()
}

// AllReduceMat sums through the host: in-process ranks share one GPU, whose
// bandwidth the copy barely touches at parameter sizes.
func (l *Local) AllReduceMat(x *kernels.Mat) error {
	buf := make([]float32, x.Len())
	l.dev.Download(buf, x)
	if err := l.host.AllReduceFloat32(buf); err != nil {
		return err
	}
	l.dev.Upload(x, buf)
	return nil
}

// NCCL is the transport between processes, one GPU each: grouped
// ncclSend/ncclRecv of the payloads straight from device memory, and
// ncclAllReduce for gradients.
type NCCL struct {
	c          *nccl.Comm
	rank, size int
	dev        *cuda.Device
	host       comm.Comm
}

// guarder is a host communicator whose watchdog can time calls made
// elsewhere (comm.Watchdog): a stalled peer must not hang an NCCL wait.
type guarder interface {
	Guard(op *comm.Op, f func() error) error
}

var (
	opAllToAll  = comm.Op{Name: "NCCL halo exchange"}
	opAllReduce = comm.Op{Name: "NCCL gradient all-reduce"}
)

// guard runs f (which waits for the GPU) under the host's watchdog, if any.
func (n *NCCL) guard(op *comm.Op, f func() error) error {
	if g, ok := n.host.(guarder); ok {
		return g.Guard(op, f)
	}
	return f()
}

// NewNCCL makes the NCCL communicator of an MPI job: rank 0's unique id is
// broadcast over the host communicator.
func NewNCCL(host comm.Comm, dev *cuda.Device) (*NCCL, error) {
	var id nccl.UniqueID
	if host.Rank() == 0 {
		var err error
		if id, err = nccl.GetUniqueID(); err != nil {
			host.Abort(2)
			return nil, err
		}
	}
	if err := host.Bcast(id[:], 0); err != nil {
		return nil, fmt.Errorf("gpu: broadcasting the NCCL id: %w", err)
	}
	c, err := nccl.InitRank(host.Size(), id, host.Rank())
	if err != nil {
		return nil, err
	}
	return &NCCL{c: c, rank: host.Rank(), size: host.Size(), dev: dev, host: host}, nil
}

func (n *NCCL) Rank() int { return n.rank }
func (n *NCCL) Size() int { return n.size }

// AllToAllV returns when the payloads have arrived.
func (n *NCCL) AllToAllV(send, recv []cuda.Bytes) error {
	return n.guard(&opAllToAll, func() error {
		if err := n.allToAll(send, recv); err != nil {
			return err
		}
		return n.wait()
	})
}

// wait synchronizes the device, then asks NCCL for a failure it saw.
func (n *NCCL) wait() error {
	if err := n.dev.Synchronize(); err != nil {
		return err
	}
	return n.c.AsyncError()
}

func (n *NCCL) allToAll(send, recv []cuda.Bytes) error {
	n.dev.CopyBytes(recv[n.rank].Ptr, send[n.rank].Ptr, send[n.rank].Len)
	if err := nccl.GroupStart(); err != nil {
		return err
	}
	for p := range n.size {
		if p == n.rank {
			continue
		}
		if send[p].Len > 0 {
			if err := n.c.Send(send[p].Ptr, send[p].Len, p, nil); err != nil {
				return err
			}
		}
		if recv[p].Len > 0 {
			if err := n.c.Recv(recv[p].Ptr, recv[p].Len, p, nil); err != nil {
				return err
			}
		}
	}
	return nccl.GroupEnd()
}

func (n *NCCL) AllReduceMat(x *kernels.Mat) error {
	if x.Len() == 0 {
		return nil
	}
	return n.guard(&opAllReduce, func() error {
		if err := n.c.AllReduceFloat32(x.Ptr, x.Ptr, x.Len(), nil); err != nil {
			return err
		}
		return n.wait()
	})
}

// Abort tears the communicator down without waiting for peers (a dead
// rank must not hang the others).
func (n *NCCL) Abort() { _ = n.c.Abort() }

// Close destroys the communicator.
func (n *NCCL) Close() error { return n.c.Destroy() }
