package datafile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
	"gonum.org/v1/hdf5"
)

func TestH5RoundTrip(t *testing.T) {
	cases := []struct {
		name             string
		n, e, f, classes int
		splits           []string
	}{
		{"features-3splits", 50, 300, 7, 4, []string{"random", "scaffold", "time"}},
		{"no-features", 40, 200, 0, 3, []string{"a", "b"}},
		{"no-edges-no-splits", 5, 0, 1, 1, nil},
		{"single-node", 1, 1, 3, 2, nil},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := datatest.RandomDataset(t, uint64(k+1), tc.n, tc.e, tc.f, tc.classes, tc.splits...)
			dir := t.TempDir()
			path := filepath.Join(dir, "d.h5")
			if err := Write(path, ds); err != nil {
				t.Fatal(err)
			}
			if names := datatest.DirNames(t, dir); !slices.Equal(names, []string{"d.h5"}) {
				t.Errorf("directory holds %v, expected only d.h5", names)
			}
			got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := datatest.SameDataset(ds, got); err != nil {
				t.Fatal(err)
			}
			if tc.f == 0 && got.Features != nil {
				t.Errorf("F = 0 read back %d feature values, expected nil", len(got.Features))
			}
		})
	}
}

// A second write replaces the file whole, and unsorted split ids are stored
// sorted.
func TestH5Overwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.h5")
	if err := Write(path, datatest.RandomDataset(t, 1, 60, 100, 3, 2, "x", "y")); err != nil {
		t.Fatal(err)
	}
	ds := datatest.RandomDataset(t, 2, 30, 50, 0, 5, "z")
	slices.Reverse(ds.Splits["z"].Train)
	if err := Write(path, ds); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ds.Splits["z"].Train)
	if err := datatest.SameDataset(ds, got); err != nil {
		t.Fatal(err)
	}
}

func TestH5WriteFailureLeavesNothing(t *testing.T) {
	ds := datatest.RandomDataset(t, 3, 20, 40, 2, 3, "s")
	dir := t.TempDir()

	// A directory that does not exist.
	if err := Write(filepath.Join(dir, "missing", "d.h5"), ds); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	// A dataset that fails validation is refused before anything is created.
	bad := datatest.RandomDataset(t, 3, 20, 40, 2, 3, "s")
	bad.Labels[4] = 3
	err := Write(filepath.Join(dir, "bad.h5"), bad)
	var ie *data.InputError
	if !errors.As(err, &ie) || ie.Field != "labels" {
		t.Errorf("invalid dataset: got %v, expected an data.InputError on labels", err)
	}
	// The HDF5 write succeeds but the rename fails (the target is a
	// non-empty directory): the temporary file must go.
	target := filepath.Join(dir, "taken.h5")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, ds); err == nil {
		t.Error("write over a directory succeeded")
	}
	if names := datatest.DirNames(t, dir); !slices.Equal(names, []string{"taken.h5"}) {
		t.Errorf("after failed writes the directory holds %v, expected only taken.h5", names)
	}
}

