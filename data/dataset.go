// Package data holds graphs and node-classification datasets: the in-memory
// CSR representation, the OGB text loader, the HDF5 dataset format and the
// synthetic graph generator. It knows nothing about devices or communication.
package data

import (
	"fmt"
	"slices"
)

// Graph is a directed graph in compressed sparse row form, stored by
// destination: row i lists the sources of the edges that point into i, so
// aggregating row i gathers node i's in-neighbours.
type Graph struct {
	N       int     // number of nodes
	Indptr  []int64 // len N+1; edges into i are Indices[Indptr[i]:Indptr[i+1]]
	Indices []int32 // len E; source node ids in [0, N)
}

// NumEdges is the number of directed edges.
func (g *Graph) NumEdges() int64 { return g.Indptr[g.N] }

// InDegree returns the number of edges into node i.
func (g *Graph) InDegree(i int) int { return int(g.Indptr[i+1] - g.Indptr[i]) }

// Split is one named train/valid/test division of the nodes (sorted node ids).
type Split struct {
	Train, Valid, Test []int32
}

// Dataset is a graph with dense node features, labels and named splits.
type Dataset struct {
	Name        string
	Graph       *Graph
	NumFeatures int       // F; 0 when the dataset has no features
	Features    []float32 // N*F row-major; nil when F = 0
	Labels      []int32   // len N; -1 = unlabelled
	NumClasses  int       // C; labels lie in [-1, C)
	Splits      map[string]*Split
}

// MaxClasses bounds the class count of an n-node graph: a class id beyond
// both the node count and 1024 is far more likely a corrupt file than a
// label space, and the model allocates per class.
func MaxClasses(n int) int { return max(n, 1<<10) }

// SplitNames returns the split names in sorted order.
func (d *Dataset) SplitNames() []string {
	names := make([]string, 0, len(d.Splits))
	for n := range d.Splits {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// InputError reports bad input: which file, which line or field, and what was
// expected. The CLI turns it into a one-line message and exit code 2.
type InputError struct {
	File  string // path of the offending file
	Line  int    // 1-based line number, 0 when not line-oriented
	Field string // column, dataset or attribute name; "" when not applicable
	Msg   string // what was wrong and what was expected
}

func (e *InputError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Field != "" {
		loc = fmt.Sprintf("%s: %s", loc, e.Field)
	}
	return loc + ": " + e.Msg
}

// ExitCode is 2, the exit code of bad input.
func (e *InputError) ExitCode() int { return 2 }

// InputErrorf builds an InputError with a formatted message.
func InputErrorf(file string, line int, field, format string, args ...any) *InputError {
	return &InputError{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}
