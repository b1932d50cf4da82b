package data

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"

	"gonum.org/v1/hdf5"
)

// The HDF5 dataset layout (docs/FORMATS.md is the reference):
//
//	/                 attrs format="gnn-spmd-dataset", version=1 (int32), name,
//	                  num_nodes, num_edges (int64), num_features, num_classes (int32)
//	/graph/indptr     int64 [N+1]   CSR by destination
//	/graph/indices    int32 [E]     sources of the edges into each row
//	/node/features    float32 [N,F] absent when F = 0
//	/node/labels      int32 [N]     -1 = unlabelled
//	/splits/<name>/{train,valid,test}  int32 [n], sorted node ids
const (
	h5Format  = "gnn-spmd-dataset"
	h5Version = 1
)

// h5SlabBytes bounds one H5Dwrite call, so a multi-GB features array is
// written as a series of hyperslabs instead of a single huge request. A
// variable so that tests can exercise the slab path on small arrays.
var h5SlabBytes = 64 << 20

// h5Type is an element type the format uses. Arrays are read without type
// conversion straight into Go memory, so the file type must be exactly the
// native (little-endian) one.
type h5Type struct {
	name   string
	class  hdf5.TypeClass
	size   uint
	native *hdf5.Datatype
}

var (
	h5Int32   = h5Type{"int32", hdf5.T_INTEGER, 4, hdf5.T_NATIVE_INT32}
	h5Int64   = h5Type{"int64", hdf5.T_INTEGER, 8, hdf5.T_NATIVE_INT64}
	h5Float32 = h5Type{"float32", hdf5.T_FLOAT, 4, hdf5.T_NATIVE_FLOAT}
	h5Float64 = h5Type{"float64", hdf5.T_FLOAT, 8, hdf5.T_NATIVE_DOUBLE}
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

// WriteH5 validates ds and writes it to path in the HDF5 dataset format. The
// write is atomic: the data goes to path+".tmp-<pid>" in the same directory,
// is synced to disk and then renamed over path, so a reader never sees a
// half-written file; on failure the temporary file is removed.
func WriteH5(path string, ds *Dataset) error {
	if err := ds.Validate(path); err != nil {
		return err
	}
	g := ds.Graph
	attrs := []H5Attr{
		{"format", h5Format},
		{"version", int32(h5Version)},
		{"name", ds.Name},
		{"num_nodes", int64(g.N)},
		{"num_edges", g.NumEdges()},
		{"num_features", int32(ds.NumFeatures)},
		{"num_classes", int32(ds.NumClasses)},
	}
	arrays := []H5Array{vec("/graph/indptr", g.Indptr), vec("/graph/indices", g.Indices)}
	if ds.NumFeatures > 0 {
		arrays = append(arrays, H5Array{"/node/features", ds.Features, []uint{uint(g.N), uint(ds.NumFeatures)}})
	}
	arrays = append(arrays, vec("/node/labels", ds.Labels), H5Array{Path: "/splits"})
	for _, name := range ds.SplitNames() {
		s := ds.Splits[name]
		for _, part := range []struct {
			name string
			ids  []int32
		}{{"train", s.Train}, {"valid", s.Valid}, {"test", s.Test}} {
			ids := part.ids
			if !slices.IsSorted(ids) { // the format promises sorted ids
				ids = slices.Clone(ids)
				slices.Sort(ids)
			}
			arrays = append(arrays, vec("/splits/"+name+"/"+part.name, ids))
		}
	}
	return WriteH5File(path, attrs, arrays)
}

// syncPath fsyncs a file or directory (after HDF5 has closed it).
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// h5Closer collects deferred HDF5 closes and keeps the first error: a close
// can fail (HDF5 flushes metadata then), and a silently failed close would
// leave a corrupt file behind a successful WriteH5.
type h5Closer struct{ err error }

func (c *h5Closer) close(what string, fn func() error) {
	if err := fn(); err != nil && c.err == nil {
		c.err = fmt.Errorf("close %s: %w", what, err)
	}
}

// writeAttr writes a scalar attribute: a variable-length string (what h5py
// writes for a Python str, and reads back as str), int32, int64, uint64
// (fingerprints, seeds) or float64.
func writeAttr(g *hdf5.Group, name string, val any) (err error) {
	sp, err := hdf5.CreateDataspace(hdf5.S_SCALAR)
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
	case uint64:
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
	var c h5Closer
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
	case float64:
		return a.Write(&v, dt)
	}
	return nil
}