// h5Fixture writes a valid generated dataset and returns its path.
func h5Fixture(t *testing.T) (string, *data.Dataset) {
	t.Helper()
	ds, err := gen.Generate(gen.Options{Nodes: 3000, Classes: 5, AvgDegree: 8, Homophily: 0.7, Features: 16, SNR: 1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "csbm.h5")
	if err := Write(path, ds); err != nil {
		t.Fatal(err)
	}
	return path, ds
}

func TestH5DumpReadsFile(t *testing.T) {
	h5dump, err := exec.LookPath("h5dump")
	if err != nil {
		t.Skip("h5dump not installed")
	}
	path, ds := h5Fixture(t)
	out, err := exec.Command(h5dump, "-H", path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5dump -H: %v\n%s", err, out)
	}
	for _, want := range []string{
		`DATASET "indices"`, "H5T_STD_I32LE", "H5T_STD_I64LE", "H5T_IEEE_F32LE",
		fmt.Sprintf("( %d, %d )", ds.Graph.N, ds.NumFeatures),
		fmt.Sprintf("( %d )", ds.Graph.NumEdges()),
		`ATTRIBUTE "format"`, `GROUP "random"`,
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("h5dump -H output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(h5dump, "-a", "/format", path).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"gnn-spmd-dataset"`)) {
		t.Errorf("h5dump -a /format: %v\n%s", err, out)
	}
}

// le returns the little-endian bytes of a slice, as numpy's tobytes() gives
// them for <i4 / <f4 arrays.
func leSHA(v any) string {
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
		panic(err)
	}
	s := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(s[:])
}

func TestH5PythonReadsFile(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import h5py, numpy").Run(); err != nil {
		t.Skip("no /usr/bin/python3 with h5py and numpy")
	}
	path, ds := h5Fixture(t)
	script := `
import sys, hashlib, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    a = f.attrs
    print(a["format"], int(a["version"]), a["name"], int(a["num_nodes"]), int(a["num_edges"]),
          int(a["num_features"]), int(a["num_classes"]))
    x = f["node/features"][...]
    ind = f["graph/indices"][...]
    ptr = f["graph/indptr"][...]
    assert x.dtype == np.float32 and ind.dtype == np.int32 and ptr.dtype == np.int64
    assert x.shape == (a["num_nodes"], a["num_features"]) and ptr[-1] == ind.shape[0]
    print(hashlib.sha256(x.tobytes()).hexdigest())
    print(hashlib.sha256(ind.tobytes()).hexdigest())
    print(hashlib.sha256(f["splits/random/train"][...].tobytes()).hexdigest())
`
	out, err := exec.Command(python, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	want := fmt.Sprintf("gnn-spmd-dataset 1 %s %d %d %d %d\n%s\n%s\n%s\n", ds.Name, ds.Graph.N, ds.Graph.NumEdges(),
		ds.NumFeatures, ds.NumClasses, leSHA(ds.Features), leSHA(ds.Graph.Indices), leSHA(ds.Splits["random"].Train))
	if string(out) != want {
		t.Errorf("h5py read\n%s\nexpected\n%s", out, want)
	}
}

// A file written by h5py following docs/FORMATS.md loads, with UTF-8
// variable-length and fixed-length (numpy bytes) string attributes alike.
func TestH5ReadsPythonWrittenFile(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import h5py, numpy").Run(); err != nil {
		t.Skip("no /usr/bin/python3 with h5py and numpy")
	}
	script := `
import sys, h5py, numpy as np
n = 6
src = np.array([1, 2, 0, 3, 4, 5], np.int32)
dst = np.array([0, 0, 1, 2, 3, 4], np.int32)
order = np.argsort(dst, kind="stable")
indptr = np.zeros(n + 1, np.int64)
np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "gnn-spmd-dataset"
    f.attrs["version"] = np.int32(1)
    f.attrs["name"] = np.bytes_(b"tiny")
    f.attrs["num_nodes"] = n
    f.attrs["num_edges"] = len(src)
    f.attrs["num_features"] = np.int32(2)
    f.attrs["num_classes"] = np.int32(2)
    f["graph/indptr"] = indptr
    f["graph/indices"] = src[order]
    f["node/features"] = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    f["node/labels"] = np.array([0, 1, 0, 1, -1, 0], np.int32)
    s = f.create_group("splits/random")
    s["train"] = np.array([0, 1], np.int32)
    s["valid"] = np.array([3, 2], np.int32)
    s["test"] = np.array([4, 5], np.int32)
`
	path := filepath.Join(t.TempDir(), "py.h5")
	if out, err := exec.Command(python, "-c", script, path).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	ds, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "tiny" || ds.Graph.N != 6 || ds.Graph.NumEdges() != 6 || ds.NumFeatures != 2 || ds.Features[11] != 11 {
		t.Errorf("read %+v", ds)
	}
	if got := ds.Graph.Indices[ds.Graph.Indptr[0]:ds.Graph.Indptr[1]]; !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("row 0 sources %v, expected [1 2]", got)
	}
	if v := ds.Splits["random"].Valid; !slices.Equal(v, []int32{2, 3}) {
		t.Errorf("valid %v, expected the unsorted ids sorted", v)
	}
}

