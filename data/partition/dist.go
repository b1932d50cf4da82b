package partition

// Distributed partition: every rank of a job reads only its slice of a
// dataset file (a contiguous range of nodes), the ranks assign the nodes
// to parts together (PT-Scotch, or the seeded random permutation), move
// every node's row, label and features to its part's rank, and each rank
// builds its own Shard, exactly as BuildShard would from the whole
// dataset. No rank holds the whole graph or feature matrix.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/cgo/ptscotch"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/internal/par"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// MethodPTScotch is PT-Scotch's distributed k-way partitioner, for
// Distribute (under mpirun: it needs MPI ranks).
const MethodPTScotch = "ptscotch"

// ptscotchBalance is the imbalance PT-Scotch may leave: the largest part
// at most 3% above the mean, METIS's default.
const ptscotchBalance = 0.03

// roundBytes bounds what one rank sends in one all-to-all of the row
// moves: larger moves take several rounds. A variable so that tests can
// force many rounds.
var roundBytes int64 = 64 << 20

// DistOptions says what Distribute partitions, and how.
type DistOptions struct {
	Path      string // a dataset file (.h5)
	Split     string // "" = the first in sorted order
	Method    string // MethodPTScotch or MethodRandom
	Seed      uint64
	Normalize bool // scale every feature row to unit L1 norm (as NormalizeFeatureRows)
	// Settings are compared with rank 0's before anything is read (with
	// the input file's identity), so that ranks started differently stop
	// at once with one line.
	Settings []Setting
}

// Distributed is one rank's result of Distribute: its shard, and the
// partition's description (its Parts are nil: a rank holds the parts of
// its own slice of the nodes only).
type Distributed struct {
	Shard *Shard
	Meta  *PartitionMeta

	bounds     []int64 // rank k's slice is the nodes [bounds[k], bounds[k+1])
	sliceParts []int32 // the part of every node of this rank's slice
}

// DistributeShard is Distribute for the training runtime: this rank's
// shard and the partition's description, with every rank of c reading
// only its slice of the dataset file at path.
func DistributeShard(c Comm, path, split string, method string, seed uint64, normalize bool) (*Shard, *PartitionMeta, error) {
	d, err := Distribute(c, DistOptions{Path: path, Split: split, Method: method, Seed: seed, Normalize: normalize})
	if err != nil {
		return nil, nil, err
	}
	return d.Shard, d.Meta, nil
}

// Distribute partitions the dataset file opt.Path into as many parts as c
// has ranks, every rank reading only its slice (the nodes [N*r/Q,
// N*(r+1)/Q), their rows, labels and features, and its share of the
// split's lists), and returns this rank's part. The shard, the dataset
// fingerprint and the partition id are those the one-process path
// (Partition, BuildShard, PartitionID) gives for the same assignment; the
// random method's assignment is PartitionRandom's. Every failure is
// agreed on: the lowest failing rank returns its error, the others a
// *RankFailed.
func Distribute(c Comm, opt DistOptions) (*Distributed, error) {
	me, q := c.Rank(), c.Size()
	var err error
	if opt.Method != MethodPTScotch && opt.Method != MethodRandom {
		err = fmt.Errorf("partition method %q: expected %q or %q for a distributed partition", opt.Method, MethodPTScotch, MethodRandom)
	}
	var id string
	if err == nil {
		id, err = fileIdentity(opt.Path)
	}
	if err := agree(c, "opening the input", err); err != nil {
		return nil, err
	}
	settings := append(slices.Clone(opt.Settings), Setting{"the input file (--data: its size and the digest of its first and last MiB)", id})
	if err := agreeSettings(c, settings); err != nil {
		return nil, err
	}
	sl, err := datafile.ReadSlice(opt.Path, me, q, opt.Split)
	if err == nil && q > sl.N {
		err = &CountError{Parts: q, Nodes: sl.N}
	}
	if err := agree(c, "reading the slices", err); err != nil {
		return nil, err
	}
	b := &distBuilder{c: c, opt: opt, sl: sl, q: q, me: me, lo: int64(sl.Lo), n: sl.Hi - sl.Lo}
	b.bounds = make([]int64, q+1)
	for k := range q {
		b.bounds[k], b.bounds[k+1] = datafile.SliceRange(int64(sl.N), k, q)
	}
	d, err := b.run()
	if err != nil {
		return nil, err
	}
	return d, nil
}

