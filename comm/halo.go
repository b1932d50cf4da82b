package comm

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Exchange moves halo rows between the ranks of one layer-wise SPMD job,
// optionally through a codec per layer and direction, and counts every byte
// it hands to the transport. Local rows [0, owned) belong to this rank; rows
// [owned+recvStart[p], owned+recvStart[p+1]) are the halo rows owned by rank
// p, in the order p lists them in its send list for us.
type Exchange struct {
	comm      Comm
	owned     int
	send      [][]int32 // send[p]: owned rows that rank p needs, in p's halo order
	recvStart []int     // len Size()+1
	sendStart []int     // len Size()+1: offsets of the send lists, in rows
	// stage holds the rows gathered for sending (forward) or received
	// (backward), all peers in one allocation: MPI addresses the peers'
	// slices by int offsets from one base. wireOut and wireIn hold encoded
	// payloads the same way; check holds a sender's own decoded payload.
	stage, check    []float32
	wireOut, wireIn []byte
	sendB, recvB    [][]byte // per-peer views handed to AllToAllV

	fwd, bwd []Codec // per layer; nil = raw float32
	ops      [][2]Op // per layer, forward and backward: the watchdog's names
	epoch    int
	seed     uint64

	// Traffic holds the bytes this rank sent, per layer and peer, since the
	// last Reset; Seconds is the time inside the transport and codecTime
	// the time spent encoding and decoding.
	Traffic   Traffic
	Seconds   float64
	codecTime float64
	// pendingCols is the width of the gradients BackwardSend received, which
	// BackwardAdd adds.
	pendingCols int
	// ErrSq[l] and NormSq[l] sum ||x - decode(encode(x))||^2 and ||x||^2
	// over the rows this rank sent in layer l's forward exchanges.
	ErrSq, NormSq []float64
}

// Traffic counts bytes handed to the transport: Fwd[l][p] in layer l's
// forward exchange to peer p, Bwd[l][p] in its backward exchange.
type Traffic struct {
	Fwd, Bwd [][]int64
}

// NewTraffic makes the counters of layers layers and q peers.
func NewTraffic(layers, q int) Traffic {
	t := Traffic{Fwd: make([][]int64, layers), Bwd: make([][]int64, layers)}
	for l := range layers {
		t.Fwd[l], t.Bwd[l] = make([]int64, q), make([]int64, q)
	}
	return t
}

// AddTo adds the bytes per layer, summed over peers, into fwd and bwd.
func (t Traffic) AddTo(fwd, bwd []int64) {
	for l := range t.Fwd {
		for p := range t.Fwd[l] {
			fwd[l] += t.Fwd[l][p]
			bwd[l] += t.Bwd[l][p]
		}
	}
}

// Clear zeroes the counters.
func (t Traffic) Clear() {
	for l := range t.Fwd {
		clear(t.Fwd[l])
		clear(t.Bwd[l])
	}
}

// NewExchange prepares the exchange for a rank owning `owned` rows, with the
// given send lists and halo layout, for a model of `layers` layers.
func NewExchange(c Comm, owned int, send [][]int32, recvStart []int, layers int) (*Exchange, error) {
	q := c.Size()
	if len(send) != q || len(recvStart) != q+1 {
		return nil, fmt.Errorf("halo exchange: %d send lists and %d halo offsets for %d ranks", len(send), len(recvStart), q)
	}
	x := &Exchange{comm: c, owned: owned, send: send, recvStart: recvStart,
		sendStart: make([]int, q+1), sendB: make([][]byte, q), recvB: make([][]byte, q),
		fwd: make([]Codec, layers), bwd: make([]Codec, layers),
		ErrSq: make([]float64, layers), NormSq: make([]float64, layers)}
	for p, rows := range send {
		x.sendStart[p+1] = x.sendStart[p] + len(rows)
	}
	// A forward exchange waits for the owners of this rank's halo rows, a
	// backward one for the ranks this rank sends rows to.
	var from, to []int
	for p := 0; p < q; p++ {
		if p != c.Rank() && recvStart[p+1] > recvStart[p] {
			from = append(from, p)
		}
		if p != c.Rank() && len(send[p]) > 0 {
			to = append(to, p)
		}
	}
	x.ops = make([][2]Op, layers)
	for l := range x.ops {
		x.ops[l] = [2]Op{{Name: fmt.Sprintf("halo exchange forward layer %d", l), Peers: from},
			{Name: fmt.Sprintf("halo exchange backward layer %d", l), Peers: to}}
	}
	x.Traffic = NewTraffic(layers, q)
	return x, nil
}

