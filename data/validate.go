package data

import (
	"math"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/data/internal/par"
)

// Validate checks every invariant the trainer relies on and names the file
// (source) and field of the first violation: CSR shape and ids, feature
// values, labels, and splits that are non-empty, in range and disjoint.
func (d *Dataset) Validate(source string) error {
	g := d.Graph
	if g == nil {
		return InputErrorf(source, 0, "graph", "missing")
	}
	n := g.N
	if n <= 0 {
		return InputErrorf(source, 0, "num_nodes", "got %d, expected a positive node count", n)
	}
	if len(g.Indptr) != n+1 {
		return InputErrorf(source, 0, "graph/indptr", "has %d entries, expected num_nodes+1 = %d", len(g.Indptr), n+1)
	}
	if g.Indptr[0] != 0 || g.Indptr[n] != int64(len(g.Indices)) {
		return InputErrorf(source, 0, "graph/indptr", "must start at 0 and end at len(indices) = %d", len(g.Indices))
	}
	for i := 0; i < n; i++ {
		if g.Indptr[i+1] < g.Indptr[i] {
			return InputErrorf(source, 0, "graph/indptr", "decreases at row %d", i)
		}
	}
	var bad atomic.Int64
	bad.Store(-1)
	par.Range(len(g.Indices), func(lo, hi int) {
		for k := lo; k < hi; k++ {
			if c := g.Indices[k]; c < 0 || int(c) >= n {
				par.StoreMin(&bad, int64(k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		return InputErrorf(source, 0, "graph/indices", "entry %d is node %d, expected an id in [0, %d)", k, g.Indices[k], n)
	}
	if d.NumFeatures < 0 || len(d.Features) != n*d.NumFeatures {
		return InputErrorf(source, 0, "features", "has %d values, expected num_nodes*num_features = %d*%d", len(d.Features), n, d.NumFeatures)
	}
	par.Range(len(d.Features), func(lo, hi int) {
		for k, v := range d.Features[lo:hi] {
			// All exponent bits set: Inf or NaN.
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				par.StoreMin(&bad, int64(lo+k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		f := int64(d.NumFeatures)
		return InputErrorf(source, 0, "features", "node %d column %d is %v, expected a finite number", k/f, k%f, d.Features[k])
	}
	if len(d.Labels) != n {
		return InputErrorf(source, 0, "labels", "has %d entries, expected num_nodes = %d", len(d.Labels), n)
	}
	if d.NumClasses <= 0 || d.NumClasses > MaxClasses(n) {
		return InputErrorf(source, 0, "num_classes", "got %d, expected a class count in [1, %d] (at most one class per node, or 1024)", d.NumClasses, MaxClasses(n))
	}
	for i, y := range d.Labels {
		if y < -1 || int(y) >= d.NumClasses {
			return InputErrorf(source, 0, "labels", "node %d has label %d, expected -1 or a class in [0, %d)", i, y, d.NumClasses)
		}
	}
	for _, name := range d.SplitNames() {
		if err := d.Splits[name].validate(source, name, n); err != nil {
			return err
		}
	}
	return nil
}

func (s *Split) validate(source, name string, n int) error {
	owner := make([]uint8, n) // 0 = none, else 1+index of the part holding the node
	parts := [3]struct {
		name string
		ids  []int32
	}{{"train", s.Train}, {"valid", s.Valid}, {"test", s.Test}}
	for p, part := range parts {
		field := "split " + name + "/" + part.name
		if len(part.ids) == 0 {
			return InputErrorf(source, 0, field, "is empty, expected at least one node")
		}
		for _, id := range part.ids {
			if id < 0 || int(id) >= n {
				return InputErrorf(source, 0, field, "holds node %d, expected an id in [0, %d)", id, n)
			}
			if o := owner[id]; o != 0 {
				if int(o) == p+1 {
					return InputErrorf(source, 0, field, "lists node %d twice", id)
				}
				return InputErrorf(source, 0, field, "node %d is also in %s, expected disjoint train/valid/test", id, parts[o-1].name)
			}
			owner[id] = uint8(p + 1)
		}
	}
	return nil
}