// fileIdentity names a file's content cheaply: its size and the digest of
// its first and last MiB (a copy on another host has another mtime).
func fileIdentity(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", data.InputErrorf(path, 0, "", "missing: no such file: expected an HDF5 dataset file")
	}
	if err != nil {
		return "", data.InputErrorf(path, 0, "", "cannot open: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("not a regular file, expected a .h5 dataset file")
	}
	if err != nil {
		return "", data.InputErrorf(path, 0, "", "%v", err)
	}
	head := make([]byte, min(st.Size(), 1<<20))
	tail := make([]byte, min(st.Size(), 1<<20))
	if _, err := f.ReadAt(head, 0); err == nil {
		_, err = f.ReadAt(tail, st.Size()-int64(len(tail)))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", data.InputErrorf(path, 0, "", "cannot read: %v", err)
	}
	return fmt.Sprintf("%d bytes, %016x", st.Size(), data.Digest(head, tail)), nil
}

// distBuilder is one rank's state while the ranks partition together.
type distBuilder struct {
	c      Comm
	opt    DistOptions
	sl     *datafile.Slice
	q, me  int
	lo     int64 // the slice is nodes [lo, lo+n)
	n      int
	bounds []int64

	code    []uint8 // per slice node: 0, or 1 + the split list holding it
	loopDeg []int32 // per slice node: its in-degree in A+I
	parts   []int32 // per slice node: its part

	// The array digests of the fingerprint and split digest.
	blocks map[string][]uint64

	s *Shard
	// from[k]: the owned rows [from[k], from[k+1]) came from rank k.
	from []int
}

// sliceOf is the rank whose slice holds node v.
func (b *distBuilder) sliceOf(v int32) int {
	return sort.Search(b.q, func(k int) bool { return b.bounds[k+1] > int64(v) })
}

func (b *distBuilder) run() (*Distributed, error) {
	if err := b.agree("checking the split", b.splitMembership()); err != nil {
		return nil, err
	}
	if err := b.agree("checking digests", b.graphDigests()); err != nil {
		return nil, err
	}
	b.loopDeg = make([]int32, b.n)
	var bad atomic.Int64
	bad.Store(-1)
	par.Range(b.n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := b.sl.Indices[b.sl.Indptr[i]-b.sl.Indptr[0] : b.sl.Indptr[i+1]-b.sl.Indptr[0]]
			d := int64(len(row)) + 1
			if slices.Contains(row, int32(b.lo)+int32(i)) {
				d--
			}
			if d > math.MaxInt32 {
				par.StoreMin(&bad, int64(i))
				return
			}
			b.loopDeg[i] = int32(d)
		}
	})
	var err error
	if i := bad.Load(); i >= 0 {
		err = fmt.Errorf("shard: node %d has more in-edges than the int32 degree range", b.lo+i)
	}
	if err := b.agree("degrees", err); err != nil {
		return nil, err
	}
	switch {
	case b.q == 1:
		b.parts = make([]int32, b.n)
	case b.opt.Method == MethodRandom:
		b.parts = randomSlice(b.sl.N, b.q, b.opt.Seed, int(b.lo), b.n)
	default:
		err = b.ptscotch()
	}
	if err := b.agree("assigning parts", err); err != nil {
		return nil, err
	}
	if err := b.moveRows(); err != nil {
		return nil, err
	}
	if err := b.agree("building the halo", b.halo()); err != nil {
		return nil, err
	}
	st, err := b.stats()
	if err != nil {
		return nil, err
	}
	if err := b.agree("moving features", b.features()); err != nil {
		return nil, err
	}
	meta, err := b.meta(st)
	if err != nil {
		return nil, err
	}
	return &Distributed{Shard: b.s, Meta: meta, bounds: b.bounds, sliceParts: b.parts}, nil
}

func (b *distBuilder) agree(what string, err error) error {
	return agree(b.c, what, err)
}

