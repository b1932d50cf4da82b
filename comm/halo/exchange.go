package halo

import (
	"fmt"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Exchanger is what a model and its trainer call: an Exchange over any
// memory.
type Exchanger interface {
	// Forward fills the halo rows of the layer-l input h (Owned+HaloRows
	// rows) with their owners' current rows.
	Forward(layer int, h *kernels.Mat) error
	// BackwardSend returns the gradients of the halo rows dh (HaloRows rows)
	// to their owners and receives what the peers return for this rank's
	// rows; BackwardAdd adds that into the gradient's owned rows own. The
	// caller may compute the owned rows in between (overlap): BackwardSend
	// does not touch them.
	BackwardSend(layer int, dh *kernels.Mat) error
	BackwardAdd(layer int, own *kernels.Mat) error
	// SetCodecs chooses how layer l's exchanges are encoded from now on.
	SetCodecs(layer int, fwd, bwd codec.Spec)
	// SetEpoch keys the codecs' random draws to (seed, epoch), so that a
	// run reproduces bit for bit.
	SetEpoch(seed uint64, epoch int)
	// SetResidual switches residual coding on or off (see Residual).
	SetResidual(r Residual) error
	// ResidualBlocks is this rank's share of the residual state, for a
	// checkpoint (GatherResidual); RestoreResidual sets it from one, and
	// ResidualBytes is its size.
	ResidualBlocks() []ResidualBlock
	RestoreResidual(tables []ResidualTable) error
	ResidualBytes() int64
	// Meter is what the exchange measured since its last Reset.
	Meter() *Meter
}

// Transport moves payloads of type P: send[p] to rank p and recv[p] from
// it, sizes agreed by both sides (a rank's own slot included). comm.Comm is
// the transport of host payloads ([]byte); the GPU's move device buffers.
type Transport[P any] interface {
	Rank() int
	Size() int
	AllToAllV(send, recv []P) error
}

// Memory is where a rank's rows and payloads live (host memory, or one
// GPU's) and the row operations of an exchange on them. Payloads are in the
// codecs' wire format (codec.Spec), so a payload encoded by one Memory
// decodes in another. Row ranges are [lo, hi) of a matrix, so that no call
// needs a view of its own (an exchange allocates nothing).
type Memory[P any] interface {
	// Grow returns a payload buffer of at least n bytes: buf itself when it
	// is large enough, else a new one (buf is released).
	Grow(buf P, n int) P
	// Slice is bytes [off, off+n) of buf.
	Slice(buf P, off, n int) P
	// Rows is rows [lo, hi) of m as a raw payload, in place.
	Rows(m *kernels.Mat, lo, hi int) P
	// Scratch returns a rows x cols matrix in the memory of *buf, which it
	// replaces by a larger allocation when it is too small.
	Scratch(buf *kernels.Mat, rows, cols int) kernels.Mat
	// EncodeRows writes the payload of m's rows idx, in that order, into
	// dst, drawing from seed; Encode does so for rows [lo, hi).
	EncodeRows(c codec.Spec, m *kernels.Mat, idx []int32, dst P, seed uint64)
	Encode(c codec.Spec, m *kernels.Mat, lo, hi int, dst P, seed uint64)
	// Decode fills rows [lo, hi) of m from a payload.
	Decode(c codec.Spec, src P, m *kernels.Mat, lo, hi int)
	// ScatterAdd adds src's rows [lo, lo+len(idx)) into dst's rows idx, in
	// order (no repeats within idx).
	ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat)
	// SqDiff returns sum (x - x^)^2 and sum x^2 over src's rows idx against
	// dec's rows [lo, lo+len(idx)), in row-major order.
	SqDiff(idx []int32, src, dec *kernels.Mat, lo int) (errSq, normSq float64)
	// Sync waits for the work issued so far (a GPU's queue), so that the
	// times measured around it are real.
	Sync() error
}

// Exchange moves one rank's halo rows through a codec per layer and
// direction, and meters every byte it hands to the transport.
type Exchange[P any] struct {
	plan *Plan
	mem  Memory[P]
	tr   Transport[P]

	fwd, bwd []codec.Spec // per layer
	// ops are the watchdog's names, per layer: the forward and backward
	// exchanges.
	ops   [][2]comm.Op
	epoch int
	seed  uint64

	res     Residual
	states  [][2]residual // per layer, forward and backward
	scratch residualScratch[P]

	// wireOut and wireIn hold all peers' encoded payloads, one allocation
	// each (MPI addresses the peers' parts by offsets from one base);
	// sendB and recvB are the per-peer views handed to the transport,
	// sizes their bytes.
	wireOut, wireIn P
	sendB, recvB    []P
	sizes           []int
	// stage holds the gradients received (backward) or the sender's own
	// decoded payload (forward); stageBuf is its allocation.
	stage, stageBuf kernels.Mat

	meter Meter
}