// rawH5 describes an HDF5 file for the malformed-file tests: the valid layout
// of a dataset, which a test then edits before writing it with the binding.
type rawH5 struct {
	attrs  []rawAttr
	arrays []rawArray
}

type rawAttr struct {
	name string
	val  any // string, int32, int64 or float64
}

type rawArray struct {
	path  string
	dtype *hdf5.Datatype // file and memory type
	dims  []uint
	data  any // pointer to a slice matching dtype
}

func rawFrom(ds *data.Dataset) *rawH5 {
	g := ds.Graph
	r := &rawH5{attrs: []rawAttr{
		{"format", "gnn-spmd-dataset"}, {"version", int32(1)}, {"name", ds.Name},
		{"num_nodes", int64(g.N)}, {"num_edges", g.NumEdges()},
		{"num_features", int32(ds.NumFeatures)}, {"num_classes", int32(ds.NumClasses)},
	}}
	add := func(p string, dt *hdf5.Datatype, data any, dims ...uint) {
		r.arrays = append(r.arrays, rawArray{p, dt, dims, data})
	}
	add("/graph/indptr", hdf5.T_NATIVE_INT64, &g.Indptr, uint(g.N+1))
	add("/graph/indices", hdf5.T_NATIVE_INT32, &g.Indices, uint(len(g.Indices)))
	if ds.NumFeatures > 0 {
		add("/node/features", hdf5.T_NATIVE_FLOAT, &ds.Features, uint(g.N), uint(ds.NumFeatures))
	}
	add("/node/labels", hdf5.T_NATIVE_INT32, &ds.Labels, uint(g.N))
	for _, name := range ds.SplitNames() {
		s := ds.Splits[name]
		add("/splits/"+name+"/train", hdf5.T_NATIVE_INT32, &s.Train, uint(len(s.Train)))
		add("/splits/"+name+"/valid", hdf5.T_NATIVE_INT32, &s.Valid, uint(len(s.Valid)))
		add("/splits/"+name+"/test", hdf5.T_NATIVE_INT32, &s.Test, uint(len(s.Test)))
	}
	return r
}

func (r *rawH5) setAttr(name string, val any) {
	for i := range r.attrs {
		if r.attrs[i].name == name {
			r.attrs[i].val = val
			return
		}
	}
	r.attrs = append(r.attrs, rawAttr{name, val})
}

func (r *rawH5) dropAttr(name string) {
	r.attrs = slices.DeleteFunc(r.attrs, func(a rawAttr) bool { return a.name == name })
}

func (r *rawH5) drop(p string) {
	r.arrays = slices.DeleteFunc(r.arrays, func(a rawArray) bool { return a.path == p })
}

func (r *rawH5) set(p string, dt *hdf5.Datatype, data any, dims ...uint) {
	r.drop(p)
	r.arrays = append(r.arrays, rawArray{p, dt, dims, data})
}