// splitMembership sends every id of this rank's share of the split's lists
// to the rank whose slice holds it, which marks its node (code), and checks
// that the lists are sorted across shares and disjoint.
func (b *distBuilder) splitMembership() error {
	sl := b.sl
	var ends []int64
	for k := range 3 {
		if ids := sl.SplitIDs[k]; len(ids) > 0 {
			ends = append(ends, int64(ids[0]), int64(ids[len(ids)-1]))
		} else {
			ends = append(ends, -1, -1)
		}
	}
	all, err := allGather(b.c, "split ends", ends)
	if err != nil {
		return err
	}
	for k := range 3 {
		prev, at := int64(-1), int64(0)
		for r := range b.q {
			first, last := all[r][2*k], all[r][2*k+1]
			_, hi := datafile.SliceRange(sl.SplitLen[k], r, b.q)
			if first >= 0 && first <= prev {
				return data.InputErrorf(sl.Path, 0, "/splits/"+sl.Split+"/"+datafile.SplitParts[k], "entry %d is node %d after node %d, expected ids sorted ascending without repeats (as the format asks; rewrite the file with gnn-spmd convert)", at, first, prev)
			}
			if last >= 0 {
				prev = last
			}
			at = hi
		}
	}
	// Codes travel as 4-byte (id << 2 | list) values.
	send := make([][]int32, b.q)
	for k := range 3 {
		for _, id := range sl.SplitIDs[k] {
			r := b.sliceOf(id)
			send[r] = append(send[r], int32(int64(id)-b.bounds[r])<<2|int32(k))
		}
	}
	recv, err := exchange(b.c, "split membership", send)
	if err != nil {
		return err
	}
	b.code = make([]uint8, b.n)
	for k := range 3 {
		for _, got := range recv {
			for _, x := range got {
				if int(x&3) != k {
					continue
				}
				i := x >> 2
				field := "/splits/" + sl.Split + "/" + datafile.SplitParts[k]
				if o := b.code[i]; o != 0 {
					if int(o) == k+1 {
						return data.InputErrorf(sl.Path, 0, field, "lists node %d twice", b.lo+int64(i))
					}
					return data.InputErrorf(sl.Path, 0, field, "node %d is also in %s, expected disjoint train/valid/test", b.lo+int64(i), datafile.SplitParts[o-1])
				}
				b.code[i] = uint8(k + 1)
			}
		}
	}
	return nil
}

// graphDigests digests the graph, labels and split lists with the other
// ranks, checks them against the file's digests and keeps them for the
// fingerprint.
func (b *distBuilder) graphDigests() error {
	sl := b.sl
	b.blocks = map[string][]uint64{}
	ptr := sl.Indptr[:b.n]
	if sl.Hi == sl.N {
		ptr = sl.Indptr // the last slice holds indptr[N]
	}
	pieces := []struct {
		path  string
		local []byte
		off   int64
	}{
		{"/graph/indptr", view(ptr), 8 * b.lo},
		{"/graph/indices", view(sl.Indices), 4 * sl.Indptr[0]},
		{"/node/labels", view(sl.Labels), 4 * b.lo},
	}
	for k, part := range datafile.SplitParts {
		pieces = append(pieces, struct {
			path  string
			local []byte
			off   int64
		}{"/splits/" + sl.Split + "/" + part, view(sl.SplitIDs[k]), 4 * sl.SplitStart[k]})
	}
	for _, p := range pieces {
		blocks, err := distDigest(b.c, p.path, p.local, p.off)
		if err != nil {
			return err
		}
		b.blocks[p.path] = blocks
		if err := b.checkDigest(p.path, blocks); err != nil {
			return err
		}
	}
	return nil
}

// total is the byte length of an array of the dataset.
func (b *distBuilder) total(path string) int64 {
	sl := b.sl
	switch path {
	case "/graph/indptr":
		return 8 * int64(sl.N+1)
	case "/graph/indices":
		return 4 * sl.E
	case "/node/labels":
		return 4 * int64(sl.N)
	case "/node/features", "normalized features":
		return 4 * int64(sl.N) * int64(sl.F)
	}
	for k, part := range datafile.SplitParts {
		if path == "/splits/"+sl.Split+"/"+part {
			return 4 * sl.SplitLen[k]
		}
	}
	panic("partition: no array " + path)
}

// checkDigest compares an array's digest with the file's, where it has one.
func (b *distBuilder) checkDigest(path string, blocks []uint64) error {
	want, ok := b.sl.Digests[path]
	if !ok {
		return nil
	}
	if got := data.CombineDigests([]int64{b.total(path)}, [][]uint64{blocks}); got != want {
		return data.InputErrorf(b.sl.Path, 0, path, "holds values whose digest is %#x, not the %#x written with them: the file is corrupt", got, want)
	}
	return nil
}