// New prepares the exchange of a model of `layers` layers over plan.
func New[P any](plan *Plan, mem Memory[P], tr Transport[P], layers int) (*Exchange[P], error) {
	q := plan.Size()
	if tr.Size() != q || tr.Rank() != plan.Rank {
		return nil, fmt.Errorf("halo exchange: a plan for rank %d of %d over a transport of rank %d of %d", plan.Rank, q, tr.Rank(), tr.Size())
	}
	x := &Exchange[P]{plan: plan, mem: mem, tr: tr,
		fwd: make([]codec.Spec, layers), bwd: make([]codec.Spec, layers), ops: make([][2]comm.Op, layers),
		states: make([][2]residual, layers), sendB: make([]P, q), recvB: make([]P, q), sizes: make([]int, q),
		meter: newMeter(layers, q)}
	from, to := plan.peers()
	for l := range x.ops {
		x.ops[l] = [2]comm.Op{{Name: fmt.Sprintf("halo exchange forward layer %d", l), Peers: from},
			{Name: fmt.Sprintf("halo exchange backward layer %d", l), Peers: to}}
	}
	return x, nil
}

func (x *Exchange[P]) SetCodecs(layer int, fwd, bwd codec.Spec) {
	x.fwd[layer], x.bwd[layer] = fwd, bwd
}
func (x *Exchange[P]) SetEpoch(seed uint64, epoch int) { x.seed, x.epoch = seed, epoch }
func (x *Exchange[P]) Meter() *Meter                   { return &x.meter }

// cut cuts buf (grown as needed) into one payload per peer, out[p] of
// n(p) bytes.
func (x *Exchange[P]) cut(buf P, out []P, n func(p int) int) P {
	total := 0
	for p := range out {
		total += n(p)
	}
	buf = x.mem.Grow(buf, total)
	off := 0
	for p := range out {
		out[p] = x.mem.Slice(buf, off, n(p))
		off += n(p)
	}
	return buf
}

// views cuts buf into one payload per peer, peer p carrying rows[p] rows
// of width f under c; sizes, if not nil, receives their bytes.
func (x *Exchange[P]) views(buf P, out []P, c codec.Spec, f int, rows, sizes []int) P {
	if sizes != nil {
		for p, r := range rows {
			sizes[p] = c.WireSize(r, f)
		}
	}
	return x.cut(buf, out, func(p int) int { return c.WireSize(rows[p], f) })
}

// now waits for the work already issued to the memory (a GPU's queue: the
// kernels that made the rows) and returns the time, so that a phase timed
// from it holds only its own work.
func (x *Exchange[P]) now() (time.Time, error) {
	err := x.mem.Sync()
	return time.Now(), err
}

// timed waits for the memory and adds the time since start to *acc.
func (x *Exchange[P]) timed(start time.Time, acc *float64) error {
	err := x.mem.Sync()
	*acc += time.Since(start).Seconds()
	return err
}

// transport sends sendB and receives recvB under the watchdog's name
// ops[layer][dir], counting the bytes to every peer but this rank (sizes)
// in traffic.
func (x *Exchange[P]) transport(layer, dir int, traffic []int64, sizes []int) error {
	return x.transportWith(layer, dir, traffic, sizes, func() error { return x.tr.AllToAllV(x.sendB, x.recvB) })
}

func (x *Exchange[P]) transportWith(layer, dir int, traffic []int64, sizes []int, move func() error) error {
	for p := range traffic {
		if p != x.plan.Rank {
			traffic[p] += int64(sizes[p])
		}
	}
	// Every caller has waited for the memory already (now, timed or a
	// Sync).
	start := time.Now()
	comm.Label(x.tr, &x.ops[layer][dir])
	err := move()
	if err == nil {
		err = x.timed(start, &x.meter.Seconds)
	}
	if err != nil {
		return fmt.Errorf("halo %s of layer %d: %w", dirName[dir], layer, err)
	}
	return nil
}

// dirName names direction dir (0 forward, 1 backward) in errors.
var dirName = [2]string{"forward", "backward"}

