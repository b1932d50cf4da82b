package partition

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/cgo/metis"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// Partition methods understood by Partition.
const (
	MethodMETIS  = "metis"
	MethodRandom = "random"
)

// Partition assigns ds's nodes to q parts with the named method. METIS also
// balances the training nodes of the named split ("" = none).
func Partition(ds *data.Dataset, split string, q int, method string, seed uint64) ([]int32, error) {
	var train []int32
	if split != "" {
		s, err := lookupSplit(ds, split)
		if err != nil {
			return nil, err
		}
		train = s.Train
	}
	switch method {
	case MethodMETIS:
		return PartitionMETIS(ds.Graph, q, seed, train)
	case MethodRandom:
		return PartitionRandom(ds.Graph, q, seed)
	}
	return nil, fmt.Errorf("partition method %q: expected %q or %q", method, MethodMETIS, MethodRandom)
}

// EmptyParts lists the parts of a q-part assignment that hold no node
// (METIS may leave some on a small or disconnected graph).
func EmptyParts(parts []int32, q int) []int {
	count := make([]int, q)
	for _, p := range parts {
		if p >= 0 && int(p) < q {
			count[p]++
		}
	}
	var empty []int
	for p, c := range count {
		if c == 0 {
			empty = append(empty, p)
		}
	}
	return empty
}

// EmptyPartsText is the warning about empty parts, "" when there are none.
func EmptyPartsText(parts []int32, q int, method string) string {
	empty := EmptyParts(parts, q)
	if len(empty) == 0 {
		return ""
	}
	names := make([]string, len(empty))
	for i, p := range empty {
		names[i] = fmt.Sprint(p)
	}
	noun := "part"
	if len(empty) > 1 {
		noun = "parts"
	}
	return fmt.Sprintf("%s left %s %s of %d without nodes (%d nodes): their ranks will hold nothing to train on; use fewer parts or --method random",
		method, noun, strings.Join(names, ", "), q, len(parts))
}

func lookupSplit(ds *data.Dataset, name string) (*data.Split, error) {
	s, ok := ds.Splits[name]
	if !ok {
		have := strings.Join(ds.SplitNames(), ", ")
		if have == "" {
			have = "none"
		}
		return nil, fmt.Errorf("dataset %s has no split %q (splits: %s)", ds.Name, name, have)
	}
	return s, nil
}

func checkNumParts(n, q int) error {
	if q < 1 || q > n {
		return &CountError{Parts: q, Nodes: n}
	}
	return nil
}

// CountError is a part count the graph cannot take (every part needs a
// node): a usage error.
type CountError struct{ Parts, Nodes int }

func (e *CountError) Error() string {
	return fmt.Sprintf("partition: %d parts for %d nodes, expected a part count in [1, %d]", e.Parts, e.Nodes, e.Nodes)
}

// ExitCode is 2, the exit code of bad input.
func (e *CountError) ExitCode() int { return 2 }

// PartitionRandom deals a seeded random permutation of the nodes round-robin
// to q parts, so part sizes differ by at most one.
func PartitionRandom(g *data.Graph, q int, seed uint64) ([]int32, error) {
	if err := checkNumParts(g.N, q); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x7061727469746e)) // stream "partitn"
	parts := make([]int32, g.N)
	for k, v := range r.Perm(g.N) {
		parts[v] = int32(k % q)
	}
	return parts, nil
}

// PartitionMETIS partitions g into q parts with METIS k-way, minimising the
// cut of the symmetrised graph (both edge directions, no self loops or
// duplicates). With at least q training nodes it balances two constraints,
// all nodes and training nodes, so that every rank gets a fair share of the
// loss work. The result is deterministic for a given seed.
func PartitionMETIS(g *data.Graph, q int, seed uint64, train []int32) ([]int32, error) {
	if err := checkNumParts(g.N, q); err != nil {
		return nil, err
	}
	if q == 1 {
		return make([]int32, g.N), nil
	}
	if int64(g.N) > metisMaxAdjacency {
		return nil, fmt.Errorf("partition: %d nodes, beyond METIS's 32-bit idx_t limit of %d; use the random method", g.N, metisMaxAdjacency)
	}
	for _, v := range train {
		if v < 0 || int(v) >= g.N {
			return nil, fmt.Errorf("partition: training node %d out of range [0, %d)", v, g.N)
		}
	}
	var vwgt []int32
	if len(train) >= q { // with fewer, some parts get none whatever METIS does
		vwgt = make([]int32, 2*g.N)
		for i := 0; i < g.N; i++ {
			vwgt[2*i] = 1
		}
		for _, v := range train {
			vwgt[2*v+1] = 1
		}
	}
	mg, err := metisGraph(g)
	if err != nil {
		return nil, err
	}
	if vwgt != nil {
		// Nodes get METIS's default tolerance; training nodes one node per
		// part more. With few training nodes per part METIS cannot meet
		// 1.03 on them and then gives up node balance instead (2 training
		// nodes over 4 parts left one part empty).
		mg.Vwgt, mg.NCon = vwgt, 2
		mg.UBVec = []float32{1.03, 1.03 + float32(q)/float32(len(train))}
	}
	opts := metis.DefaultOptions()
	opts[metis.OptionSeed] = metisSeed(seed)
	parts, _, err := metis.PartGraphKway(mg, q, &opts)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	for v, p := range parts {
		if p < 0 || int(p) >= q {
			return nil, fmt.Errorf("partition: METIS put node %d in part %d, outside [0, %d)", v, p, q)
		}
	}
	return parts, nil
}