// randomSlice is PartitionRandom's assignment of the nodes [lo, lo+n): the
// same seeded shuffle, run whole (4 bytes per node for as long as it
// takes), of which the slice is kept.
func randomSlice(nodes, q int, seed uint64, lo, n int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x7061727469746e)) // PartitionRandom's stream
	perm := make([]int32, nodes)
	for i := range perm {
		perm[i] = int32(i)
	}
	r.Shuffle(nodes, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	parts := make([]int32, n)
	for k, v := range perm {
		if i := int(v) - lo; i >= 0 && i < n {
			parts[i] = int32(k % q)
		}
	}
	return parts
}

// ptscotch assigns the slice's nodes to parts with PT-Scotch on the
// symmetrised graph (every node's in- and out-neighbours, each once,
// without itself), as METIS gets it.
func (b *distBuilder) ptscotch() error {
	nat, ok := b.c.(nativeMPI)
	if !ok {
		return &SetupError{"partition: the ptscotch method runs under mpirun (PT-Scotch needs MPI ranks); use metis or random in one process"}
	}
	sym, err := b.symmetric()
	if err != nil {
		return err
	}
	g, err := b.scotchGraph(sym)
	if err != nil {
		return err
	}
	// PT-Scotch holds about 50 bytes per local arc: drop the slice's
	// sources (read again after) and hand the garbage back first.
	b.sl.Indices = nil
	debug.FreeOSMemory()
	var parts []ptscotch.Num
	step(b.c, "PT-Scotch")
	err = nat.CallNative(func(fcomm int32) error {
		var err error
		parts, err = ptscotch.Part(fcomm, b.q, g, b.q, b.opt.Seed, ptscotchBalance)
		return err
	})
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	g = ptscotch.Graph{}
	if err := b.sl.ReadIndices(); err != nil {
		return err
	}
	b.parts = make([]int32, b.n)
	for i, p := range parts {
		if p < 0 || int(p) >= b.q {
			return fmt.Errorf("partition: PT-Scotch put node %d in part %d, outside [0, %d)", b.lo+int64(i), p, b.q)
		}
		b.parts[i] = int32(p)
	}
	return nil
}

// symmetric reports whether the graph's edges, as a multiset, equal their
// reverses (isSymmetric's test, summed over the ranks).
func (b *distBuilder) symmetric() (bool, error) {
	sl := b.sl
	var fwd, bwd atomic.Uint64
	par.Range(b.n, func(lo, hi int) {
		var f, w uint64
		for i := lo; i < hi; i++ {
			d := uint64(b.lo) + uint64(i)
			for _, s := range sl.Indices[sl.Indptr[i]-sl.Indptr[0] : sl.Indptr[i+1]-sl.Indptr[0]] {
				f += rng.Mix64(uint64(uint32(s))<<32 | d)
				w += rng.Mix64(d<<32 | uint64(uint32(s)))
			}
		}
		fwd.Add(f)
		bwd.Add(w)
	})
	all, err := allGather(b.c, "symmetry check", []uint64{fwd.Load(), bwd.Load()})
	if err != nil {
		return false, err
	}
	var f, w uint64
	for _, a := range all {
		f += a[0]
		w += a[1]
	}
	return f == w, nil
}

