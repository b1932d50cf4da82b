package gnn

import (
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// FromShard builds the Local view of one rank from its shard. The weights
// use global degrees (the halo nodes' from the shard), so that every rank
// weighs an edge exactly as one process would.
func FromShard(s *data.Shard, model string) (*Local, error) {
	agg, loops, err := AggregationFor(model)
	if err != nil {
		return nil, err
	}
	own, halo := len(s.Owned), len(s.Halo)
	// The owned rows' local column ids equal their row ids, so the
	// single-graph helper adds the same self-loops a whole graph gets.
	g := &data.Graph{N: own, Indptr: s.Indptr, Indices: s.Indices}
	if loops {
		g = data.WithSelfLoops(g)
	}
	var rowDeg, colDeg []int32
	switch agg {
	case Mean:
		rowDeg = make([]int32, own)
		for i := range rowDeg {
			rowDeg[i] = int32(g.InDegree(i))
		}
	case GCNNorm:
		rowDeg, colDeg = s.LoopDegree[:own], s.LoopDegree
	}
	return &Local{
		NumOwned:    own,
		NumHalo:     halo,
		Adj:         kernels.NewAdj(own, own+halo, g.Indptr, g.Indices, EdgeWeights(agg, g.Indptr, g.Indices, rowDeg, colDeg)),
		Features:    &kernels.Mat{Rows: own, Cols: s.NumFeatures, Data: s.Features},
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
