package datafile

import (
	"math"
	"slices"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
)

// Slice is what one of several processes reads of a dataset file, so that
// none reads it whole: the rows [Lo, Hi) of the graph (each row lists the
// sources of the edges into that node) and the labels, and a share by
// position of each of one split's id lists. Every value is checked as
// Read checks it, except what only the whole array can tell: the digests
// (which the processes check together: Digests holds the file's), that
// the split's lists are sorted and disjoint across shares, and the
// splits not chosen (not read).
type Slice struct {
	Path, Name string
	N          int
	E          int64
	F, C       int
	Lo, Hi     int
	Indptr     []int64 // Hi-Lo+1 entries: the global offsets of rows Lo ... Hi
	Indices    []int32 // the sources of rows [Lo, Hi)
	Labels     []int32 // of rows [Lo, Hi)
	Split      string
	// SplitIDs[k] (train, valid, test) are the ids at positions
	// [SplitStart[k], SplitStart[k]+len) of a list of SplitLen[k].
	SplitIDs   [3][]int32
	SplitStart [3]int64
	SplitLen   [3]int64
	// Digests are the file's dataset digests by path; nil for a file
	// without them.
	Digests map[string]uint64
}

// SplitParts names the three lists of a split, in Slice's order.
var SplitParts = [3]string{"train", "valid", "test"}

// SliceRange is process rank's share [lo, hi) of n items among procs.
func SliceRange(n int64, rank, procs int) (lo, hi int64) {
	return n * int64(rank) / int64(procs), n * int64(rank+1) / int64(procs)
}