// writeArray creates a contiguous, uncompressed dataset (the layout that
// loads fastest: one read straight into the destination slice) and writes
// data into it in slabs of at most h5SlabBytes along the first dimension.
func writeArray[T H5Elem](g *hdf5.Group, name string, typ h5Type, data []T, dims []uint) (err error) {
	sp, err := hdf5.CreateSimpleDataspace(dims, nil)
	if err != nil {
		return err
	}
	defer sp.Close()
	d, err := g.CreateDataset(name, typ.native, sp)
	if err != nil {
		return err
	}
	var c h5Closer
	defer func() {
		c.close("dataset", d.Close)
		if err == nil {
			err = c.err
		}
	}()
	if len(data) == 0 {
		return nil // HDF5 refuses a write from an empty (nil) buffer
	}
	rowLen := len(data) / int(dims[0])
	rows := max(1, h5SlabBytes/(rowLen*int(typ.size)))
	if rows >= int(dims[0]) {
		return d.Write(&data)
	}
	for lo := 0; lo < int(dims[0]); lo += rows {
		hi := min(lo+rows, int(dims[0]))
		if err := writeSlab(d, data[lo*rowLen:hi*rowLen], lo, hi, dims); err != nil {
			return err
		}
	}
	return nil
}

// writeSlab writes rows [lo, hi) of a dataset with the given dims.
func writeSlab[T H5Elem](d *hdf5.Dataset, chunk []T, lo, hi int, dims []uint) error {
	offset := make([]uint, len(dims))
	offset[0] = uint(lo)
	count := slices.Clone(dims)
	count[0] = uint(hi - lo)
	fs := d.Space()
	if fs == nil {
		return fmt.Errorf("cannot get the dataspace")
	}
	defer fs.Close()
	if err := fs.SelectHyperslab(offset, nil, count, nil); err != nil {
		return err
	}
	ms, err := hdf5.CreateSimpleDataspace(count, nil)
	if err != nil {
		return err
	}
	defer ms.Close()
	return d.WriteSubset(&chunk, ms, fs)
}