func (r *rawH5) write(t *testing.T, path string) {
	t.Helper()
	f, err := hdf5.CreateFile(path, hdf5.F_ACC_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := f.OpenGroup("/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	scalar, err := hdf5.CreateDataspace(hdf5.S_SCALAR)
	if err != nil {
		t.Fatal(err)
	}
	defer scalar.Close()
	for _, a := range r.attrs {
		dt := map[string]*hdf5.Datatype{"string": hdf5.T_GO_STRING, "int32": hdf5.T_NATIVE_INT32,
			"int64": hdf5.T_NATIVE_INT64, "float64": hdf5.T_NATIVE_DOUBLE}[fmt.Sprintf("%T", a.val)]
		at, err := root.CreateAttribute(a.name, dt, scalar)
		if err != nil {
			t.Fatal(err)
		}
		switch v := a.val.(type) {
		case string:
			err = at.Write(&v, dt)
		case int32:
			err = at.Write(&v, dt)
		case int64:
			err = at.Write(&v, dt)
		case float64:
			err = at.Write(&v, dt)
		}
		if err != nil {
			t.Fatal(err)
		}
		at.Close()
	}
	for _, a := range r.arrays {
		// Create the parent groups as needed.
		parts := strings.Split(strings.Trim(a.path, "/"), "/")
		for i := 1; i < len(parts); i++ {
			if p := "/" + strings.Join(parts[:i], "/"); !f.LinkExists(p) {
				g, err := f.CreateGroup(p)
				if err != nil {
					t.Fatal(err)
				}
				g.Close()
			}
		}
		sp, err := hdf5.CreateSimpleDataspace(a.dims, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.CreateDataset(a.path, a.dtype, sp)
		if err != nil {
			t.Fatalf("create %s: %v", a.path, err)
		}
		n := uint(1)
		for _, x := range a.dims {
			n *= x
		}
		if n > 0 {
			if err := d.Write(a.data); err != nil {
				t.Fatalf("write %s: %v", a.path, err)
			}
		}
		d.Close()
		sp.Close()
	}
}

func TestH5MalformedFiles(t *testing.T) {
	base := datatest.RandomDataset(t, 5, 40, 150, 3, 4, "random")
	n, e := base.Graph.N, len(base.Graph.Indices)
	validPath := filepath.Join(t.TempDir(), "valid.h5")
	if err := Write(validPath, base); err != nil {
		t.Fatal(err)
	}
	validBytes, err := os.ReadFile(validPath)
	if err != nil {
		t.Fatal(err)
	}

	// Each case edits a copy of the valid layout (or writes raw bytes) and
	// names the field and a phrase the error must contain.
	cases := []struct {
		name   string
		edit   func(r *rawH5)
		bytes  []byte // when set, the file holds these bytes instead
		field  string
		phrase string
	}{
		{name: "valid layout via binding", edit: func(r *rawH5) {}},
		{name: "missing labels", edit: func(r *rawH5) { r.drop("/node/labels") },
			field: "/node/labels", phrase: "missing dataset"},
		{name: "missing features", edit: func(r *rawH5) { r.drop("/node/features") },
			field: "/node/features", phrase: "missing dataset, expected float32 [num_nodes, num_features]"},
		{name: "indices wrong length", edit: func(r *rawH5) {
			short := base.Graph.Indices[:e-1]
			r.set("/graph/indices", hdf5.T_NATIVE_INT32, &short, uint(e-1))
		}, field: "/graph/indices", phrase: fmt.Sprintf("has shape [%d], expected [num_edges] = [%d]", e-1, e)},
		{name: "indptr wrong length", edit: func(r *rawH5) {
			short := base.Graph.Indptr[:n]
			r.set("/graph/indptr", hdf5.T_NATIVE_INT64, &short, uint(n))
		}, field: "/graph/indptr", phrase: fmt.Sprintf("expected [num_nodes+1] = [%d]", n+1)},
		{name: "int64 indices", edit: func(r *rawH5) {
			wide := make([]int64, e)
			r.set("/graph/indices", hdf5.T_NATIVE_INT64, &wide, uint(e))
		}, field: "/graph/indices", phrase: "integer of 8 bytes, expected int32"},
		{name: "int32 indptr", edit: func(r *rawH5) {
			narrow := make([]int32, n+1)
			r.set("/graph/indptr", hdf5.T_NATIVE_INT32, &narrow, uint(n+1))
		}, field: "/graph/indptr", phrase: "integer of 4 bytes, expected int64"},
		{name: "float64 features", edit: func(r *rawH5) {
			x := make([]float64, len(base.Features))
			r.set("/node/features", hdf5.T_NATIVE_DOUBLE, &x, uint(n), 3)
		}, field: "/node/features", phrase: "float of 8 bytes, expected float32"},
		{name: "features wrong shape", edit: func(r *rawH5) {
			r.set("/node/features", hdf5.T_NATIVE_FLOAT, &base.Features, 3, uint(n))
		}, field: "/node/features", phrase: fmt.Sprintf("has shape [3 %d], expected [num_nodes, num_features] = [%d 3]", n, n)},
		{name: "features rank 1", edit: func(r *rawH5) {
			r.set("/node/features", hdf5.T_NATIVE_FLOAT, &base.Features, uint(3*n))
		}, field: "/node/features", phrase: "has rank 1, expected a 2-dimensional float32 array"},
		{name: "big-endian labels", edit: func(r *rawH5) {
			r.set("/node/labels", hdf5.T_STD_I32BE, &base.Labels, uint(n))
		}, field: "/node/labels", phrase: "non-native byte order"},
		{name: "labels >= num_classes", edit: func(r *rawH5) {
			l := slices.Clone(base.Labels)
			l[7] = 4
			r.set("/node/labels", hdf5.T_NATIVE_INT32, &l, uint(n))
		}, field: "/node/labels", phrase: "node 7 has label 4, expected -1 or a class in [0, 4)"},
		{name: "indices out of range", edit: func(r *rawH5) {
			ind := slices.Clone(base.Graph.Indices)
			ind[3] = int32(n)
			r.set("/graph/indices", hdf5.T_NATIVE_INT32, &ind, uint(e))
		}, field: "/graph/indices", phrase: "entry 3"},
		{name: "NaN feature", edit: func(r *rawH5) {
			x := slices.Clone(base.Features)
			x[5] = float32(math.NaN())
			r.set("/node/features", hdf5.T_NATIVE_FLOAT, &x, uint(n), 3)
		}, field: "/node/features", phrase: "expected a finite number"},
		{name: "overlapping splits", edit: func(r *rawH5) {
			s := base.Splits["random"]
			v := append(slices.Clone(s.Valid), s.Train[0])
			slices.Sort(v)
			r.set("/splits/random/valid", hdf5.T_NATIVE_INT32, &v, uint(len(v)))
		}, field: "/splits/random/valid", phrase: "also in train"},
		{name: "missing splits group", edit: func(r *rawH5) {
			r.arrays = slices.DeleteFunc(r.arrays, func(a rawArray) bool { return strings.HasPrefix(a.path, "/splits/") })
		}, field: "/splits", phrase: "missing group"},
		{name: "split member not a group", edit: func(r *rawH5) {
			r.set("/splits/odd", hdf5.T_NATIVE_INT32, &base.Labels, uint(n))
		}, field: "/splits/odd", phrase: "is not a group"},
		{name: "split without test", edit: func(r *rawH5) { r.drop("/splits/random/test") },
			field: "/splits/random/test", phrase: "missing dataset"},
		{name: "missing format", edit: func(r *rawH5) { r.dropAttr("format") },
			field: "attribute format", phrase: "missing"},
		{name: "wrong format", edit: func(r *rawH5) { r.setAttr("format", "something-else") },
			field: "attribute format", phrase: `is "something-else", expected "gnn-spmd-dataset"`},
		{name: "format not a string", edit: func(r *rawH5) { r.setAttr("format", int32(1)) },
			field: "attribute format", phrase: "has type class integer, expected a string"},
		{name: "unsupported version", edit: func(r *rawH5) { r.setAttr("version", int32(2)) },
			field: "attribute version", phrase: "unsupported version"},
		{name: "float version", edit: func(r *rawH5) { r.setAttr("version", 1.0) },
			field: "attribute version", phrase: "has type class float, expected an integer"},
		{name: "missing num_classes", edit: func(r *rawH5) { r.dropAttr("num_classes") },
			field: "attribute num_classes", phrase: "missing"},
		{name: "absurd num_nodes", edit: func(r *rawH5) { r.setAttr("num_nodes", int64(1e15)) },
			field: "attribute num_nodes", phrase: "is 1000000000000000, expected a node count in [1, 2147483647]"},
		{name: "num_nodes beyond the file", edit: func(r *rawH5) { r.setAttr("num_nodes", int64(2e9)) },
			field: "attribute num_nodes", phrase: "cannot hold"},
		{name: "absurd num_edges", edit: func(r *rawH5) { r.setAttr("num_edges", int64(1e12)) },
			field: "attribute num_edges", phrase: "is 1000000000000"},
		{name: "absurd num_features", edit: func(r *rawH5) { r.setAttr("num_features", int32(1e9)) },
			field: "attribute num_features", phrase: "is 1000000000"},
		{name: "negative num_classes", edit: func(r *rawH5) { r.setAttr("num_classes", int32(-3)) },
			field: "attribute num_classes", phrase: "is -3"},
		{name: "truncated file", bytes: validBytes[:len(validBytes)/2],
			phrase: "truncated or corrupt"},
		{name: "text file", bytes: []byte("node,label\n0,1\n1,0\n"),
			phrase: "not an HDF5 file"},
		{name: "empty file", bytes: []byte{}, phrase: "not an HDF5 file"},
	}
	dir := t.TempDir()
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("case%02d.h5", k))
			if tc.bytes != nil {
				if err := os.WriteFile(path, tc.bytes, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				r := rawFrom(base)
				tc.edit(r)
				r.write(t, path)
			}
			ds, err := Read(path)
			if tc.phrase == "" {
				if err != nil {
					t.Fatalf("valid file: %v", err)
				}
				if err := datatest.SameDataset(base, ds); err != nil {
					t.Fatal(err)
				}
				return
			}
			var ie *data.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v (%T), expected an *data.InputError", err, err)
			}
			msg := err.Error()
			if ie.File != path || ie.Field != tc.field || !strings.Contains(msg, tc.phrase) {
				t.Errorf("got File=%q Field=%q %q\nexpected File=%q Field=%q and %q", ie.File, ie.Field, msg, path, tc.field, tc.phrase)
			}
			if !strings.HasPrefix(msg, path+": ") || (tc.field != "" && !strings.Contains(msg, ": "+tc.field+": ")) {
				t.Errorf("message %q does not name the file and field", msg)
			}
		})
	}
}

