package partition

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/par"
)

// Shard is one rank's view of a partitioned dataset: its owned nodes, the
// halo of other ranks' nodes its owned nodes aggregate from, the local CSR
// over [owned | halo] columns, and who sends what to whom in each layer.
type Shard struct {
	Part, NumParts int
	NumNodes       int // global N

	// Owned are the global ids of the owned nodes, ascending: local row i
	// is node Owned[i].
	Owned []int32
	// Halo are the global ids of the other parts' nodes with an edge into
	// an owned node, grouped by owner part ascending and ascending within a
	// part: local column NumOwned()+k is node Halo[k].
	Halo []int32
	// RecvStart (len NumParts+1): the halo rows from part p are
	// Halo[RecvStart[p]:RecvStart[p+1]]; the own part's range is empty.
	RecvStart []int
	// Send[p] are the local rows part p holds in its halo, in the order p
	// stores them (ascending global id); Send[Part] is empty.
	Send [][]int32

	// Local CSR by destination with NumOwned() rows: row i lists the
	// sources of the edges into Owned[i], in the global row's order, as
	// local columns in [0, NumOwned()+len(Halo)).
	Indptr  []int64
	Indices []int32
	// LoopDegree, for every local column (owned, then halo): the node's
	// in-degree in A+I (its in-degree, plus 1 if it has no self loop). GCN
	// normalisation needs it for halo nodes too, whose rows live elsewhere.
	LoopDegree []int32

	NumFeatures int
	// Features is NumCols() x NumFeatures, row-major: the owned nodes'
	// features, then zero rows where the first layer's halo rows land,
	// so that the first layer's input is the features themselves.
	Features   []float32
	Labels     []int32 // owned rows; -1 = unlabelled
	NumClasses int

	// Train, Valid and Test are the local rows of the owned nodes in each
	// part of the split, ascending; the Global counts are the split's
	// sizes over all parts (the loss is averaged over GlobalTrain).
	Train, Valid, Test                   []int32
	GlobalTrain, GlobalValid, GlobalTest int
}

// NumOwned is the number of owned nodes (local rows).
func (s *Shard) NumOwned() int { return len(s.Owned) }

// NumCols is the number of local columns: owned then halo nodes.
func (s *Shard) NumCols() int { return len(s.Owned) + len(s.Halo) }

// NumSent is the number of rows this part sends per layer, to all parts.
func (s *Shard) NumSent() int {
	n := 0
	for _, rows := range s.Send {
		n += len(rows)
	}
	return n
}

// BuildShard builds part's shard of ds under the assignment parts of the
// nodes to q parts, with the split named split ("" = none). Building one
// shard costs O(N + E): the halos of all parts are needed for its Send
// lists.
func BuildShard(ds *data.Dataset, split string, parts []int32, q, part int) (*Shard, error) {
	if part < 0 || part >= q {
		return nil, fmt.Errorf("shard: part %d, expected a part in [0, %d)", part, q)
	}
	b, err := newShardBuilder(ds, split, parts, q)
	if err != nil {
		return nil, err
	}
	return b.build(part), nil
}

// BuildShards builds the shards of all q parts. Shards are built one after
// another, each with all cores.
func BuildShards(ds *data.Dataset, split string, parts []int32, q int) ([]*Shard, error) {
	b, err := newShardBuilder(ds, split, parts, q)
	if err != nil {
		return nil, err
	}
	shards := make([]*Shard, q)
	for p := range shards {
		shards[p] = b.build(p)
	}
	return shards, nil
}

// shardBuilder holds what all shards of one partition share.
type shardBuilder struct {
	ds      *data.Dataset
	plan    *partPlan
	loopDeg []int32      // global A+I in-degrees
	split   [3][][]int32 // train/valid/test: per part, the local rows
	global  [3]int
	col     []int32 // scratch: node -> local column of the shard being built
}

func newShardBuilder(ds *data.Dataset, split string, parts []int32, q int) (*shardBuilder, error) {
	g := ds.Graph
	if len(ds.Labels) != g.N || len(ds.Features) != g.N*ds.NumFeatures {
		return nil, fmt.Errorf("shard: dataset %s has %d labels and %d feature values for %d nodes and %d features",
			ds.Name, len(ds.Labels), len(ds.Features), g.N, ds.NumFeatures)
	}
	var sp *data.Split
	if split != "" {
		var err error
		if sp, err = lookupSplit(ds, split); err != nil {
			return nil, err
		}
	}
	pl, err := newPartPlan(g, parts, q)
	if err != nil {
		return nil, err
	}
	loopDeg, err := loopDegrees(g)
	if err != nil {
		return nil, err
	}
	b := &shardBuilder{ds: ds, plan: pl, loopDeg: loopDeg, col: make([]int32, g.N)}
	if sp != nil {
		for k, ids := range [3][]int32{sp.Train, sp.Valid, sp.Test} {
			if b.split[k], err = pl.localSplit(ids); err != nil {
				return nil, fmt.Errorf("shard: split %s: %w", split, err)
			}
			b.global[k] = len(ids)
		}
	}
	return b, nil
}

// loopDegrees returns every node's in-degree in A+I.
func loopDegrees(g *data.Graph) ([]int32, error) {
	deg := make([]int32, g.N)
	var bad atomic.Int64
	bad.Store(-1)
	runChunks(rowChunks(g.Indptr, runtime.GOMAXPROCS(0)), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := g.Indices[g.Indptr[i]:g.Indptr[i+1]]
			d := int64(len(row)) + 1
			for _, s := range row {
				if int(s) == i {
					d--
					break
				}
			}
			if d > math.MaxInt32 {
				par.StoreMin(&bad, int64(i))
				return
			}
			deg[i] = int32(d)
		}
	})
	if i := bad.Load(); i >= 0 {
		return nil, fmt.Errorf("shard: node %d has %d in-edges, beyond the int32 degree range", i, g.InDegree(int(i)))
	}
	return deg, nil
}

