//go:build !cpu

package comm

// The transports of device payloads in the GPU build: NCCL between
// processes (one GPU each), device-to-device copies between the goroutine
// ranks of one process sharing a GPU, and host-staged MPI (staged.go)
// between processes where NCCL cannot serve.

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/nccl"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// DeviceTransport moves device payloads: send[p] to rank p and recv[p] from
// it, sizes agreed by both sides. It also sums device matrices over the
// ranks.
type DeviceTransport interface {
	Rank() int
	Size() int
	AllToAllV(send, recv []kernels.Bytes) error
	// AllToAllVShort is AllToAllV for payloads whose size only their
	// sender knows (Comm.AllToAllVShort): recv[p].Len bounds what rank p
	// may send (a longer payload is an error naming both ranks and sizes)
	// and got[p] is set to the bytes that came from it.
	AllToAllVShort(send, recv []kernels.Bytes, got []int) error
	AllReduceMat(x *kernels.Mat) error
}

// GPU is what the device transports need of the GPU their payloads live on
// (kernels/cuda.Device is one): copies, waiting for the queued work, and
// making it current on another thread (NCCL's setup runs on one).
// DownloadBytes and UploadBytes copy exactly the payload's Len bytes.
type GPU interface {
	Upload(dst *kernels.Mat, src []float32)
	Download(dst []float32, src *kernels.Mat)
	DownloadBytes(dst []byte, src kernels.Bytes)
	UploadBytes(dst kernels.Bytes, src []byte)
	CopyBytes(dst, src uintptr, n int)
	Synchronize() error
	MakeCurrent() error
}

// checkCounts refuses buffer lists that do not hold one entry per rank
// (got is nil for AllToAllV).
func checkCounts(op string, rank, q int, send, recv []kernels.Bytes, got []int) error {
	if len(send) != q || len(recv) != q || (got != nil && len(got) != q) {
		return fmt.Errorf("comm: %s on rank %d: %d send and %d receive buffers and %d counts for %d ranks", op, rank, len(send), len(recv), len(got), q)
	}
	return nil
}

// tooLong is a short all-to-all's payload past its receive bound.
func tooLong(from, n, to, bound int) error {
	return fmt.Errorf("comm: rank %d sends %d bytes to rank %d, which takes at most %d", from, n, to, bound)
}

// SharedGPU is the transport of ranks that are goroutines of one process on
// one GPU (NCCL refuses two ranks on one device): the ranks trade the
// device addresses of their payloads over the host communicator and copy
// from each other's buffers. All copies go to the context's default
// stream, after the peers' encodes issued before the address exchange.
type SharedGPU struct {
	host  Comm
	dev   GPU
	addrs [][]byte // per peer: address and length of its payload for us
	mine  [][]byte
	sum   []float32 // AllReduceMat's host copy, kept from call to call
}

// NewSharedGPU wraps one goroutine rank's host communicator (a Local).
func NewSharedGPU(host Comm, dev GPU) *SharedGPU {
	q := host.Size()
	l := &SharedGPU{host: host, dev: dev, addrs: make([][]byte, q), mine: make([][]byte, q)}
	for p := range q {
		l.addrs[p], l.mine[p] = make([]byte, 16), make([]byte, 16)
	}
	return l
}

func (l *SharedGPU) Rank() int { return l.host.Rank() }
func (l *SharedGPU) Size() int { return l.host.Size() }

func (l *SharedGPU) AllToAllV(send, recv []kernels.Bytes) error {
	return l.copyAll(send, recv, nil)
}

// AllToAllVShort: the lengths travel with the addresses, so a payload
// shorter than its receive buffer needs no extra exchange.
func (l *SharedGPU) AllToAllVShort(send, recv []kernels.Bytes, got []int) error {
	if err := checkCounts("AllToAllVShort", l.Rank(), l.Size(), send, recv, got); err != nil {
		return err
	}
	return l.copyAll(send, recv, got)
}

// copyAll trades the payloads' addresses and copies each peer's into
// recv: exactly recv[p].Len bytes where got is nil, else at most that
// many, their count in got[p].
func (l *SharedGPU) copyAll(send, recv []kernels.Bytes, got []int) error {
	if err := l.trade(send); err != nil {
		return err
	}
	for p, b := range recv {
		src, n := l.peer(p)
		switch {
		case got == nil && n != b.Len:
			return fmt.Errorf("comm: rank %d sends %d bytes, rank %d expects %d", p, n, l.Rank(), b.Len)
		case got != nil && n > b.Len:
			return tooLong(p, n, l.Rank(), b.Len)
		}
		l.dev.CopyBytes(b.Ptr, src, n)
		if got != nil {
			got[p] = n
		}
	}
	// No rank may reuse its send buffers before every peer's copy is
	// issued (the stream then orders the copies first).
	return l.host.Barrier()
}

// trade sends every peer the address and length of its payload.
func (l *SharedGPU) trade(send []kernels.Bytes) error {
	for p, b := range send {
		binary.LittleEndian.PutUint64(l.mine[p], uint64(b.Ptr))
		binary.LittleEndian.PutUint64(l.mine[p][8:], uint64(b.Len))
	}
	return l.host.AllToAllV(l.mine, l.addrs)
}

// peer is the address and length of rank p's payload for this rank.
func (l *SharedGPU) peer(p int) (uintptr, int) {
	return uintptr(binary.LittleEndian.Uint64(l.addrs[p])), int(binary.LittleEndian.Uint64(l.addrs[p][8:]))
}

