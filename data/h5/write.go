// Package h5 is the HDF5 toolkit every file format of this project uses
// (the dataset file, part files, checkpoints): scalar root attributes naming
// the format and version, contiguous uncompressed little-endian arrays
// with the digests of their values, writes that are atomic (through
// data/outfile),
// and readers that check every type, shape and size against the file
// before allocating, and report each problem as a *data.InputError naming
// the file and the HDF5 object.
package h5

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"

	"gonum.org/v1/hdf5"
)

// slabBytes bounds one H5Dwrite call, so a multi-GB features array is
// written as a series of hyperslabs instead of a single huge request. A
// variable so that tests can exercise the slab path on small arrays.
var slabBytes = 64 << 20

// elemType is an element type the format uses. Arrays are read without type
// conversion straight into Go memory, so the file type must be exactly the
// native (little-endian) one.
type elemType struct {
	name   string
	class  hdf5.TypeClass
	size   uint
	native *hdf5.Datatype
}

var (
	typeInt32   = elemType{"int32", hdf5.T_INTEGER, 4, hdf5.T_NATIVE_INT32}
	typeInt64   = elemType{"int64", hdf5.T_INTEGER, 8, hdf5.T_NATIVE_INT64}
	typeFloat32 = elemType{"float32", hdf5.T_FLOAT, 4, hdf5.T_NATIVE_FLOAT}
	typeFloat64 = elemType{"float64", hdf5.T_FLOAT, 8, hdf5.T_NATIVE_DOUBLE}
)

// withHDF5 runs fn on one locked OS thread with HDF5's automatic error-stack
// printing turned off. Debian's libhdf5 is built thread-safe, which makes
// that setting per thread: the binding silences only the thread that ran its
// init, and a goroutine on any other thread would dump HDF5's stack to stderr
// for failures this package already reports as errors.
func withHDF5(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := hdf5.DisplayErrors(false); err != nil {
		return err
	}
	return fn()
}

// Attr is a scalar root attribute: string, int32, int64, uint64 or float64.
type Attr struct {
	Name string
	Val  any
}

// Array is a dataset: Data is []int32, []int64, []float32 or []float64
// of shape Dims; nil Data stands for an (empty) group at Path.
type Array struct {
	Path string // absolute, e.g. "/graph/indptr"
	Data any
	Dims []uint
}

// WriteFile writes root attributes and datasets to a new HDF5 file at
// path, atomically (outfile.WriteAtomic).
func WriteFile(path string, attrs []Attr, arrays []Array) error {
	return outfile.WriteAtomic(path, func(tmp string) error { return Create(tmp, attrs, arrays) })
}

// Create writes root attributes and datasets to a new HDF5 file named
// name, in place: the writer of a temporary file. A file system without
// room for the arrays is refused before anything is written, in words
// (libhdf5 reports a failed write without its errno).
func Create(name string, attrs []Attr, arrays []Array) error {
	// Creating the file first gives a plain OS error (permissions, a
	// missing directory) rather than HDF5's.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	need := Size(attrs, arrays)
	if free, ok := outfile.FreeBytes(filepath.Dir(name)); ok && free < need {
		return fmt.Errorf("the file needs about %d bytes, %s has %d free: %w", need, filepath.Dir(name), free, syscall.ENOSPC)
	}
	return withHDF5(func() error { return writeContent(name, attrs, arrays) })
}

// Size estimates the bytes of the file Create writes: the arrays' data,
// the strings of the attributes, and libhdf5's metadata, 8 KiB for the
// file and 600 bytes for every array (object header, layout, its group's
// share). Measured on checkpoints of 58 to 94 arrays and 4 KB to 8.7 MB
// of data, it is 0.1% to 15% above the file's size (docs/notes); a flat
// 64 KiB of metadata was 71% above it for a small model's checkpoint,
// and refused runs whose checkpoints fitted.
func Size(attrs []Attr, arrays []Array) int64 {
	need := int64(8 << 10)
	for _, a := range arrays {
		need += 600 + int64(dataBytes(a.Data))
	}
	for _, a := range attrs {
		if s, ok := a.Val.(string); ok {
			need += int64(len(s))
		}
	}
	return need
}

