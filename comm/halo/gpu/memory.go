//go:build !cpu

// Package gpu is the halo exchange's Memory on a GPU: rows in device
// memory, payloads as device buffers, every row operation a kernel of
// kernels/cuda writing the wire format of comm/codec, so that a payload
// encoded here decodes on the CPU and the reverse.
package gpu

import (
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// CUDA is the halo.Memory of one GPU. The send lists are index slices
// fixed for the run, which the device keeps a copy of.
type CUDA struct{ Dev *cuda.Device }

// NewExchange is the exchange of a rank whose rows live on dev, over a
// device transport (NCCL, or device copies between ranks sharing the GPU).
func NewExchange(plan *halo.Plan, dev *cuda.Device, tr comm.DeviceTransport, layers int) (*halo.Exchange[kernels.Bytes], error) {
	return halo.New[kernels.Bytes](plan, CUDA{dev}, tr, layers)
}

func (g CUDA) Grow(buf kernels.Bytes, n int) kernels.Bytes {
	if n <= buf.Len {
		return buf
	}
	g.Dev.Free(buf)
	return g.Dev.NewBytes(max(n, 2*buf.Len))
}

func (CUDA) Slice(buf kernels.Bytes, off, n int) kernels.Bytes {
	return kernels.Bytes{Ptr: buf.Ptr + uintptr(off), Len: n}
}

func (CUDA) Rows(m *kernels.Mat, lo, hi int) kernels.Bytes {
	return kernels.Bytes{Ptr: m.Ptr + uintptr(4*lo*m.Cols), Len: 4 * (hi - lo) * m.Cols}
}

func (g CUDA) Scratch(buf *kernels.Mat, rows, cols int) kernels.Mat {
	if buf.Len() < rows*cols {
		if buf.Ptr != 0 {
			g.Dev.Free(kernels.Bytes{Ptr: buf.Ptr, Len: 4 * buf.Len()})
		}
		*buf = *g.Dev.NewMat(max(rows*cols, 1), 1)
	}
	return kernels.Mat{Rows: rows, Cols: cols, Ptr: buf.Ptr}
}

func (g CUDA) EncodeRows(c codec.Spec, m *kernels.Mat, idx []int32, dst kernels.Bytes, seed uint64) {
	g.encode(c, cuda.RowList(idx), m, dst, seed)
}

func (g CUDA) Encode(c codec.Spec, m *kernels.Mat, lo, hi int, dst kernels.Bytes, seed uint64) {
	g.encode(c, cuda.AllRows(), m.View(lo, hi), dst, seed)
}

// hostOnly refuses the grouped codecs, which the trainer sends to host
// exchanges only (the kernels code one header per row).
func hostOnly(c codec.Spec) {
	if c.Group() > 1 {
		panic("gpu: " + c.Name() + ": grouped codecs run on host memory only")
	}
}

func (g CUDA) encode(c codec.Spec, rows cuda.Rows, src *kernels.Mat, dst kernels.Bytes, seed uint64) {
	hostOnly(c)
	switch idx, all := rows.List(); {
	case c.Kind() == codec.KindQuant && c.Bits() == 16:
		g.Dev.BF16Encode(rows, src, dst.Ptr, seed)
	case c.Kind() == codec.KindQuant:
		g.Dev.QuantEncode(c.Bits(), rows, src, dst.Ptr, seed)
	case c.Kind() == codec.KindTrunc:
		g.Dev.TruncEncode(c.Keep(src.Cols), rows, src, dst.Ptr)
	case all: // raw rows: a copy, or a gather into the payload
		g.Dev.CopyBytes(dst.Ptr, src.Ptr, 4*src.Len())
	default:
		g.Dev.GatherRows(idx, src, &kernels.Mat{Rows: len(idx), Cols: src.Cols, Ptr: dst.Ptr})
	}
}

func (g CUDA) Decode(c codec.Spec, src kernels.Bytes, m *kernels.Mat, lo, hi int) {
	hostOnly(c)
	dst := m.View(lo, hi)
	switch {
	case c.Kind() == codec.KindQuant && c.Bits() == 16:
		g.Dev.BF16Decode(src.Ptr, dst)
	case c.Kind() == codec.KindQuant:
		g.Dev.QuantDecode(c.Bits(), src.Ptr, dst)
	case c.Kind() == codec.KindTrunc:
		g.Dev.TruncDecode(c.Keep(dst.Cols), src.Ptr, dst)
	default:
		g.Dev.CopyBytes(dst.Ptr, src.Ptr, 4*dst.Len())
	}
}

func (g CUDA) ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	g.Dev.ScatterAddRows(idx, src.View(lo, lo+len(idx)), dst)
}

func (g CUDA) SqDiff(idx []int32, src, dec *kernels.Mat, lo int) (errSq, normSq float64) {
	return g.Dev.SqDiff(cuda.RowList(idx), src, dec.View(lo, lo+len(idx)))
}

func (g CUDA) Sync() error { return g.Dev.Synchronize() }