// localSplit distributes global ids over the parts as local rows, ascending
// within each part.
func (pl *partPlan) localSplit(ids []int32) ([][]int32, error) {
	if !slices.IsSorted(ids) { // data.Split promises sorted ids; tolerate others
		ids = slices.Sorted(slices.Values(ids))
	}
	n := len(pl.parts)
	cnt := make([]int, pl.q)
	for _, v := range ids {
		if v < 0 || int(v) >= n {
			return nil, fmt.Errorf("node %d out of range [0, %d)", v, n)
		}
		cnt[pl.parts[v]]++
	}
	out := make([][]int32, pl.q)
	for p := range out {
		out[p] = make([]int32, 0, cnt[p])
	}
	for _, v := range ids {
		p := pl.parts[v]
		out[p] = append(out[p], pl.localRow[v])
	}
	return out, nil
}

func (b *shardBuilder) build(p int) *Shard {
	pl, ds, g := b.plan, b.ds, b.ds.Graph
	own, halo := pl.owned[p], pl.halo[p]
	nOwn, f := len(own), ds.NumFeatures
	s := &Shard{
		Part: p, NumParts: pl.q, NumNodes: g.N,
		Owned: own, Halo: halo, RecvStart: pl.recvStart[p],
		Send:        make([][]int32, pl.q),
		NumFeatures: f, NumClasses: ds.NumClasses,
		Train: []int32{}, Valid: []int32{}, Test: []int32{},
		GlobalTrain: b.global[0], GlobalValid: b.global[1], GlobalTest: b.global[2],
	}
	if b.split[0] != nil {
		s.Train, s.Valid, s.Test = b.split[0][p], b.split[1][p], b.split[2][p]
	}
	// Part r's halo rows from p, ascending global id, are what p sends r.
	for r := range s.Send {
		var seg []int32
		if r != p {
			seg = pl.halo[r][pl.recvStart[r][p]:pl.recvStart[r][p+1]]
		}
		send := make([]int32, len(seg))
		for k, v := range seg {
			send[k] = pl.localRow[v]
		}
		s.Send[r] = send
	}

	// col maps every node that can appear in p's rows (owned or halo) to
	// its local column; other entries are stale and never read.
	col := b.col
	for i, v := range own {
		col[v] = int32(i)
	}
	for k, v := range halo {
		col[v] = int32(nOwn + k)
	}
	s.Indptr = make([]int64, nOwn+1)
	for i, d := range own {
		s.Indptr[i+1] = s.Indptr[i] + g.Indptr[d+1] - g.Indptr[d]
	}
	s.Indices = make([]int32, s.Indptr[nOwn])
	runChunks(rowChunks(s.Indptr, runtime.GOMAXPROCS(0)), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			d := own[i]
			dst := s.Indices[s.Indptr[i]:s.Indptr[i+1]]
			for k, v := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				dst[k] = col[v]
			}
		}
	})

	s.LoopDegree = make([]int32, nOwn+len(halo))
	for i, v := range own {
		s.LoopDegree[i] = b.loopDeg[v]
	}
	for k, v := range halo {
		s.LoopDegree[nOwn+k] = b.loopDeg[v]
	}
	s.Labels = make([]int32, nOwn)
	for i, v := range own {
		s.Labels[i] = ds.Labels[v]
	}
	s.Features = make([]float32, (nOwn+len(halo))*f)
	par.Range(nOwn, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := int(own[i])
			copy(s.Features[i*f:(i+1)*f], ds.Features[v*f:(v+1)*f])
		}
	})
	return s
}

// NoComm returns the "no communication" baseline of s: the subgraph induced
// by the owned nodes, with cut edges dropped and no halo. Its LoopDegree
// counts only the kept edges (plus the self loop), so GCN normalisation and
// mean aggregation are those of the local subgraph rather than of a graph
// with silently missing neighbours. The owned-row arrays (Owned, Features,
// Labels and the splits) are shared with s.
func (s *Shard) NoComm() *Shard {
	c := *s
	n := len(s.Owned)
	c.Features = s.Features[:n*s.NumFeatures]
	c.Halo = []int32{}
	c.RecvStart = make([]int, s.NumParts+1)
	c.Send = make([][]int32, s.NumParts)
	for p := range c.Send {
		c.Send[p] = []int32{}
	}
	c.Indptr = make([]int64, n+1)
	c.LoopDegree = make([]int32, n)
	bounds := rowChunks(s.Indptr, runtime.GOMAXPROCS(0))
	runChunks(bounds, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			kept, loop := 0, false
			for _, v := range s.Indices[s.Indptr[i]:s.Indptr[i+1]] {
				if int(v) < n {
					kept++
					loop = loop || int(v) == i
				}
			}
			c.Indptr[i+1] = int64(kept)
			c.LoopDegree[i] = int32(kept)
			if !loop {
				c.LoopDegree[i]++
			}
		}
	})
	for i := 0; i < n; i++ {
		c.Indptr[i+1] += c.Indptr[i]
	}
	c.Indices = make([]int32, c.Indptr[n])
	runChunks(bounds, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			at := c.Indptr[i]
			for _, v := range s.Indices[s.Indptr[i]:s.Indptr[i+1]] {
				if int(v) < n {
					c.Indices[at] = v
					at++
				}
			}
		}
	})
	return &c
}
