package gnn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// Permute returns v with its owned rows in the given order: row i of the
// result is row order[i] of v. Halo rows keep their places, the split lists
// stay ascending, and GlobalIDs follow the rows, so dropout masks and every
// metric are those of v up to the order of floating-point sums over rows.
func (v *View) Permute(order []int32) (*View, error) {
	own := v.NumOwned
	if len(order) != own {
		return nil, fmt.Errorf("permutation of %d rows for a view of %d owned rows", len(order), own)
	}
	inv := make([]int32, own)
	for i := range inv {
		inv[i] = -1
	}
	for i, r := range order {
		if r < 0 || int(r) >= own || inv[r] >= 0 {
			return nil, fmt.Errorf("permutation: entry %d is row %d, expected each row of [0, %d) once", i, r, own)
		}
		inv[r] = int32(i)
	}
	mapRow := func(r int32) int32 {
		if int(r) < own {
			return inv[r]
		}
		return r
	}
	a := v.Adj
	ptr := make([]int64, own+1)
	for i, r := range order {
		ptr[i+1] = ptr[i] + a.Ptr[r+1] - a.Ptr[r]
	}
	col := make([]int32, ptr[own])
	var val []float32
	if a.Val != nil {
		val = make([]float32, ptr[own])
	}
	f := v.Input.Cols
	input := kernels.NewMat(v.Input.Rows, f)
	copy(input.Data[own*f:], v.Input.Data[own*f:])
	for i, r := range order {
		src := a.Col[a.Ptr[r]:a.Ptr[r+1]]
		dst := col[ptr[i]:ptr[i+1]]
		for k, c := range src {
			dst[k] = mapRow(c)
		}
		if val != nil {
			copy(val[ptr[i]:ptr[i+1]], a.Val[a.Ptr[r]:a.Ptr[r+1]])
		}
		copy(input.Data[i*f:(i+1)*f], v.Input.Data[int(r)*f:int(r+1)*f])
	}
	send := make([][]int32, len(v.Plan.Send))
	for p, rows := range v.Plan.Send {
		send[p] = make([]int32, len(rows))
		for k, r := range rows {
			send[p][k] = inv[r]
		}
	}
	plan, err := halo.NewPlan(v.Plan.Rank, own, send, v.Plan.RecvStart)
	if err != nil {
		return nil, err
	}
	rows := func(s []int32) []int32 {
		out := make([]int32, len(s))
		for k, r := range s {
			out[k] = inv[r]
		}
		slices.Sort(out)
		return out
	}
	labels, ids := make([]int32, own), make([]int32, own)
	for i, r := range order {
		labels[i], ids[i] = v.Labels[r], v.GlobalIDs[r]
	}
	w := *v
	w.Plan, w.Input, w.Labels, w.GlobalIDs = plan, input, labels, ids
	w.Adj = kernels.NewAdj(own, a.Cols, ptr, col, val)
	w.Train, w.Valid, w.Test = rows(v.Train), rows(v.Valid), rows(v.Test)
	return &w, nil
}

// Orderings for Reorder.
const (
	OrderNone  = "none"  // the rows as the data give them
	OrderRCM   = "rcm"   // reverse Cuthill-McKee over the owned rows
	OrderMETIS = "metis" // the owned rows' METIS clusters (ClusterOrder), one after another
)

// Reorder returns v with its owned rows in the named order, or v itself
// where that order is the rows' own (OrderNone, or a rank too small for
// OrderMETIS to cluster).
func (v *View) Reorder(order string) (*View, error) {
	var o []int32
	switch order {
	case OrderNone:
		return v, nil
	case OrderRCM:
		o = RCM(v.Adj, v.NumOwned)
	case OrderMETIS:
		var err error
		if o, err = ClusterOrder(v.Adj, v.NumOwned, clusterRows); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("order %q: expected %s, %s or %s", order, OrderNone, OrderRCM, OrderMETIS)
	}
	if isIdentity(o) {
		return v, nil
	}
	return v.Permute(o)
}

func isIdentity(order []int32) bool {
	for i, r := range order {
		if int(r) != i {
			return false
		}
	}
	return true
}