// metisMaxAdjacency is METIS's limit on adjacency entries (idx_t is
// 32-bit); a variable so that tests can reach the refusal.
var metisMaxAdjacency int64 = math.MaxInt32

// metisSeed folds a 64-bit seed into METIS's non-negative 32-bit seed (-1
// would mean METIS's fixed default).
func metisSeed(seed uint64) int32 {
	return int32(uint32(seed^seed>>32) & math.MaxInt32)
}

// metisGraph builds the undirected graph METIS needs: node i's neighbours
// are its in- and out-neighbours, each once, without i itself, in order of
// first appearance (in-neighbours in row order, then any out-neighbours
// that are not in-neighbours, ascending), so the result is deterministic. Refuses graphs whose
// adjacency does not fit METIS's 32-bit idx_t.
func metisGraph(g *data.Graph) (metis.Graph, error) {
	// Most GNN graphs are stored symmetric already; then the in-neighbours
	// are the whole neighbourhood and the transpose is not needed.
	var tptr []int64
	var tind []int32
	if !isSymmetric(g) {
		var err error
		if tptr, tind, err = transpose(g); err != nil {
			return metis.Graph{}, err
		}
	}
	n := g.N
	// Two passes with the same dedup (count, then fill) keep memory at the
	// final arrays plus the transpose.
	bounds := rowChunks(g.Indptr, markWorkers(g))
	row := func(i int, mark, buf []int32) []int32 {
		buf = buf[:0]
		for _, v := range g.Indices[g.Indptr[i]:g.Indptr[i+1]] {
			if int(v) != i && mark[v] != int32(i) {
				mark[v] = int32(i)
				buf = append(buf, v)
			}
		}
		if tind == nil {
			return buf
		}
		for _, v := range tind[tptr[i]:tptr[i+1]] {
			if int(v) != i && mark[v] != int32(i) {
				mark[v] = int32(i)
				buf = append(buf, v)
			}
		}
		return buf
	}
	newMark := func() []int32 {
		mark := make([]int32, n)
		for k := range mark {
			mark[k] = -1
		}
		return mark
	}
	deg := make([]int64, n+1)
	runChunks(bounds, func(_, lo, hi int) {
		mark, buf := newMark(), []int32(nil)
		for i := lo; i < hi; i++ {
			buf = row(i, mark, buf)
			deg[i+1] = int64(len(buf))
		}
	})
	for i := 0; i < n; i++ {
		deg[i+1] += deg[i]
	}
	if total := deg[n]; total > metisMaxAdjacency {
		return metis.Graph{}, fmt.Errorf("partition: the symmetrised graph has %d adjacency entries (%d undirected edges), beyond METIS's 32-bit idx_t limit of %d; use the random method", total, total/2, metisMaxAdjacency)
	}
	xadj := make([]int32, n+1)
	for i := range xadj {
		xadj[i] = int32(deg[i])
	}
	adjncy := make([]int32, deg[n])
	runChunks(bounds, func(_, lo, hi int) {
		mark, buf := newMark(), []int32(nil)
		for i := lo; i < hi; i++ {
			buf = row(i, mark, buf)
			copy(adjncy[xadj[i]:], buf)
		}
	})
	return metis.Graph{Xadj: xadj, Adjncy: adjncy}, nil
}

// markWorkers is how many workers may each hold an N-sized scratch array:
// at most 8, and few enough that the scratch stays below the edge arrays.
func markWorkers(g *data.Graph) int {
	w := min(runtime.GOMAXPROCS(0), 8)
	if g.N > 0 {
		w = min(w, int(max(1, g.NumEdges()/int64(g.N))))
	}
	return max(w, 1)
}

