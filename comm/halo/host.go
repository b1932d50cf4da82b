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
	delta  []float32 // DeltaEncode's row scratch
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

// EncodeRows encodes the rows idx of m (raw rows copied straight into the
// payload; codec.Spec.EncodeGather).
func (h *Host) EncodeRows(c codec.Spec, m *kernels.Mat, idx []int32, dst []byte, seed uint64) {
	f := m.Cols
	if c.Raw() {
		for k, r := range idx {
			copy(dst[4*k*f:4*(k+1)*f], bytesOf(m.Row(int(r))))
		}
		return
	}
	h.gather = c.EncodeGather(dst, m.Data, idx, f, seed, h.gather)
}

func (*Host) Decode(c codec.Spec, src []byte, m *kernels.Mat, lo, hi int) {
	c.Decode(m.Data[lo*m.Cols:hi*m.Cols], src, hi-lo, m.Cols)
}

func (*Host) ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	f := src.Cols
	if scatterAddFast(dst.Data, idx, src.Data[lo*f:], f) {
		return
	}
	scatterAddGo(dst.Data, idx, src.Data[lo*f:], f)
}

func scatterAddGo(dst []float32, idx []int32, src []float32, f int) {
	for k, r := range idx {
		d := dst[int(r)*f : int(r+1)*f]
		for j, v := range src[k*f : (k+1)*f] {
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

// The operations of residual coding and gradient row skipping
// (ResidualMemory).

func (*Host) Residual(idx []int32, m, state *kernels.Mat, lo int, d *kernels.Mat, dmax, mmax []uint32) {
	f, n := m.Cols, len(idx)
	dd, ss := d.Data[lo*f:(lo+n)*f], state.Data[lo*f:(lo+n)*f]
	if !residualSubFast(dd, m.Data, ss, idx, f, dmax[:n], mmax[:n]) {
		residualSubGo(dd, m.Data, ss, idx, f, dmax[:n], mmax[:n])
	}
}

func (*Host) RowSqNorms(m *kernels.Mat, lo int, out []float64) {
	f := m.Cols
	rowSqNorms(m.Data[lo*f:(lo+len(out))*f], f, out)
}

// EncodeOnce and ScatterAddOnce are EncodeRows and ScatterAdd: the host
// keeps no copy of a row list.
func (h *Host) EncodeOnce(c codec.Spec, m *kernels.Mat, idx []int32, dst []byte, seed uint64) {
	h.EncodeRows(c, m, idx, dst, seed)
}

func (h *Host) ScatterAddOnce(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	h.ScatterAdd(idx, src, lo, dst)
}

func (*Host) Put(dst, src []byte)              { copy(dst, src) }
func (*Host) Get(dst, src []byte)              { copy(dst, src) }
func (*Host) Zeros(rows, cols int) kernels.Mat { return *kernels.NewMat(rows, cols) }

// residualSubGo is d row k = m row idx[k] - s row k, with the rows'
// largest magnitudes as bits (magnitude).
func residualSubGo(d, m, s []float32, idx []int32, f int, dmax, mmax []uint32) {
	for k, r := range idx {
		x, sk, dk := m[int(r)*f:int(r+1)*f], s[k*f:(k+1)*f], d[k*f:(k+1)*f]
		var md, mm uint32
		for j, v := range x {
			dk[j] = v - sk[j]
			md, mm = max(md, magnitude(dk[j])), max(mm, magnitude(v))
		}
		dmax[k], mmax[k] = md, mm
	}
}

// magnitude is |x|'s bits: for every float32 they order as the magnitudes
// do, with infinities above every finite value and NaNs above them.
func magnitude(x float32) uint32 { return math.Float32bits(x) &^ (1 << 31) }

// keep sets bit k of bitmap where skip keeps row k, and returns the bits
// set.
func keep(dmax, mmax []uint32, skip codec.Skip, bitmap []byte) int {
	clear(bitmap)
	n := 0
	for k, d := range dmax {
		if skip.Keeps(k, math.Float32frombits(d), math.Float32frombits(mmax[k])) {
			bitmap[k>>3] |= 1 << (k & 7)
			n++
		}
	}
	return n
}

// DeltaEncode runs residual coding's sender steps for the n rows idx of m
// against state's rows [lo, lo+n) in one pass (codec.Spec.DeltaEncode),
// the payload into dst; c must fuse them (DeltaFused).
func (h *Host) DeltaEncode(c codec.Spec, idx []int32, m, state *kernels.Mat, lo, n int, skip codec.Skip, bitmap, dst []byte, seed uint64) (kept int, errSq, normSq float64) {
	f := m.Cols
	h.delta = growF32(h.delta, codec.DeltaScratch(f))
	kept, errSq, normSq, ok := c.DeltaEncode(dst, m.Data, idx, f, state.Data[lo*f:(lo+n)*f], skip, bitmap, seed, h.delta)
	if !ok {
		panic("halo: DeltaEncode under a codec that does not fuse it")
	}
	return kept, errSq, normSq
}

// DecodeAdd adds the decoded payload src into dst's rows, where c fuses
// the decode with the add (codec.Spec.DecodeAdd), writing each updated
// row into the same row of out too where out is not nil; it reports
// whether it did.
func (h *Host) DecodeAdd(c codec.Spec, rows []int32, src []byte, dst *kernels.Mat, out []float32) bool {
	return c.DecodeAdd(dst.Data, rows, src, dst.Cols, out)
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