// scotchGraph is the slice's piece of the symmetrised graph: each row's
// in-neighbours and, unless the graph is symmetric, its out-neighbours
// (sent by the ranks that hold the edges), sorted, each once, without the
// node itself.
func (b *distBuilder) scotchGraph(sym bool) (ptscotch.Graph, error) {
	sl := b.sl
	extra := make([]int64, b.n+1) // out-neighbours per row, as a CSR
	var out []int32
	if !sym {
		send := make([][]int32, b.q)
		for i := range b.n {
			d := int32(b.lo) + int32(i)
			for _, s := range sl.Indices[sl.Indptr[i]-sl.Indptr[0] : sl.Indptr[i+1]-sl.Indptr[0]] {
				r := b.sliceOf(s)
				send[r] = append(send[r], s, d)
			}
		}
		recv, err := exchange(b.c, "reverse edges", send)
		if err != nil {
			return ptscotch.Graph{}, err
		}
		for _, got := range recv {
			for k := 0; k < len(got); k += 2 {
				extra[int64(got[k])-b.lo+1]++
			}
		}
		for i := range b.n {
			extra[i+1] += extra[i]
		}
		out = make([]int32, extra[b.n])
		at := slices.Clone(extra[:b.n])
		for _, got := range recv {
			for k := 0; k < len(got); k += 2 {
				i := int64(got[k]) - b.lo
				out[at[i]] = got[k+1]
				at[i]++
			}
		}
	}
	// Each row is written at its upper bound's offset, sorted and made
	// unique in place, then the rows are packed.
	base := sl.Indptr[0]
	start := func(i int) int64 { return sl.Indptr[i] - base + extra[i] }
	if start(b.n) > ptscotch.MaxNum {
		return ptscotch.Graph{}, fmt.Errorf("partition: rank %d holds %d arcs, beyond PT-Scotch's %d-bit index (build with -tags scotch64 for its 64-bit variant, or use more processes)", b.me, start(b.n), 8*unsafe.Sizeof(ptscotch.Num(0)))
	}
	var adj []ptscotch.Num
	if out == nil && unsafe.Sizeof(ptscotch.Num(0)) == unsafe.Sizeof(int32(0)) && len(sl.Indices) > 0 {
		// A symmetric graph's rows only shrink: with 32-bit indices they
		// are made in the slice's own sources (read again after PT-Scotch).
		adj = unsafe.Slice((*ptscotch.Num)(unsafe.Pointer(&sl.Indices[0])), len(sl.Indices))
		sl.Indices = nil
	} else {
		adj = make([]ptscotch.Num, start(b.n))
	}
	src := func(k int64) ptscotch.Num { return ptscotch.Num(sl.Indices[k]) }
	if sl.Indices == nil {
		src = func(k int64) ptscotch.Num { return adj[k] }
	}
	length := make([]int64, b.n)
	par.Range(b.n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := adj[start(i):start(i):start(i+1)]
			for k := sl.Indptr[i] - base; k < sl.Indptr[i+1]-base; k++ {
				row = append(row, src(k)) // in place: k is row's own next slot
			}
			for _, s := range out[extra[i]:extra[i+1]] {
				row = append(row, ptscotch.Num(s))
			}
			slices.Sort(row)
			self, k := ptscotch.Num(b.lo+int64(i)), 0
			for j, v := range row {
				if v != self && (j == 0 || v != row[j-1]) {
					row[k] = v
					k++
				}
			}
			length[i] = int64(k)
		}
	})
	ptr := make([]ptscotch.Num, b.n+1)
	for i := range b.n {
		copy(adj[ptr[i]:], adj[start(i):start(i)+length[i]])
		ptr[i+1] = ptr[i] + ptscotch.Num(length[i])
	}
	arcs, err := allGather(b.c, "arc counts", []int64{int64(ptr[b.n])})
	if err != nil {
		return ptscotch.Graph{}, err
	}
	var total int64
	for _, a := range arcs {
		total += a[0]
	}
	if total > ptscotch.MaxNum {
		return ptscotch.Graph{}, fmt.Errorf("partition: the symmetrised graph has %d arcs, beyond PT-Scotch's %d-bit index (build with -tags scotch64 for its 64-bit variant)", total, 8*unsafe.Sizeof(ptscotch.Num(0)))
	}
	return ptscotch.Graph{Ptr: ptr, Adj: adj[:ptr[b.n]:ptr[b.n]]}, nil
}

// rounds runs send in as many rounds as the largest slice's bytes need
// (roundBytes per round): in round c, rank k sends its slice's nodes
// [start, end) of round c (ascending), and take gets what every rank sent
// this one in that round.
func rounds[T elem](b *distBuilder, what string, bytes int64, send func(lo, hi int) [][]T, take func(recv [][]T)) error {
	most, err := allMax(b.c, what+" size", bytes)
	if err != nil {
		return err
	}
	r := int((most + roundBytes - 1) / roundBytes)
	r = max(r, 1)
	for c := range r {
		recv, err := exchange(b.c, what, send(b.n*c/r, b.n*(c+1)/r))
		if err != nil {
			return err
		}
		take(recv)
	}
	return nil
}