// rowChunks splits the rows [0, N) of a CSR into at most k contiguous
// ranges of about equal work (rows plus edges): chunk c is rows
// [bounds[c], bounds[c+1]).
func rowChunks(indptr []int64, k int) []int {
	n := len(indptr) - 1
	total := indptr[n] + int64(n)
	bounds := []int{0}
	for c := 1; c <= k; c++ {
		target := total * int64(c) / int64(k)
		r := sort.Search(n, func(r int) bool { return indptr[r]+int64(r) >= target })
		if c == k {
			r = n
		}
		if r > bounds[len(bounds)-1] {
			bounds = append(bounds, r)
		}
	}
	return bounds
}

// runChunks runs body on every chunk of bounds concurrently.
func runChunks(bounds []int, body func(c, lo, hi int)) {
	if len(bounds) == 2 {
		body(0, bounds[0], bounds[1])
		return
	}
	var wg sync.WaitGroup
	for c := 0; c+1 < len(bounds); c++ {
		wg.Go(func() { body(c, bounds[c], bounds[c+1]) })
	}
	wg.Wait()
}

// transpose returns g's edges stored by source: row s of (indptr, indices)
// lists the destinations of the edges out of s, in ascending order. It is a
// parallel counting sort: each chunk of rows counts its edges per source,
// and the counts become per-chunk write offsets, so no atomics are needed
// and the output does not depend on the number of workers.
func transpose(g *data.Graph) ([]int64, []int32, error) {
	n, e := g.N, g.NumEdges()
	bounds := rowChunks(g.Indptr, markWorkers(g))
	for c := 0; c+1 < len(bounds); c++ {
		if g.Indptr[bounds[c+1]]-g.Indptr[bounds[c]] > math.MaxInt32 { // the int32 counts below
			return nil, nil, fmt.Errorf("partition: rows %d..%d hold more than 2^31-1 edges", bounds[c], bounds[c+1]-1)
		}
	}
	cnt := make([][]int32, len(bounds)-1)
	runChunks(bounds, func(c, lo, hi int) {
		k := make([]int32, n)
		for _, s := range g.Indices[g.Indptr[lo]:g.Indptr[hi]] {
			k[s]++
		}
		cnt[c] = k
	})
	indptr := make([]int64, n+1)
	for s := 0; s < n; s++ {
		var run int64
		for _, k := range cnt {
			x := int64(k[s])
			k[s] = int32(run) // becomes this chunk's offset within row s
			run += x
		}
		if run > math.MaxInt32 {
			return nil, nil, fmt.Errorf("partition: node %d has %d out-edges, more than 2^31-1", s, run)
		}
		indptr[s+1] = indptr[s] + run
	}
	indices := make([]int32, e)
	runChunks(bounds, func(c, lo, hi int) {
		off := cnt[c]
		for d := lo; d < hi; d++ {
			for _, s := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				indices[indptr[s]+int64(off[s])] = int32(d)
				off[s]++
			}
		}
	})
	return indptr, indices, nil
}

// isSymmetric reports whether g's edges, as a multiset, equal their
// reverses, so that every node's in-neighbours are also its out-neighbours.
// It compares the wrapping sums of mix64 (SplitMix64) of (s, d) and of
// (d, s) over all edges: O(E) time and no memory. Different multisets collide with
// probability about 2^-64; METIS would then see a slightly asymmetric graph,
// which costs cut quality, not correctness.
func isSymmetric(g *data.Graph) bool {
	var fwd, bwd atomic.Uint64
	runChunks(rowChunks(g.Indptr, runtime.GOMAXPROCS(0)), func(_, lo, hi int) {
		var f, b uint64
		for d := lo; d < hi; d++ {
			for _, s := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				f += rng.Mix64(uint64(uint32(s))<<32 | uint64(d))
				b += rng.Mix64(uint64(d)<<32 | uint64(uint32(s)))
			}
		}
		fwd.Add(f)
		bwd.Add(b)
	})
	return fwd.Load() == bwd.Load()
}

// EdgeCut counts the directed edges of g whose endpoints lie in different
// parts. parts must have one entry per node.
func EdgeCut(g *data.Graph, parts []int32) int64 {
	var cut atomic.Int64
	runChunks(rowChunks(g.Indptr, runtime.GOMAXPROCS(0)), func(_, lo, hi int) {
		var c int64
		for d := lo; d < hi; d++ {
			pd := parts[d]
			for _, s := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				if parts[s] != pd {
					c++
				}
			}
		}
		cut.Add(c)
	})
	return cut.Load()
}