// SetCodecs chooses how layer l's exchanges are encoded from now on; nil
// (or None) sends raw float32 rows.
func (x *Exchange) SetCodecs(layer int, fwd, bwd Codec) {
	x.fwd[layer], x.bwd[layer] = fwd, bwd
}

// SetEpoch keys the codecs' random draws to (seed, epoch), so that a run
// reproduces bit for bit.
func (x *Exchange) SetEpoch(seed uint64, epoch int) { x.seed, x.epoch = seed, epoch }

// LayerBytes adds the bytes this rank sent since the last Reset, per layer
// and summed over peers, into fwd and bwd (one entry per layer), and returns
// the seconds spent in the transport.
func (x *Exchange) LayerBytes(fwd, bwd []int64) float64 {
	x.Traffic.AddTo(fwd, bwd)
	return x.Seconds
}

// Reset zeroes the traffic, error and time counters.
func (x *Exchange) Reset() {
	x.Traffic.Clear()
	clear(x.ErrSq)
	clear(x.NormSq)
	x.Seconds, x.codecTime = 0, 0
}

// HaloRows is the number of halo rows this rank receives per layer.
func (x *Exchange) HaloRows() int { return x.recvStart[len(x.recvStart)-1] }

func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func growFloats(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// peerStage returns peer p's part of the stage for rows of width f.
func (x *Exchange) peerStage(p, f int) []float32 {
	x.stage = growFloats(x.stage, x.sendStart[len(x.send)]*f)
	return x.stage[x.sendStart[p]*f : x.sendStart[p+1]*f]
}

// wireViews cuts wire into one payload per peer, peer p carrying rows(p)
// rows of width f, and returns the grown buffer.
func wireViews(c Codec, wire []byte, views [][]byte, f int, rows func(p int) int) []byte {
	total := 0
	for p := range views {
		total += c.WireSize(rows(p), f)
	}
	wire = growBytes(wire, total)
	off := 0
	for p := range views {
		n := c.WireSize(rows(p), f)
		views[p] = wire[off : off+n]
		off += n
	}
	return wire
}

// active reports whether an exchange goes through a codec (nil = raw rows,
// received in place without a copy).
func active(c Codec) bool { return c != nil }

func (x *Exchange) transport(dir string, layer int) error {
	start := time.Now()
	op := &x.ops[layer][0]
	if dir == "backward" {
		op = &x.ops[layer][1]
	}
	Label(x.comm, op)
	err := x.comm.AllToAllV(x.sendB, x.recvB)
	x.Seconds += time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("halo %s of layer %d: %w", dir, layer, err)
	}
	return nil
}

// Forward fills the halo rows of h (layer l's aggregated matrix) with the
// owners' rows: each rank gathers the rows its peers need and, uncompressed,
// receives its halo straight into h.
func (x *Exchange) Forward(layer int, h *kernels.Mat) error {
	f := h.Cols
	if h.Rows != x.owned+x.HaloRows() {
		return fmt.Errorf("halo forward: matrix has %d rows, expected %d owned + %d halo", h.Rows, x.owned, x.HaloRows())
	}
	me, c := x.comm.Rank(), x.fwd[layer]
	for p, rows := range x.send {
		buf := x.peerStage(p, f)
		for k, r := range rows {
			copy(buf[k*f:(k+1)*f], h.Data[int(r)*f:int(r+1)*f])
		}
	}
	recvRows := func(p int) int { return x.recvStart[p+1] - x.recvStart[p] }
	if !active(c) {
		for p := range x.send {
			x.sendB[p] = bytesOf(x.peerStage(p, f))
			lo, hi := x.owned+x.recvStart[p], x.owned+x.recvStart[p+1]
			x.recvB[p] = bytesOf(h.Data[lo*f : hi*f])
		}
		x.count(x.Traffic.Fwd[layer], me)
		return x.transport("forward", layer)
	}
	start := time.Now()
	x.wireOut = wireViews(c, x.wireOut, x.sendB, f, func(p int) int { return len(x.send[p]) })
	x.wireIn = wireViews(c, x.wireIn, x.recvB, f, recvRows)
	x.check = growFloats(x.check, x.sendStart[len(x.send)]*f)
	for p, rows := range x.send {
		src := x.peerStage(p, f)
		c.Encode(x.sendB[p], src, len(rows), f, SeedFor(x.seed, x.epoch, layer, 0, me, p))
		// The sender decodes its own payload to measure the error that
		// compression adds (what the adaptive schedule and comp_error use).
		dec := x.check[x.sendStart[p]*f : x.sendStart[p+1]*f]
		c.Decode(dec, x.sendB[p], len(rows), f)
		var e, n float64
		for i, v := range src {
			d := float64(v) - float64(dec[i])
			e += d * d
			n += float64(v) * float64(v)
		}
		x.ErrSq[layer] += e
		x.NormSq[layer] += n
	}
	x.codecTime += time.Since(start).Seconds()
	x.count(x.Traffic.Fwd[layer], me)
	if err := x.transport("forward", layer); err != nil {
		return err
	}
	start = time.Now()
	for p := range x.send {
		lo, hi := x.owned+x.recvStart[p], x.owned+x.recvStart[p+1]
		c.Decode(h.Data[lo*f:hi*f], x.recvB[p], hi-lo, f)
	}
	x.codecTime += time.Since(start).Seconds()
	return nil
}