// TestH5HeapReferences edits the global heap references of a valid file's
// string attributes (length, collection address, object index: 16 bytes
// per value) and its heap collection. libhdf5 1.10 follows such a reference
// unchecked and reads out of bounds, crashing or not depending on its heap
// layout; Read must refuse each edit with one line, the same every time.
func TestH5HeapReferences(t *testing.T) {
	path, _ := h5Fixture(t)
	valid, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gcol := bytes.Index(valid, []byte("GCOL\x01"))
	if gcol < 0 {
		t.Fatal("the fixture has no global heap collection")
	}
	// The references: a length, then the collection's address, then an index.
	var refs []int
	addr := binary.LittleEndian.AppendUint64(nil, uint64(gcol))
	for i := 4; i+12 <= len(valid); i++ {
		if bytes.Equal(valid[i:i+8], addr) && binary.LittleEndian.Uint32(valid[i+8:]) > 0 && binary.LittleEndian.Uint32(valid[i+8:]) < 16 {
			refs = append(refs, i-4)
		}
	}
	if len(refs) < 2 { // format and name at least
		t.Fatalf("found %d heap references, expected one per string attribute", len(refs))
	}
	ref := refs[len(refs)-1]
	u32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	u64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
	}
	length := binary.LittleEndian.Uint32(valid[ref:])
	first := gcol + 16 // the collection's first object: index, references, reserved, size
	cases := []struct {
		name, phrase string
		edit         func([]byte)
	}{
		{"index past the collection's table", "names no object of its global heap", u32(ref+12, 0x1202)},
		{"index of no object", "names no object of its global heap", u32(ref+12, 200)},
		{"index of the free space", "names no object of its global heap", u32(ref+12, 0)},
		{"length longer than the object", "of another length", u32(ref, length+1)},
		{"length shorter than the object", "of another length", u32(ref, length-1)},
		{"address outside the file", "outside the file", u64(ref+4, uint64(len(valid))+4096)},
		{"address of no collection", "not there", u64(ref+4, uint64(gcol+8))},
		{"collection larger than the file", "of a size no collection has", u64(gcol+8, uint64(len(valid)))},
		{"object larger than its collection", "impossible size", u64(first+8, 1<<40)},
	}
	dir := t.TempDir()
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(valid)
			tc.edit(b)
			p := filepath.Join(dir, fmt.Sprintf("heap%02d.h5", k))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(p)
			var ie *data.InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), p+": attribute ") || !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("got %v, expected an *data.InputError naming %s, an attribute and %q", err, p, tc.phrase)
			}
		})
	}
}