// moveRows sends every node of the slice to its part's rank: first a
// header (id, label, split code, row length), from which the receiver
// knows its owned nodes (ascending: the ranks' slices are in id order)
// and lays out its CSR; then the rows, placed as they come.
func (b *distBuilder) moveRows() error {
	sl := b.sl
	type header = [4]int32
	hdrs := make([][]header, b.q)
	err := rounds(b, "moving node headers", 16*int64(b.n), func(lo, hi int) [][]int32 {
		send := make([][]int32, b.q)
		for i := lo; i < hi; i++ {
			p := b.parts[i]
			send[p] = append(send[p], int32(b.lo)+int32(i), sl.Labels[i], int32(b.code[i]), int32(sl.Indptr[i+1]-sl.Indptr[i]))
		}
		return send
	}, func(recv [][]int32) {
		for k, got := range recv {
			for j := 0; j < len(got); j += 4 {
				hdrs[k] = append(hdrs[k], header{got[j], got[j+1], got[j+2], got[j+3]})
			}
		}
	})
	if err != nil {
		return err
	}
	s := &Shard{Part: b.me, NumParts: b.q, NumNodes: sl.N, NumFeatures: sl.F, NumClasses: sl.C,
		Train: []int32{}, Valid: []int32{}, Test: []int32{}}
	nOwn := 0
	b.from = make([]int, b.q+1)
	for k, h := range hdrs {
		nOwn += len(h)
		b.from[k+1] = nOwn
	}
	s.Owned, s.Labels = make([]int32, nOwn), make([]int32, nOwn)
	s.Indptr = make([]int64, nOwn+1)
	i := 0
	for _, hs := range hdrs {
		for _, h := range hs {
			s.Owned[i], s.Labels[i] = h[0], h[1]
			s.Indptr[i+1] = s.Indptr[i] + int64(h[3])
			switch h[2] {
			case 1:
				s.Train = append(s.Train, int32(i))
			case 2:
				s.Valid = append(s.Valid, int32(i))
			case 3:
				s.Test = append(s.Test, int32(i))
			}
			i++
		}
	}
	s.GlobalTrain, s.GlobalValid, s.GlobalTest = int(sl.SplitLen[0]), int(sl.SplitLen[1]), int(sl.SplitLen[2])
	hdrs = nil
	s.Indices = make([]int32, s.Indptr[nOwn])
	b.s = s
	// The rows: rank k's arrive in order after those it sent before.
	at := make([]int64, b.q)
	for k := range b.q {
		at[k] = s.Indptr[b.from[k]]
	}
	base := sl.Indptr[0]
	err = rounds(b, "moving rows", 4*int64(len(sl.Indices)), func(lo, hi int) [][]int32 {
		size := make([]int64, b.q)
		for i := lo; i < hi; i++ {
			size[b.parts[i]] += sl.Indptr[i+1] - sl.Indptr[i]
		}
		send := make([][]int32, b.q)
		for p := range send {
			send[p] = make([]int32, 0, size[p])
		}
		for i := lo; i < hi; i++ {
			p := b.parts[i]
			send[p] = append(send[p], sl.Indices[sl.Indptr[i]-base:sl.Indptr[i+1]-base]...)
		}
		return send
	}, func(recv [][]int32) {
		for k, got := range recv {
			at[k] += int64(copy(s.Indices[at[k]:], got))
		}
	})
	if err != nil {
		return err
	}
	// The slice's graph is not needed any more.
	sl.Indices, sl.Labels = nil, nil
	return nil
}