// dataBytes is the size of an array's data.
func dataBytes(d any) int {
	switch d := d.(type) {
	case []int32:
		return 4 * len(d)
	case []int64:
		return 8 * len(d)
	case []float32:
		return 4 * len(d)
	case []float64:
		return 8 * len(d)
	}
	return 0
}

// writeContent writes root attributes and datasets (creating their
// groups) to a new HDF5 file, closing everything and keeping the first
// close error.
func writeContent(name string, attrs []Attr, arrays []Array) (err error) {
	f, err := hdf5.CreateFile(name, hdf5.F_ACC_TRUNC)
	if err != nil {
		return fmt.Errorf("create HDF5 file: %w", err)
	}
	var c closer
	defer func() {
		c.close("HDF5 file", f.Close)
		if err == nil {
			err = c.err
		}
	}()
	root, err := f.OpenGroup("/")
	if err != nil {
		return fmt.Errorf("open root group: %w", err)
	}
	defer c.close("/", root.Close)
	for _, a := range attrs {
		if err := writeAttr(root, a.Name, a.Val); err != nil {
			return fmt.Errorf("attribute %s: %w", a.Name, err)
		}
	}
	groups := map[string]*hdf5.Group{"/": root}
	var opened []string // created groups, closed children first
	defer func() {
		for i := len(opened) - 1; i >= 0; i-- {
			c.close(opened[i], groups[opened[i]].Close)
		}
	}()
	// group returns the group at an absolute path, creating it and its
	// parents as needed.
	var group func(path string) (*hdf5.Group, error)
	group = func(path string) (*hdf5.Group, error) {
		if g := groups[path]; g != nil {
			return g, nil
		}
		parent, err := group(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		g, err := parent.CreateGroup(filepath.Base(path))
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		groups[path] = g
		opened = append(opened, path)
		return g, nil
	}
	var paths []string
	var digests []uint64
	for _, a := range arrays {
		if a.Data == nil { // an empty group
			if _, err := group(a.Path); err != nil {
				return err
			}
			continue
		}
		g, err := group(filepath.Dir(a.Path))
		if err != nil {
			return err
		}
		digest, err := writeAny(g, a)
		if err != nil {
			return err
		}
		paths, digests = append(paths, a.Path), append(digests, digest)
	}
	if len(paths) == 0 {
		return nil
	}
	if err := writeAttr(root, DigestPathsAttr, strings.Join(paths, "\n")); err != nil {
		return fmt.Errorf("attribute %s: %w", DigestPathsAttr, err)
	}
	if err := writeAttr(root, DigestsAttr, digests); err != nil {
		return fmt.Errorf("attribute %s: %w", DigestsAttr, err)
	}
	return nil
}

// writeAny writes the array a into its group g and returns its digest.
func writeAny(g *hdf5.Group, a Array) (digest uint64, err error) {
	base := filepath.Base(a.Path)
	switch d := a.Data.(type) {
	case []int32:
		digest, err = writeArray(g, base, typeInt32, d, a.Dims)
	case []int64:
		digest, err = writeArray(g, base, typeInt64, d, a.Dims)
	case []float32:
		digest, err = writeArray(g, base, typeFloat32, d, a.Dims)
	case []float64:
		digest, err = writeArray(g, base, typeFloat64, d, a.Dims)
	default:
		err = fmt.Errorf("unsupported data %T", a.Data)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", a.Path, err)
	}
	return digest, nil
}

func Vec[T any](path string, data []T) Array {
	return Array{path, data, []uint{uint(len(data))}}
}

// closer collects deferred HDF5 closes and keeps the first error: a close
// can fail (HDF5 flushes metadata then), and a silently failed close would
// leave a corrupt file behind a successful WriteH5.
type closer struct{ err error }

func (c *closer) close(what string, fn func() error) {
	if err := fn(); err != nil && c.err == nil {
		c.err = fmt.Errorf("close %s: %w", what, err)
	}
}

// writeAttr writes a scalar attribute: a variable-length string (what h5py
// writes for a Python str, and reads back as str), int32, int64, uint64
// (fingerprints, seeds) or float64; or a one-dimensional []uint64 (the
// digests).
func writeAttr(g *hdf5.Group, name string, val any) (err error) {
	var sp *hdf5.Dataspace
	if v, ok := val.([]uint64); ok {
		sp, err = hdf5.CreateSimpleDataspace([]uint{uint(len(v))}, nil)
	} else {
		sp, err = hdf5.CreateDataspace(hdf5.S_SCALAR)
	}
	if err != nil {
		return err
	}
	defer sp.Close()
	var dt *hdf5.Datatype
	switch val.(type) {
	case string:
		dt = hdf5.T_GO_STRING
	case int32:
		dt = hdf5.T_NATIVE_INT32
	case int64:
		dt = hdf5.T_NATIVE_INT64
	case uint64, []uint64:
		dt = hdf5.T_NATIVE_UINT64
	case float64:
		dt = hdf5.T_NATIVE_DOUBLE
	default:
		return fmt.Errorf("unsupported attribute type %T", val)
	}
	a, err := g.CreateAttribute(name, dt, sp)
	if err != nil {
		return err
	}
	var c closer
	defer func() {
		c.close("attribute", a.Close)
		if err == nil {
			err = c.err
		}
	}()
	switch v := val.(type) {
	case string:
		return a.Write(&v, dt)
	case int32:
		return a.Write(&v, dt)
	case int64:
		return a.Write(&v, dt)
	case uint64:
		return a.Write(&v, dt)
	case []uint64:
		return a.Write(&v[0], dt) // the binding writes from the element's address
	case float64:
		return a.Write(&v, dt)
	}
	return nil
}

// The root attributes that hold data.Digest of every dataset's values:
// DigestPathsAttr the datasets' paths, one per line, and DigestsAttr
// (uint64, one per path) their digests. HDF5 keeps no checksum of
// contiguous data, so without them a flipped bit in a parameter or a
// feature would be read back as a plausible number. They are root
// attributes, not attributes of each dataset, because libhdf5 1.10 reads
// out of bounds on some corrupt dataset attribute headers where the scan
// child survives them and the reader crashes (the corrupt-byte sweep
// found one); root attributes are what every reader opens already.
const (
	DigestPathsAttr = "digest_paths"
	DigestsAttr     = "digests"
)

// writeArray creates a contiguous, uncompressed dataset (the layout that
// loads fastest: one read straight into the destination slice), writes
// data into it in slabs of at most slabBytes along the first dimension,
// and returns the digest of what it wrote.
func writeArray[T Elem](g *hdf5.Group, name string, typ elemType, values []T, dims []uint) (digest uint64, err error) {
	sp, err := hdf5.CreateSimpleDataspace(dims, nil)
	if err != nil {
		return 0, err
	}
	defer sp.Close()
	d, err := g.CreateDataset(name, typ.native, sp)
	if err != nil {
		return 0, err
	}
	var c closer
	defer func() {
		c.close("dataset", d.Close)
		if err == nil {
			err = c.err
		}
	}()
	n := 1
	for _, x := range dims {
		n *= int(x)
	}
	if len(values) < n {
		return 0, fmt.Errorf("%d values for shape %v", len(values), dims)
	}
	values = values[:n] // what the file holds
	digest = data.Digest(any(values))
	if len(values) == 0 {
		return digest, nil // HDF5 refuses a write from an empty (nil) buffer
	}
	rowLen := len(values) / int(dims[0])
	rows := max(1, slabBytes/(rowLen*int(typ.size)))
	if rows >= int(dims[0]) {
		return digest, d.Write(&values)
	}
	for lo := 0; lo < int(dims[0]); lo += rows {
		hi := min(lo+rows, int(dims[0]))
		if err := writeSlab(d, values[lo*rowLen:hi*rowLen], lo, hi, dims); err != nil {
			return 0, err
		}
	}
	return digest, nil
}

// writeSlab writes rows [lo, hi) of a dataset with the given dims.
func writeSlab[T Elem](d *hdf5.Dataset, chunk []T, lo, hi int, dims []uint) error {
	fs, ms, err := rowSpaces(d, lo, hi, dims)
	if err != nil {
		return err
	}
	defer fs.Close()
	defer ms.Close()
	return d.WriteSubset(&chunk, ms, fs)
}

// rowSpaces selects the rows [lo, hi) of a dataset with the given dims:
// its file space with the hyperslab selected, and a memory space of their
// shape. The caller closes both.
func rowSpaces(d *hdf5.Dataset, lo, hi int, dims []uint) (fs, ms *hdf5.Dataspace, err error) {
	offset := make([]uint, len(dims))
	offset[0] = uint(lo)
	count := slices.Clone(dims)
	count[0] = uint(hi - lo)
	if fs = d.Space(); fs == nil {
		return nil, nil, fmt.Errorf("cannot get the dataspace")
	}
	if err := fs.SelectHyperslab(offset, nil, count, nil); err != nil {
		fs.Close()
		return nil, nil, err
	}
	if ms, err = hdf5.CreateSimpleDataspace(count, nil); err != nil {
		fs.Close()
		return nil, nil, err
	}
	return fs, ms, nil
}

// Writer writes a new HDF5 file whose large arrays may arrive in pieces
// (rows written in order, each array's digest computed as they come), so
// that its writer never holds them whole: the streaming conversion of a
// dataset and meta.h5's assignment from many processes. Every method runs
// its HDF5 calls on a locked thread (withHDF5); the first error is kept
// and returned by every later call. The file carries the same attributes
// and digests as Create's.
type Writer struct {
	name    string
	f       *hdf5.File
	groups  map[string]*hdf5.Group
	opened  []string
	paths   []string // datasets, in the order they were begun
	digests map[string]uint64
	open    map[string]*stream
	err     error
}

// stream is a dataset being written in rows.
type stream struct {
	d      *hdf5.Dataset
	typ    elemType
	dims   []uint
	rowLen int
	next   int // the next row
	sum    data.Digester
}

// NewWriter creates the file name (in place: the writer of a temporary
// file, as Create) with the root attributes attrs.
func NewWriter(name string, attrs []Attr) (*Writer, error) {
	w := &Writer{name: name, groups: map[string]*hdf5.Group{}, digests: map[string]uint64{}, open: map[string]*stream{}}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	err = withHDF5(func() error {
		var err error
		if w.f, err = hdf5.CreateFile(name, hdf5.F_ACC_TRUNC); err != nil {
			return fmt.Errorf("create HDF5 file: %w", err)
		}
		root, err := w.f.OpenGroup("/")
		if err != nil {
			return fmt.Errorf("open root group: %w", err)
		}
		w.groups["/"] = root
		for _, a := range attrs {
			if err := writeAttr(root, a.Name, a.Val); err != nil {
				return fmt.Errorf("attribute %s: %w", a.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *Writer) do(fn func() error) error {
	if w.err == nil {
		w.err = withHDF5(fn)
	}
	return w.err
}

// group returns the group at an absolute path, creating it and its parents.
func (w *Writer) group(path string) (*hdf5.Group, error) {
	if g := w.groups[path]; g != nil {
		return g, nil
	}
	parent, err := w.group(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	g, err := parent.CreateGroup(filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	w.groups[path] = g
	w.opened = append(w.opened, path)
	return g, nil
}

// Array writes a whole array (or an empty group, for nil Data).
func (w *Writer) Array(a Array) error {
	return w.do(func() error {
		if a.Data == nil {
			_, err := w.group(a.Path)
			return err
		}
		g, err := w.group(filepath.Dir(a.Path))
		if err != nil {
			return err
		}
		digest, err := writeAny(g, a)
		if err != nil {
			return err
		}
		w.paths = append(w.paths, a.Path)
		w.digests[a.Path] = digest
		return nil
	})
}

// Begin creates the dataset at path, of the element type of sample (an
// empty []int32, []int64, []float32 or []float64) and shape dims, whose
// rows Rows then writes in order.
func (w *Writer) Begin(path string, sample any, dims []uint) error {
	return w.do(func() error {
		var typ elemType
		switch sample.(type) {
		case []int32:
			typ = typeInt32
		case []int64:
			typ = typeInt64
		case []float32:
			typ = typeFloat32
		case []float64:
			typ = typeFloat64
		default:
			return fmt.Errorf("%s: unsupported data %T", path, sample)
		}
		g, err := w.group(filepath.Dir(path))
		if err != nil {
			return err
		}
		sp, err := hdf5.CreateSimpleDataspace(dims, nil)
		if err != nil {
			return err
		}
		defer sp.Close()
		d, err := g.CreateDataset(filepath.Base(path), typ.native, sp)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		row := 1
		for _, x := range dims[1:] {
			row *= int(x)
		}
		w.open[path] = &stream{d: d, typ: typ, dims: slices.Clone(dims), rowLen: row}
		w.paths = append(w.paths, path)
		return nil
	})
}

// Rows writes the next rows of the dataset begun at path: data holds whole
// rows, of its element type.
func (w *Writer) Rows(path string, data any) error {
	return w.do(func() error {
		s := w.open[path]
		if s == nil {
			return fmt.Errorf("%s: rows written before Begin or after End", path)
		}
		n := dataBytes(data) / int(s.typ.size)
		if n%max(s.rowLen, 1) != 0 || s.next+n/max(s.rowLen, 1) > int(s.dims[0]) {
			return fmt.Errorf("%s: %d values do not make whole rows within shape %v after row %d", path, n, s.dims, s.next)
		}
		rows := n / max(s.rowLen, 1)
		if rows == 0 {
			return nil
		}
		var err error
		switch d := data.(type) {
		case []int32:
			err = writeSlab(s.d, d, s.next, s.next+rows, s.dims)
		case []int64:
			err = writeSlab(s.d, d, s.next, s.next+rows, s.dims)
		case []float32:
			err = writeSlab(s.d, d, s.next, s.next+rows, s.dims)
		case []float64:
			err = writeSlab(s.d, d, s.next, s.next+rows, s.dims)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		s.sum.Write(rawBytes(data))
		s.next += rows
		return nil
	})
}

// End closes the dataset begun at path, which must have all its rows.
func (w *Writer) End(path string) error {
	return w.do(func() error {
		s := w.open[path]
		if s == nil {
			return fmt.Errorf("%s: End without Begin", path)
		}
		delete(w.open, path)
		err := s.d.Close()
		if err == nil && s.next != int(s.dims[0]) {
			err = fmt.Errorf("%s: %d of %d rows written", path, s.next, s.dims[0])
		}
		w.digests[path] = s.sum.Sum()
		return err
	})
}

// Close writes the digests and closes the file.
func (w *Writer) Close() error {
	if len(w.open) > 0 && w.err == nil {
		w.err = fmt.Errorf("%s: %d datasets not ended", w.name, len(w.open))
	}
	w.do(func() error {
		if len(w.paths) == 0 {
			return nil
		}
		digests := make([]uint64, len(w.paths))
		for i, p := range w.paths {
			digests[i] = w.digests[p]
		}
		if err := writeAttr(w.groups["/"], DigestPathsAttr, strings.Join(w.paths, "\n")); err != nil {
			return fmt.Errorf("attribute %s: %w", DigestPathsAttr, err)
		}
		if err := writeAttr(w.groups["/"], DigestsAttr, digests); err != nil {
			return fmt.Errorf("attribute %s: %w", DigestsAttr, err)
		}
		return nil
	})
	err := w.err
	if cerr := w.release(); err == nil {
		err = cerr
	}
	return err
}

// Abort closes the file without its digests (the caller removes it).
func (w *Writer) Abort() { w.release() }

// release closes every open object, children first.
func (w *Writer) release() error {
	var c closer
	withHDF5(func() error {
		for _, s := range w.open {
			c.close("dataset", s.d.Close)
		}
		w.open = map[string]*stream{}
		for i := len(w.opened) - 1; i >= 0; i-- {
			c.close(w.opened[i], w.groups[w.opened[i]].Close)
		}
		w.opened = nil
		if g := w.groups["/"]; g != nil {
			c.close("/", g.Close)
		}
		w.groups = map[string]*hdf5.Group{}
		if w.f != nil {
			c.close("HDF5 file", w.f.Close)
			w.f = nil
		}
		return nil
	})
	return c.err
}

// rawBytes is the in-memory bytes of a numeric slice.
func rawBytes(d any) []byte {
	switch d := d.(type) {
	case []int32:
		return data.Bytes(d)
	case []int64:
		return data.Bytes(d)
	case []float32:
		return data.Bytes(d)
	case []float64:
		return data.Bytes(d)
	}
	return nil
}
