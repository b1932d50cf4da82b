package data

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/data/internal/par"
)

// BuildOptions controls how an edge list becomes a Graph.
type BuildOptions struct {
	AddInverse   bool // also add dst->src for every src->dst (OGB's arxiv is directed)
	AddSelfLoops bool // add i->i for every node that lacks one
}

// BuildGraph turns the directed edges src[k]->dst[k] over n nodes into a CSR
// stored by destination. Ids must already be validated to lie in [0, n).
// Within a row, sources keep the order of the edge list (inverse edges after
// forward ones), so the result is deterministic. Duplicate edges are kept.
func BuildGraph(n int, src, dst []int32, opt BuildOptions) (*Graph, error) {
	if len(src) != len(dst) {
		return nil, fmt.Errorf("BuildGraph: %d sources but %d destinations", len(src), len(dst))
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("BuildGraph: %d nodes exceed the 32-bit node id range", n)
	}
	deg := make([]int64, n+1)
	for _, d := range dst {
		deg[d+1]++
	}
	if opt.AddInverse {
		for _, s := range src {
			deg[s+1]++
		}
	}
	var hasLoop []bool
	if opt.AddSelfLoops {
		hasLoop = make([]bool, n)
		for k := range src {
			if src[k] == dst[k] {
				hasLoop[src[k]] = true
			}
		}
		for i := 0; i < n; i++ {
			if !hasLoop[i] {
				deg[i+1]++
			}
		}
	}
	indptr := deg
	for i := 0; i < n; i++ {
		indptr[i+1] += indptr[i]
	}
	indices := make([]int32, indptr[n])
	fill := make([]int64, n)
	copy(fill, indptr[:n])
	if opt.AddSelfLoops {
		// Self-loops first in each row: a fixed place that does not depend on
		// the edge order.
		for i := 0; i < n; i++ {
			if !hasLoop[i] {
				indices[fill[i]] = int32(i)
				fill[i]++
			}
		}
	}
	for k := range src {
		d := dst[k]
		indices[fill[d]] = src[k]
		fill[d]++
	}
	if opt.AddInverse {
		for k := range src {
			s := src[k]
			indices[fill[s]] = dst[k]
			fill[s]++
		}
	}
	return &Graph{N: n, Indptr: indptr, Indices: indices}, nil
}

// WithSelfLoops returns g with an edge i->i added to every row that lacks
// one (placed first in the row); g itself is unchanged.
func WithSelfLoops(g *Graph) *Graph {
	missing := make([]bool, g.N)
	par.Range(g.N, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			missing[i] = true
			for _, s := range g.Indices[g.Indptr[i]:g.Indptr[i+1]] {
				if int(s) == i {
					missing[i] = false
					break
				}
			}
		}
	})
	indptr := make([]int64, g.N+1)
	for i := 0; i < g.N; i++ {
		indptr[i+1] = indptr[i] + g.Indptr[i+1] - g.Indptr[i]
		if missing[i] {
			indptr[i+1]++
		}
	}
	indices := make([]int32, indptr[g.N])
	par.Range(g.N, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			at := indptr[i]
			if missing[i] {
				indices[at] = int32(i)
				at++
			}
			copy(indices[at:indptr[i+1]], g.Indices[g.Indptr[i]:g.Indptr[i+1]])
		}
	})
	return &Graph{N: g.N, Indptr: indptr, Indices: indices}
}

// NormalizeFeatureRows scales every feature row to unit L1 norm (rows of
// zeros stay zero), the preprocessing of Kipf & Welling's GCN experiments.
func (d *Dataset) NormalizeFeatureRows() {
	f := d.NumFeatures
	par.Range(d.Graph.N, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := d.Features[i*f : (i+1)*f]
			var s float64
			for _, v := range row {
				s += math.Abs(float64(v))
			}
			if s > 0 {
				inv := float32(1 / s)
				for j := range row {
					row[j] *= inv
				}
			}
		}
	})
}