// AllReduceMat sums through the host: in-process ranks share one GPU, whose
// bandwidth the copy barely touches at parameter sizes.
func (l *SharedGPU) AllReduceMat(x *kernels.Mat) error {
	if cap(l.sum) < x.Len() {
		l.sum = make([]float32, x.Len())
	}
	buf := l.sum[:x.Len()]
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
	dev        GPU
	host       Comm
	next       *Op // the label of the next call (Label)
	// AllToAllVShort's host exchange of sizes (per peer: what this rank
	// sends it and the most it takes from it) and the receive buffers cut
	// to the sizes that come, kept from call to call.
	sizesOut, sizesIn [][]byte
	shortRecv         []kernels.Bytes
}

// guarder is a host communicator whose watchdog can time calls made
// elsewhere (Watchdog): a stalled peer must not hang an NCCL wait.
type guarder interface {
	Guard(op *Op, f func() error) error
}

var (
	opNCCLAllToAll  = Op{Name: "NCCL halo exchange"}
	opNCCLAllReduce = Op{Name: "NCCL gradient all-reduce"}
)

// Label names the next call (Labeler), for the watchdog's report.
func (n *NCCL) Label(op *Op) { n.next = op }

// label is the name of this call: the last label, else def.
func (n *NCCL) label(def *Op) *Op {
	op := def
	if n.next != nil {
		op, n.next = n.next, nil
	}
	return op
}

// guard runs f (which waits for the GPU) under the host's watchdog, if
// any, named op.
func (n *NCCL) guard(op *Op, f func() error) error {
	if g, ok := n.host.(guarder); ok {
		return g.Guard(op, f)
	}
	return f()
}

// NCCLPeerError is what NewNCCL returns on a rank whose own setup went
// well when another rank's failed: that rank returns the cause.
type NCCLPeerError = nccl.PeerError

var opNCCLSetup = Op{Name: "NCCL setup agreement"}

// ncclHost labels the setup's calls on the host communicator for its
// watchdog.
type ncclHost struct{ Comm }

func (h ncclHost) Bcast(buf []byte, root int) error {
	Label(h.Comm, &opNCCLSetup)
	return h.Comm.Bcast(buf, root)
}

func (h ncclHost) AllReduceFloat64(x []float64) error {
	Label(h.Comm, &opNCCLSetup)
	return h.Comm.AllReduceFloat64(x)
}

// NewNCCL makes the NCCL communicator of an MPI job, one GPU per rank:
// rank 0's unique id is broadcast over the host communicator, and the
// ranks agree over it before and after ncclCommInitRank, where none waits
// longer than wait (0: no bound), so that a rank that fails cannot leave
// the others blocked (nccl.Join). Every rank must call it: a rank that
// failed before tells its peers so beforehand, over the host communicator.
func NewNCCL(host Comm, dev GPU, wait time.Duration) (*NCCL, error) {
	c, err := nccl.Join(ncclHost{host}, nil, dev.MakeCurrent, wait)
	if err != nil {
		return nil, err
	}
	q := host.Size()
	n := &NCCL{c: c, rank: host.Rank(), size: q, dev: dev, host: host,
		sizesOut: make([][]byte, q), sizesIn: make([][]byte, q), shortRecv: make([]kernels.Bytes, q)}
	for p := range q {
		n.sizesOut[p], n.sizesIn[p] = make([]byte, 16), make([]byte, 16)
	}
	return n, nil
}

func (n *NCCL) Rank() int { return n.rank }
func (n *NCCL) Size() int { return n.size }

// AllToAllV returns when the payloads have arrived.
func (n *NCCL) AllToAllV(send, recv []kernels.Bytes) error {
	return n.guard(n.label(&opNCCLAllToAll), func() error {
		if err := n.allToAll(send, recv); err != nil {
			return err
		}
		return n.wait()
	})
}

// AllToAllVShort first trades the sizes over the host communicator (NCCL's
// receives need them), each rank telling each peer both what it sends and
// the most it takes: both ends of a payload past its bound see the error,
// so neither posts a send or receive its peer would not match.
func (n *NCCL) AllToAllVShort(send, recv []kernels.Bytes, got []int) error {
	if err := checkCounts("NCCL AllToAllVShort", n.rank, n.size, send, recv, got); err != nil {
		return err
	}
	op := n.label(&opNCCLAllToAll)
	for p := range n.size {
		binary.LittleEndian.PutUint64(n.sizesOut[p], uint64(send[p].Len))
		binary.LittleEndian.PutUint64(n.sizesOut[p][8:], uint64(recv[p].Len))
	}
	Label(n.host, op)
	if err := n.host.AllToAllV(n.sizesOut, n.sizesIn); err != nil {
		return err
	}
	for p := range n.size {
		sends, bound := int(binary.LittleEndian.Uint64(n.sizesIn[p])), int(binary.LittleEndian.Uint64(n.sizesIn[p][8:]))
		if sends > recv[p].Len {
			return tooLong(p, sends, n.rank, recv[p].Len)
		}
		if send[p].Len > bound {
			return tooLong(n.rank, send[p].Len, p, bound)
		}
		got[p] = sends
		n.shortRecv[p] = kernels.Bytes{Ptr: recv[p].Ptr, Len: sends}
	}
	return n.guard(op, func() error {
		if err := n.allToAll(send, n.shortRecv); err != nil {
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

func (n *NCCL) allToAll(send, recv []kernels.Bytes) error {
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
	return n.guard(n.label(&opNCCLAllReduce), func() error {
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