// checkAssignment checks a part assignment against n nodes and q parts.
func checkAssignment(n int, parts []int32, q int) error {
	if q < 1 || q > math.MaxInt32 {
		return fmt.Errorf("partition: %d parts, expected at least 1", q)
	}
	if len(parts) != n {
		return fmt.Errorf("partition: assignment has %d entries for %d nodes", len(parts), n)
	}
	for v, p := range parts {
		if p < 0 || int(p) >= q {
			return fmt.Errorf("partition: node %d is in part %d, expected a part in [0, %d)", v, p, q)
		}
	}
	return nil
}

// partPlan is what every shard derives from: who owns which node, and each
// part's halo. Send lists are not stored: part o sends to p exactly p's halo
// rows from o, so Send is read off the receiver's halo.
type partPlan struct {
	q         int
	parts     []int32
	localRow  []int32   // node -> its row in its owner's Owned
	owned     [][]int32 // per part: owned global ids, ascending
	halo      [][]int32 // per part: halo ids grouped by owner part, ascending within
	recvStart [][]int   // per part: halo[p][recvStart[p][o]:recvStart[p][o+1]] comes from o
}

// newPartPlan computes the plan in O(N + E + q*N/64) time: owned lists by a
// chunked counting pass, and each part's halo as a bitmap over the nodes,
// filled in parallel from the part's rows and read out in id order.
func newPartPlan(g *data.Graph, parts []int32, q int) (*partPlan, error) {
	n := g.N
	if err := checkAssignment(n, parts, q); err != nil {
		return nil, err
	}
	pl := &partPlan{q: q, parts: parts, localRow: make([]int32, n),
		owned: make([][]int32, q), halo: make([][]int32, q), recvStart: make([][]int, q)}

	// Owned lists: chunk c's nodes of part p go after those of chunks < c.
	w := runtime.GOMAXPROCS(0)
	bounds := []int{0}
	for c := 1; c <= w; c++ {
		if b := n * c / w; b > bounds[len(bounds)-1] {
			bounds = append(bounds, b)
		}
	}
	cnt := make([][]int, len(bounds)-1)
	runChunks(bounds, func(c, lo, hi int) {
		k := make([]int, q)
		for _, p := range parts[lo:hi] {
			k[p]++
		}
		cnt[c] = k
	})
	for p := 0; p < q; p++ {
		run := 0
		for _, k := range cnt {
			x := k[p]
			k[p] = run
			run += x
		}
		pl.owned[p] = make([]int32, run)
	}
	runChunks(bounds, func(c, lo, hi int) {
		at := cnt[c]
		for v := lo; v < hi; v++ {
			p := parts[v]
			pl.owned[p][at[p]] = int32(v)
			pl.localRow[v] = int32(at[p])
			at[p]++
		}
	})

	for p := range pl.recvStart {
		pl.recvStart[p] = make([]int, q+1)
	}
	if q == 1 {
		return pl, nil
	}
	// One bitmap over the nodes per part, all filled in one pass over the
	// rows in order (sequential reads, as in EdgeCut; walking each part's
	// scattered rows instead was several times slower). Parts go in groups
	// that keep the bitmaps within 256 MiB.
	words := (n + 63) / 64
	group := max(1, min(q, (256<<20)/8/words))
	bitmap := make([]uint64, group*words)
	bounds = rowChunks(g.Indptr, runtime.GOMAXPROCS(0))
	for p0 := 0; p0 < q; p0 += group {
		p1 := min(q, p0+group)
		runChunks(bounds, func(_, lo, hi int) {
			for d := lo; d < hi; d++ {
				p := int(parts[d])
				if p < p0 || p >= p1 {
					continue
				}
				bm := bitmap[(p-p0)*words : (p-p0+1)*words]
				for _, s := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
					if int(parts[s]) != p {
						word, bit := &bm[s>>6], uint64(1)<<(s&63)
						if atomic.LoadUint64(word)&bit == 0 {
							atomic.OrUint64(word, bit)
						}
					}
				}
			}
		})
		for p := p0; p < p1; p++ {
			pl.halo[p] = haloFromBitmap(bitmap[(p-p0)*words:(p-p0+1)*words], parts, pl.recvStart[p])
		}
	}
	return pl, nil
}

