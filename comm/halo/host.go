package halo

import (
	"math"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Host is the Memory of rows in host memory, payloads as byte slices: the
// CPU's exchange. The zero Host is ready; it is not safe for concurrent use
// (every rank has its own).
type Host struct {
	gather []float32 // the rows of one encode, gathered
}

// NewHost is the exchange of a rank whose rows live in host memory, over a
// host communicator (MPI, or goroutine ranks).
func NewHost(plan *Plan, c comm.Comm, layers int) (*Exchange[[]byte], error) {
	return New[[]byte](plan, &Host{}, c, layers)
}

func (*Host) Grow(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, n)
	}
	return buf[:n]
}

func (*Host) Slice(buf []byte, off, n int) []byte { return buf[off : off+n] }

func (*Host) Rows(m *kernels.Mat, lo, hi int) []byte {
	return bytesOf(m.Data[lo*m.Cols : hi*m.Cols])
}

func (*Host) Scratch(buf *kernels.Mat, rows, cols int) kernels.Mat {
	if len(buf.Data) < rows*cols {
		*buf = kernels.Mat{Rows: rows * cols, Cols: 1, Data: make([]float32, rows*cols)}
	}
	return kernels.Mat{Rows: rows, Cols: cols, Data: buf.Data[:rows*cols]}
}

func (*Host) Encode(c codec.Spec, m *kernels.Mat, lo, hi int, dst []byte, seed uint64) {
	c.Encode(dst, m.Data[lo*m.Cols:hi*m.Cols], hi-lo, m.Cols, seed)
}

// EncodeRows gathers the rows (raw rows straight into the payload) and
// encodes them.
func (h *Host) EncodeRows(c codec.Spec, m *kernels.Mat, idx []int32, dst []byte, seed uint64) {
	f := m.Cols
	if c.Raw() {
		for k, r := range idx {
			copy(dst[4*k*f:4*(k+1)*f], bytesOf(m.Row(int(r))))
		}
		return
	}
	if cap(h.gather) < len(idx)*f {
		h.gather = make([]float32, len(idx)*f)
	}
	rows := h.gather[:len(idx)*f]
	for k, r := range idx {
		copy(rows[k*f:(k+1)*f], m.Row(int(r)))
	}
	c.Encode(dst, rows, len(idx), f, seed)
}

func (*Host) Decode(c codec.Spec, src []byte, m *kernels.Mat, lo, hi int) {
	c.Decode(m.Data[lo*m.Cols:hi*m.Cols], src, hi-lo, m.Cols)
}

func (*Host) ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	for k, r := range idx {
		d := dst.Row(int(r))
		for j, v := range src.Row(lo + k) {
			d[j] += v
		}
	}
}

func (*Host) SqDiff(idx []int32, src, dec *kernels.Mat, lo int) (errSq, normSq float64) {
	f := src.Cols
	return codec.SqDiff(src.Data[:src.Rows*f], idx, f, dec.Data[lo*f:(lo+len(idx))*f])
}

func (*Host) Sync() error { return nil }

// bytesOf views f as bytes, in host order (raw rows travel in host order;
// every supported host is little endian, as the wire format is).
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func (*Host) Sub(idx []int32, m, state *kernels.Mat, lo int, d *kernels.Mat) {
	for k, r := range idx {
		s, out := state.Row(lo+k), d.Row(lo+k)
		for j, v := range m.Row(int(r)) {
			out[j] = v - s[j]
		}
	}
}

func (*Host) Keep(idx []int32, m, d *kernels.Mat, lo int, tau float32, bitmap []byte) int {
	clear(bitmap)
	n := 0
	for k, r := range idx {
		// A non-finite residual always goes: the receiver must see it.
		if dm := rowMax(d.Row(lo + k)); dm > tau*rowMax(m.Row(int(r))) || dm > math.MaxFloat32 {
			bitmap[k>>3] |= 1 << (k & 7)
			n++
		}
	}
	return n
}

// rowMax is the largest magnitude in v, +Inf when v holds a NaN.
func rowMax(v []float32) float32 {
	var m float32
	for _, x := range v {
		a := math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
		if a != a {
			return float32(math.Inf(1))
		}
		m = max(m, a)
	}
	return m
}
