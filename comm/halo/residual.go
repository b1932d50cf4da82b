package halo

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Residual configures residual coding with error feedback. Both ends of
// every exchange (layer, direction, peer) keep the receiver's
// reconstruction R of each row, zero at first. It applies to codecs of at
// least 2 bits per value; 1-bit exchanges go plainly (see residualOn). The sender encodes x - R
// instead of x, both ends add the decoded difference into R, and the
// receiver uses R as the row. What the codec lost stays in x - R and is
// sent again next time, so errors do not pile up, and a row that stops
// changing converges to its exact value.
type Residual struct {
	// Forward and Backward turn it on for the activations and for the
	// returned gradients.
	Forward, Backward bool
	// Skip, when > 0, leaves out every row whose residual's largest
	// magnitude is at most Skip times the largest of the row itself: a
	// bitmap at the head of each peer's payload (one bit per row, counted
	// in the bytes) says which rows follow. Both ends keep R for the rows
	// left out, whose residual carries into the next exchange.
	Skip float32
	// Refresh, when > 0, sends every row at least once every Refresh
	// epochs whatever its residual (codec.Skip), a fixed share of each
	// peer's rows each epoch, so that a left-out row's error does not
	// outlive Refresh epochs: a row that stops changing converges to its
	// exact value, as without skipping.
	Refresh int
	// SkipGrad, when > 0, leaves out small gradient rows against the mean
	// over the rows going to the same peer. In a backward exchange that
	// codes no residuals (and is not raw), each row whose squared norm is
	// below SkipGrad times that mean (see gradskip.go): a bitmap per peer,
	// as with Skip, and no state. In one that codes residuals (with Skip
	// > 0), also each row whose residual's largest magnitude m has
	// cols·m² at most SkipGrad times the mean squared norm: that bounds the
	// residual's squared norm, so the rows left out miss at most SkipGrad
	// of the message's squared norm, and what they miss stays in their
	// residual, sent later (at the latest at Refresh).
	SkipGrad float32
}

// ResidualMemory is a Memory that residual coding and gradient row
// skipping run on, with the row operations they add. Which rows go is
// decided on the host, by the same code for every memory, from a few
// numbers per row that these operations return; the bitmaps that say so
// are host bytes, copied into the head of each payload sent and out of
// each payload received.
type ResidualMemory[P any] interface {
	Memory[P]
	// Residual writes d's rows [lo, lo+len(idx)) = m's rows idx minus
	// state's rows [lo, lo+len(idx)), and sets dmax[k] and mmax[k] to the
	// largest magnitudes (magnitude: float32 bits without the sign) of d's
	// row lo+k and of m's row idx[k].
	Residual(idx []int32, m, state *kernels.Mat, lo int, d *kernels.Mat, dmax, mmax []uint32)
	// RowSqNorms sets out[k] to the squared norm of m's row lo+k, summed in
	// float64 in column order (rowSqNorms).
	RowSqNorms(m *kernels.Mat, lo int, out []float64)
	// EncodeOnce and ScatterAddOnce are EncodeRows and ScatterAdd for row
	// lists whose contents change from call to call (the rows a bitmap
	// keeps), which a device must not keep a copy of.
	EncodeOnce(c codec.Spec, m *kernels.Mat, idx []int32, dst P, seed uint64)
	ScatterAddOnce(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat)
	// Put copies host bytes into a payload (len(src) bytes of dst); Get
	// copies a payload's bytes out (len(dst) bytes of src).
	Put(dst P, src []byte)
	Get(dst []byte, src P)
	// Zeros allocates a rows x cols matrix of zeros that lives as long as
	// the exchange (residual state).
	Zeros(rows, cols int) kernels.Mat
}

// residual is the state of one exchange (layer, direction): sent holds the
// reconstructions of the rows this rank sends, peer by peer as its payloads
// are laid out; recv those of the rows it receives, likewise. cols is 0
// until the exchange first runs with residual coding.
type residual struct {
	cols       int
	sent, recv kernels.Mat
}