// ReadSlice reads process rank's slice (of procs) of the dataset file at
// path, with the split named split ("" = the first in sorted order, as
// PickSplit). Every problem with the file is a *data.InputError naming it
// and the HDF5 object.
func ReadSlice(path string, rank, procs int, split string) (*Slice, error) {
	s := &Slice{Path: path}
	err := h5.Read(path, Format, Version, "no such file: expected an HDF5 dataset file", func(f *h5.File) error {
		name, n, e, nf, nc, err := readCounts(f)
		if err != nil {
			return err
		}
		s.Name, s.N, s.E, s.F, s.C = name, int(n), e, int(nf), int(nc)
		lo, hi := SliceRange(n, rank, procs)
		s.Lo, s.Hi = int(lo), int(hi)
		s.Digests = map[string]uint64{}
		for _, p := range []string{"/graph/indptr", "/graph/indices", "/node/labels", "/node/features"} {
			if d, ok := f.Digest(p); ok {
				s.Digests[p] = d
			}
		}
		s.Indptr = h5.ReadRange[int64](f, "/graph/indptr", "[num_nodes+1]", func(int64) (int64, int64) { return lo, hi + 1 }, n+1)
		if f.Err() != nil {
			return f.Err()
		}
		if err := s.checkIndptr(f); err != nil {
			return err
		}
		s.readIndices(f)
		s.Labels = h5.ReadRange[int32](f, "/node/labels", "[num_nodes]", func(int64) (int64, int64) { return lo, hi }, n)
		if nf > 0 || f.Exists("/node/features") {
			h5.Dims[float32](f, "/node/features", "[num_nodes, num_features]", n, nf) // read later, by rows
		}
		if f.Err() != nil {
			return f.Err()
		}
		if err := s.readSplit(f, split, rank, procs); err != nil {
			return err
		}
		if len(s.Digests) == 0 {
			s.Digests = nil
		}
		return s.check(f)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// readIndices reads the sources of the slice's rows.
func (s *Slice) readIndices(f *h5.File) {
	s.Indices = h5.ReadRange[int32](f, "/graph/indices", "[num_edges]", func(int64) (int64, int64) {
		return s.Indptr[0], s.Indptr[len(s.Indptr)-1]
	}, s.E)
}

// ReadIndices reads the slice's sources again, after a caller dropped
// them to make room (checked in range as before).
func (s *Slice) ReadIndices() error {
	return h5.Read(s.Path, Format, Version, "no such file: expected an HDF5 dataset file", func(f *h5.File) error {
		s.readIndices(f)
		if f.Err() != nil {
			return f.Err()
		}
		for k, c := range s.Indices {
			if c < 0 || int(c) >= s.N {
				return f.Errorf("/graph/indices", "entry %d is node %d, expected an id in [0, %d)", s.Indptr[0]+int64(k), c, s.N)
			}
		}
		return nil
	})
}

// checkIndptr checks the slice's row pointers: within [0, E], not
// decreasing, 0 at the first row and E after the last.
func (s *Slice) checkIndptr(f *h5.File) error {
	p := s.Indptr
	if (s.Lo == 0 && p[0] != 0) || (s.Hi == s.N && p[len(p)-1] != s.E) {
		return f.Errorf("/graph/indptr", "must start at 0 and end at len(indices) = %d", s.E)
	}
	for i := 1; i < len(p); i++ {
		if p[i] < p[i-1] {
			return f.Errorf("/graph/indptr", "decreases at row %d", s.Lo+i-1)
		}
	}
	if p[0] < 0 || p[len(p)-1] > s.E {
		return f.Errorf("/graph/indptr", "row %d points to %d, outside [0, num_edges = %d]", s.Lo, p[0], s.E)
	}
	return nil
}

// readSplit picks the split and reads this process's share of its lists.
func (s *Slice) readSplit(f *h5.File, split string, rank, procs int) error {
	names := f.Groups("/splits", "split", "train, valid and test")
	if f.Err() != nil {
		return f.Err()
	}
	slices.Sort(names)
	if split == "" {
		if len(names) == 0 {
			return data.InputErrorf(s.Path, 0, "splits", "the dataset has none, expected a train/valid/test split")
		}
		split = names[0]
	}
	if !slices.Contains(names, split) {
		return data.InputErrorf(s.Path, 0, "/splits/"+split, "no such split, expected one of %v", names)
	}
	s.Split = split
	for k, part := range SplitParts {
		p := "/splits/" + split + "/" + part
		if d, ok := f.Digest(p); ok {
			s.Digests[p] = d
		}
		s.SplitIDs[k] = h5.ReadRange[int32](f, p, "[n] with n <= num_nodes", func(n int64) (int64, int64) {
			s.SplitLen[k] = n
			lo, hi := SliceRange(n, rank, procs)
			s.SplitStart[k] = lo
			return lo, hi
		}, -1)
		if f.Err() != nil {
			return f.Err()
		}
		if s.SplitLen[k] > int64(s.N) {
			return f.Errorf(p, "has %d entries, expected at most num_nodes = %d", s.SplitLen[k], s.N)
		}
	}
	return nil
}

// check is Dataset.Validate on the slice: source ids and labels in range,
// the split's ids in range, sorted within the share and lists non-empty.
func (s *Slice) check(f *h5.File) error {
	for k, c := range s.Indices {
		if c < 0 || int(c) >= s.N {
			return f.Errorf("/graph/indices", "entry %d is node %d, expected an id in [0, %d)", s.Indptr[0]+int64(k), c, s.N)
		}
	}
	for i, y := range s.Labels {
		if y < -1 || int(y) >= s.C {
			return f.Errorf("/node/labels", "node %d has label %d, expected -1 or a class in [0, %d)", s.Lo+i, y, s.C)
		}
	}
	for k, ids := range s.SplitIDs {
		p := "/splits/" + s.Split + "/" + SplitParts[k]
		if s.SplitLen[k] == 0 {
			return f.Errorf(p, "is empty, expected at least one node")
		}
		for i, id := range ids {
			if id < 0 || int(id) >= s.N {
				return f.Errorf(p, "holds node %d, expected an id in [0, %d)", id, s.N)
			}
			if i > 0 && id <= ids[i-1] {
				return f.Errorf(p, "entry %d is node %d after node %d, expected ids sorted ascending without repeats (as the format asks; rewrite the file with gnn-spmd convert)", s.SplitStart[k]+int64(i), id, ids[i-1])
			}
		}
	}
	return nil
}

// ReadFeatureRows reads the feature rows [lo, hi) of the dataset file at
// path, checked finite; their digest is for the caller to check with the
// other processes' (Slice.Digests).
func ReadFeatureRows(path string, lo, hi int) ([]float32, error) {
	var x []float32
	err := h5.Read(path, Format, Version, "no such file: expected an HDF5 dataset file", func(f *h5.File) error {
		_, n, _, nf, _, err := readCounts(f)
		if err != nil || nf == 0 {
			return err
		}
		x = h5.ReadRange[float32](f, "/node/features", "[num_nodes, num_features]", func(int64) (int64, int64) {
			return int64(lo), int64(hi)
		}, n, nf)
		if f.Err() != nil {
			return f.Err()
		}
		for k, v := range x {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				return f.Errorf("/node/features", "node %d column %d is %v, expected a finite number", int64(lo)+int64(k)/nf, int64(k)%nf, v)
			}
		}
		return nil
	})
	return x, err
}
