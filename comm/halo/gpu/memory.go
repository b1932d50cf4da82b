//go:build !cpu

// Package gpu is the halo exchange's Memory on a GPU: rows in device
// memory, payloads as device buffers, every row operation a kernel of
// kernels/cuda writing the wire format of comm/codec, so that a payload
// encoded here decodes on the CPU and the reverse.
package gpu

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// CUDA is the halo.Memory of one GPU, and its halo.ResidualMemory. The
// send lists are index slices fixed for the run, which the device keeps a
// copy of; the lists a skip bitmap keeps change every call and are
// uploaded with each launch (cuda.ListOnce).
type CUDA struct {
	Dev       *cuda.Device
	gatherBuf kernels.Mat // a grouped encode's rows, gathered
}

// NewExchange is the exchange of a rank whose rows live on dev, over a
// device transport (NCCL, MPI through host memory, or device copies
// between ranks sharing the GPU).
func NewExchange(plan *halo.Plan, dev *cuda.Device, tr comm.DeviceTransport, layers int) (*halo.Exchange[kernels.Bytes], error) {
	return halo.New[kernels.Bytes](plan, &CUDA{Dev: dev}, tr, layers)
}

func (g *CUDA) Grow(buf kernels.Bytes, n int) kernels.Bytes {
	if n <= buf.Len {
		return buf
	}
	g.Dev.Free(buf)
	return g.Dev.NewBytes(max(n, 2*buf.Len))
}

func (*CUDA) Slice(buf kernels.Bytes, off, n int) kernels.Bytes {
	if off < 0 || n < 0 || off+n > buf.Len {
		panic(fmt.Sprintf("gpu: bytes [%d, %d) of a %d-byte buffer", off, off+n, buf.Len))
	}
	return kernels.Bytes{Ptr: buf.Ptr + uintptr(off), Len: n}
}

func (*CUDA) Rows(m *kernels.Mat, lo, hi int) kernels.Bytes {
	return kernels.Bytes{Ptr: m.Ptr + uintptr(4*lo*m.Cols), Len: 4 * (hi - lo) * m.Cols}
}

func (g *CUDA) Scratch(buf *kernels.Mat, rows, cols int) kernels.Mat {
	if buf.Len() < rows*cols {
		if buf.Ptr != 0 {
			g.Dev.Free(kernels.Bytes{Ptr: buf.Ptr, Len: 4 * buf.Len()})
		}
		*buf = *g.Dev.NewMat(max(rows*cols, 1), 1)
	}
	return kernels.Mat{Rows: rows, Cols: cols, Ptr: buf.Ptr}
}

func (g *CUDA) EncodeRows(c codec.Spec, m *kernels.Mat, idx []int32, dst kernels.Bytes, seed uint64) {
	g.encode(c, cuda.RowList(idx), m, dst, seed)
}

func (g *CUDA) Encode(c codec.Spec, m *kernels.Mat, lo, hi int, dst kernels.Bytes, seed uint64) {
	g.encode(c, cuda.AllRows(), m.View(lo, hi), dst, seed)
}

func (g *CUDA) encode(c codec.Spec, rows cuda.Rows, src *kernels.Mat, dst kernels.Bytes, seed uint64) {
	if c.Group() > 1 {
		g.encodeGrouped(c, rows, src, dst, seed)
		return
	}
	switch idx, all := rows.List(); {
	case c.Kind() == codec.KindQuant && c.Bits() == 16:
		g.Dev.BF16Encode(rows, src, dst.Ptr, seed)
	case c.Kind() == codec.KindQuant:
		g.Dev.QuantEncode(c.Bits(), rows, src, dst.Ptr, seed)
	case c.Kind() == codec.KindTern:
		g.Dev.TernEncode(rows, src, dst.Ptr, cuda.TernKey, seed, 0)
	case c.Kind() == codec.KindTrunc:
		g.Dev.TruncEncode(c.Keep(src.Cols), rows, src, dst.Ptr)
	case all: // raw rows: a copy, or a gather into the payload
		g.Dev.CopyBytes(dst.Ptr, src.Ptr, 4*src.Len())
	default:
		g.Dev.GatherRows(rows, src, &kernels.Mat{Rows: len(idx), Cols: src.Cols, Ptr: dst.Ptr})
	}
}

