package halo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// The residual and gradient-skipping paths of a memory that is not the
// host's, which is the GPU's path (comm/halo/gpu): payloads of a type of
// their own, bitmaps copied in and out of them, no fused host kernels.
// boxed wraps host bytes so that nothing in the exchange can treat a
// payload as a []byte, and boxedMem runs the host's row operations on
// them; the payloads and rows must be the host exchange's, bit for bit.

type boxed struct{ b []byte }

type boxedMem struct{ h Host }

func (m *boxedMem) Grow(buf boxed, n int) boxed { return boxed{m.h.Grow(buf.b, n)} }
func (m *boxedMem) Slice(buf boxed, off, n int) boxed {
	return boxed{buf.b[off : off+n : off+n]}
}
func (m *boxedMem) Rows(x *kernels.Mat, lo, hi int) boxed { return boxed{m.h.Rows(x, lo, hi)} }
func (m *boxedMem) Scratch(buf *kernels.Mat, rows, cols int) kernels.Mat {
	return m.h.Scratch(buf, rows, cols)
}
func (m *boxedMem) EncodeRows(c codec.Spec, x *kernels.Mat, idx []int32, dst boxed, seed uint64) {
	m.h.EncodeRows(c, x, idx, dst.b, seed)
}
func (m *boxedMem) Encode(c codec.Spec, x *kernels.Mat, lo, hi int, dst boxed, seed uint64) {
	m.h.Encode(c, x, lo, hi, dst.b, seed)
}
func (m *boxedMem) Decode(c codec.Spec, src boxed, x *kernels.Mat, lo, hi int) {
	m.h.Decode(c, src.b, x, lo, hi)
}
func (m *boxedMem) ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	m.h.ScatterAdd(idx, src, lo, dst)
}
func (m *boxedMem) SqDiff(idx []int32, src, dec *kernels.Mat, lo int) (float64, float64) {
	return m.h.SqDiff(idx, src, dec, lo)
}
func (m *boxedMem) Sync() error { return nil }
func (m *boxedMem) Residual(idx []int32, x, state *kernels.Mat, lo int, d *kernels.Mat, dmax, mmax []uint32) {
	m.h.Residual(idx, x, state, lo, d, dmax, mmax)
}
func (m *boxedMem) RowSqNorms(x *kernels.Mat, lo int, out []float64) { m.h.RowSqNorms(x, lo, out) }
func (m *boxedMem) EncodeOnce(c codec.Spec, x *kernels.Mat, idx []int32, dst boxed, seed uint64) {
	m.h.EncodeOnce(c, x, idx, dst.b, seed)
}
func (m *boxedMem) ScatterAddOnce(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	m.h.ScatterAddOnce(idx, src, lo, dst)
}

// Put and Get check the lengths, as a device copy does.
func (m *boxedMem) Put(dst boxed, src []byte) {
	if len(src) > len(dst.b) {
		panic(fmt.Sprintf("boxed: Put of %d bytes into %d", len(src), len(dst.b)))
	}
	copy(dst.b, src)
}
func (m *boxedMem) Get(dst []byte, src boxed) {
	if len(dst) > len(src.b) {
		panic(fmt.Sprintf("boxed: Get of %d bytes from %d", len(dst), len(src.b)))
	}
	copy(dst, src.b)
}
func (m *boxedMem) Zeros(rows, cols int) kernels.Mat { return m.h.Zeros(rows, cols) }

// boxedComm moves boxed payloads over a host communicator.
type boxedComm struct{ c comm.Comm }

func (t boxedComm) Rank() int { return t.c.Rank() }
func (t boxedComm) Size() int { return t.c.Size() }
func (t boxedComm) AllToAllV(send, recv []boxed) error {
	return t.c.AllToAllV(unbox(send), unbox(recv))
}
func (t boxedComm) AllToAllVShort(send, recv []boxed, got []int) error {
	return t.c.AllToAllVShort(unbox(send), unbox(recv), got)
}

func unbox(v []boxed) [][]byte {
	out := make([][]byte, len(v))
	for i, b := range v {
		out[i] = b.b
	}
	return out
}