// side is one end of an exchange in one direction: peer p's rows are
// [Start[p], Start[p]+Rows[p]) of the sender's (or receiver's) stage.
type side struct{ Start, Rows []int }

// sides are the sender's and the receiver's layouts of direction dir:
// forward a rank sends its send lists and receives its halo rows, backward
// the reverse.
func (x *Exchange[P]) sides(dir int) (send, recv side) {
	pl := x.plan
	fwd, bwd := side{pl.sendStart, pl.sendRows}, side{pl.RecvStart, pl.recvRows}
	if dir == 1 {
		return bwd, fwd
	}
	return fwd, bwd
}

// residualScratch is what residual coding reuses between exchanges.
type residualScratch[P any] struct {
	d, dBuf         kernels.Mat // the residuals, then their decoded values
	iota            []int32     // iota[i] = i: a contiguous range as a row list
	keep            []int32     // the rows one bitmap keeps
	outB, inB       [][]byte    // per peer, the bitmaps at the head of the payloads sent and received
	bitsOut, bitsIn []byte      // their memory
	dmax, mmax      []uint32    // per row of one peer: its residual's and its own largest magnitude
	sentK           []int       // rows kept per peer
	got             []int       // bytes received per peer under skipping
	wire            P           // the payloads sent, all peers
	wireP           []P         // their per-peer views, at their largest
	norms           []float64   // gradient skipping: the rows' squared norms
}

// prepare sizes the scratch for q peers and states of up to rows rows.
func (r *residualScratch[P]) prepare(q, rows int) {
	if len(r.iota) < rows {
		r.iota = make([]int32, rows)
		for i := range r.iota {
			r.iota[i] = int32(i)
		}
		r.keep = make([]int32, 0, rows)
		r.dmax, r.mmax = make([]uint32, rows), make([]uint32, rows)
	}
	if len(r.outB) != q {
		r.outB, r.inB = make([][]byte, q), make([][]byte, q)
		r.sentK, r.got = make([]int, q), make([]int, q)
		r.wireP = make([]P, q)
	}
}

// rows lists the rows [lo, lo+n) whose bit is set in bitmap, or all of
// them when bitmap is nil.
func (r *residualScratch[P]) rows(bitmap []byte, lo, n int) []int32 {
	if bitmap == nil {
		return r.iota[lo : lo+n]
	}
	r.keep = r.keep[:0]
	for k := range n {
		if bitmap[k>>3]&(1<<(k&7)) != 0 {
			r.keep = append(r.keep, int32(lo+k))
		}
	}
	return r.keep
}

// bitmap is peer p's bitmap in b, nil without skipping.
func (x *Exchange[P]) bitmap(b [][]byte, p int) []byte {
	if x.res.Skip > 0 {
		return b[p]
	}
	return nil
}

// skipRule is the rule that leaves rows out of the payload to peer p this
// epoch: the rows forced by Refresh move on by one each epoch. floor is
// the residual magnitude below which every row stays out (Skip.Floor).
func (x *Exchange[P]) skipRule(p int, floor float32) codec.Skip {
	r := codec.Skip{Tau: x.res.Skip, Floor: floor, Every: x.res.Refresh}
	if r.Every > 0 {
		r.Phase = (x.epoch + p) % r.Every
	}
	return r
}

// gradFloor is the skip floor of a residual-coded backward payload of n
// rows of f values, rows [lo, lo+n) of m (Residual.SkipGrad): the
// magnitude m with f·m² = SkipGrad times the rows' mean squared norm. It
// is 0 (no floor) in the forward direction, without SkipGrad or
// skipping, and where the rows are not finite.
func gradFloor[P any](x *Exchange[P], mem ResidualMemory[P], dir int, m *kernels.Mat, lo, n int) float32 {
	f := m.Cols
	if dir != 1 || x.res.SkipGrad == 0 || x.res.Skip == 0 || n == 0 || f == 0 {
		return 0
	}
	r := &x.scratch
	if cap(r.norms) < n {
		r.norms = make([]float64, n)
	}
	mem.RowSqNorms(m, lo, r.norms[:n])
	var total float64
	for _, s := range r.norms[:n] {
		total += s
	}
	floor := math.Sqrt(float64(x.res.SkipGrad) * total / float64(n) / float64(f))
	if math.IsNaN(floor) || math.IsInf(floor, 0) {
		return 0
	}
	return float32(floor)
}

