// Package datafile is the dataset file: one HDF5 file holding a graph, its
// node features and labels and its splits (docs/FORMATS.md is the
// reference), and Load, which reads a dataset from such a file or from an
// OGB-layout directory.
package datafile

import (
	"math"
	"slices"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

// The HDF5 dataset layout:
//
//	/                 attrs format="gnn-spmd-dataset", version=1 (int32), name,
//	                  num_nodes, num_edges (int64), num_features, num_classes (int32)
//	/graph/indptr     int64 [N+1]   CSR by destination
//	/graph/indices    int32 [E]     sources of the edges into each row
//	/node/features    float32 [N,F] absent when F = 0
//	/node/labels      int32 [N]     -1 = unlabelled
//	/splits/<name>/{train,valid,test}  int32 [n], sorted node ids
const (
	Format  = "gnn-spmd-dataset"
	Version = 1
)

// Write validates ds and writes it to path in the dataset format,
// atomically (h5.WriteAtomic).
func Write(path string, ds *data.Dataset) error {
	if err := ds.Validate(path); err != nil {
		return err
	}
	g := ds.Graph
	arrays := []h5.Array{h5.Vec("/graph/indptr", g.Indptr), h5.Vec("/graph/indices", g.Indices)}
	if ds.NumFeatures > 0 {
		arrays = append(arrays, h5.Array{Path: "/node/features", Data: ds.Features, Dims: []uint{uint(g.N), uint(ds.NumFeatures)}})
	}
	arrays = append(arrays, tailArrays(ds)...)
	return h5.WriteFile(path, rootAttrs(ds), arrays)
}

// rootAttrs is a dataset file's root attributes.
func rootAttrs(ds *data.Dataset) []h5.Attr {
	return []h5.Attr{
		{Name: "format", Val: Format},
		{Name: "version", Val: int32(Version)},
		{Name: "name", Val: ds.Name},
		{Name: "num_nodes", Val: int64(ds.Graph.N)},
		{Name: "num_edges", Val: ds.Graph.NumEdges()},
		{Name: "num_features", Val: int32(ds.NumFeatures)},
		{Name: "num_classes", Val: int32(ds.NumClasses)},
	}
}

// tailArrays are the arrays after the features: labels and splits.
func tailArrays(ds *data.Dataset) []h5.Array {
	arrays := []h5.Array{h5.Vec("/node/labels", ds.Labels), {Path: "/splits"}}
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
			arrays = append(arrays, h5.Vec("/splits/"+name+"/"+part.name, ids))
		}
	}
	return arrays
}

