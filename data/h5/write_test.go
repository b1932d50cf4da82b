package h5

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/hdf5"
)

// TestSlabbedWrite: arrays larger than one slab are written in several
// hyperslabs and read back whole.
func TestSlabbedWrite(t *testing.T) {
	defer func(s int) { slabBytes = s }(slabBytes)
	slabBytes = 100 // 25 int32s, 3 rows of 7 float32s, 12 int64s per slab
	ints := make([]int32, 103)
	rows := make([]float32, 103*7)
	longs := make([]int64, 50)
	for i := range ints {
		ints[i] = int32(i*7 - 3)
	}
	for i := range rows {
		rows[i] = float32(i) / 3
	}
	for i := range longs {
		longs[i] = int64(i) << 40
	}
	path := filepath.Join(t.TempDir(), "a.h5")
	attrs := []Attr{{Name: "format", Val: "slabs"}, {Name: "version", Val: int32(1)}}
	arrays := []Array{Vec("/ints", ints), {Path: "/g/rows", Data: rows, Dims: []uint{103, 7}}, Vec("/longs", longs)}
	if err := WriteFile(path, attrs, arrays); err != nil {
		t.Fatal(err)
	}
	err := Read(path, "slabs", 1, "no such file", func(f *File) error {
		if got := ReadArray[int32](f, "/ints", "[103]", 103); !slices.Equal(got, ints) {
			t.Errorf("ints read back as %v", got)
		}
		if got := ReadArray[float32](f, "/g/rows", "[103, 7]", 103, 7); !slices.Equal(got, rows) {
			t.Errorf("rows read back differ")
		}
		if got := ReadArray[int64](f, "/longs", "[50]", 50); !slices.Equal(got, longs) {
			t.Errorf("longs read back as %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDigest: the file holds every dataset's digest; a changed value (a
// flipped byte in the file) is an error naming the dataset, and a file
// without digests (another writer's, an older file's) reads.
func TestDigest(t *testing.T) {
	// Values whose bytes are easy to find in the file.
	marked := []float64{math.Float64frombits(0x3ff1_2345_6789_abcd), 2, 3}
	ints := []int32{7, -1, 1 << 30}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.h5")
	attrs := []Attr{{Name: "format", Val: "digest"}, {Name: "version", Val: int32(1)}}
	arrays := []Array{Vec("/marked", marked), Vec("/ints", ints), Vec("/empty", []float32{})}
	if err := WriteFile(good, attrs, arrays); err != nil {
		t.Fatal(err)
	}
	read := func(path string) error {
		return Read(path, "digest", 1, "no such file", func(f *File) error {
			ReadArray[float64](f, "/marked", "[3]", 3)
			ReadArray[int32](f, "/ints", "[3]", 3)
			ReadArray[float32](f, "/empty", "[0]", 0)
			return nil
		})
	}
	if err := read(good); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	var mark [8]byte
	binary.LittleEndian.PutUint64(mark[:], math.Float64bits(marked[0]))
	at := bytes.Index(b, mark[:])
	if at < 0 || bytes.Index(b[at+1:], mark[:]) >= 0 {
		t.Fatalf("the marked value is not in the file once")
	}
	b[at] ^= 1 // the lowest mantissa bit: a plausible value still
	bad := filepath.Join(dir, "bad.h5")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = read(bad)
	if err == nil || !strings.Contains(err.Error(), "/marked: holds values whose digest is") || !strings.Contains(err.Error(), "the file is corrupt") {
		t.Errorf("a changed value: got %v, want an error naming /marked", err)
	}
	// The same arrays written without digests, as h5py would.
	plain := filepath.Join(dir, "plain.h5")
	err = withHDF5(func() error {
		f, err := hdf5.CreateFile(plain, hdf5.F_ACC_TRUNC)
		if err != nil {
			return err
		}
		defer f.Close()
		root, err := f.OpenGroup("/")
		if err != nil {
			return err
		}
		defer root.Close()
		for _, a := range attrs {
			if err := writeAttr(root, a.Name, a.Val); err != nil {
				return err
			}
		}
		for _, a := range arrays {
			sp, err := hdf5.CreateSimpleDataspace(a.Dims, nil)
			if err != nil {
				return err
			}
			typ := map[string]*hdf5.Datatype{"/marked": hdf5.T_NATIVE_DOUBLE, "/ints": hdf5.T_NATIVE_INT32, "/empty": hdf5.T_NATIVE_FLOAT}[a.Path]
			d, err := root.CreateDataset(a.Path[1:], typ, sp)
			sp.Close()
			if err != nil {
				return err
			}
			switch v := a.Data.(type) {
			case []float64:
				err = d.Write(&v)
			case []int32:
				err = d.Write(&v)
			}
			d.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := read(plain); err != nil {
		t.Errorf("a file without digests: %v", err)
	}
}

// TestWriterMatchesCreate: a file whose arrays arrive in pieces (Writer)
// holds what Create writes from whole arrays, digests included, and its
// rows read back by ranges (ReadRange).
func TestWriterMatchesCreate(t *testing.T) {
	rows := make([]float32, 103*7)
	for i := range rows {
		rows[i] = float32(i) / 3
	}
	ints := []int32{5, -1, 7}
	dir := t.TempDir()
	attrs := []Attr{{Name: "format", Val: "pieces"}, {Name: "version", Val: int32(1)}}
	whole := filepath.Join(dir, "whole.h5")
	if err := Create(whole, attrs, []Array{{Path: "/g/rows", Data: rows, Dims: []uint{103, 7}}, Vec("/ints", ints)}); err != nil {
		t.Fatal(err)
	}
	pieces := filepath.Join(dir, "pieces.h5")
	w, err := NewWriter(pieces, attrs)
	if err != nil {
		t.Fatal(err)
	}
	w.Begin("/g/rows", []float32(nil), []uint{103, 7})
	w.Array(Vec("/ints", ints))
	for lo := 0; lo < 103; lo += 10 {
		w.Rows("/g/rows", rows[lo*7:min(103, lo+10)*7])
	}
	w.End("/g/rows")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(path string) (string, []uint64, []float32) {
		var paths string
		var digests []uint64
		var got []float32
		err := Read(path, "pieces", 1, "no such file", func(f *File) error {
			paths = f.String(DigestPathsAttr)
			for _, p := range []string{"/g/rows", "/ints"} {
				d, ok := f.Digest(p)
				if !ok {
					t.Fatalf("%s: no digest of %s", path, p)
				}
				digests = append(digests, d)
			}
			got = ReadRange[float32](f, "/g/rows", "[n, 7]", func(n int64) (int64, int64) { return 40, 103 }, -1, 7)
			ReadArray[int32](f, "/ints", "[3]", 3) // checks its digest
			return f.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return paths, digests, got
	}
	p1, d1, r1 := read(whole)
	p2, d2, r2 := read(pieces)
	if p1 != p2 || !slices.Equal(d1, d2) {
		t.Errorf("Writer: digests %q %x, Create %q %x", p2, d2, p1, d1)
	}
	if !slices.Equal(r1, rows[40*7:]) || !slices.Equal(r2, r1) {
		t.Errorf("ReadRange gave other rows")
	}
}