// ReadH5 reads a dataset written by WriteH5 (or by any tool following the
// layout in docs/FORMATS.md) and validates it. Every problem with the file is
// an *InputError naming the file, the HDF5 object (e.g. "/graph/indices" or
// "attribute num_nodes") and what was expected. Sizes are checked against the
// attributes and the file size before anything is allocated.
func ReadH5(path string) (*Dataset, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, inputErrorf(path, 0, "", "cannot open: %v", err)
	}
	if st.IsDir() {
		return nil, inputErrorf(path, 0, "", "is a directory, expected an HDF5 dataset file")
	}
	if !st.Mode().IsRegular() {
		return nil, inputErrorf(path, 0, "", "is not a regular file, expected an HDF5 dataset file")
	}
	r := &h5Reader{path: path, size: st.Size()}
	var ds *Dataset
	err = withHDF5(func() error {
		var err error
		ds, err = r.read()
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := ds.Validate(path); err != nil {
		if ie, ok := err.(*InputError); ok {
			ie.Field = h5Field(ie.Field)
		}
		return nil, err
	}
	return ds, nil
}

// h5Field maps a field name from Dataset.Validate to the HDF5 object holding it.
func h5Field(f string) string {
	switch f {
	case "graph", "graph/indptr", "graph/indices":
		return "/" + f
	case "features":
		return "/node/features"
	case "labels":
		return "/node/labels"
	case "num_nodes", "num_classes", "num_features", "num_edges":
		return "attribute " + f
	}
	if rest, ok := strings.CutPrefix(f, "split "); ok {
		return "/splits/" + rest
	}
	return f
}

type h5Reader struct {
	path string
	size int64 // file size in bytes: an upper bound for any uncompressed array
	f    *hdf5.File
}

func (r *h5Reader) errorf(field, format string, args ...any) error {
	return inputErrorf(r.path, 0, field, format, args...)
}

func (r *h5Reader) read() (ds *Dataset, err error) {
	if !hdf5.IsHDF5(r.path) {
		return nil, r.errorf("", "not an HDF5 file (no HDF5 signature), expected a %s file", h5Format)
	}
	r.f, err = hdf5.OpenFile(r.path, hdf5.F_ACC_RDONLY)
	if err != nil {
		return nil, r.errorf("", "has an HDF5 signature but cannot be opened: the file is truncated or corrupt")
	}
	defer r.f.Close()
	root, err := r.f.OpenGroup("/")
	if err != nil {
		return nil, r.errorf("/", "cannot open the root group: the file is corrupt")
	}
	defer root.Close()

	format, err := r.stringAttr(root, "format")
	if err != nil {
		return nil, err
	}
	if format != h5Format {
		return nil, r.errorf("attribute format", "is %q, expected %q", format, h5Format)
	}
	version, err := r.intAttr(root, "version")
	if err != nil {
		return nil, err
	}
	if version != h5Version {
		return nil, r.errorf("attribute version", "is %d: unsupported version, expected %d", version, h5Version)
	}
	name, err := r.stringAttr(root, "name")
	if err != nil {
		return nil, err
	}

	// The counts come first and are bounded by what the file can hold (the
	// format is uncompressed), so an absurd attribute is refused before any
	// allocation.
	n, err := r.intAttr(root, "num_nodes")
	if err != nil {
		return nil, err
	}
	if n < 1 || n > math.MaxInt32 {
		return nil, r.errorf("attribute num_nodes", "is %d, expected a node count in [1, %d] (node ids are int32)", n, math.MaxInt32)
	}
	if perNode := int64(8 + 4); n > r.size/perNode { // indptr + labels
		return nil, r.errorf("attribute num_nodes", "is %d, but a file of %d bytes cannot hold indptr and labels for that many nodes (%d bytes each)", n, r.size, perNode)
	}
	e, err := r.intAttr(root, "num_edges")
	if err != nil {
		return nil, err
	}
	if e < 0 || e > r.size/4 {
		return nil, r.errorf("attribute num_edges", "is %d, expected a count in [0, %d] for a file of %d bytes (4 bytes per edge)", e, r.size/4, r.size)
	}
	nf, err := r.intAttr(root, "num_features")
	if err != nil {
		return nil, err
	}
	if nf < 0 || nf > r.size/4/n {
		return nil, r.errorf("attribute num_features", "is %d, expected a count in [0, %d] for %d nodes in a file of %d bytes", nf, r.size/4/n, n, r.size)
	}
	nc, err := r.intAttr(root, "num_classes")
	if err != nil {
		return nil, err
	}
	if nc < 1 || nc > math.MaxInt32 {
		return nil, r.errorf("attribute num_classes", "is %d, expected a class count in [1, %d]", nc, math.MaxInt32)
	}

	indptr, err := readArray[int64](r, "/graph/indptr", h5Int64, []int64{n + 1}, "[num_nodes+1]")
	if err != nil {
		return nil, err
	}
	indices, err := readArray[int32](r, "/graph/indices", h5Int32, []int64{e}, "[num_edges]")
	if err != nil {
		return nil, err
	}
	var features []float32
	if nf > 0 || r.f.LinkExists("/node/features") {
		// A [N, 0] array is accepted for F = 0; the writer omits it.
		features, err = readArray[float32](r, "/node/features", h5Float32, []int64{n, nf}, "[num_nodes, num_features]")
		if err != nil {
			return nil, err
		}
		if nf == 0 {
			features = nil
		}
	}
	labels, err := readArray[int32](r, "/node/labels", h5Int32, []int64{n}, "[num_nodes]")
	if err != nil {
		return nil, err
	}
	splits, err := r.readSplits(n)
	if err != nil {
		return nil, err
	}
	return &Dataset{
		Name:        name,
		Graph:       &Graph{N: int(n), Indptr: indptr, Indices: indices},
		NumFeatures: int(nf),
		Features:    features,
		Labels:      labels,
		NumClasses:  int(nc),
		Splits:      splits,
	}, nil
}

func (r *h5Reader) readSplits(n int64) (map[string]*Split, error) {
	if !r.f.LinkExists("/splits") {
		return nil, r.errorf("/splits", "missing group, expected /splits with one group per split (empty when there are none)")
	}
	g, err := r.f.OpenGroup("/splits")
	if err != nil {
		return nil, r.errorf("/splits", "is not a group, expected a group with one subgroup per split")
	}
	defer g.Close()
	count, err := g.NumObjects()
	if err != nil {
		return nil, r.errorf("/splits", "cannot list its members: the file is corrupt")
	}
	splits := make(map[string]*Split, count)
	for i := uint(0); i < count; i++ {
		name, err := g.ObjectNameByIndex(i)
		if err != nil {
			return nil, r.errorf("/splits", "cannot read member %d: the file is corrupt", i)
		}
		field := "/splits/" + name
		if t, err := g.ObjectTypeByIndex(i); err != nil || t != hdf5.H5G_GROUP {
			return nil, r.errorf(field, "is not a group, expected a group holding train, valid and test")
		}
		s := &Split{}
		for _, part := range []struct {
			name string
			ids  *[]int32
		}{{"train", &s.Train}, {"valid", &s.Valid}, {"test", &s.Test}} {
			p := field + "/" + part.name
			ids, err := readArray[int32](r, p, h5Int32, []int64{-1}, "[n] with n <= num_nodes")
			if err != nil {
				return nil, err
			}
			if int64(len(ids)) > n {
				return nil, r.errorf(p, "has %d entries, expected at most num_nodes = %d", len(ids), n)
			}
			if !slices.IsSorted(ids) { // tolerate foreign writers: the API promises sorted ids
				slices.Sort(ids)
			}
			*part.ids = ids
		}
		splits[name] = s
	}
	return splits, nil
}

// stringAttr reads a scalar string attribute of the root group, fixed-length
// or variable-length.
func (r *h5Reader) stringAttr(g *hdf5.Group, name string) (string, error) {
	field := "attribute " + name
	a, dt, err := r.openAttr(g, name, hdf5.T_STRING, "a string")
	if err != nil {
		return "", err
	}
	defer a.Close()
	defer dt.Close()
	if (&hdf5.VarLenType{Datatype: *dt}).IsVariableStr() {
		var s string
		if err := a.Read(&s, dt); err != nil {
			return "", r.errorf(field, "cannot be read: the file is corrupt")
		}
		return s, nil
	}
	size := dt.Size()
	if size == 0 || size > 1<<20 {
		return "", r.errorf(field, "is a string of %d bytes, expected a short string", size)
	}
	// Read into our own buffer: the binding's fixed-length path reads into
	// uninitialised memory that is not NUL-terminated.
	buf := make([]byte, size)
	if err := a.Read(&buf[0], dt); err != nil {
		return "", r.errorf(field, "cannot be read: the file is corrupt")
	}
	if i := slices.Index(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return strings.TrimRight(string(buf), " "), nil
}

// intAttr reads a scalar integer attribute of any width, converted to int64.
func (r *h5Reader) intAttr(g *hdf5.Group, name string) (int64, error) {
	a, dt, err := r.openAttr(g, name, hdf5.T_INTEGER, "an integer")
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer dt.Close()
	var v int64
	if err := a.Read(&v, hdf5.T_NATIVE_INT64); err != nil {
		return 0, r.errorf("attribute "+name, "cannot be read as an integer: the file is corrupt")
	}
	return v, nil
}

// openAttr opens an attribute and checks that it holds one value of the
// wanted type class; the caller closes both results.
func (r *h5Reader) openAttr(g *hdf5.Group, name string, class hdf5.TypeClass, want string) (*hdf5.Attribute, *hdf5.Datatype, error) {
	field := "attribute " + name
	a, err := g.OpenAttribute(name)
	if err != nil {
		return nil, nil, r.errorf(field, "missing, expected %s attribute on the root group", want)
	}
	dt := &hdf5.Datatype{Identifier: a.GetType()}
	if dt.ID() < 0 {
		a.Close()
		return nil, nil, r.errorf(field, "has no readable type: the file is corrupt")
	}
	if c := dt.Class(); c != class {
		dt.Close()
		a.Close()
		return nil, nil, r.errorf(field, "has type class %s, expected %s", typeClassName(c), want)
	}
	sp := a.Space()
	points := -1
	if sp != nil {
		points = sp.SimpleExtentNPoints()
		sp.Close()
	}
	if points != 1 {
		dt.Close()
		a.Close()
		return nil, nil, r.errorf(field, "holds %d values, expected a single value", points)
	}
	return a, dt, nil
}

// readArray opens the dataset at p, checks its element type and shape
// against want (a -1 dimension takes any size) and reads it. The shape is
// checked before allocating, and its byte size against the file size.
func readArray[T H5Elem](r *h5Reader, p string, typ h5Type, want []int64, wantDesc string) ([]T, error) {
	return readArrayRoom[T](r, p, typ, want, wantDesc, 0)
}

// readArrayRoom is readArray with room more elements of capacity after the
// array's.
func readArrayRoom[T H5Elem](r *h5Reader, p string, typ h5Type, want []int64, wantDesc string, room int) ([]T, error) {
	if !r.f.LinkExists(p) {
		return nil, r.errorf(p, "missing dataset, expected %s %s", typ.name, wantDesc)
	}
	d, err := r.f.OpenDataset(p)
	if err != nil {
		return nil, r.errorf(p, "is not a dataset, expected %s %s", typ.name, wantDesc)
	}
	defer d.Close()

	dt, err := d.Datatype()
	if err != nil {
		return nil, r.errorf(p, "has no readable type: the file is corrupt")
	}
	class, size, native := dt.Class(), dt.Size(), dt.Equal(typ.native)
	dt.Close()
	if class != typ.class || size != typ.size {
		return nil, r.errorf(p, "has element type %s of %d bytes, expected %s", typeClassName(class), size, typ.name)
	}
	if !native {
		return nil, r.errorf(p, "has a %d-byte %s type with a non-native byte order or bit layout, expected little-endian %s", size, typeClassName(class), typ.name)
	}

	sp := d.Space()
	if sp == nil {
		return nil, r.errorf(p, "has no readable dataspace: the file is corrupt")
	}
	defer sp.Close()
	rank := sp.SimpleExtentNDims()
	if rank != len(want) || sp.SimpleExtentType() != hdf5.S_SIMPLE {
		return nil, r.errorf(p, "has rank %d, expected a %d-dimensional %s array of shape %s", max(rank, 0), len(want), typ.name, wantDesc)
	}
	dims, _, err := sp.SimpleExtentDims()
	if err != nil {
		return nil, r.errorf(p, "has an unreadable shape: the file is corrupt")
	}
	total := uint64(1)
	limit := uint64(r.size) / uint64(typ.size)
	for i, w := range want {
		if w >= 0 && uint64(dims[i]) != uint64(w) {
			return nil, r.errorf(p, "has shape %v, expected %s = %v", dims, wantDesc, wantShape(want, dims))
		}
		if dims[i] != 0 && total > limit/uint64(dims[i]) {
			total = limit + 1 // would overflow: larger than the file anyway
			break
		}
		total *= uint64(dims[i])
	}
	if total > limit {
		return nil, r.errorf(p, "has shape %v, more %s values than a file of %d bytes can hold (compressed datasets are not supported)", dims, typ.name, r.size)
	}
	buf := make([]T, total, int(total)+room)
	if total > 0 {
		if err := d.Read(&buf); err != nil {
			return nil, r.errorf(p, "cannot be read: the file is truncated or corrupt, or the dataset uses an unavailable filter")
		}
	}
	return buf, nil
}

// wantShape fills the free (-1) dimensions of want from the actual dims.
func wantShape(want []int64, dims []uint) []int64 {
	s := slices.Clone(want)
	for i := range s {
		if s[i] < 0 {
			s[i] = int64(dims[i])
		}
	}
	return s
}

func typeClassName(c hdf5.TypeClass) string {
	switch c {
	case hdf5.T_INTEGER:
		return "integer"
	case hdf5.T_FLOAT:
		return "float"
	case hdf5.T_STRING:
		return "string"
	case hdf5.T_COMPOUND:
		return "compound"
	case hdf5.T_ENUM:
		return "enum"
	case hdf5.T_VLEN:
		return "variable-length"
	case hdf5.T_ARRAY:
		return "array"
	case hdf5.T_OPAQUE:
		return "opaque"
	case hdf5.T_BITFIELD:
		return "bitfield"
	case hdf5.T_REFERENCE:
		return "reference"
	case hdf5.T_TIME:
		return "time"
	}
	return fmt.Sprintf("class %d", int(c))
}