// encodeGrouped is the quant(b, g) and tern(g) formats (comm/codec): the
// rows, contiguous (gathered first where they are a list), coded as rows
// of g rows' values, and the rest as one row: quant's drawn from ^seed,
// tern's under the payload's one key, its draws' row the number of whole
// groups.
func (g *CUDA) encodeGrouped(c codec.Spec, rows cuda.Rows, src *kernels.Mat, dst kernels.Bytes, seed uint64) {
	if idx, all := rows.List(); !all {
		gathered := g.Scratch(&g.gatherBuf, len(idx), src.Cols)
		g.Dev.GatherRows(rows, src, &gathered)
		src = &gathered
	}
	whole, rest, w, at := c.Groups(src.Rows, src.Cols)
	groups := &kernels.Mat{Rows: whole, Cols: w, Ptr: src.Ptr}
	tail := &kernels.Mat{Rows: 1, Cols: rest * src.Cols, Ptr: src.Ptr + uintptr(4*whole*w)}
	if c.Kind() == codec.KindTern {
		g.Dev.TernEncode(cuda.AllRows(), groups, dst.Ptr, cuda.TernKey, seed, 0)
		if rest > 0 {
			g.Dev.TernEncode(cuda.AllRows(), tail, dst.Ptr, at, seed, whole)
		}
		return
	}
	g.Dev.QuantEncode(c.Bits(), cuda.AllRows(), groups, dst.Ptr, seed)
	if rest > 0 {
		g.Dev.QuantEncode(c.Bits(), cuda.AllRows(), tail, dst.Ptr+uintptr(at), ^seed)
	}
}

func (g *CUDA) Decode(c codec.Spec, src kernels.Bytes, m *kernels.Mat, lo, hi int) {
	dst := m.View(lo, hi)
	switch {
	case c.Group() > 1 && c.Kind() == codec.KindTern:
		whole, rest, w, at := c.Groups(dst.Rows, dst.Cols)
		g.Dev.TernDecode(src.Ptr, cuda.TernKey, 0, &kernels.Mat{Rows: whole, Cols: w, Ptr: dst.Ptr})
		if rest > 0 {
			tail := &kernels.Mat{Rows: 1, Cols: rest * dst.Cols, Ptr: dst.Ptr + uintptr(4*whole*w)}
			g.Dev.TernDecode(src.Ptr, at, whole, tail)
		}
	case c.Group() > 1:
		whole, rest, w, at := c.Groups(dst.Rows, dst.Cols)
		g.Dev.QuantDecode(c.Bits(), src.Ptr, &kernels.Mat{Rows: whole, Cols: w, Ptr: dst.Ptr})
		if rest > 0 {
			tail := &kernels.Mat{Rows: 1, Cols: rest * dst.Cols, Ptr: dst.Ptr + uintptr(4*whole*w)}
			g.Dev.QuantDecode(c.Bits(), src.Ptr+uintptr(at), tail)
		}
	case c.Kind() == codec.KindQuant && c.Bits() == 16:
		g.Dev.BF16Decode(src.Ptr, dst)
	case c.Kind() == codec.KindQuant:
		g.Dev.QuantDecode(c.Bits(), src.Ptr, dst)
	case c.Kind() == codec.KindTern:
		g.Dev.TernDecode(src.Ptr, cuda.TernKey, 0, dst)
	case c.Kind() == codec.KindTrunc:
		g.Dev.TruncDecode(c.Keep(dst.Cols), src.Ptr, dst)
	default:
		g.Dev.CopyBytes(dst.Ptr, src.Ptr, 4*dst.Len())
	}
}

func (g *CUDA) ScatterAdd(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	g.Dev.ScatterAddRows(cuda.RowList(idx), src.View(lo, lo+len(idx)), dst)
}

func (g *CUDA) SqDiff(idx []int32, src, dec *kernels.Mat, lo int) (errSq, normSq float64) {
	return g.Dev.SqDiff(cuda.RowList(idx), src, dec.View(lo, lo+len(idx)))
}

func (g *CUDA) Sync() error { return g.Dev.Synchronize() }

// The operations of residual coding and gradient row skipping: the rows
// stay on the device; what decides which go (a few bytes per row) and the
// bitmaps come to the host and back.

func (g *CUDA) Residual(idx []int32, m, state *kernels.Mat, lo int, d *kernels.Mat, dmax, mmax []uint32) {
	n := len(idx)
	g.Dev.ResidualSub(idx, m, state.View(lo, lo+n), d.View(lo, lo+n), dmax[:n], mmax[:n])
}

func (g *CUDA) RowSqNorms(m *kernels.Mat, lo int, out []float64) {
	g.Dev.RowSqNorms(m.View(lo, lo+len(out)), out)
}

func (g *CUDA) EncodeOnce(c codec.Spec, m *kernels.Mat, idx []int32, dst kernels.Bytes, seed uint64) {
	g.encode(c, cuda.ListOnce(idx), m, dst, seed)
}

func (g *CUDA) ScatterAddOnce(idx []int32, src *kernels.Mat, lo int, dst *kernels.Mat) {
	g.Dev.ScatterAddRows(cuda.ListOnce(idx), src.View(lo, lo+len(idx)), dst)
}

func (g *CUDA) Put(dst kernels.Bytes, src []byte) {
	g.Dev.UploadBytes(g.Slice(dst, 0, len(src)), src)
}

func (g *CUDA) Get(dst []byte, src kernels.Bytes) {
	g.Dev.DownloadBytes(dst, g.Slice(src, 0, len(dst)))
}

func (g *CUDA) Zeros(rows, cols int) kernels.Mat { return *g.Dev.NewMat(rows, cols) }