// Convert writes the OGB-layout directory dir as a dataset file at path,
// the same file as Write(path, ogb.Load(dir)) gives, with memory bounded
// by the CSR it builds and the blocks of feature rows being parsed: the
// rows go to the file as they come (ogb.OpenStream). It returns the
// dataset without its features.
func Convert(dir, path string, opt ogb.Options) (*data.Dataset, error) {
	st, err := ogb.OpenStream(dir, opt)
	if err != nil {
		return nil, err
	}
	ds := st.Dataset
	var inErr error // a bad feature row, reported as itself
	err = outfile.WriteAtomic(path, func(tmp string) error {
		w, err := h5.NewWriter(tmp, rootAttrs(ds))
		if err != nil {
			return err
		}
		w.Array(h5.Vec("/graph/indptr", ds.Graph.Indptr))
		w.Array(h5.Vec("/graph/indices", ds.Graph.Indices))
		if ds.NumFeatures > 0 {
			w.Begin("/node/features", []float32(nil), []uint{uint(ds.Graph.N), uint(ds.NumFeatures)})
			if inErr = st.Features(func(rows []float32) error { return w.Rows("/node/features", rows) }); inErr != nil {
				w.Abort()
				return inErr
			}
			w.End("/node/features")
		}
		for _, a := range tailArrays(ds) {
			w.Array(a)
		}
		return w.Close()
	})
	if inErr != nil {
		return nil, inErr
	}
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// Read reads a dataset written by Write (or by any tool following the
// layout in docs/FORMATS.md) and validates it. Every problem with the file
// is a *data.InputError naming the file, the HDF5 object (e.g.
// "/graph/indices" or "attribute num_nodes") and what was expected. Sizes
// are checked against the attributes and the file size before anything is
// allocated.
func Read(path string) (*data.Dataset, error) {
	var ds *data.Dataset
	err := h5.Read(path, Format, Version, "no such file: expected an HDF5 dataset file", func(f *h5.File) error {
		var err error
		ds, err = read(f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := ds.Validate(path); err != nil {
		if ie, ok := err.(*data.InputError); ok {
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

func read(f *h5.File) (*data.Dataset, error) {
	name, n, e, nf, nc, err := readCounts(f)
	if err != nil {
		return nil, err
	}
	indptr := h5.ReadArray[int64](f, "/graph/indptr", "[num_nodes+1]", n+1)
	indices := h5.ReadArray[int32](f, "/graph/indices", "[num_edges]", e)
	var features []float32
	if nf > 0 || f.Exists("/node/features") {
		// A [N, 0] array is accepted for F = 0; the writer omits it.
		features = h5.ReadArray[float32](f, "/node/features", "[num_nodes, num_features]", n, nf)
		if nf == 0 {
			features = nil
		}
	}
	labels := h5.ReadArray[int32](f, "/node/labels", "[num_nodes]", n)
	splits := readSplits(f, n)
	if f.Err() != nil {
		return nil, f.Err()
	}
	return &data.Dataset{
		Name:        name,
		Graph:       &data.Graph{N: int(n), Indptr: indptr, Indices: indices},
		NumFeatures: int(nf),
		Features:    features,
		Labels:      labels,
		NumClasses:  int(nc),
		Splits:      splits,
	}, nil
}

func readSplits(f *h5.File, n int64) map[string]*data.Split {
	names := f.Groups("/splits", "split", "train, valid and test")
	splits := make(map[string]*data.Split, len(names))
	for _, name := range names {
		s := &data.Split{}
		for _, part := range []struct {
			name string
			ids  *[]int32
		}{{"train", &s.Train}, {"valid", &s.Valid}, {"test", &s.Test}} {
			p := "/splits/" + name + "/" + part.name
			ids := h5.ReadArray[int32](f, p, "[n] with n <= num_nodes", -1)
			if f.Err() != nil {
				return nil
			}
			if int64(len(ids)) > n {
				f.Errorf(p, "has %d entries, expected at most num_nodes = %d", len(ids), n)
				return nil
			}
			if !slices.IsSorted(ids) { // tolerate foreign writers: the API promises sorted ids
				slices.Sort(ids)
			}
			*part.ids = ids
		}
		splits[name] = s
	}
	return splits
}

// readCounts reads the name and the counts, each bounded by what the file
// can hold (the format is uncompressed), so that an absurd attribute is
// refused before any allocation.
func readCounts(f *h5.File) (name string, n, e, nf, nc int64, err error) {
	const any = math.MaxInt64
	name = f.String("name")
	n = f.Int("num_nodes", -any, any)
	if f.Err() != nil {
		return "", 0, 0, 0, 0, f.Err()
	}
	if n < 1 || n > math.MaxInt32 {
		return "", 0, 0, 0, 0, f.Errorf("attribute num_nodes", "is %d, expected a node count in [1, %d] (node ids are int32)", n, math.MaxInt32)
	}
	if perNode := int64(8 + 4); n > f.Size()/perNode { // indptr + labels
		return "", 0, 0, 0, 0, f.Errorf("attribute num_nodes", "is %d, but a file of %d bytes cannot hold indptr and labels for that many nodes (%d bytes each)", n, f.Size(), perNode)
	}
	e = f.Int("num_edges", -any, any)
	if f.Err() == nil && (e < 0 || e > f.Size()/4) {
		return "", 0, 0, 0, 0, f.Errorf("attribute num_edges", "is %d, expected a count in [0, %d] for a file of %d bytes (4 bytes per edge)", e, f.Size()/4, f.Size())
	}
	nf = f.Int("num_features", -any, any)
	if f.Err() == nil && (nf < 0 || nf > f.Size()/4/n) {
		return "", 0, 0, 0, 0, f.Errorf("attribute num_features", "is %d, expected a count in [0, %d] for %d nodes in a file of %d bytes", nf, f.Size()/4/n, n, f.Size())
	}
	nc = f.Int("num_classes", -any, any)
	if f.Err() == nil && (nc < 1 || nc > int64(data.MaxClasses(int(n)))) {
		return "", 0, 0, 0, 0, f.Errorf("attribute num_classes", "is %d, expected a class count in [1, %d] (at most one class per node, or 1024)", nc, data.MaxClasses(int(n)))
	}
	return name, n, e, nf, nc, f.Err()
}
