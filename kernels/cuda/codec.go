//go:build !cpu

package cuda

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Launchers of the kernels in codec.cu: the halo-row codecs in exactly the
// wire format of comm/codec (little endian, as both the host and the GPU
// are), so a payload encoded here decodes on the CPU and the reverse. An
// encoder reads the source rows Rows says: a list (a send list: gathering
// and encoding in one pass) or all of the matrix's rows.

// Rows selects an encoder's source rows: the listed ones, in order (an
// empty list is no rows), or all of the source's.
type Rows struct {
	list []int32
	all  bool
	once bool // list changes from call to call: uploaded at every launch
}

// AllRows is every row of the source, in order.
func AllRows() Rows { return Rows{all: true} }

// RowList is the rows idx of the source, in that order: a list fixed for
// the run (a send list), whose device copy is kept (Device.Ints).
func RowList(idx []int32) Rows { return Rows{list: idx} }

// ListOnce is RowList for a list whose contents change from call to call
// (the rows a skip bitmap keeps): it is uploaded at every launch, never
// kept, so that a later list in the same host memory is not mistaken for
// it.
func ListOnce(idx []int32) Rows { return Rows{list: idx, once: true} }

// List returns the listed rows, or all = true for AllRows.
func (r Rows) List() (idx []int32, all bool) { return r.list, r.all }

// mustList is the list of a launcher that takes no AllRows (op names it).
func (r Rows) mustList(op string) []int32 {
	if r.all {
		panic("cuda: " + op + ": needs a row list")
	}
	return r.list
}

// count is the number of payload rows.
func (r Rows) count(src *kernels.Mat) int {
	if r.all {
		return src.Rows
	}
	return len(r.list)
}

// ptr is the kernels' idx argument: the device copy of the list, or NULL
// for all rows (the kernels' only reading of NULL; an empty list launches
// nothing).
func (r Rows) ptr(d *Device) uint64 {
	if r.all {
		return 0
	}
	if r.once {
		return d.intsOnce(r.list)
	}
	return d.Ints(r.list)
}

// QuantEncode writes the quant(bits) payload (bits 1..8) of src's rows
// into dst; h is kernels.Mix64 of the message seed.
func (d *Device) QuantEncode(bits int, rows Rows, src *kernels.Mat, dst uintptr, seed uint64) {
	if bits < 1 || bits > 8 {
		panic(fmt.Sprintf("cuda: QuantEncode: %d bits", bits))
	}
	if n := rows.count(src); n > 0 {
		d.launch(kQuantEncode, n, true, i32(n), i32(src.Cols), i32(bits), rows.ptr(d), mat(src), uint64(dst),
			rng.Mix64(seed))
	}
}

// QuantDecode decodes a quant(bits) payload into dst (all its rows).
func (d *Device) QuantDecode(bits int, src uintptr, dst *kernels.Mat) {
	if dst.Rows > 0 {
		d.launch(kQuantDecode, dst.Rows*max(dst.Cols, 1), false, i32(dst.Rows), i32(dst.Cols), i32(bits), uint64(src), mat(dst))
	}
}

// BF16Encode writes the bf16 payload of src's rows.
func (d *Device) BF16Encode(rows Rows, src *kernels.Mat, dst uintptr, seed uint64) {
	if n := rows.count(src); n > 0 && src.Cols > 0 {
		d.launch(kBF16Encode, n*src.Cols, false, i32(n), i32(src.Cols), rows.ptr(d), mat(src), uint64(dst), rng.Mix64(seed))
	}
}

// BF16Decode decodes a bf16 payload into dst.
func (d *Device) BF16Decode(src uintptr, dst *kernels.Mat) {
	if n := dst.Len(); n > 0 {
		d.launch(kBF16Decode, n, false, i64(n), uint64(src), mat(dst))
	}
}

// TernKey is the bytes of a tern payload's key, at its head (comm/codec's
// tern format): an ungrouped payload's rows, and tern(g)'s whole groups,
// start at byte TernKey.
const TernKey = 8

// TernEncode writes tern rows (comm/codec/tern.go) of src's rows, under
// the key of seed: the key at dst (a payload's head), the rows from dst +
// at, their draws' rows numbered from first. A whole payload is at =
// TernKey, first = 0; the rest of tern(g) is one row at its restAt
// (codec.Spec.Groups), first = the number of whole groups. No rows write
// nothing.
func (d *Device) TernEncode(rows Rows, src *kernels.Mat, dst uintptr, at int, seed uint64, first int) {
	if n := rows.count(src); n > 0 {
		d.launch(kTernEncode, n, true, i32(n), i32(src.Cols), i32(first), rows.ptr(d), mat(src), uint64(dst),
			i64(at), rng.Mix64(seed))
	}
}

// TernDecode decodes into dst (all its rows) the tern rows at src + at of
// the payload whose head (its key) is at src, their draws' rows numbered
// from first: TernEncode's inverse.
func (d *Device) TernDecode(src uintptr, at, first int, dst *kernels.Mat) {
	if n := dst.Len(); n > 0 {
		d.launch(kTernDecode, n, false, i32(dst.Rows), i32(dst.Cols), i32(first), uint64(src), i64(at), mat(dst))
	}
}

// TruncEncode writes the first k columns of src's rows.
func (d *Device) TruncEncode(k int, rows Rows, src *kernels.Mat, dst uintptr) {
	if n := rows.count(src); n > 0 && k > 0 {
		d.launch(kTruncEncode, n*k, false, i32(n), i32(src.Cols), i32(k), rows.ptr(d), mat(src), uint64(dst))
	}
}

// TruncDecode fills dst from a trunc payload of k columns, zero-padding.
func (d *Device) TruncDecode(k int, src uintptr, dst *kernels.Mat) {
	if n := dst.Len(); n > 0 {
		d.launch(kTruncDecode, n, false, i32(dst.Rows), i32(dst.Cols), i32(k), uint64(src), mat(dst))
	}
}

// SqDiff returns sum (x - x^)^2 and sum x^2 over src's rows against
// dec's first rows: a sender's measure of what its codec lost.
func (d *Device) SqDiff(rows Rows, src, dec *kernels.Mat) (errSq, normSq float64) {
	n := rows.count(src)
	if n == 0 || src.Cols == 0 {
		return 0, 0
	}
	g := partialGrid(n * src.Cols)
	d.launchGrid(kSqDiffPartial, g, i32(n), i32(src.Cols), rows.ptr(d), mat(src), mat(dec), dptr(d.partial))
	errSq = d.sumPartials(g, 2, 0)
	for b := 0; b < g; b++ {
		normSq += d.host[2*b+1]
	}
	return errSq, normSq
}