// TestResidualOtherMemory: residual coding (rows with their own headers
// and sharing them, with and without skipping) and gradient row skipping
// run on a memory that is not the host's send the host's payloads and
// give its rows and state, bit for bit, epoch after epoch; the state
// gathered from one restores into the other.
func TestResidualOtherMemory(t *testing.T) {
	cases := []struct {
		name     string
		fwd, bwd codec.Spec
		res      Residual
	}{
		{"residual quant(2) skip refresh", codec.Quant(2), codec.Quant(2), Residual{Forward: true, Backward: true, Skip: 0.05, Refresh: 3}},
		{"residual grouped skip", codec.Quant(2).Grouped(3), codec.Quant(3).Grouped(2), Residual{Forward: true, Backward: true, Skip: 0.02}},
		{"residual quant(4) no skip", codec.Quant(4), codec.Quant(2), Residual{Forward: true, Backward: true}},
		{"gradient skip", codec.Quant(2), codec.Quant(2), Residual{Forward: true, SkipGrad: 0.3}},
		{"residual ternary", codec.Tern(), codec.Tern().Grouped(3), Residual{Forward: true, Backward: true, Skip: 0.02, Refresh: 3}},
		{"residual gradient floor", codec.Tern(), codec.Quant(2), Residual{Forward: true, Backward: true, Skip: 0.005, Refresh: 4, SkipGrad: 0.3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			l := randomLayout(rng, 3)
			const f, epochs = 9, 12
			host := runEpochs(t, l, f, epochs, tc.fwd, tc.bwd, tc.res, false)
			other := runEpochs(t, l, f, epochs, tc.fwd, tc.bwd, tc.res, true)
			for r := range host {
				a, b := host[r], other[r]
				if len(a.payloads) != len(b.payloads) {
					t.Fatalf("rank %d: %d payloads on the host, %d on the other memory", r, len(a.payloads), len(b.payloads))
				}
				for i := range a.payloads {
					if string(a.payloads[i]) != string(b.payloads[i]) {
						t.Fatalf("rank %d: payload %d differs (%d and %d bytes)", r, i, len(a.payloads[i]), len(b.payloads[i]))
					}
				}
				sameBits(t, fmt.Sprintf("rank %d rows", r), a.rows, b.rows)
				sameBits(t, fmt.Sprintf("rank %d state", r), a.state, b.state)
			}
		})
	}
}

// rankRun is what one rank's exchange sent and ended with.
type rankRun struct {
	payloads [][]byte // every payload sent, in order
	rows     []float32
	state    []float32 // the restored exchange's residual state, sender side
}

// runEpochs runs epochs of a forward and a backward exchange on every
// rank, the rows changing a little each epoch, the gradients random; with
// boxedMemory on a boxedMem. Halfway it gathers the residual state and
// restores it into a new exchange of the same memory, which goes on.
func runEpochs(t *testing.T, l haloLayout, f, epochs int, fwd, bwd codec.Spec, res Residual, boxedMemory bool) []rankRun {
	q := len(l.owned)
	out := make([]rankRun, q)
	var gathered []ResidualTable // rank 0's, read by every rank after a barrier
	err := comm.RunLocal(q, func(c *comm.Local) error {
		r := c.Rank()
		rs := l.recvStart(r)
		plan, err := NewPlan(r, l.owned[r], l.send[r], rs)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(r), 9))
		h := kernels.NewMat(l.owned[r]+rs[q], f)
		for i := range h.Data {
			h.Data[i] = float32(rng.NormFloat64())
		}
		var x Exchanger
		var sent func() [][]byte
		build := func() error {
			if boxedMemory {
				bx, err := New[boxed](plan, &boxedMem{}, boxedComm{c}, 1)
				x, sent = bx, func() [][]byte { return unbox(bx.sendB) }
				if err != nil {
					return err
				}
			} else {
				hx, err := NewHost(plan, c, 1)
				x, sent = hx, func() [][]byte { return hx.sendB }
				if err != nil {
					return err
				}
			}
			x.SetCodecs(0, fwd, bwd)
			return x.SetResidual(res)
		}
		if err := build(); err != nil {
			return err
		}
		record := func() {
			for _, b := range sent() {
				out[r].payloads = append(out[r].payloads, append([]byte{}, b...))
			}
		}
		for e := range epochs {
			if e == epochs/2 {
				tables, err := GatherResidual(c, x.ResidualBlocks(), 1)
				if err != nil {
					return err
				}
				// Every rank reads rank 0's tables, as from a checkpoint.
				if r == 0 {
					gathered = tables
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				tables = gathered
				if err := build(); err != nil {
					return err
				}
				if err := x.RestoreResidual(tables); err != nil {
					return err
				}
			}
			x.SetEpoch(5, e)
			for i := range l.owned[r] * f {
				h.Data[i] += float32(rng.NormFloat64()) / float32(4*(e+1))
			}
			if err := x.Forward(0, h); err != nil {
				return err
			}
			record()
			dh := h.View(l.owned[r], h.Rows)
			for i := range dh.Data {
				dh.Data[i] = float32(rng.NormFloat64()) * float32(1+i%3)
			}
			if err := x.BackwardSend(0, dh); err != nil {
				return err
			}
			record()
			if err := x.BackwardAdd(0, h.View(0, l.owned[r])); err != nil {
				return err
			}
		}
		out[r].rows = append([]float32{}, h.Data...)
		for _, b := range x.ResidualBlocks() {
			out[r].state = append(out[r].state, b.Data...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d and %d values", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: value %d: %v and %v", what, i, a[i], b[i])
		}
	}
}