func bitmapSize(n int) int { return (n + 7) / 8 }

func popcount(b []byte) int {
	n := 0
	for _, v := range b {
		n += bits.OnesCount8(v)
	}
	return n
}

func sumInts(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// cutBytes cuts buf (grown as needed) into out[p] of n(p) bytes.
func cutBytes(buf []byte, out [][]byte, n func(p int) int) []byte {
	total := 0
	for p := range out {
		total += n(p)
	}
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	off := 0
	for p := range out {
		out[p] = buf[off : off+n(p) : off+n(p)]
		off += n(p)
	}
	return buf[:total]
}

// residualMemory is x's memory as one that runs residual coding and
// gradient row skipping (every memory of this module does).
func (x *Exchange[P]) residualMemory() ResidualMemory[P] {
	mem, ok := x.mem.(ResidualMemory[P])
	if !ok {
		panic(fmt.Sprintf("halo: a %T memory runs no residual coding (SetResidual refuses it)", x.mem))
	}
	return mem
}

// ShortTransport is a transport that receives payloads shorter than their
// buffers, whose size only their sender knows (comm.Comm.AllToAllVShort):
// the payloads of an exchange that leaves rows out.
type ShortTransport[P any] interface {
	AllToAllVShort(send, recv []P, got []int) error
}

// SetResidual switches residual coding on or off for the exchanges that
// follow (the trainer turns it off for evaluation passes, which are not
// part of the training stream). It fails when the exchange's memory or
// transport cannot run it.
func (x *Exchange[P]) SetResidual(r Residual) error {
	if _, ok := x.mem.(ResidualMemory[P]); r.Any() && !ok {
		return fmt.Errorf("residual coding and gradient row skipping need a memory that runs them, not %T", x.mem)
	}
	if _, ok := x.tr.(ShortTransport[P]); (r.On() && r.Skip > 0 || r.SkipGrad > 0) && !ok {
		return fmt.Errorf("skipping rows needs a transport that receives short payloads, not %T", x.tr)
	}
	x.res = r
	return nil
}

// On reports whether r codes residuals in either direction.
func (r Residual) On() bool { return r.Forward || r.Backward }

// Any reports whether r changes any exchange: residual coding or gradient
// row skipping, both of which need host memory.
func (r Residual) Any() bool { return r.On() || r.SkipGrad > 0 }

// residualOn reports whether an exchange in direction dir under c codes
// residuals. Raw rows go as they are, and so do 1-bit codes: error feedback
// through them does not converge. A 1-bit code of a residual d errs by up
// to the range of d (its two levels are d's min and max), so the next
// residual spans up to twice that range, and the rows blow up; b bits err
// by one step, 1/(2^b-1) of the range, and at b >= 2 the residual shrinks
// (TestResidualOneBitPlain). Either way the state is left alone.
func (x *Exchange[P]) residualOn(dir int, c codec.Spec) bool {
	return [2]bool{x.res.Forward, x.res.Backward}[dir] && !c.Raw() && c.Bits() != 1
}

// state returns the residual state of layer's exchange in direction dir,
// allocated (zero) on first use.
func (x *Exchange[P]) state(layer, dir, cols int) (*residual, error) {
	s := &x.states[layer][dir]
	if s.cols == 0 {
		send, recv := x.sides(dir)
		*s = x.newResidual(cols, sumInts(send.Rows), sumInts(recv.Rows))
	}
	if s.cols != cols {
		return nil, fmt.Errorf("residual state of layer %d is %d wide, its rows %d", layer, s.cols, cols)
	}
	return s, nil
}

// newResidual is a zero state in the exchange's memory.
func (x *Exchange[P]) newResidual(cols, sent, recv int) residual {
	mem := x.residualMemory()
	return residual{cols: cols, sent: mem.Zeros(sent, cols), recv: mem.Zeros(recv, cols)}
}

// ResidualBytes is the memory the residual state holds on this rank.
func (x *Exchange[P]) ResidualBytes() int64 {
	var n int64
	for _, l := range x.states {
		for _, s := range l {
			n += 4 * int64(s.sent.Len()+s.recv.Len())
		}
	}
	return n
}

// residualEncode is the sender's half of a residual exchange in direction
// dir: for every peer p it writes the residuals of src's rows idx(p)
// against st.sent into x.sendB[p], adds what the receiver will decode into
// st.sent, and prepares x.recvB for the peers' payloads. With skipping a
// payload leads with its bitmap, and its receiver learns from that bitmap
// how many rows follow (residualTransport). With measure set it adds
// comp_error's sums of the rows against the updated st.sent to the meter.
func residualEncode[P any](x *Exchange[P], mem ResidualMemory[P], layer, dir int, c codec.Spec, src *kernels.Mat, idx func(p int) []int32, st *residual, measure bool) error {
	pl, r, f, q := x.plan, &x.scratch, src.Cols, x.plan.Size()
	send, recv := x.sides(dir)
	r.prepare(q, max(st.sent.Rows, st.recv.Rows))
	start, err := x.now()
	if err != nil {
		return err
	}
	lead := x.bitmapBytes
	seed := func(p int) uint64 { return codec.SeedFor(x.seed, x.epoch, layer, dir, pl.Rank, p) }
	// Every peer's payload is staged at its largest size (every row kept);
	// its bitmap goes at its head.
	r.wire = x.cut(r.wire, r.wireP, func(p int) int { return lead(send.Rows[p]) + c.WireSize(send.Rows[p], f) })
	r.bitsOut = cutBytes(r.bitsOut, r.outB, func(p int) int { return lead(send.Rows[p]) })
	h, fused := any(mem).(*Host)
	if fused && fast && c.DeltaFused() && f > 0 {
		// One pass per row: residual, skip test, code, the state's update
		// and comp_error.
		for p := range q {
			lo, n := send.Start[p], send.Rows[p]
			wire := any(r.wireP[p]).([]byte)
			rule := x.skipRule(p, gradFloor(x, mem, dir, src, lo, n))
			k, e, nn := h.DeltaEncode(c, idx(p), src, &st.sent, lo, n, rule, x.bitmap(r.outB, p), wire[lead(n):], seed(p))
			r.sentK[p] = k
			if measure {
				x.meter.ErrSq[layer] += e
				x.meter.NormSq[layer] += nn
			}
		}
	} else {
		r.d = mem.Scratch(&r.dBuf, st.sent.Rows, f)
		for p := range q {
			lo, n := send.Start[p], send.Rows[p]
			mem.Residual(idx(p), src, &st.sent, lo, &r.d, r.dmax[:n], r.mmax[:n])
			bitmap := x.bitmap(r.outB, p)
			r.sentK[p] = n
			if bitmap != nil {
				r.sentK[p] = keep(r.dmax[:n], r.mmax[:n], x.skipRule(p, gradFloor(x, mem, dir, src, lo, n)), bitmap)
			}
			rows := r.rows(bitmap, lo, n)
			wire := mem.Slice(r.wireP[p], lead(n), c.WireSize(len(rows), f))
			if bitmap != nil {
				mem.EncodeOnce(c, &r.d, rows, wire, seed(p))
			} else {
				mem.Encode(c, &r.d, lo, lo+n, wire, seed(p))
			}
			// The sender decodes its own payload into residual rows it has
			// encoded, and adds them into its copy of the receiver's state.
			mem.Decode(c, wire, &r.d, lo, lo+len(rows))
			scatterAdd(mem, bitmap, rows, &r.d, lo, &st.sent)
			if measure {
				// comp_error: what the receiver's rows miss of the sender's now.
				e, nn := mem.SqDiff(idx(p), src, &st.sent, lo)
				x.meter.ErrSq[layer] += e
				x.meter.NormSq[layer] += nn
			}
		}
	}
	for p := range q {
		if b := r.outB[p]; len(b) > 0 {
			mem.Put(mem.Slice(r.wireP[p], 0, len(b)), b)
		}
		x.sizes[p] = lead(send.Rows[p]) + c.WireSize(r.sentK[p], f)
		x.sendB[p] = mem.Slice(r.wireP[p], 0, x.sizes[p])
	}
	// The peers' payloads, likewise at their largest.
	x.wireIn = x.cut(x.wireIn, x.recvB, func(p int) int { return lead(recv.Rows[p]) + c.WireSize(recv.Rows[p], f) })
	return x.timed(start, &x.meter.CodecSeconds)
}

// bitmapBytes is the bitmap that leads a payload of n rows under skipping
// (none without).
func (x *Exchange[P]) bitmapBytes(n int) int {
	if x.res.Skip > 0 {
		return bitmapSize(n)
	}
	return 0
}

// residualTransport sends the payloads residualEncode staged, short ones
// under skipping (transportShort).
func residualTransport[P any](x *Exchange[P], mem ResidualMemory[P], layer, dir int, c codec.Spec, f int, traffic []int64) error {
	if x.res.Skip <= 0 {
		return x.transport(layer, dir, traffic, x.sizes)
	}
	_, recv := x.sides(dir)
	return transportShort(x, mem, layer, dir, traffic, recv.Rows, c, f)
}

// transportShort is transport for payloads under skipping: each leads with
// the bitmap of its rows (rows[p] from peer p) and carries only the rows
// whose bits are set, a size that only its sender knows. It copies each
// received payload's bitmap to the host (the scratch's inB), leaves its
// rows in x.recvB, and checks that the payload's size agrees with the
// bitmap.
func transportShort[P any](x *Exchange[P], mem ResidualMemory[P], layer, dir int, traffic []int64, rows []int, c codec.Spec, f int) error {
	tr := x.tr.(ShortTransport[P]) // SetResidual checked
	r := &x.scratch                // prepared by the encoder
	if err := x.transportWith(layer, dir, traffic, x.sizes, func() error { return tr.AllToAllVShort(x.sendB, x.recvB, r.got) }); err != nil {
		return err
	}
	r.bitsIn = cutBytes(r.bitsIn, r.inB, func(p int) int { return bitmapSize(rows[p]) })
	for p, b := range x.recvB {
		n, kept := bitmapSize(rows[p]), 0
		if r.got[p] >= n {
			mem.Get(r.inB[p], mem.Slice(b, 0, n))
			kept = popcount(r.inB[p])
		}
		if want := n + c.WireSize(kept, f); r.got[p] != want {
			return fmt.Errorf("halo %s of layer %d: rank %d sent %d bytes, expected a %d-byte bitmap and the %d rows it marks (%d bytes)",
				dirName[dir], layer, p, r.got[p], n, kept, want)
		}
		x.recvB[p] = mem.Slice(b, n, r.got[p]-n)
	}
	return nil
}

// scatterAdd adds src's rows [lo, lo+len(rows)) into dst's rows, where
// rows may be the rows a bitmap kept (a list that changes every call).
func scatterAdd[P any](mem ResidualMemory[P], bitmap []byte, rows []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	if bitmap != nil {
		mem.ScatterAddOnce(rows, src, lo, dst)
		return
	}
	mem.ScatterAdd(rows, src, lo, dst)
}

// residualDecode is the receiver's half for peer p: it adds the decoded
// residuals of payload src into the rows [lo, lo+n) of st.recv, staging
// them in rows [at, at+kept) of m where the host cannot fuse the two.
func residualDecode[P any](x *Exchange[P], mem ResidualMemory[P], c codec.Spec, p int, src P, st *residual, lo, n int, m *kernels.Mat, at int) {
	r := &x.scratch
	bitmap := x.bitmap(r.inB, p)
	rows := r.rows(bitmap, lo, n)
	if h, ok := any(mem).(*Host); ok && fast && h.DecodeAdd(c, rows, any(src).([]byte), &st.recv, nil) {
		return
	}
	mem.Decode(c, src, m, at, at+len(rows))
	scatterAdd(mem, bitmap, rows, m, at, &st.recv)
}

// residualForward is Forward with residual coding: the receiver's halo rows
// are its reconstructions.
func residualForward[P any](x *Exchange[P], mem ResidualMemory[P], layer int, h *kernels.Mat, c codec.Spec) error {
	pl, f := x.plan, h.Cols
	st, err := x.state(layer, 0, f)
	if err != nil {
		return err
	}
	if err := residualEncode(x, mem, layer, 0, c, h, func(p int) []int32 { return pl.Send[p] }, st, true); err != nil {
		return err
	}
	if err := residualTransport(x, mem, layer, 0, c, f, x.meter.Fwd[layer]); err != nil {
		return err
	}
	start := time.Now()
	hx, onHost := any(mem).(*Host)
	for p := range pl.Send {
		lo, hi := pl.RecvStart[p], pl.RecvStart[p+1]
		bitmap := x.bitmap(x.scratch.inB, p)
		if onHost && fast {
			halo := h.Data[pl.Owned*f : (pl.Owned+st.recv.Rows)*f] // row k is st.recv's row k
			if hx.DecodeAdd(c, x.scratch.rows(bitmap, lo, hi-lo), any(x.recvB[p]).([]byte), &st.recv, halo) {
				// The kept rows are in place; the skipped ones are copied.
				copySkipped(halo, st.recv.Data, bitmap, lo, hi-lo, f)
				continue
			}
		}
		residualDecode(x, mem, c, p, x.recvB[p], st, lo, hi-lo, h, pl.Owned+lo)
		mem.Decode(codec.None(), mem.Rows(&st.recv, lo, hi), h, pl.Owned+lo, pl.Owned+hi)
	}
	return x.timed(start, &x.meter.CodecSeconds)
}

// copySkipped copies the rows [lo, lo+n) of src (rows of f values) whose
// bit in bitmap is clear into the same rows of dst, a run of them at a
// time; without a bitmap no row was skipped.
func copySkipped(dst, src []float32, bitmap []byte, lo, n, f int) {
	if bitmap == nil {
		return
	}
	for k := 0; k < n; {
		if bitmap[k>>3]&(1<<(k&7)) != 0 {
			k++
			continue
		}
		end := k + 1
		for end < n && bitmap[end>>3]&(1<<(end&7)) == 0 {
			end++
		}
		copy(dst[(lo+k)*f:(lo+end)*f], src[(lo+k)*f:(lo+end)*f])
		k = end
	}
}

// residualBackwardSend is BackwardSend with residual coding.
func residualBackwardSend[P any](x *Exchange[P], mem ResidualMemory[P], layer int, dh *kernels.Mat, c codec.Spec) error {
	pl, f := x.plan, dh.Cols
	st, err := x.state(layer, 1, f)
	if err != nil {
		return err
	}
	x.stage = mem.Scratch(&x.stageBuf, pl.SendRows(), f)
	halo := func(p int) []int32 { return x.scratch.iota[pl.RecvStart[p]:pl.RecvStart[p+1]] }
	if err := residualEncode(x, mem, layer, 1, c, dh, halo, st, false); err != nil {
		return err
	}
	return residualTransport(x, mem, layer, 1, c, f, x.meter.Bwd[layer])
}

// residualBackwardAdd is BackwardAdd with residual coding: the gradients
// added are the reconstructions.
func residualBackwardAdd[P any](x *Exchange[P], mem ResidualMemory[P], layer int, own *kernels.Mat, c codec.Spec) error {
	pl := x.plan
	st := &x.states[layer][1]
	start := time.Now()
	for p, rows := range pl.Send {
		lo, n := pl.sendStart[p], pl.sendRows[p]
		residualDecode(x, mem, c, p, x.recvB[p], st, lo, n, &x.stage, lo)
		mem.ScatterAdd(rows, &st.recv, lo, own)
	}
	return x.timed(start, &x.meter.CodecSeconds)
}