// clusterRows is the size of the clusters OrderMETIS aims at (a variable so
// that tests can cluster small graphs): a cluster of a 256-wide layer is
// 32 MiB, about a last-level cache (the AVX-512 loop gathers whole rows of
// up to 256 columns; the AVX2 loop, 64 columns of all of a chunk's rows at a
// time, 8 MiB of them). Where most edges stay inside clusters this pays:
// BenchmarkSpMM (kernels), 2 threads, with 99% of sources in the row's
// cluster of 25k rows (-spmm.clusters 40 -spmm.homophily 0.99) 67-80 GB/s
// against 45-47 GB/s for sources anywhere. At the benchmark graph's 70% it
// gains nothing (42-43 GB/s).
var clusterRows = 32768

// ClusterOrder returns the first n rows of a (columns below n; the others
// are halo rows and ignored) grouped by METIS clusters of about rows rows
// each, cluster after cluster, ascending within one. An edge inside a
// cluster then gathers a piece of a row that the cluster's other rows
// gathered a moment before, from cache, where on a graph whose ids hide its
// communities almost every gather misses. The order depends on the graph
// alone.
func ClusterOrder(a *kernels.Adj, n, rows int) ([]int32, error) {
	k := (n + rows - 1) / max(rows, 1)
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	if k <= 1 {
		return order, nil
	}
	g := &data.Graph{N: n, Indptr: make([]int64, n+1), Indices: make([]int32, 0, a.Ptr[n]-a.Ptr[0])}
	for i := 0; i < n; i++ {
		for _, c := range a.Col[a.Ptr[i]:a.Ptr[i+1]] {
			if int(c) < n {
				g.Indices = append(g.Indices, c)
			}
		}
		g.Indptr[i+1] = int64(len(g.Indices))
	}
	// Without edges there is nothing to cluster; beyond METIS's 32-bit
	// adjacency the order stays as given (a speed-up only, never an error).
	if len(g.Indices) == 0 || 2*int64(len(g.Indices)) > math.MaxInt32 {
		return order, nil
	}
	parts, err := partition.PartitionMETIS(g, k, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", OrderMETIS, err)
	}
	slices.SortStableFunc(order, func(x, y int32) int { return int(parts[x]) - int(parts[y]) })
	return order, nil
}

// RCM returns the reverse Cuthill-McKee order of the first n rows of a
// (columns below n; the others are halo rows and ignored): a breadth-first
// walk that visits each node's unvisited neighbours in order of degree,
// started in every component at its unvisited node of least degree, and
// reversed. Neighbours then sit near each other in id, so the rows an
// aggregation gathers for one output row are near the rows gathered for
// the next, and more of them are in cache. Ties go to the lower id, so the
// order depends on the graph alone.
func RCM(a *kernels.Adj, n int) []int32 {
	deg := make([]int32, n)
	for i := range deg {
		for _, c := range a.Col[a.Ptr[i]:a.Ptr[i+1]] {
			if int(c) < n && int(c) != i {
				deg[i]++
			}
		}
	}
	// Start candidates by ascending degree (a counting sort, stable in id).
	maxDeg := int32(0)
	for _, d := range deg {
		maxDeg = max(maxDeg, d)
	}
	start := make([]int32, maxDeg+2)
	for _, d := range deg {
		start[d+1]++
	}
	for d := 1; d < len(start); d++ {
		start[d] += start[d-1]
	}
	byDeg := make([]int32, n)
	for i, d := range deg {
		byDeg[start[d]] = int32(i)
		start[d]++
	}
	seen := make([]bool, n)
	order := make([]int32, 0, n)
	for _, s := range byDeg {
		if seen[s] {
			continue
		}
		seen[s] = true
		order = append(order, s)
		for head := len(order) - 1; head < len(order); head++ {
			u := order[head]
			first := len(order)
			for _, c := range a.Col[a.Ptr[u]:a.Ptr[u+1]] {
				if int(c) < n && !seen[c] {
					seen[c] = true
					order = append(order, c)
				}
			}
			// Insertion sort of the new neighbours by (degree, id): the
			// lists are a row's length.
			nb := order[first:]
			for i := 1; i < len(nb); i++ {
				x := nb[i]
				j := i
				for ; j > 0 && (deg[nb[j-1]] > deg[x] || deg[nb[j-1]] == deg[x] && nb[j-1] > x); j-- {
					nb[j] = nb[j-1]
				}
				nb[j] = x
			}
		}
	}
	slices.Reverse(order)
	return order
}
