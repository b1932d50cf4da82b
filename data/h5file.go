package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/hdf5"
)

// The conventions every HDF5 format of this project follows (dataset,
// partition, and the training checkpoints of package ckpt): scalar root
// attributes naming the format and version, contiguous uncompressed
// little-endian arrays, atomic writes, and an *InputError naming the file and
// object for every problem found when reading.

// H5Attr is a scalar root attribute: string, int32, int64, uint64 or float64.
type H5Attr struct {
	Name string
	Val  any
}

// H5Array is a dataset: Data is []int32, []int64, []float32 or []float64
// of shape Dims; nil Data stands for an (empty) group at Path.
type H5Array struct {
	Path string // absolute, e.g. "/graph/indptr"
	Data any
	Dims []uint
}

// WriteFileAtomic writes a file through a temporary file next to path:
// write creates and fills the file named tmp, which is then fsynced and
// renamed over path, and the directory fsynced. A reader never sees a
// half-written path; on failure the temporary file is removed.
func WriteFileAtomic(path string, write func(tmp string) error) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	err := write(tmp)
	if err == nil {
		err = syncPath(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncPath(filepath.Dir(path))
	return nil
}

// TestHookTempCreated, when set (by tests only), runs in WriteH5File once
// the temporary file exists and before anything is written into it.
var TestHookTempCreated func(tmp string)

// WriteH5File writes root attributes and datasets to a new HDF5 file at
// path, atomically (WriteFileAtomic).
func WriteH5File(path string, attrs []H5Attr, arrays []H5Array) error {
	return WriteFileAtomic(path, func(tmp string) error {
		// Creating the file first gives a plain OS error (permissions, a
		// missing directory) rather than HDF5's.
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		f.Close()
		if TestHookTempCreated != nil {
			TestHookTempCreated(tmp)
		}
		return withHDF5(func() error { return writeH5Content(tmp, attrs, arrays) })
	})
}

// writeH5Content writes root attributes and datasets (creating their
// groups) to a new HDF5 file, closing everything and keeping the first
// close error.
func writeH5Content(name string, attrs []H5Attr, arrays []H5Array) (err error) {
	f, err := hdf5.CreateFile(name, hdf5.F_ACC_TRUNC)
	if err != nil {
		return fmt.Errorf("create HDF5 file: %w", err)
	}
	var c h5Closer
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
		base := filepath.Base(a.Path)
		switch d := a.Data.(type) {
		case []int32:
			err = writeArray(g, base, h5Int32, d, a.Dims)
		case []int64:
			err = writeArray(g, base, h5Int64, d, a.Dims)
		case []float32:
			err = writeArray(g, base, h5Float32, d, a.Dims)
		case []float64:
			err = writeArray(g, base, h5Float64, d, a.Dims)
		default:
			err = fmt.Errorf("unsupported data %T", a.Data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
	}
	return nil
}

func vec[T any](path string, data []T) H5Array {
	return H5Array{path, data, []uint{uint(len(data))}}
}

// H5File is an HDF5 file open for reading in ReadH5File. Its getters keep
// the first error (Err) and return zero values after it, so that a reader
// reads a run of fields and checks once; every error is an *InputError
// naming the file and the HDF5 object.
type H5File struct{ a attrReader }

// ReadH5File opens path, checks that its format and version attributes are
// format and version, and runs fn on it. fn runs on one locked OS thread and
// must not use f from another goroutine.
func ReadH5File(path, format string, version int64, fn func(f *H5File) error) error {
	return readH5File(path, format, version, "no such file", func(r *h5Reader, root *hdf5.Group) error {
		f := &H5File{attrReader{r: r, g: root}}
		if err := fn(f); err != nil {
			return err
		}
		return f.Err()
	})
}

// Err is the first error of f's getters.
func (f *H5File) Err() error { return f.a.err }

// Errorf records (unless an error came first) and returns an *InputError
// about field of this file.
func (f *H5File) Errorf(field, format string, args ...any) error {
	if f.a.err == nil {
		f.a.err = f.a.r.errorf(field, format, args...)
	}
	return f.a.err
}

// Int reads an integer root attribute, which must lie in [lo, hi].
func (f *H5File) Int(name string, lo, hi int64) int64 { return f.a.int(name, lo, hi) }

// Uint64 reads an unsigned integer root attribute.
func (f *H5File) Uint64(name string) uint64 { return f.a.u64(name) }

// String reads a string root attribute.
func (f *H5File) String(name string) string { return f.a.str(name) }

// Float64 reads a floating-point root attribute.
func (f *H5File) Float64(name string) float64 {
	a := &f.a
	if a.err != nil {
		return 0
	}
	at, dt, err := a.r.openAttr(a.g, name, hdf5.T_FLOAT, "a floating-point")
	if err != nil {
		a.err = err
		return 0
	}
	defer at.Close()
	defer dt.Close()
	var v float64
	if err := at.Read(&v, hdf5.T_NATIVE_DOUBLE); err != nil {
		a.err = a.r.errorf("attribute "+name, "cannot be read as a float: the file is corrupt")
	}
	return v
}

// H5Elem is an element type of the arrays ReadH5Array reads.
type H5Elem interface {
	int32 | int64 | float32 | float64
}

// ReadH5Array reads the dataset at path, which must have exactly the element
// type T and the given shape (described as desc in errors, e.g. "[epochs]");
// both are checked, and the size against the file's, before anything is
// allocated.
func ReadH5Array[T H5Elem](f *H5File, path, desc string, shape ...int64) []T {
	if f.a.err != nil {
		return nil
	}
	var typ h5Type
	switch any(T(0)).(type) {
	case int32:
		typ = h5Int32
	case int64:
		typ = h5Int64
	case float32:
		typ = h5Float32
	case float64:
		typ = h5Float64
	}
	v, err := readArray[T](f.a.r, path, typ, shape, desc)
	f.a.err = err
	return v
}

// H5FileFormat returns the format attribute of the HDF5 file at path, ""
// when it is no HDF5 file or has none: what a tool reads to tell the
// formats apart.
func H5FileFormat(path string) string {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	format := ""
	withHDF5(func() error {
		if !hdf5.IsHDF5(path) {
			return nil
		}
		f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
		if err != nil {
			return nil
		}
		defer f.Close()
		root, err := f.OpenGroup("/")
		if err != nil {
			return nil
		}
		defer root.Close()
		format, _ = (&h5Reader{path: path, f: f}).stringAttr(root, "format")
		return nil
	})
	return format
}

// readH5File opens path, checks its format and version attributes and runs
// fn on the root group, all on one HDF5 thread.
func readH5File(path, format string, version int64, missingHint string, fn func(r *h5Reader, root *hdf5.Group) error) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return inputErrorf(path, 0, "", "missing: %s", missingHint)
	}
	if err != nil {
		return inputErrorf(path, 0, "", "cannot open: %v", err)
	}
	if st.IsDir() {
		return inputErrorf(path, 0, "", "is a directory, expected a %s file", format)
	}
	if !st.Mode().IsRegular() {
		// A FIFO or device would block or never end the read.
		return inputErrorf(path, 0, "", "is not a regular file, expected a %s file", format)
	}
	r := &h5Reader{path: path, size: st.Size()}
	return withHDF5(func() error {
		if !hdf5.IsHDF5(path) {
			return r.errorf("", "not an HDF5 file (no HDF5 signature), expected a %s file", format)
		}
		r.f, err = hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
		if err != nil {
			return r.errorf("", "has an HDF5 signature but cannot be opened: the file is truncated or corrupt")
		}
		defer r.f.Close()
		root, err := r.f.OpenGroup("/")
		if err != nil {
			return r.errorf("/", "cannot open the root group: the file is corrupt")
		}
		defer root.Close()
		got, err := r.stringAttr(root, "format")
		if err != nil {
			return err
		}
		if got != format {
			return r.errorf("attribute format", "is %q, expected %q", got, format)
		}
		v, err := r.intAttr(root, "version")
		if err != nil {
			return err
		}
		if v != version {
			return r.errorf("attribute version", "is %d: unsupported version, expected %d", v, version)
		}
		return fn(r, root)
	})
}

// attrReader reads root attributes, keeping the first error.
type attrReader struct {
	r   *h5Reader
	g   *hdf5.Group
	err error
}

func (a *attrReader) int(name string, lo, hi int64) int64 {
	if a.err != nil {
		return 0
	}
	v, err := a.r.intAttr(a.g, name)
	if err == nil && (v < lo || v > hi) {
		err = a.r.errorf("attribute "+name, "is %d, expected a value in [%d, %d]", v, lo, hi)
	}
	a.err = err
	return v
}

func (a *attrReader) str(name string) string {
	if a.err != nil {
		return ""
	}
	v, err := a.r.stringAttr(a.g, name)
	a.err = err
	return v
}

func (a *attrReader) u64(name string) uint64 {
	if a.err != nil {
		return 0
	}
	at, dt, err := a.r.openAttr(a.g, name, hdf5.T_INTEGER, "an integer")
	if err != nil {
		a.err = err
		return 0
	}
	defer at.Close()
	defer dt.Close()
	var v uint64
	if err := at.Read(&v, hdf5.T_NATIVE_UINT64); err != nil {
		a.err = a.r.errorf("attribute "+name, "cannot be read as an unsigned integer: the file is corrupt")
	}
	return v
}