// halo finds the shard's halo (every other part's node with an edge into
// an owned node, grouped by part, ascending), asks the ranks whose slices
// hold them for their parts and degrees, maps the CSR to local columns
// and builds the send lists with the other ranks.
func (b *distBuilder) halo() error {
	s := b.s
	nOwn := len(s.Owned)
	// Every source, once, in id order: a bitmap over the nodes, and the
	// number of sources before each word, so that a source's index among
	// them is a popcount away.
	words := (s.NumNodes + 63) / 64
	bm := make([]uint64, words)
	par.Range(len(s.Indices), func(lo, hi int) {
		for _, v := range s.Indices[lo:hi] {
			w, bit := &bm[v>>6], uint64(1)<<(v&63)
			if atomic.LoadUint64(w)&bit == 0 {
				atomic.OrUint64(w, bit)
			}
		}
	})
	before := make([]int32, words)
	total := 0
	for w, x := range bm {
		before[w] = int32(total)
		total += bits.OnesCount64(x)
	}
	col := make([]int32, total) // a source's local column, by its index
	var cand []int32            // sources owned elsewhere, ascending
	var candAt []int32          // their indices
	k, o := 0, 0
	for w, x := range bm {
		for ; x != 0; x &= x - 1 {
			v := int32(w*64 + bits.TrailingZeros64(x))
			for o < nOwn && s.Owned[o] < v {
				o++
			}
			if o < nOwn && s.Owned[o] == v {
				col[k] = int32(o)
			} else {
				cand, candAt = append(cand, v), append(candAt, int32(k))
			}
			k++
		}
	}
	// Ask the slices' ranks for the part and degree of every candidate.
	ask := make([][]int32, b.q)
	for _, v := range cand {
		r := b.sliceOf(v)
		ask[r] = append(ask[r], v)
	}
	asked, err := exchange(b.c, "halo lookups", ask)
	if err != nil {
		return err
	}
	answer := make([][]int32, b.q)
	for r, ids := range asked {
		answer[r] = make([]int32, 0, 2*len(ids))
		for _, v := range ids {
			i := int64(v) - b.lo
			answer[r] = append(answer[r], b.parts[i], b.loopDeg[i])
		}
	}
	answers, err := exchange(b.c, "halo answers", answer)
	if err != nil {
		return err
	}
	// The answers come back in the order asked: by rank, ascending.
	part, deg := make([]int32, len(cand)), make([]int32, len(cand))
	j := 0
	for _, a := range answers {
		for x := 0; x < len(a); x += 2 {
			part[j], deg[j] = a[x], a[x+1]
			j++
		}
	}
	s.RecvStart = make([]int, b.q+1)
	for c, p := range part {
		if int(p) == b.me {
			return fmt.Errorf("partition: rank %d: node %d is in its part by its slice's rank but not among the nodes it received", b.me, cand[c])
		}
		s.RecvStart[p+1]++
	}
	for p := range b.q {
		s.RecvStart[p+1] += s.RecvStart[p]
	}
	s.Halo = make([]int32, len(cand))
	s.LoopDegree = make([]int32, nOwn+len(cand))
	next := slices.Clone(s.RecvStart[:b.q])
	for c, v := range cand {
		h := next[part[c]]
		next[part[c]]++
		s.Halo[h] = v
		s.LoopDegree[nOwn+h] = deg[c]
		col[candAt[c]] = int32(nOwn + h)
	}
	cand, candAt, part, deg = nil, nil, nil, nil
	par.Range(len(s.Indices), func(lo, hi int) {
		for e, v := range s.Indices[lo:hi] {
			w := v >> 6
			idx := before[w] + int32(bits.OnesCount64(bm[w]&(uint64(1)<<(v&63)-1)))
			s.Indices[lo+e] = col[idx]
		}
	})
	bm, before, col = nil, nil, nil
	// Owned rows' degrees from their own rows, as loopDegrees computes them.
	for i := range nOwn {
		row := s.Indices[s.Indptr[i]:s.Indptr[i+1]]
		d := int32(len(row)) + 1
		if slices.Contains(row, int32(i)) {
			d--
		}
		s.LoopDegree[i] = d
	}
	// Send lists: part p's halo from this rank, as this rank's rows.
	ids := make([][]int32, b.q)
	for p := range b.q {
		ids[p] = s.Halo[s.RecvStart[p]:s.RecvStart[p+1]]
	}
	wanted, err := exchange(b.c, "send lists", ids)
	if err != nil {
		return err
	}
	s.Send = make([][]int32, b.q)
	for p, vs := range wanted {
		send := make([]int32, len(vs))
		o := 0
		for k, v := range vs {
			for o < nOwn && s.Owned[o] < v {
				o++
			}
			if o == nOwn || s.Owned[o] != v {
				return fmt.Errorf("partition: rank %d asked rank %d for node %d, which it does not own", p, b.me, v)
			}
			send[k] = int32(o)
		}
		s.Send[p] = send
	}
	return nil
}

// stats gathers every part's counts into the partition's statistics.
func (b *distBuilder) stats() (*PartitionStats, error) {
	s := b.s
	nOwn := len(s.Owned)
	var cut atomic.Int64
	par.Range(len(s.Indices), func(lo, hi int) {
		var c int64
		for _, v := range s.Indices[lo:hi] {
			if int(v) >= nOwn {
				c++
			}
		}
		cut.Add(c)
	})
	mine := []int64{int64(nOwn), int64(len(s.Indices)), int64(len(s.Train)), cut.Load()}
	for o := range b.q {
		mine = append(mine, int64(s.RecvStart[o+1]-s.RecvStart[o]))
	}
	all, err := allGather(b.c, "statistics", mine)
	if err != nil {
		return nil, err
	}
	st := &PartitionStats{NumParts: b.q, Parts: make([]PartStats, b.q)}
	for p := range b.q {
		st.Parts[p].RecvRows, st.Parts[p].SendRows = make([]int, b.q), make([]int, b.q)
	}
	for p, a := range all {
		ps := &st.Parts[p]
		ps.Nodes, ps.Edges, ps.TrainNodes = int(a[0]), a[1], int(a[2])
		st.EdgeCut += a[3]
		for o := range b.q {
			r := int(a[4+o])
			ps.RecvRows[o] = r
			st.Parts[o].SendRows[p] = r
			st.CommRows += int64(r)
		}
	}
	st.setBalance()
	return st, nil
}

