//go:build !cpu

package gpu

import (
	"fmt"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// Exchange is comm.Exchange on the GPU: the same halo layout, codecs,
// random draws (comm.SeedFor), byte accounting and summation order, with
// every row operation a kernel and every payload in device memory. Times
// are measured after synchronizing the device, so the split between
// encoding and transport is real, not the cost of queueing.
type Exchange struct {
	tr        Transport
	dev       *cuda.Device
	owned     int
	send      [][]int32
	recvStart []int
	sendStart []int

	fwd, bwd []comm.Codec
	epoch    int
	seed     uint64

	wireOut, wireIn cuda.Bytes   // grown on demand; per-peer views below
	sendB, recvB    []cuda.Bytes // views handed to the transport
	stage           *kernels.Mat // decoded rows (backward) or the sender's own decode (forward)

	traffic       comm.Traffic
	seconds       float64
	codecTime     float64
	errSq, normSq []float64
	pendingCols   int // width of the gradients BackwardSend received
}

// NewExchange prepares the exchange of one rank (see comm.NewExchange for
// the layout).
func NewExchange(tr Transport, dev *cuda.Device, owned int, send [][]int32, recvStart []int, layers int) (*Exchange, error) {
	q := tr.Size()
	if len(send) != q || len(recvStart) != q+1 {
		return nil, fmt.Errorf("gpu halo exchange: %d send lists and %d halo offsets for %d ranks", len(send), len(recvStart), q)
	}
	x := &Exchange{tr: tr, dev: dev, owned: owned, send: send, recvStart: recvStart, sendStart: make([]int, q+1),
		fwd: make([]comm.Codec, layers), bwd: make([]comm.Codec, layers),
		sendB: make([]cuda.Bytes, q), recvB: make([]cuda.Bytes, q),
		errSq: make([]float64, layers), normSq: make([]float64, layers)}
	for p, rows := range send {
		x.sendStart[p+1] = x.sendStart[p] + len(rows)
	}
	x.traffic = comm.NewTraffic(layers, q)
	return x, nil
}

func (x *Exchange) SetCodecs(layer int, fwd, bwd comm.Codec) { x.fwd[layer], x.bwd[layer] = fwd, bwd }
func (x *Exchange) SetEpoch(seed uint64, epoch int)          { x.seed, x.epoch = seed, epoch }
func (x *Exchange) CodecSeconds() float64                    { return x.codecTime }
func (x *Exchange) haloRows() int                            { return x.recvStart[len(x.recvStart)-1] }

func (x *Exchange) LayerBytes(fwd, bwd []int64) float64 {
	x.traffic.AddTo(fwd, bwd)
	return x.seconds
}

func (x *Exchange) Reset() {
	x.traffic.Clear()
	clear(x.errSq)
	clear(x.normSq)
	x.seconds, x.codecTime = 0, 0
}

func (x *Exchange) CompErrors(errSq, normSq []float64) {
	for l := range x.errSq {
		errSq[l] += x.errSq[l]
		normSq[l] += x.normSq[l]
	}
}

// wireSize is the payload of rows x f under c (nil: raw float32).
func wireSize(c comm.Codec, rows, f int) int {
	if c == nil {
		return 4 * rows * f
	}
	return c.WireSize(rows, f)
}

// views cuts buf (grown as needed) into one payload per peer.
func (x *Exchange) views(buf *cuda.Bytes, out []cuda.Bytes, c comm.Codec, f int, rows func(p int) int) {
	total := 0
	for p := range out {
		total += wireSize(c, rows(p), f)
	}
	if total > buf.Len {
		x.dev.Free(*buf)
		*buf = x.dev.NewBytes(max(total, 2*buf.Len))
	}
	off := 0
	for p := range out {
		n := wireSize(c, rows(p), f)
		out[p] = cuda.Bytes{Ptr: buf.Ptr + uintptr(off), Len: n}
		off += n
	}
}

// stageRows returns a rows x f scratch matrix.
func (x *Exchange) stageRows(rows, f int) *kernels.Mat {
	if x.stage == nil || x.stage.Len() < rows*f {
		x.stage = x.dev.NewMat(max(rows*f, 1), 1)
	}
	return x.stage.Reshape(rows, f)
}

func (x *Exchange) encode(c comm.Codec, idx []int32, src *kernels.Mat, dst cuda.Bytes, seed uint64) {
	s := comm.SpecOf(c)
	switch {
	case s.Kind == "quant" && s.Bits == 16:
		x.dev.BF16Encode(idx, src, dst.Ptr, seed)
	case s.Kind == "quant":
		x.dev.QuantEncode(s.Bits, idx, src, dst.Ptr, seed)
	case s.Kind == "trunc":
		x.dev.TruncEncode(s.Keep(src.Cols), idx, src, dst.Ptr)
	case idx != nil: // raw rows: a gather into the payload
		x.dev.GatherRows(idx, src, &kernels.Mat{Rows: len(idx), Cols: src.Cols, Ptr: dst.Ptr})
	default:
		x.dev.CopyBytes(dst.Ptr, src.Ptr, 4*src.Len())
	}
}

func (x *Exchange) decode(c comm.Codec, src cuda.Bytes, dst *kernels.Mat) {
	s := comm.SpecOf(c)
	switch {
	case s.Kind == "quant" && s.Bits == 16:
		x.dev.BF16Decode(src.Ptr, dst)
	case s.Kind == "quant":
		x.dev.QuantDecode(s.Bits, src.Ptr, dst)
	case s.Kind == "trunc":
		x.dev.TruncDecode(s.Keep(dst.Cols), src.Ptr, dst)
	default:
		x.dev.CopyBytes(dst.Ptr, src.Ptr, 4*dst.Len())
	}
}

// sync waits for the device and adds the time since start to *acc.
func (x *Exchange) sync(start time.Time, acc *float64) error {
	err := x.dev.Synchronize()
	*acc += time.Since(start).Seconds()
	return err
}

func (x *Exchange) count(traffic []int64) {
	me := x.tr.Rank()
	for p, b := range x.sendB {
		if p != me {
			traffic[p] += int64(b.Len)
		}
	}
}

func (x *Exchange) transport(dir string, layer int) error {
	start := time.Now()
	err := x.tr.AllToAllV(x.sendB, x.recvB)
	if err == nil {
		err = x.sync(start, &x.seconds)
	}
	if err != nil {
		return fmt.Errorf("halo %s of layer %d: %w", dir, layer, err)
	}
	return nil
}

// Forward fills h's halo rows with their owners' rows.
func (x *Exchange) Forward(layer int, h *kernels.Mat) error {
	f := h.Cols
	if h.Rows != x.owned+x.haloRows() {
		return fmt.Errorf("halo forward: matrix has %d rows, expected %d owned + %d halo", h.Rows, x.owned, x.haloRows())
	}
	me, c := x.tr.Rank(), x.fwd[layer]
	recvRows := func(p int) int { return x.recvStart[p+1] - x.recvStart[p] }
	start := time.Now()
	x.views(&x.wireOut, x.sendB, c, f, func(p int) int { return len(x.send[p]) })
	if c == nil { // raw rows land in place
		for p := range x.recvB {
			x.recvB[p] = cuda.Bytes{Ptr: rowPtr(h, x.owned+x.recvStart[p]), Len: 4 * recvRows(p) * f}
		}
	} else {
		x.views(&x.wireIn, x.recvB, c, f, recvRows)
	}
	var check *kernels.Mat
	if c != nil {
		check = x.stageRows(x.sendStart[len(x.send)], f)
	}
	for p, rows := range x.send {
		x.encode(c, rows, h, x.sendB[p], comm.SeedFor(x.seed, x.epoch, layer, 0, me, p))
		if c != nil && len(rows) > 0 {
			// The sender decodes its own payload to measure what
			// compression lost (comp_error, the adaptive schedule).
			dec := check.View(x.sendStart[p], x.sendStart[p+1])
			x.decode(c, x.sendB[p], dec)
			e, n := x.dev.SqDiff(rows, h, dec)
			x.errSq[layer] += e
			x.normSq[layer] += n
		}
	}
	acc := &x.codecTime
	if c == nil {
		acc = &x.seconds // gathering raw rows is part of sending them
	}
	if err := x.sync(start, acc); err != nil {
		return err
	}
	x.count(x.traffic.Fwd[layer])
	if err := x.transport("forward", layer); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	start = time.Now()
	for p := range x.send {
		x.decode(c, x.recvB[p], h.View(x.owned+x.recvStart[p], x.owned+x.recvStart[p+1]))
	}
	return x.sync(start, &x.codecTime)
}

// BackwardSend returns the halo-row gradients dh (NumHalo rows) to their
// owners and receives, into the stage, the gradients peers return for this
// rank's rows; BackwardAdd scatter-adds them into the owned rows. The
// caller may compute the owned rows in between.
func (x *Exchange) BackwardSend(layer int, dh *kernels.Mat) error {
	f := dh.Cols
	if dh.Rows != x.haloRows() {
		return fmt.Errorf("halo backward: matrix has %d rows, expected %d halo rows", dh.Rows, x.haloRows())
	}
	me, c := x.tr.Rank(), x.bwd[layer]
	halo := func(p int) *kernels.Mat { return dh.View(x.recvStart[p], x.recvStart[p+1]) }
	stage := x.stageRows(x.sendStart[len(x.send)], f)
	if c == nil { // raw rows go from dh and land in the stage
		for p := range x.send {
			x.sendB[p] = cuda.Bytes{Ptr: halo(p).Ptr, Len: 4 * halo(p).Len()}
			x.recvB[p] = cuda.Bytes{Ptr: rowPtr(stage, x.sendStart[p]), Len: 4 * len(x.send[p]) * f}
		}
	} else {
		start := time.Now()
		x.views(&x.wireOut, x.sendB, c, f, func(p int) int { return x.recvStart[p+1] - x.recvStart[p] })
		x.views(&x.wireIn, x.recvB, c, f, func(p int) int { return len(x.send[p]) })
		for p := range x.send {
			x.encode(c, nil, halo(p), x.sendB[p], comm.SeedFor(x.seed, x.epoch, layer, 1, me, p))
		}
		if err := x.sync(start, &x.codecTime); err != nil {
			return err
		}
	}
	x.count(x.traffic.Bwd[layer])
	x.pendingCols = f
	return x.transport("backward", layer)
}

// BackwardAdd adds the gradients BackwardSend received into own (the
// owned rows), peer by peer in rank order.
func (x *Exchange) BackwardAdd(layer int, own *kernels.Mat) error {
	f := own.Cols
	if own.Rows != x.owned || f != x.pendingCols {
		return fmt.Errorf("halo backward: owned rows %dx%d, expected %dx%d", own.Rows, f, x.owned, x.pendingCols)
	}
	c := x.bwd[layer]
	stage := x.stageRows(x.sendStart[len(x.send)], f)
	start := time.Now()
	for p, rows := range x.send {
		buf := stage.View(x.sendStart[p], x.sendStart[p+1])
		if c != nil {
			x.decode(c, x.recvB[p], buf)
		}
		x.dev.ScatterAddRows(rows, buf, own)
	}
	return x.sync(start, &x.codecTime) // the scatter-add counts as decoding
}

// rowPtr is the device address of row r of m.
func rowPtr(m *kernels.Mat, r int) uintptr { return m.Ptr + uintptr(4*r*m.Cols) }