// count adds the bytes about to be sent to every peer but this rank.
func (x *Exchange) count(traffic []int64, me int) {
	for p := range x.sendB {
		if p != me {
			traffic[p] += int64(len(x.sendB[p]))
		}
	}
}

// BackwardSend returns the halo-row gradients dh (the layer's NumHalo rows)
// to their owners and receives the gradients peers return for this rank's
// rows; BackwardAdd then adds those into the owned rows. Between the two
// the caller may compute the owned rows (overlap): BackwardSend does not
// touch them.
func (x *Exchange) BackwardSend(layer int, dh *kernels.Mat) error {
	f := dh.Cols
	if dh.Rows != x.HaloRows() {
		return fmt.Errorf("halo backward: matrix has %d rows, expected %d halo rows", dh.Rows, x.HaloRows())
	}
	me, c := x.comm.Rank(), x.bwd[layer]
	halo := func(p int) []float32 { return dh.Data[x.recvStart[p]*f : x.recvStart[p+1]*f] }
	if !active(c) {
		for p := range x.send {
			x.sendB[p] = bytesOf(halo(p))
			x.recvB[p] = bytesOf(x.peerStage(p, f))
		}
	} else {
		start := time.Now()
		x.wireOut = wireViews(c, x.wireOut, x.sendB, f, func(p int) int { return x.recvStart[p+1] - x.recvStart[p] })
		x.wireIn = wireViews(c, x.wireIn, x.recvB, f, func(p int) int { return len(x.send[p]) })
		for p := range x.send {
			rows := x.recvStart[p+1] - x.recvStart[p]
			c.Encode(x.sendB[p], halo(p), rows, f, SeedFor(x.seed, x.epoch, layer, 1, me, p))
		}
		x.codecTime += time.Since(start).Seconds()
	}
	x.count(x.Traffic.Bwd[layer], me)
	x.pendingCols = f
	return x.transport("backward", layer)
}

// BackwardAdd adds the gradients BackwardSend received into the owned rows
// of own, peer by peer in rank order (a fixed summation order).
func (x *Exchange) BackwardAdd(layer int, own *kernels.Mat) error {
	f := own.Cols
	if own.Rows != x.owned || f != x.pendingCols {
		return fmt.Errorf("halo backward: owned rows %dx%d, expected %dx%d", own.Rows, f, x.owned, x.pendingCols)
	}
	c := x.bwd[layer]
	start := time.Now()
	for p, rows := range x.send {
		buf := x.peerStage(p, f)
		if active(c) {
			c.Decode(buf, x.recvB[p], len(rows), f)
		}
		for k, r := range rows {
			dst := own.Data[int(r)*f : int(r+1)*f]
			for j, v := range buf[k*f : (k+1)*f] {
				dst[j] += v
			}
		}
	}
	if active(c) {
		x.codecTime += time.Since(start).Seconds()
	}
	return nil
}

// CompError returns sqrt(errSq/normSq), the relative error of compressed
// payloads (0 when nothing was sent).
func CompError(errSq, normSq float64) float64 {
	if normSq == 0 {
		return 0
	}
	return math.Sqrt(errSq / normSq)
}

// CompErrors adds ErrSq and NormSq, per layer, into errSq and normSq.
func (x *Exchange) CompErrors(errSq, normSq []float64) {
	for l := range x.ErrSq {
		errSq[l] += x.ErrSq[l]
		normSq[l] += x.NormSq[l]
	}
}

// CodecSeconds is the time spent encoding and decoding since Reset.
func (x *Exchange) CodecSeconds() float64 { return x.codecTime }