// Forward fills h's halo rows with their owners' rows. Raw rows are
// received in place; encoded ones are decoded into place.
func (x *Exchange[P]) Forward(layer int, h *kernels.Mat) error {
	pl, f, c := x.plan, h.Cols, x.fwd[layer]
	if h.Rows != pl.Owned+pl.HaloRows() {
		return fmt.Errorf("halo forward: matrix has %d rows, expected %d owned + %d halo", h.Rows, pl.Owned, pl.HaloRows())
	}
	if x.residualOn(0, c) {
		return residualForward(x, x.residualMemory(), layer, h, c)
	}
	start, err := x.now()
	if err != nil {
		return err
	}
	x.wireOut = x.views(x.wireOut, x.sendB, c, f, pl.sendRows, x.sizes)
	if c.Raw() {
		for p := range x.recvB {
			x.recvB[p] = x.mem.Rows(h, pl.Owned+pl.RecvStart[p], pl.Owned+pl.RecvStart[p+1])
		}
	} else {
		x.wireIn = x.views(x.wireIn, x.recvB, c, f, pl.recvRows, nil)
		x.stage = x.mem.Scratch(&x.stageBuf, pl.SendRows(), f)
	}
	for p, rows := range pl.Send {
		x.mem.EncodeRows(c, h, rows, x.sendB[p], codec.SeedFor(x.seed, x.epoch, layer, 0, pl.Rank, p))
		if !c.Raw() && len(rows) > 0 {
			// The sender decodes its own payload to measure what
			// compression lost (comp_error, the adaptive schedule).
			x.mem.Decode(c, x.sendB[p], &x.stage, pl.sendStart[p], pl.sendStart[p+1])
			e, n := x.mem.SqDiff(rows, h, &x.stage, pl.sendStart[p])
			x.meter.ErrSq[layer] += e
			x.meter.NormSq[layer] += n
		}
	}
	acc := &x.meter.CodecSeconds
	if c.Raw() {
		acc = &x.meter.Seconds
	}
	if err := x.timed(start, acc); err != nil {
		return err
	}
	if err := x.transport(layer, 0, x.meter.Fwd[layer], x.sizes); err != nil {
		return err
	}
	if c.Raw() {
		return nil
	}
	start = time.Now()
	for p := range pl.Send {
		x.mem.Decode(c, x.recvB[p], h, pl.Owned+pl.RecvStart[p], pl.Owned+pl.RecvStart[p+1])
	}
	return x.timed(start, &x.meter.CodecSeconds)
}

// BackwardSend returns the halo-row gradients dh to their owners and
// receives, into the stage, what the peers return for this rank's rows.
func (x *Exchange[P]) BackwardSend(layer int, dh *kernels.Mat) error {
	pl, f, c := x.plan, dh.Cols, x.bwd[layer]
	if dh.Rows != pl.HaloRows() {
		return fmt.Errorf("halo backward: matrix has %d rows, expected %d halo rows", dh.Rows, pl.HaloRows())
	}
	if x.residualOn(1, c) {
		return residualBackwardSend(x, x.residualMemory(), layer, dh, c)
	}
	if x.gradSkipOn(c) {
		return skipGradSend(x, x.residualMemory(), layer, dh, c)
	}
	x.stage = x.mem.Scratch(&x.stageBuf, pl.SendRows(), f)
	if c.Raw() { // raw rows go from dh and land in the stage
		if err := x.mem.Sync(); err != nil { // the transport's clock starts next
			return err
		}
		for p := range pl.Send {
			x.sendB[p] = x.mem.Rows(dh, pl.RecvStart[p], pl.RecvStart[p+1])
			x.recvB[p] = x.mem.Rows(&x.stage, pl.sendStart[p], pl.sendStart[p+1])
			x.sizes[p] = c.WireSize(pl.recvRows[p], f)
		}
	} else {
		start, err := x.now()
		if err != nil {
			return err
		}
		x.wireOut = x.views(x.wireOut, x.sendB, c, f, pl.recvRows, x.sizes)
		x.wireIn = x.views(x.wireIn, x.recvB, c, f, pl.sendRows, nil)
		for p := range pl.Send {
			x.mem.Encode(c, dh, pl.RecvStart[p], pl.RecvStart[p+1], x.sendB[p],
				codec.SeedFor(x.seed, x.epoch, layer, 1, pl.Rank, p))
		}
		if err := x.timed(start, &x.meter.CodecSeconds); err != nil {
			return err
		}
	}
	return x.transport(layer, 1, x.meter.Bwd[layer], x.sizes)
}

// BackwardAdd adds the gradients BackwardSend received into the owned rows
// own, peer by peer in rank order (a fixed summation order).
func (x *Exchange[P]) BackwardAdd(layer int, own *kernels.Mat) error {
	pl, c := x.plan, x.bwd[layer]
	if own.Rows != pl.Owned || own.Cols != x.stage.Cols {
		return fmt.Errorf("halo backward: owned rows %dx%d, expected %d rows as wide as the gradients sent", own.Rows, own.Cols, pl.Owned)
	}
	if x.residualOn(1, c) {
		return residualBackwardAdd(x, x.residualMemory(), layer, own, c)
	}
	start, err := x.now()
	if err != nil {
		return err
	}
	h, host := any(x.mem).(*Host)
	skip := x.gradSkipOn(c)
	for p, rows := range pl.Send {
		if skip { // only the rows the peer's bitmap says it sent
			rows = x.scratch.pick(rows, x.scratch.inB[p])
		}
		if host && fast && !c.Raw() && h.DecodeAdd(c, rows, any(x.recvB[p]).([]byte), own, nil) {
			continue // decoded and added in one pass: the same values, summed in the same order
		}
		if !c.Raw() {
			x.mem.Decode(c, x.recvB[p], &x.stage, pl.sendStart[p], pl.sendStart[p]+len(rows))
		}
		if skip { // rows is the scratch's list of kept rows, new every call
			x.residualMemory().ScatterAddOnce(rows, &x.stage, pl.sendStart[p], own)
			continue
		}
		x.mem.ScatterAdd(rows, &x.stage, pl.sendStart[p], own)
	}
	return x.timed(start, &x.meter.CodecSeconds) // the scatter-add counts as decoding
}