func TestH5MissingPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.h5")
	_, err := Read(path)
	var ie *data.InputError
	if !errors.As(err, &ie) || ie.File != path || !strings.Contains(err.Error(), "missing: no such file") {
		t.Errorf("got %v, expected a *data.InputError naming %s", err, path)
	}
	_, err = Read(t.TempDir())
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: got %v", err)
	}
}

// HDF5 prints its error stack to stderr unless told not to, per OS thread in
// a thread-safe build. Reading bad files from many goroutines (so from other
// threads than the one that ran the binding's init) must print nothing. The
// check runs in a child process so the C library's stderr can be captured.
func TestH5QuietStderr(t *testing.T) {
	if dir := os.Getenv("GNN_H5_QUIET_CHILD"); dir != "" {
		done := make(chan struct{})
		for g := 0; g < 8; g++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for _, name := range []string{"trunc.h5", "bad.h5"} {
					if _, err := Read(filepath.Join(dir, name)); err == nil {
						panic("bad file read without error")
					}
				}
			}()
		}
		for g := 0; g < 8; g++ {
			<-done
		}
		return
	}
	dir := t.TempDir()
	path, _ := h5Fixture(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trunc.h5"), raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	r := rawFrom(datatest.RandomDataset(t, 8, 10, 20, 0, 2))
	r.drop("/node/labels")
	r.write(t, filepath.Join(dir, "bad.h5"))

	cmd := exec.Command(os.Args[0], "-test.run=^TestH5QuietStderr$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GNN_H5_QUIET_CHILD="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "HDF5") {
		t.Errorf("HDF5 printed to stderr:\n%s", stderr.String())
	}
}

