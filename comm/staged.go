//go:build !cpu

package comm

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// HostStaged is the transport of device payloads between ranks whose GPUs
// NCCL cannot serve (NCCL refuses two ranks on one GPU): every payload is
// copied to host memory, moved by the host communicator's all-to-all (the
// MPI calls of the CPU path), and copied to the receiver's device. That
// costs two PCIe copies per payload on top of the host exchange; a rank's
// payload to itself stays on the device.
//
// It works over any host communicator, goroutine ranks (Local) included.
type HostStaged struct {
	host Comm
	dev  GPU
	next *Op // the label of the next call (Label)
	// The host copies of the payloads, back to back in one buffer per
	// direction (what MPI_Alltoallv moves without another copy), and each
	// peer's window into them: grown to the largest call, kept between
	// calls.
	sendBuf, recvBuf   []byte
	sendView, recvView [][]byte
	sum                []float32 // AllReduceMat's host copy
}

var (
	opStagedAllToAll  = Op{Name: "host-staged halo exchange"}
	opStagedAllReduce = Op{Name: "host-staged gradient all-reduce"}
)

// NewHostStaged wraps one rank's host communicator: an MPI rank's, or a
// Local's in tests.
func NewHostStaged(host Comm, dev GPU) *HostStaged {
	q := host.Size()
	return &HostStaged{host: host, dev: dev, sendView: make([][]byte, q), recvView: make([][]byte, q)}
}

func (s *HostStaged) Rank() int { return s.host.Rank() }
func (s *HostStaged) Size() int { return s.host.Size() }

// Label names the next call (Labeler); the host communicator's watchdog
// times it under that name, so that a dead peer ends the job.
func (s *HostStaged) Label(op *Op) { s.next = op }

// labelHost passes the call's label, else def, to the host communicator.
func (s *HostStaged) labelHost(def *Op) {
	op := def
	if s.next != nil {
		op, s.next = s.next, nil
	}
	Label(s.host, op)
}

// AllToAllV downloads the payloads, exchanges them with the host's
// AllToAllV and uploads what came.
func (s *HostStaged) AllToAllV(send, recv []kernels.Bytes) error {
	return s.staged("host-staged AllToAllV", send, recv, nil, func() error { return s.host.AllToAllV(s.sendView, s.recvView) })
}

// AllToAllVShort is AllToAllV with the host's AllToAllVShort: each host
// receive window is the payload's bound, and only the bytes that came go
// back to the device.
func (s *HostStaged) AllToAllVShort(send, recv []kernels.Bytes, got []int) error {
	return s.staged("host-staged AllToAllVShort", send, recv, got, func() error { return s.host.AllToAllVShort(s.sendView, s.recvView, got) })
}

// staged runs one all-to-all through host memory: the payloads go down to
// their host windows, move runs the host's exchange, and what came goes up
// (got[p] bytes from rank p where got is not nil, else recv[p].Len). A
// rank's payload to itself is copied on the device.
func (s *HostStaged) staged(op string, send, recv []kernels.Bytes, got []int, move func() error) error {
	r := s.Rank()
	if err := checkCounts(op, r, s.Size(), send, recv, got); err != nil {
		return err
	}
	switch {
	case got != nil && send[r].Len > recv[r].Len:
		return tooLong(r, send[r].Len, r, recv[r].Len)
	case got == nil && send[r].Len != recv[r].Len:
		return fmt.Errorf("comm: rank %d sends %d bytes, rank %d expects %d", r, send[r].Len, r, recv[r].Len)
	}
	s.sendBuf = window(s.sendBuf, s.sendView, send, r)
	s.recvBuf = window(s.recvBuf, s.recvView, recv, r)
	s.download(send, r)
	s.labelHost(&opStagedAllToAll)
	if err := move(); err != nil {
		return err
	}
	s.dev.CopyBytes(recv[r].Ptr, send[r].Ptr, send[r].Len)
	if got != nil {
		got[r] = send[r].Len
	}
	for p, b := range recv {
		if p == r {
			continue
		}
		n := b.Len
		if got != nil {
			n = got[p]
		}
		s.dev.UploadBytes(kernels.Bytes{Ptr: b.Ptr, Len: n}, s.recvView[p][:n])
	}
	return nil
}

// download copies every payload but the rank's own to its host window
// (the copy waits for the encodes queued before it).
func (s *HostStaged) download(send []kernels.Bytes, self int) {
	for p, b := range send {
		if p != self {
			s.dev.DownloadBytes(s.sendView[p], b)
		}
	}
}

// window lays the payloads' host copies out back to back in buf (grown
// when short) and points view[p] at payload p's; the rank's own payload
// gets an empty window, as it is copied on the device.
func window(buf []byte, view [][]byte, bufs []kernels.Bytes, self int) []byte {
	total := 0
	for p, b := range bufs {
		if p != self {
			total += b.Len
		}
	}
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:cap(buf)]
	off := 0
	for p, b := range bufs {
		n := b.Len
		if p == self {
			n = 0
		}
		view[p] = buf[off : off+n : off+n]
		off += n
	}
	return buf
}

// AllReduceMat sums through the host, as the CPU path's gradients are
// summed (the same bits on every rank).
func (s *HostStaged) AllReduceMat(x *kernels.Mat) error {
	if cap(s.sum) < x.Len() {
		s.sum = make([]float32, x.Len())
	}
	buf := s.sum[:x.Len()]
	s.dev.Download(buf, x)
	s.labelHost(&opStagedAllReduce)
	if err := s.host.AllReduceFloat32(buf); err != nil {
		return err
	}
	s.dev.Upload(x, buf)
	return nil
}