// features reads the slice's feature rows, checks their digest with the
// other ranks, normalises them when asked, and moves them to their parts'
// ranks, into the shard's features (with zero rows for the halo after the
// owned ones, as ReadShard reads them).
func (b *distBuilder) features() error {
	sl, s := b.sl, b.s
	f := sl.F
	x, err := datafile.ReadFeatureRows(sl.Path, sl.Lo, sl.Hi)
	if err := agree(b.c, "reading features", err); err != nil {
		return err
	}
	if f == 0 {
		x = nil
	}
	blocks, err := distDigest(b.c, "/node/features", view(x), 4*b.lo*int64(f))
	if err != nil {
		return err
	}
	b.blocks["/node/features"] = blocks
	if err := b.checkDigest("/node/features", blocks); err != nil {
		return err
	}
	if b.opt.Normalize && f > 0 {
		(&data.Dataset{Graph: &data.Graph{N: b.n}, NumFeatures: f, Features: x}).NormalizeFeatureRows()
		if b.blocks["/node/features"], err = distDigest(b.c, "normalized features", view(x), 4*b.lo*int64(f)); err != nil {
			return err
		}
	}
	s.Features = make([]float32, (len(s.Owned)+len(s.Halo))*f)
	if f == 0 {
		s.Features = nil
		return nil
	}
	at := make([]int, b.q)
	for k := range b.q {
		at[k] = b.from[k] * f
	}
	return rounds(b, "moving features", 4*int64(len(x)), func(lo, hi int) [][]float32 {
		size := make([]int, b.q)
		for i := lo; i < hi; i++ {
			size[b.parts[i]] += f
		}
		send := make([][]float32, b.q)
		for p := range send {
			send[p] = make([]float32, 0, size[p])
		}
		for i := lo; i < hi; i++ {
			p := b.parts[i]
			send[p] = append(send[p], x[i*f:(i+1)*f]...)
		}
		return send
	}, func(recv [][]float32) {
		for k, got := range recv {
			at[k] += copy(s.Features[at[k]:], got)
		}
	})
}

// meta is the partition's description, with the fingerprint, split digest
// and partition id the one-process path computes from the whole arrays.
func (b *distBuilder) meta(st *PartitionStats) (*PartitionMeta, error) {
	sl := b.sl
	hdr := []uint64{uint64(sl.N), uint64(sl.F), uint64(sl.C)}
	fp := data.CombineDigests(
		[]int64{24, b.total("/graph/indptr"), b.total("/graph/indices"), b.total("/node/labels"), b.total("/node/features")},
		[][]uint64{localDigest(view(hdr)), b.blocks["/graph/indptr"], b.blocks["/graph/indices"], b.blocks["/node/labels"], b.blocks["/node/features"]})
	var lens []int64
	var blocks [][]uint64
	for _, part := range datafile.SplitParts {
		p := "/splits/" + sl.Split + "/" + part
		lens, blocks = append(lens, b.total(p)), append(blocks, b.blocks[p])
	}
	m := &PartitionMeta{NumParts: b.q, Method: b.opt.Method, Seed: b.opt.Seed, DatasetName: sl.Name, Fingerprint: fp, Split: sl.Split,
		NumNodes: sl.N, NumEdges: sl.E, NumFeatures: sl.F, NumClasses: sl.C,
		GlobalTrain: int(sl.SplitLen[0]), GlobalValid: int(sl.SplitLen[1]), GlobalTest: int(sl.SplitLen[2]),
		Stats: st, splitDigest: data.CombineDigests(lens, blocks)}
	partBlocks, err := distDigest(b.c, "/parts", view(b.parts), 4*b.lo)
	if err != nil {
		return nil, err
	}
	idHdr := []uint64{m.Fingerprint, uint64(m.NumParts), m.splitDigest}
	m.PartitionID = data.CombineDigests([]int64{24, int64(len(m.Split)), 4 * int64(sl.N)},
		[][]uint64{localDigest(view(idHdr)), localDigest([]byte(m.Split)), partBlocks})
	return m, nil
}