// benchDataset is the benchmark dataset: 1M nodes, average degree 20, 128
// float32 features (about 600 MB as a file).
func benchDataset(b *testing.B) *data.Dataset {
	b.Helper()
	ds, err := gen.Generate(gen.Options{Nodes: 1 << 20, Classes: 16, AvgDegree: 20, Homophily: 0.6, Features: 128, SNR: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return ds
}

// BenchmarkReadH5 loads the benchmark dataset from a warm page cache,
// validation included, its scan remembered (as for a second read in one
// process); BenchmarkScanH5 is what a fresh process adds: the scan by a
// child process (data/h5/scan.go).
func BenchmarkReadH5(b *testing.B) {
	path := benchFile(b)
	for b.Loop() {
		if _, err := Read(path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanH5(b *testing.B) {
	path := benchFile(b)
	for b.Loop() {
		if err := h5.Scan(path); err != nil {
			b.Fatal(err)
		}
	}
}

// benchFile writes the benchmark dataset and sets the bytes per operation
// to its size.
func benchFile(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "bench.h5")
	if err := Write(path, benchDataset(b)); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	return path
}

// BenchmarkWriteH5 writes the benchmark dataset, validation and fsync included.
func BenchmarkWriteH5(b *testing.B) {
	ds := benchDataset(b)
	path := filepath.Join(b.TempDir(), "bench.h5")
	for b.Loop() {
		if err := Write(path, ds); err != nil {
			b.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
}
