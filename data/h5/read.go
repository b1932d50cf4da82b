package h5

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cgo/h5scan"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"gonum.org/v1/hdf5"
)

// File is an HDF5 file open for reading in Read. Its getters keep the first
// error (Err) and return zero values after it, so that a reader reads a run
// of fields and checks once; every error is a *data.InputError naming the
// file and the HDF5 object.
type File struct {
	path string
	size int64 // bytes: an upper bound for any uncompressed array
	f    *hdf5.File
	root *hdf5.Group
	err  error
	// digests are the datasets' digests by path (DigestsAttr); nil for a
	// file without them.
	digests map[string]uint64
}

// Read opens path, checks that its format and version attributes are
// format and version, and runs fn on it; missing says what to do when there
// is no such file. fn runs on one locked OS thread and must not use f from
// another goroutine.
func Read(path, format string, version int64, missing string, fn func(f *File) error) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return data.InputErrorf(path, 0, "", "missing: %s", missing)
	}
	if err != nil {
		return data.InputErrorf(path, 0, "", "cannot open: %v", osReason(err))
	}
	if st.IsDir() {
		return data.InputErrorf(path, 0, "", "is a directory, expected a %s file", format)
	}
	if !st.Mode().IsRegular() {
		// A FIFO or device would block or never end the read.
		return data.InputErrorf(path, 0, "", "is %s, not a regular file, expected a %s file", outfile.Kind(st.Mode()), format)
	}
	// libhdf5 says only "not HDF5" of a file it cannot open: a file this
	// process may not read is refused for what it is.
	if f, err := os.Open(path); err != nil {
		return data.InputErrorf(path, 0, "", "cannot open: %v", osReason(err))
	} else {
		f.Close()
	}
	f := &File{path: path, size: st.Size()}
	err = withHDF5(func() error {
		if !hdf5.IsHDF5(path) {
			return f.errorf("", "not an HDF5 file (no HDF5 signature), expected a %s file", format)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := check(path, st); err != nil {
		return err
	}
	return withHDF5(func() error {
		if f.f, err = hdf5.OpenFile(path, hdf5.F_ACC_RDONLY); err != nil {
			return f.errorf("", "has an HDF5 signature but cannot be opened: the file is truncated or corrupt")
		}
		defer f.f.Close()
		if f.root, err = f.f.OpenGroup("/"); err != nil {
			return f.errorf("/", "cannot open the root group: the file is corrupt")
		}
		defer f.root.Close()
		if got := f.String("format"); f.err == nil && got != format {
			return f.errorf("attribute format", "is %q, expected %q", got, format)
		}
		if v := f.Int("version", math.MinInt64, math.MaxInt64); f.err == nil && v != version {
			return f.errorf("attribute version", "is %d: unsupported version, expected %d", v, version)
		}
		if f.err != nil {
			return f.err
		}
		if err := f.readDigests(); err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		return f.err
	})
}

// osReason is a file error without its path, which the message names.
func osReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Format returns the format attribute of the HDF5 file at path, "" when it
// is no regular HDF5 file or has none: what a tool reads to tell the formats
// apart.
func Format(path string) string {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() || check(path, st) != nil {
		return ""
	}
	format := ""
	withHDF5(func() error {
		if !hdf5.IsHDF5(path) {
			return nil
		}
		h, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
		if err != nil {
			return nil
		}
		defer h.Close()
		root, err := h.OpenGroup("/")
		if err != nil {
			return nil
		}
		defer root.Close()
		format, _ = (&File{path: path, f: h}).stringAttr(root, "format")
		return nil
	})
	return format
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Size is the file's size in bytes, which bounds every count a reader takes
// from the file.
func (f *File) Size() int64 { return f.size }

// Err is the first error of f's getters.
func (f *File) Err() error { return f.err }

func (f *File) errorf(field, format string, args ...any) error {
	return data.InputErrorf(f.path, 0, field, format, args...)
}

// Errorf records (unless an error came first) and returns a
// *data.InputError about field of this file.
func (f *File) Errorf(field, format string, args ...any) error {
	if f.err == nil {
		f.err = f.errorf(field, format, args...)
	}
	return f.err
}

// keep records err as f's first error.
func (f *File) keep(err error) {
	if f.err == nil {
		f.err = err
	}
}

// HasAttr reports whether the root group has the attribute name (one that
// newer files add).
func (f *File) HasAttr(name string) bool {
	if f.err != nil {
		return false
	}
	a, err := f.root.OpenAttribute(name)
	if err != nil {
		return false
	}
	a.Close()
	return true
}

// readDigests reads the datasets' digests (DigestPathsAttr, DigestsAttr),
// where the file has them: files from before them, and those other
// writers make, do not.
func (f *File) readDigests() error {
	if !f.HasAttr(DigestPathsAttr) {
		return nil
	}
	paths := strings.Split(f.String(DigestPathsAttr), "\n")
	if f.err != nil {
		return f.err
	}
	field := "attribute " + DigestsAttr
	a, err := f.root.OpenAttribute(DigestsAttr)
	if err != nil {
		return f.errorf(field, "missing, expected a uint64 digest per path in %s", DigestPathsAttr)
	}
	defer a.Close()
	dt := &hdf5.Datatype{Identifier: a.GetType()}
	if dt.ID() < 0 {
		return f.errorf(field, "has no readable type: the file is corrupt")
	}
	defer dt.Close()
	if dt.Class() != hdf5.T_INTEGER || !dt.Equal(hdf5.T_STD_U64LE) {
		return f.errorf(field, "has type class %s of %d bytes, expected little-endian uint64", typeClassName(dt.Class()), dt.Size())
	}
	points := -1
	if sp := a.Space(); sp != nil {
		points = sp.SimpleExtentNPoints()
		sp.Close()
	}
	if points != len(paths) {
		return f.errorf(field, "holds %d values, expected one per path in %s (%d)", points, DigestPathsAttr, len(paths))
	}
	digests := make([]uint64, len(paths))
	if err := a.Read(&digests[0], hdf5.T_NATIVE_UINT64); err != nil {
		return f.errorf(field, "cannot be read: the file is corrupt")
	}
	f.digests = make(map[string]uint64, len(paths))
	for i, p := range paths {
		f.digests[p] = digests[i]
	}
	return nil
}

// Int reads an integer root attribute, which must lie in [lo, hi].
func (f *File) Int(name string, lo, hi int64) int64 {
	if f.err != nil {
		return 0
	}
	v, err := f.intAttr(f.root, name)
	if err == nil && (v < lo || v > hi) {
		err = f.errorf("attribute "+name, "is %d, expected a value in [%d, %d]", v, lo, hi)
	}
	f.keep(err)
	return v
}

// String reads a string root attribute.
func (f *File) String(name string) string {
	if f.err != nil {
		return ""
	}
	v, err := f.stringAttr(f.root, name)
	f.keep(err)
	return v
}

// Uint64 reads an unsigned integer root attribute.
func (f *File) Uint64(name string) uint64 {
	var v uint64
	f.scalar(name, hdf5.T_INTEGER, "an integer", "an unsigned integer", &v, hdf5.T_NATIVE_UINT64)
	return v
}

// Float64 reads a floating-point root attribute.
func (f *File) Float64(name string) float64 {
	var v float64
	f.scalar(name, hdf5.T_FLOAT, "a floating-point", "a float", &v, hdf5.T_NATIVE_DOUBLE)
	return v
}

// scalar reads root attribute name, of type class, into v as native.
func (f *File) scalar(name string, class hdf5.TypeClass, want, as string, v any, native *hdf5.Datatype) {
	if f.err != nil {
		return
	}
	at, dt, err := f.openAttr(f.root, name, class, want)
	if err != nil {
		f.keep(err)
		return
	}
	defer at.Close()
	defer dt.Close()
	if err := at.Read(v, native); err != nil {
		f.keep(f.errorf("attribute "+name, "cannot be read as %s: the file is corrupt", as))
	}
}

// Exists reports whether an object lies at path (an absolute HDF5 path).
func (f *File) Exists(path string) bool { return f.err == nil && f.f.LinkExists(path) }

// Groups lists the names of the members of the group at path, each of
// which must be a group (want says what the members hold, for errors), in
// the file's order.
func (f *File) Groups(path, member, holding string) []string {
	if f.err != nil {
		return nil
	}
	if !f.f.LinkExists(path) {
		f.Errorf(path, "missing group, expected %s with one group per %s (empty when there are none)", path, member)
		return nil
	}
	g, err := f.f.OpenGroup(path)
	if err != nil {
		f.Errorf(path, "is not a group, expected a group with one subgroup per %s", member)
		return nil
	}
	defer g.Close()
	count, err := g.NumObjects()
	if err != nil {
		f.Errorf(path, "cannot list its members: the file is corrupt")
		return nil
	}
	var names []string
	for i := uint(0); i < count; i++ {
		name, err := g.ObjectNameByIndex(i)
		if err != nil {
			f.Errorf(path, "cannot read member %d: the file is corrupt", i)
			return nil
		}
		if t, err := g.ObjectTypeByIndex(i); err != nil || t != hdf5.H5G_GROUP {
			f.Errorf(path+"/"+name, "is not a group, expected a group holding %s", holding)
			return nil
		}
		names = append(names, name)
	}
	return names
}

// Elem is an element type of the arrays ReadArray reads.
type Elem interface {
	int32 | int64 | float32 | float64
}

// ReadArray reads the dataset at path, which must have exactly the element
// type T and the given shape (a -1 dimension takes any size; desc describes
// the shape in errors, e.g. "[epochs]"); both are checked, and the size
// against the file's, before anything is allocated.
func ReadArray[T Elem](f *File, path, desc string, shape ...int64) []T {
	return ReadArrayRoom[T](f, path, desc, 0, shape...)
}

// ReadArrayRoom is ReadArray with capacity for room more elements after the
// array's (rows a caller fills in place later).
func ReadArrayRoom[T Elem](f *File, path, desc string, room int, shape ...int64) []T {
	if f.err != nil {
		return nil
	}
	v, err := readArray[T](f, path, typeOf[T](), shape, desc, room)
	f.keep(err)
	return v
}

func typeOf[T Elem]() elemType {
	switch any(T(0)).(type) {
	case int32:
		return typeInt32
	case int64:
		return typeInt64
	case float32:
		return typeFloat32
	}
	return typeFloat64
}

// stringAttr reads a scalar string attribute of group g, fixed-length
// or variable-length.
func (f *File) stringAttr(g *hdf5.Group, name string) (string, error) {
	field := "attribute " + name
	a, dt, err := f.openAttr(g, name, hdf5.T_STRING, "a string")
	if err != nil {
		return "", err
	}
	defer a.Close()
	defer dt.Close()
	if (&hdf5.VarLenType{Datatype: *dt}).IsVariableStr() {
		s, err := h5scan.ReadVarString(a.ID())
		if err != nil {
			return "", f.errorf(field, "cannot be read: the file is corrupt")
		}
		return s, nil
	}
	size := dt.Size()
	if size == 0 || size > 1<<20 {
		return "", f.errorf(field, "is a string of %d bytes, expected a short string", size)
	}
	// Read into our own buffer: the binding's fixed-length path reads into
	// uninitialised memory that is not NUL-terminated.
	buf := make([]byte, size)
	if err := a.Read(&buf[0], dt); err != nil {
		return "", f.errorf(field, "cannot be read: the file is corrupt")
	}
	if i := slices.Index(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return strings.TrimRight(string(buf), " "), nil
}

// intAttr reads a scalar integer attribute of any width, converted to int64.
func (f *File) intAttr(g *hdf5.Group, name string) (int64, error) {
	a, dt, err := f.openAttr(g, name, hdf5.T_INTEGER, "an integer")
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer dt.Close()
	var v int64
	if err := a.Read(&v, hdf5.T_NATIVE_INT64); err != nil {
		return 0, f.errorf("attribute "+name, "cannot be read as an integer: the file is corrupt")
	}
	return v, nil
}

// standardLayouts are the numeric types an attribute may have: every
// writer makes these, and HDF5 converts anything else by its declared
// layout (a corrupt exponent bias turns 0 into 2^33), which other readers
// such as h5py ignore.
var standardLayouts = []*hdf5.Datatype{hdf5.T_IEEE_F32LE, hdf5.T_IEEE_F64LE,
	hdf5.T_STD_I8LE, hdf5.T_STD_I16LE, hdf5.T_STD_I32LE, hdf5.T_STD_I64LE,
	hdf5.T_STD_U8LE, hdf5.T_STD_U16LE, hdf5.T_STD_U32LE, hdf5.T_STD_U64LE}

// standardLayout reports whether dt is a string or one of standardLayouts.
func standardLayout(dt *hdf5.Datatype) bool {
	if dt.Class() == hdf5.T_STRING {
		return true
	}
	for _, t := range standardLayouts {
		if dt.Equal(t) {
			return true
		}
	}
	return false
}

// openAttr opens an attribute and checks that it holds one value of the
// wanted type class; the caller closes both results.
func (f *File) openAttr(g *hdf5.Group, name string, class hdf5.TypeClass, want string) (*hdf5.Attribute, *hdf5.Datatype, error) {
	field := "attribute " + name
	a, err := g.OpenAttribute(name)
	if err != nil {
		return nil, nil, f.errorf(field, "missing, expected %s attribute on the root group", want)
	}
	dt := &hdf5.Datatype{Identifier: a.GetType()}
	if dt.ID() < 0 {
		a.Close()
		return nil, nil, f.errorf(field, "has no readable type: the file is corrupt")
	}
	if c := dt.Class(); c != class {
		dt.Close()
		a.Close()
		return nil, nil, f.errorf(field, "has type class %s, expected %s", typeClassName(c), want)
	}
	if !standardLayout(dt) {
		size := dt.Size()
		dt.Close()
		a.Close()
		return nil, nil, f.errorf(field, "has a %s type of %d bytes with a non-standard byte order or bit layout, expected little-endian %s",
			typeClassName(class), size, strings.TrimPrefix(strings.TrimPrefix(want, "an "), "a "))
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
		return nil, nil, f.errorf(field, "holds %d values, expected a single value", points)
	}
	return a, dt, nil
}

// readArray opens the dataset at p, checks its element type and shape
// against want (a -1 dimension takes any size) and reads it into a slice
// with room more elements of capacity. The shape is checked before
// allocating, and its byte size against the file size.
func readArray[T Elem](f *File, p string, typ elemType, want []int64, wantDesc string, room int) ([]T, error) {
	d, dims, err := openArray(f, p, typ, want, wantDesc)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	total := uint64(1)
	for _, x := range dims {
		total *= uint64(x)
	}
	buf := make([]T, total, int(total)+room)
	if total > 0 {
		if err := d.Read(&buf); err != nil {
			return nil, f.errorf(p, "cannot be read: the file is truncated or corrupt, or the dataset uses an unavailable filter")
		}
	}
	return buf, f.checkDigest(p, buf)
}

// ReadRange reads the rows [lo, hi) of the first dimension of the dataset
// at path (a hyperslab: what one process of many reads), which must have
// exactly the element type T and the given shape (-1: any size); rows
// picks the range from the first dimension's actual size n. A part of an
// array cannot be held to the array's digest: the processes that read the
// parts check it together (Digest has the file's).
func ReadRange[T Elem](f *File, path, desc string, rows func(n int64) (lo, hi int64), shape ...int64) []T {
	d, dims := openFor[T](f, path, desc, shape)
	if d == nil {
		return nil
	}
	defer d.Close()
	lo, hi := rows(int64(dims[0]))
	if lo < 0 || hi < lo || hi > int64(dims[0]) {
		f.keep(f.errorf(path, "rows [%d, %d) asked of %d", lo, hi, dims[0]))
		return nil
	}
	row := int64(1)
	for _, x := range dims[1:] {
		row *= int64(x)
	}
	buf := make([]T, (hi-lo)*row)
	if len(buf) == 0 {
		return buf
	}
	fs, ms, err := rowSpaces(d, int(lo), int(hi), dims)
	if err == nil {
		err = d.ReadSubset(&buf, ms, fs)
		fs.Close()
		ms.Close()
	}
	if err != nil {
		f.keep(f.errorf(path, "cannot be read: the file is truncated or corrupt, or the dataset uses an unavailable filter"))
		return nil
	}
	return buf
}

// Digest is the digest the file holds for the dataset at path (false for
// a file without digests).
func (f *File) Digest(path string) (uint64, bool) {
	d, ok := f.digests[path]
	return d, ok
}

// Dims is the shape of the dataset at path, checked against the element
// type T and shape (-1: any size) as ReadArray checks it, without reading.
func Dims[T Elem](f *File, path, desc string, shape ...int64) []int64 {
	d, dims := openFor[T](f, path, desc, shape)
	if d == nil {
		return nil
	}
	d.Close()
	out := make([]int64, len(dims))
	for i, x := range dims {
		out[i] = int64(x)
	}
	return out
}

// openFor is openArray for element type T, keeping its error in f; nil
// after any error.
func openFor[T Elem](f *File, path, desc string, shape []int64) (*hdf5.Dataset, []uint) {
	if f.err != nil {
		return nil, nil
	}
	d, dims, err := openArray(f, path, typeOf[T](), shape, desc)
	if err != nil {
		f.keep(err)
		return nil, nil
	}
	return d, dims
}

// openArray opens the dataset at p and checks its element type and shape
// against want, and its size against the file's; the caller closes it.
func openArray(f *File, p string, typ elemType, want []int64, wantDesc string) (*hdf5.Dataset, []uint, error) {
	if !f.f.LinkExists(p) {
		return nil, nil, f.errorf(p, "missing dataset, expected %s %s", typ.name, wantDesc)
	}
	d, err := f.f.OpenDataset(p)
	if err != nil {
		return nil, nil, f.errorf(p, "is not a dataset, expected %s %s", typ.name, wantDesc)
	}
	dims, err := checkArray(f, d, p, typ, want, wantDesc)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, dims, nil
}

// checkArray checks an open dataset's element type and shape.
func checkArray(f *File, d *hdf5.Dataset, p string, typ elemType, want []int64, wantDesc string) ([]uint, error) {
	dt, err := d.Datatype()
	if err != nil {
		return nil, f.errorf(p, "has no readable type: the file is corrupt")
	}
	class, size, native := dt.Class(), dt.Size(), dt.Equal(typ.native)
	dt.Close()
	if class != typ.class || size != typ.size {
		return nil, f.errorf(p, "has element type %s of %d bytes, expected %s", typeClassName(class), size, typ.name)
	}
	if !native {
		return nil, f.errorf(p, "has a %d-byte %s type with a non-native byte order or bit layout, expected little-endian %s", size, typeClassName(class), typ.name)
	}

	sp := d.Space()
	if sp == nil {
		return nil, f.errorf(p, "has no readable dataspace: the file is corrupt")
	}
	defer sp.Close()
	rank := sp.SimpleExtentNDims()
	if rank != len(want) || sp.SimpleExtentType() != hdf5.S_SIMPLE {
		return nil, f.errorf(p, "has rank %d, expected a %d-dimensional %s array of shape %s", max(rank, 0), len(want), typ.name, wantDesc)
	}
	dims, _, err := sp.SimpleExtentDims()
	if err != nil {
		return nil, f.errorf(p, "has an unreadable shape: the file is corrupt")
	}
	total := uint64(1)
	limit := uint64(f.size) / uint64(typ.size)
	for i, w := range want {
		if w >= 0 && uint64(dims[i]) != uint64(w) {
			return nil, f.errorf(p, "has shape %v, expected %s = %v", dims, wantDesc, wantShape(want, dims))
		}
		if dims[i] != 0 && total > limit/uint64(dims[i]) {
			total = limit + 1 // would overflow: larger than the file anyway
			break
		}
		total *= uint64(dims[i])
	}
	if total > limit {
		return nil, f.errorf(p, "has shape %v, more %s values than a file of %d bytes can hold (compressed datasets are not supported)", dims, typ.name, f.size)
	}
	return dims, nil
}

// checkDigest compares the values read from the dataset at p with the
// digest written with them, where the file has one (readDigests).
func (f *File) checkDigest(p string, values any) error {
	want, ok := f.digests[p]
	if !ok {
		return nil
	}
	if got := data.Digest(values); got != want {
		return f.errorf(p, "holds values whose digest is %#x, not the %#x written with them: the file is corrupt", got, want)
	}
	return nil
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
