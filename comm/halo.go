package comm

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Exchange moves halo rows between the ranks of one layer-wise SPMD job and
// counts every byte it hands to the transport. Local rows [0, owned) belong
// to this rank; rows [owned+recvStart[p], owned+recvStart[p+1]) are the halo
// rows owned by rank p, in the order p lists them in its send list for us.
type Exchange struct {
	comm      Comm
	owned     int
	send      [][]int32 // send[p]: owned rows that rank p needs, in p's halo order
	recvStart []int     // len Size()+1
	sendStart []int     // len Size()+1: offsets of the send lists, in rows
	// stage holds the rows gathered for sending (forward) or received
	// (backward), all peers in one allocation: MPI addresses the peers'
	// slices by int offsets from one base.
	stage []float32
	sendB [][]byte // byte views handed to AllToAllV
	recvB [][]byte
	// Traffic holds the bytes this rank sent, per layer and peer, since the
	// last Reset; Seconds is the time spent inside the transport.
	Traffic Traffic
	Seconds float64
}

// Traffic counts bytes handed to the transport: Fwd[l][p] in layer l's
// forward exchange to peer p, Bwd[l][p] in its backward exchange.
type Traffic struct {
	Fwd, Bwd [][]int64
}

// Total returns the forward and backward byte totals.
func (t *Traffic) Total() (fwd, bwd int64) {
	for l := range t.Fwd {
		for p := range t.Fwd[l] {
			fwd += t.Fwd[l][p]
			bwd += t.Bwd[l][p]
		}
	}
	return fwd, bwd
}

// NewExchange prepares the exchange for a rank owning `owned` rows, with the
// given send lists and halo layout, for a model of `layers` layers.
func NewExchange(c Comm, owned int, send [][]int32, recvStart []int, layers int) (*Exchange, error) {
	q := c.Size()
	if len(send) != q || len(recvStart) != q+1 {
		return nil, fmt.Errorf("halo exchange: %d send lists and %d halo offsets for %d ranks", len(send), len(recvStart), q)
	}
	x := &Exchange{comm: c, owned: owned, send: send, recvStart: recvStart,
		sendStart: make([]int, q+1), sendB: make([][]byte, q), recvB: make([][]byte, q)}
	for p, rows := range send {
		x.sendStart[p+1] = x.sendStart[p] + len(rows)
	}
	x.Traffic.Fwd = make([][]int64, layers)
	x.Traffic.Bwd = make([][]int64, layers)
	for l := 0; l < layers; l++ {
		x.Traffic.Fwd[l] = make([]int64, q)
		x.Traffic.Bwd[l] = make([]int64, q)
	}
	return x, nil
}

// LayerBytes adds the bytes this rank sent since the last Reset, per layer
// and summed over peers, into fwd and bwd (one entry per layer), and returns
// the seconds spent in the transport.
func (x *Exchange) LayerBytes(fwd, bwd []int64) float64 {
	for l := range x.Traffic.Fwd {
		for p := range x.Traffic.Fwd[l] {
			fwd[l] += x.Traffic.Fwd[l][p]
			bwd[l] += x.Traffic.Bwd[l][p]
		}
	}
	return x.Seconds
}

// Reset zeroes the traffic counters and the transport time.
func (x *Exchange) Reset() {
	for l := range x.Traffic.Fwd {
		clear(x.Traffic.Fwd[l])
		clear(x.Traffic.Bwd[l])
	}
	x.Seconds = 0
}

// HaloRows is the number of halo rows this rank receives per layer.
func (x *Exchange) HaloRows() int { return x.recvStart[len(x.recvStart)-1] }

func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// peerStage returns peer p's part of the stage for rows of width f.
func (x *Exchange) peerStage(p, f int) []float32 {
	if n := x.sendStart[len(x.send)] * f; cap(x.stage) < n {
		x.stage = make([]float32, n)
	}
	return x.stage[x.sendStart[p]*f : x.sendStart[p+1]*f]
}

// Forward fills the halo rows of h (layer l's aggregated matrix) with the
// owners' rows: each rank gathers the rows its peers need and receives its
// own halo straight into h.
func (x *Exchange) Forward(layer int, h *kernels.Mat) error {
	f := h.Cols
	if h.Rows != x.owned+x.HaloRows() {
		return fmt.Errorf("halo forward: matrix has %d rows, expected %d owned + %d halo", h.Rows, x.owned, x.HaloRows())
	}
	me := x.comm.Rank()
	for p, rows := range x.send {
		buf := x.peerStage(p, f)
		for k, r := range rows {
			copy(buf[k*f:(k+1)*f], h.Data[int(r)*f:int(r+1)*f])
		}
		x.sendB[p] = bytesOf(buf)
		lo, hi := x.owned+x.recvStart[p], x.owned+x.recvStart[p+1]
		x.recvB[p] = bytesOf(h.Data[lo*f : hi*f])
		if p != me {
			x.Traffic.Fwd[layer][p] += int64(len(x.sendB[p]))
		}
	}
	start := time.Now()
	err := x.comm.AllToAllV(x.sendB, x.recvB)
	x.Seconds += time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("halo forward of layer %d: %w", layer, err)
	}
	return nil
}

// Backward returns the halo rows of dh to their owners, who add them into
// the owned rows they came from, peer by peer in rank order (a fixed
// summation order).
func (x *Exchange) Backward(layer int, dh *kernels.Mat) error {
	f := dh.Cols
	if dh.Rows != x.owned+x.HaloRows() {
		return fmt.Errorf("halo backward: matrix has %d rows, expected %d owned + %d halo", dh.Rows, x.owned, x.HaloRows())
	}
	me := x.comm.Rank()
	for p := range x.send {
		lo, hi := x.owned+x.recvStart[p], x.owned+x.recvStart[p+1]
		x.sendB[p] = bytesOf(dh.Data[lo*f : hi*f])
		x.recvB[p] = bytesOf(x.peerStage(p, f))
		if p != me {
			x.Traffic.Bwd[layer][p] += int64(len(x.sendB[p]))
		}
	}
	start := time.Now()
	err := x.comm.AllToAllV(x.sendB, x.recvB)
	x.Seconds += time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("halo backward of layer %d: %w", layer, err)
	}
	for p, rows := range x.send {
		buf := x.peerStage(p, f)
		for k, r := range rows {
			dst := dh.Data[int(r)*f : int(r+1)*f]
			for j, v := range buf[k*f : (k+1)*f] {
				dst[j] += v
			}
		}
	}
	return nil
}
