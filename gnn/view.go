// Package gnn owns the training policy and the model maths: GraphSAGE, GCN
// and GAT layers with hand-written backward passes, the loss, Adam, the rate
// schedules of halo compression, and the training loop. It reaches numbers
// only through kernels.Device and other ranks only through a halo.Exchanger
// and a Reducer, so the same loop runs in one process or across many.
package gnn

import (
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// View is one rank's view of the graph, in the row layout every layer
// input shares: its owned nodes (rows [0, NumOwned)) and the halo nodes of
// other ranks that its owned nodes aggregate from (rows
// [NumOwned, NumOwned+NumHalo)), which Plan says who sends.
type View struct {
	NumOwned, NumHalo int
	// Plan is the halo layout: which owned rows go to which rank, and
	// where each rank's rows land among the halo rows.
	Plan *halo.Plan
	// Adj has NumOwned rows and NumOwned+NumHalo columns; its weights
	// already hold the model's normalisation (mean or GCN).
	Adj *kernels.Adj
	// Input is (NumOwned+NumHalo) x F: the owned rows' features, then the
	// rows the first layer's halo exchange fills (zero until then).
	Input *kernels.Mat
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

// aggregation is how a layer weighs the rows it aggregates.
type aggregation int

const (
	// mean weighs each in-neighbour of i by 1/indeg(i) (GraphSAGE-mean).
	mean aggregation = iota
	// gcnNorm weighs edge j->i by 1/sqrt(deg(i) deg(j)), with self-loops
	// already in the graph (Kipf & Welling's renormalisation).
	gcnNorm
	// attention leaves the weights to the model (GAT), over A + I.
	attention
)

// aggregationFor returns the aggregation a model uses and whether its graph
// needs self-loops.
func aggregationFor(model string) (aggregation, bool, error) {
	switch model {
	case "sage":
		return mean, false, nil
	case "gcn":
		return gcnNorm, true, nil
	case "gat":
		return attention, true, nil
	}
	return 0, false, fmt.Errorf("model %q: expected sage, gcn or gat", model)
}

// edgeWeights fills the per-edge weights of a CSR whose row i is a node of
// in-degree rowDeg[i] and whose column c is a node of in-degree colDeg[c]
// (both counted in the whole graph, so that every rank weighs alike).
func edgeWeights(agg aggregation, ptr []int64, col []int32, rowDeg, colDeg []int32) []float32 {
	if agg == attention {
		return nil
	}
	rows := len(ptr) - 1
	val := make([]float32, ptr[rows])
	for i := 0; i < rows; i++ {
		for k := ptr[i]; k < ptr[i+1]; k++ {
			switch agg {
			case mean:
				val[k] = float32(1 / float64(rowDeg[i]))
			case gcnNorm:
				val[k] = float32(1 / math.Sqrt(float64(rowDeg[i])*float64(colDeg[col[k]])))
			}
		}
	}
	return val
}

// Features is the owned rows of Input.
func (v *View) Features() *kernels.Mat { return v.Input.View(0, v.NumOwned) }

// SingleProcess builds the View of a whole dataset on one rank.
func SingleProcess(ds *data.Dataset, split string, model string) (*View, error) {
	sp, ok := ds.Splits[split]
	if !ok {
		return nil, fmt.Errorf("split %q: not in dataset %s (has %v)", split, ds.Name, ds.SplitNames())
	}
	if ds.NumFeatures == 0 {
		return nil, fmt.Errorf("dataset %s has no node features: training needs them", ds.Name)
	}
	agg, loops, err := aggregationFor(model)
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
	plan, err := halo.NewPlan(0, n, [][]int32{nil}, []int{0, 0})
	if err != nil {
		return nil, err
	}
	return &View{
		NumOwned:    n,
		Plan:        plan,
		Adj:         kernels.NewAdj(n, n, g.Indptr, g.Indices, edgeWeights(agg, g.Indptr, g.Indices, deg, deg)),
		Input:       &kernels.Mat{Rows: n, Cols: ds.NumFeatures, Data: ds.Features},
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

// FromShard builds the View of one rank from its shard. The weights use
// global degrees (the halo nodes' from the shard), so that every rank
// weighs an edge exactly as one process would.
func FromShard(s *partition.Shard, model string) (*View, error) {
	agg, loops, err := aggregationFor(model)
	if err != nil {
		return nil, err
	}
	own, nHalo := len(s.Owned), len(s.Halo)
	plan, err := halo.NewPlan(s.Part, own, s.Send, s.RecvStart)
	if err != nil {
		return nil, err
	}
	if plan.HaloRows() != nHalo || len(s.Features) != (own+nHalo)*s.NumFeatures {
		return nil, fmt.Errorf("shard of part %d: %d halo nodes, %d halo rows received, %d feature values for %d rows of %d",
			s.Part, nHalo, plan.HaloRows(), len(s.Features), own+nHalo, s.NumFeatures)
	}
	// The owned rows' local column ids equal their row ids, so the
	// single-graph helper adds the same self-loops a whole graph gets.
	g := &data.Graph{N: own, Indptr: s.Indptr, Indices: s.Indices}
	if loops {
		g = data.WithSelfLoops(g)
	}
	var rowDeg, colDeg []int32
	switch agg {
	case mean:
		rowDeg = make([]int32, own)
		for i := range rowDeg {
			rowDeg[i] = int32(g.InDegree(i))
		}
	case gcnNorm:
		rowDeg, colDeg = s.LoopDegree[:own], s.LoopDegree
	}
	return &View{
		NumOwned:    own,
		NumHalo:     nHalo,
		Plan:        plan,
		Adj:         kernels.NewAdj(own, own+nHalo, g.Indptr, g.Indices, edgeWeights(agg, g.Indptr, g.Indices, rowDeg, colDeg)),
		Input:       &kernels.Mat{Rows: own + nHalo, Cols: s.NumFeatures, Data: s.Features},
		Labels:      s.Labels,
		Train:       s.Train,
		Valid:       s.Valid,
		Test:        s.Test,
		GlobalIDs:   s.Owned,
		GlobalTrain: s.GlobalTrain,
		GlobalValid: s.GlobalValid,
		GlobalTest:  s.GlobalTest,
		NumClasses:  s.NumClasses,
	}, nil
}