// haloFromBitmap reads a part's halo out of its bitmap (clearing it) in id
// order, counting per owner into recvStart, and returns the ids grouped by
// owner part (stable, so ascending within an owner).
func haloFromBitmap(bm []uint64, parts []int32, recvStart []int) []int32 {
	q := len(recvStart) - 1
	total := 0
	for _, x := range bm {
		total += bits.OnesCount64(x)
	}
	ids := make([]int32, 0, total)
	for i, x := range bm {
		if x == 0 {
			continue
		}
		bm[i] = 0
		for ; x != 0; x &= x - 1 {
			s := int32(i*64 + bits.TrailingZeros64(x))
			ids = append(ids, s)
			recvStart[parts[s]+1]++
		}
	}
	for o := 0; o < q; o++ {
		recvStart[o+1] += recvStart[o]
	}
	h := make([]int32, total)
	at := slices.Clone(recvStart[:q])
	for _, s := range ids {
		o := parts[s]
		h[at[o]] = s
		at[o]++
	}
	return h
}

// PartStats describes one part of a partition.
type PartStats struct {
	Nodes      int   // owned nodes
	Edges      int64 // edges into owned nodes: the rows of the local CSR
	TrainNodes int   // owned training nodes
	RecvRows   []int // RecvRows[o]: halo rows received from part o per layer
	SendRows   []int // SendRows[o]: owned rows sent to part o per layer
}

// HaloRows is the number of halo rows the part receives per layer.
func (p *PartStats) HaloRows() int {
	t := 0
	for _, r := range p.RecvRows {
		t += r
	}
	return t
}

// PartitionStats summarises a partition: balance and communication.
type PartitionStats struct {
	NumParts     int
	Parts        []PartStats
	EdgeCut      int64   // directed edges between parts
	CommRows     int64   // rows exchanged per layer and direction: the sum of all halos
	NodeBalance  float64 // max/mean of owned nodes
	TrainBalance float64 // max/mean of owned training nodes; 0 without training nodes
}

// ComputePartitionStats computes the statistics of assigning g's nodes to q
// parts; train (may be nil) is the training split's node ids.
func ComputePartitionStats(g *data.Graph, parts []int32, q int, train []int32) (*PartitionStats, error) {
	pl, err := newPartPlan(g, parts, q)
	if err != nil {
		return nil, err
	}
	for _, v := range train {
		if v < 0 || int(v) >= g.N {
			return nil, fmt.Errorf("partition: training node %d out of range [0, %d)", v, g.N)
		}
	}
	return pl.stats(g, train), nil
}

func (pl *partPlan) stats(g *data.Graph, train []int32) *PartitionStats {
	q := pl.q
	st := &PartitionStats{NumParts: q, Parts: make([]PartStats, q), EdgeCut: EdgeCut(g, pl.parts)}
	for p := range st.Parts {
		ps := &st.Parts[p]
		ps.Nodes = len(pl.owned[p])
		for _, d := range pl.owned[p] {
			ps.Edges += g.Indptr[d+1] - g.Indptr[d]
		}
		ps.RecvRows = make([]int, q)
		ps.SendRows = make([]int, q)
	}
	for _, v := range train {
		st.Parts[pl.parts[v]].TrainNodes++
	}
	for p := 0; p < q; p++ {
		for o := 0; o < q; o++ {
			r := pl.recvStart[p][o+1] - pl.recvStart[p][o]
			st.Parts[p].RecvRows[o] = r
			st.Parts[o].SendRows[p] = r
			st.CommRows += int64(r)
		}
	}
	st.setBalance()
	return st
}

// setBalance fills the balance fields from the per-part counts.
func (st *PartitionStats) setBalance() {
	var nodes, train, maxNodes, maxTrain int
	for _, p := range st.Parts {
		nodes += p.Nodes
		train += p.TrainNodes
		maxNodes = max(maxNodes, p.Nodes)
		maxTrain = max(maxTrain, p.TrainNodes)
	}
	q := float64(st.NumParts)
	st.NodeBalance, st.TrainBalance = 0, 0
	if nodes > 0 {
		st.NodeBalance = float64(maxNodes) * q / float64(nodes)
	}
	if train > 0 {
		st.TrainBalance = float64(maxTrain) * q / float64(train)
	}
}

// String formats the statistics as a table, one line per part.
func (st *PartitionStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "parts %d  edge cut %d  halo rows per layer %d  balance nodes %.3f train %.3f\n",
		st.NumParts, st.EdgeCut, st.CommRows, st.NodeBalance, st.TrainBalance)
	fmt.Fprintf(&b, "%6s %10s %12s %8s %10s %10s\n", "part", "nodes", "edges", "train", "halo_in", "sent")
	for p := range st.Parts {
		ps := &st.Parts[p]
		sent := 0
		for _, r := range ps.SendRows {
			sent += r
		}
		fmt.Fprintf(&b, "%6d %10d %12d %8d %10d %10d\n", p, ps.Nodes, ps.Edges, ps.TrainNodes, ps.HaloRows(), sent)
	}
	return b.String()
}
