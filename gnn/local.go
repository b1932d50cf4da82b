// Package gnn owns the training policy and the model maths: GraphSAGE and GCN
// layers with hand-written backward passes, the loss, Adam, and the training
// loop. It reaches numbers only through kernels.Device and other ranks only
// through the Halo and Reducer interfaces, so the same loop runs in one
// process or across many.
package gnn

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Local is one rank's view of the graph: its owned nodes (rows
// [0, NumOwned)) and the halo nodes of other ranks that its owned nodes
// aggregate from (rows [NumOwned, NumOwned+NumHalo) of every layer input).
type Local struct {
	NumOwned, NumHalo int
	// Adj has NumOwned rows and NumOwned+NumHalo columns; its weights
	// already hold the model's normalisation (mean or GCN).
	Adj *kernels.Adj
	// Features is NumOwned x F.
	Features *kernels.Mat
	// Labels of the owned rows (-1 = unlabelled).
	Labels []int32
	// Train, Valid and Test list local row ids.
	Train, Valid, Test []int32
	// GlobalIDs[i] is the global node id of owned row i (keys the dropout
	// masks, so that a node draws the same mask on any rank).
	GlobalIDs []int32
	// Global totals, summed over all ranks: the loss is normalised by
	// GlobalTrain so that distributed training equals one process.
	GlobalTrain, GlobalValid, GlobalTest int
	NumClasses                           int
}

// Aggregation is how a layer weighs the rows it aggregates.
type Aggregation int

const (
	// Mean weighs each in-neighbour of i by 1/indeg(i) (GraphSAGE-mean).
	Mean Aggregation = iota
	// Sum weighs every in-neighbour by 1.
	Sum
	// GCNNorm weighs edge j->i by 1/sqrt(deg(i) deg(j)), with self-loops
	// already in the graph (Kipf & Welling's renormalisation).
	GCNNorm
)

// AggregationFor returns the aggregation a model uses and whether its graph
// needs self-loops.
func AggregationFor(model string) (Aggregation, bool, error) {
	switch model {
	case "sage":
		return Mean, false, nil
	case "gcn":
		return GCNNorm, true, nil
	}
	return 0, false, fmt.Errorf("model %q: expected sage or gcn", model)
}

// EdgeWeights fills the per-edge weights of a CSR whose row i is a node of
// in-degree rowDeg[i] and whose column c is a node of in-degree colDeg[c]
// (both counted in the whole graph, so that every rank weighs alike).
// It returns nil for Sum (all ones).
func EdgeWeights(agg Aggregation, ptr []int64, col []int32, rowDeg, colDeg []int32) []float32 {
	if agg == Sum {
		return nil
	}
	rows := len(ptr) - 1
	val := make([]float32, ptr[rows])
	for i := 0; i < rows; i++ {
		for k := ptr[i]; k < ptr[i+1]; k++ {
			switch agg {
			case Mean:
				val[k] = float32(1 / float64(rowDeg[i]))
			case GCNNorm:
				val[k] = float32(1 / math.Sqrt(float64(rowDeg[i])*float64(colDeg[col[k]])))
			}
		}
	}
	return val
}

// SingleProcess builds the Local view of a whole dataset on one rank.
func SingleProcess(ds *data.Dataset, split string, model string) (*Local, error) {
	sp, ok := ds.Splits[split]
	if !ok {
		return nil, fmt.Errorf("split %q: not in dataset %s (has %v)", split, ds.Name, ds.SplitNames())
	}
	if ds.NumFeatures == 0 {
		return nil, fmt.Errorf("dataset %s has no node features: training needs them", ds.Name)
	}
	agg, loops, err := AggregationFor(model)
	if err != nil {
		return nil, err
	}
	g := ds.Graph
	if loops {
		g = data.WithSelfLoops(g)
	}
	deg := make([]int32, g.N)
	for i := range deg {
		deg[i] = int32(g.InDegree(i))
	}
	ids := make([]int32, g.N)
	for i := range ids {
		ids[i] = int32(i)
	}
	n := g.N
	return &Local{
		NumOwned:    n,
		Adj:         kernels.NewAdj(n, n, g.Indptr, g.Indices, EdgeWeights(agg, g.Indptr, g.Indices, deg, deg)),
		Features:    &kernels.Mat{Rows: n, Cols: ds.NumFeatures, Data: ds.Features},
		Labels:      ds.Labels,
		Train:       sp.Train,
		Valid:       sp.Valid,
		Test:        sp.Test,
		GlobalIDs:   ids,
		GlobalTrain: len(sp.Train),
		GlobalValid: len(sp.Valid),
		GlobalTest:  len(sp.Test),
		NumClasses:  ds.NumClasses,
	}, nil
}
