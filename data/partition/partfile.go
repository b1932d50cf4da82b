package partition

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/internal/par"
)

// A partition directory (docs/FORMATS.md is the reference):
//
//	meta.h5       the partition: attributes, /parts int32 [N], /stats/...
//	part-<p>.h5   one rank's Shard
//
// Every part file carries the dataset fingerprint, the partition id, the
// part count and its own index, so a rank refuses a file that belongs to
// another dataset, partition or part.
const (
	partMetaFormat = "gnn-spmd-partition"
	partFileFormat = "gnn-spmd-partition-part"
	partVersion    = 1
	partMetaName   = "meta.h5"
)

// MetaPath is the meta.h5 of the partition in dir.
func MetaPath(dir string) string { return filepath.Join(dir, partMetaName) }

// PartFileName is the name of part p's file in a partition directory.
func PartFileName(p int) string { return fmt.Sprintf("part-%d.h5", p) }

// PartitionMeta describes a partition directory (its meta.h5).
type PartitionMeta struct {
	NumParts    int
	Method      string // "metis", "random", ...: recorded, not interpreted
	Seed        uint64
	DatasetName string
	Fingerprint uint64 // data.Dataset.Fingerprint of the partitioned dataset
	// PartitionID digests the fingerprint, part count, split and
	// assignment; every part file of this partition carries it.
	PartitionID uint64
	Split       string // "" = no split

	NumNodes                             int
	NumEdges                             int64
	NumFeatures, NumClasses              int
	GlobalTrain, GlobalValid, GlobalTest int

	Parts []int32 // part of every node
	Stats *PartitionStats

	splitDigest uint64
}

// WritePartition builds the shards of ds under the assignment parts and
// writes them to dir (created if needed): part-<p>.h5 for every part, then
// meta.h5. The shards are built and written one at a time, so memory stays
// at the dataset plus one shard. Each file is written atomically (temporary
// file, fsync, rename); meta.h5 is removed first and written last, so a
// failed run never leaves a directory that ReadShard accepts with a mix of
// old and new files. Part files of a previous partition with more parts are
// removed. ds must be valid (as Load returns it).
func WritePartition(dir string, ds *data.Dataset, split string, method string, seed uint64, parts []int32, q int) error {
	b, err := newShardBuilder(ds, split, parts, q)
	if err != nil {
		return err
	}
	g := ds.Graph
	meta := &PartitionMeta{
		NumParts: q, Method: method, Seed: seed, DatasetName: ds.Name, Split: split,
		NumNodes: g.N, NumEdges: g.NumEdges(), NumFeatures: ds.NumFeatures, NumClasses: ds.NumClasses,
		GlobalTrain: b.global[0], GlobalValid: b.global[1], GlobalTest: b.global[2],
		Parts: parts,
	}
	var train []int32
	if split != "" {
		train = ds.Splits[split].Train
	}
	meta.splitDigest = splitDigest(ds, split)
	meta.Stats = b.plan.stats(g, train)
	meta.Fingerprint = ds.Fingerprint()
	meta.PartitionID = meta.partitionID()

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write partition: %w", err)
	}
	metaPath := filepath.Join(dir, partMetaName)
	if err := os.Remove(metaPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write partition: %w", err)
	}
	for p := 0; p < q; p++ {
		s := b.build(p)
		attrs, arrays := partContent(s, meta)
		if err := h5.WriteFile(filepath.Join(dir, PartFileName(p)), attrs, arrays); err != nil {
			return err
		}
	}
	attrs, arrays := metaContent(meta)
	if err := h5.WriteFile(metaPath, attrs, arrays); err != nil {
		return err
	}
	removeStaleParts(dir, q)
	return nil
}

// removeStaleParts deletes part-<p>.h5 files with p >= q: leftovers of an
// earlier partition into more parts.
func removeStaleParts(dir string, q int) {
	names, _ := filepath.Glob(filepath.Join(dir, "part-*.h5"))
	for _, name := range names {
		idx := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "part-"), ".h5")
		if p, err := strconv.Atoi(idx); err == nil && p >= q && PartFileName(p) == filepath.Base(name) {
			os.Remove(name)
		}
	}
}

// metaContent is meta.h5's attributes and datasets.
func metaContent(m *PartitionMeta) ([]h5.Attr, []h5.Array) {
	st, q := m.Stats, m.NumParts
	attrs := []h5.Attr{
		{Name: "format", Val: partMetaFormat}, {Name: "version", Val: int32(partVersion)},
		{Name: "num_parts", Val: int32(q)}, {Name: "method", Val: m.Method}, {Name: "seed", Val: m.Seed},
		{Name: "dataset_name", Val: m.DatasetName}, {Name: "dataset_fingerprint", Val: m.Fingerprint},
		{Name: "partition_id", Val: m.PartitionID}, {Name: "split", Val: m.Split}, {Name: "split_digest", Val: m.splitDigest},
		{Name: "num_nodes", Val: int64(m.NumNodes)}, {Name: "num_edges", Val: m.NumEdges},
		{Name: "num_features", Val: int32(m.NumFeatures)}, {Name: "num_classes", Val: int32(m.NumClasses)},
		{Name: "global_train", Val: int64(m.GlobalTrain)}, {Name: "global_valid", Val: int64(m.GlobalValid)}, {Name: "global_test", Val: int64(m.GlobalTest)},
		{Name: "edge_cut", Val: st.EdgeCut}, {Name: "comm_rows", Val: st.CommRows},
	}
	k := len(st.Parts) // == q, unless a test writes a deliberately broken file
	nodes, edges, train := make([]int64, k), make([]int64, k), make([]int64, k)
	recv := make([]int64, 0, k*k)
	for p, ps := range st.Parts {
		nodes[p], edges[p], train[p] = int64(ps.Nodes), ps.Edges, int64(ps.TrainNodes)
		for _, r := range ps.RecvRows {
			recv = append(recv, int64(r))
		}
	}
	return attrs, []h5.Array{
		h5.Vec("/parts", m.Parts),
		h5.Vec("/stats/nodes", nodes), h5.Vec("/stats/edges", edges), h5.Vec("/stats/train_nodes", train),
		{Path: "/stats/recv_rows", Data: recv, Dims: []uint{uint(k), uint(k)}},
	}
}

// partContent is part-<p>.h5's attributes and datasets.
func partContent(s *Shard, m *PartitionMeta) ([]h5.Attr, []h5.Array) {
	attrs := []h5.Attr{
		{Name: "format", Val: partFileFormat}, {Name: "version", Val: int32(partVersion)},
		{Name: "part", Val: int32(s.Part)}, {Name: "num_parts", Val: int32(s.NumParts)},
		{Name: "dataset_fingerprint", Val: m.Fingerprint}, {Name: "partition_id", Val: m.PartitionID}, {Name: "split", Val: m.Split},
		{Name: "num_nodes", Val: int64(s.NumNodes)}, {Name: "num_features", Val: int32(s.NumFeatures)}, {Name: "num_classes", Val: int32(s.NumClasses)},
		{Name: "global_train", Val: int64(s.GlobalTrain)}, {Name: "global_valid", Val: int64(s.GlobalValid)}, {Name: "global_test", Val: int64(s.GlobalTest)},
	}
	sendPtr := make([]int64, len(s.Send)+1)
	for p, rows := range s.Send {
		sendPtr[p+1] = sendPtr[p] + int64(len(rows))
	}
	recvStart := make([]int64, len(s.RecvStart))
	for i, v := range s.RecvStart {
		recvStart[i] = int64(v)
	}
	arrays := []h5.Array{
		h5.Vec("/owned", s.Owned), h5.Vec("/halo", s.Halo), h5.Vec("/recv_start", recvStart),
		h5.Vec("/send/indptr", sendPtr), h5.Vec("/send/rows", slices.Concat(s.Send...)),
		h5.Vec("/graph/indptr", s.Indptr), h5.Vec("/graph/indices", s.Indices),
		h5.Vec("/node/loop_degree", s.LoopDegree), h5.Vec("/node/labels", s.Labels),
		h5.Vec("/split/train", s.Train), h5.Vec("/split/valid", s.Valid), h5.Vec("/split/test", s.Test),
	}
	if s.NumFeatures > 0 {
		arrays = append(arrays, h5.Array{Path: "/node/features", Data: s.Features[:len(s.Owned)*s.NumFeatures], Dims: []uint{uint(len(s.Owned)), uint(s.NumFeatures)}})
	}
	return attrs, arrays
}

// ReadPartitionMeta reads and validates dir/meta.h5. Every problem is an
// *data.InputError naming the file and the HDF5 object.
func ReadPartitionMeta(dir string) (*PartitionMeta, error) {
	path := filepath.Join(dir, partMetaName)
	var m *PartitionMeta
	err := h5.Read(path, partMetaFormat, partVersion, "not a partition directory; create it with gnn-spmd partition --out "+dir,
		func(f *h5.File) error {
			var err error
			m, err = readMeta(f)
			return err
		})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ReadShard reads part's shard from the partition directory dir, checking
// that the partition has wantParts parts (0 = any), that the part file
// belongs to this partition of this dataset and is this part's, and every
// shape, range and cross-reference the trainer relies on. Every problem
// with the files is an *data.InputError naming the file and the HDF5 object.
func ReadShard(dir string, part int, wantParts int) (*Shard, *PartitionMeta, error) {
	m, err := ReadPartitionMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	if wantParts > 0 && m.NumParts != wantParts {
		return nil, nil, data.InputErrorf(filepath.Join(dir, partMetaName), 0, "num_parts",
			"partitioned into %d parts, but the job has %d ranks; re-run gnn-spmd partition --parts %d", m.NumParts, wantParts, wantParts)
	}
	if part < 0 || part >= m.NumParts {
		return nil, nil, fmt.Errorf("read shard: part %d, expected a part in [0, %d)", part, m.NumParts)
	}
	path := filepath.Join(dir, PartFileName(part))
	var s *Shard
	err = h5.Read(path, partFileFormat, partVersion, "the partition in "+dir+" is incomplete; re-run gnn-spmd partition",
		func(f *h5.File) error {
			var err error
			s, err = readShard(f, m, part)
			return err
		})
	if err != nil {
		return nil, nil, err
	}
	return s, m, nil
}

// mustEqual checks an integer attribute of a part file against meta.h5.
func mustEqual(f *h5.File, name string, want int64) {
	if got := f.Int(name, 0, math.MaxInt64); f.Err() == nil && got != want {
		f.Errorf("attribute "+name, "is %d, but meta.h5 has %d: the file is corrupt", got, want)
	}
}

func readMeta(a *h5.File) (*PartitionMeta, error) {
	m := &PartitionMeta{}
	m.NumParts = int(a.Int("num_parts", 1, math.MaxInt32))
	m.Method = a.String("method")
	m.Seed = a.Uint64("seed")
	m.DatasetName = a.String("dataset_name")
	m.Fingerprint = a.Uint64("dataset_fingerprint")
	m.PartitionID = a.Uint64("partition_id")
	m.Split = a.String("split")
	m.splitDigest = a.Uint64("split_digest")
	// The counts are bounded by the file size (4 bytes per node in /parts)
	// before anything is allocated.
	n := a.Int("num_nodes", 1, min(math.MaxInt32, a.Size()/4))
	m.NumNodes = int(n)
	m.NumEdges = a.Int("num_edges", 0, math.MaxInt64)
	m.NumFeatures = int(a.Int("num_features", 0, math.MaxInt32))
	m.NumClasses = int(a.Int("num_classes", 1, int64(data.MaxClasses(int(n)))))
	m.GlobalTrain = int(a.Int("global_train", 0, n))
	m.GlobalValid = int(a.Int("global_valid", 0, n))
	m.GlobalTest = int(a.Int("global_test", 0, n))
	cut := a.Int("edge_cut", 0, m.NumEdges)
	comm := a.Int("comm_rows", 0, math.MaxInt64)
	if a.Err() != nil {
		return nil, a.Err()
	}
	q := m.NumParts
	if q > m.NumNodes {
		return nil, a.Errorf("attribute num_parts", "is %d, more parts than num_nodes = %d", q, n)
	}
	if m.Parts = h5.ReadArray[int32](a, "/parts", "[num_nodes]", n); a.Err() != nil {
		return nil, a.Err()
	}
	count := make([]int64, q)
	for v, p := range m.Parts {
		if p < 0 || int(p) >= q {
			return nil, a.Errorf("/parts", "node %d is in part %d, expected a part in [0, num_parts = %d)", v, p, q)
		}
		count[p]++
	}
	if id := m.partitionID(); id != m.PartitionID {
		return nil, a.Errorf("attribute partition_id", "is %016x, but /parts and the other attributes give %016x: the file is corrupt", m.PartitionID, id)
	}

	arrays := map[string][]int64{}
	for _, name := range []string{"nodes", "edges", "train_nodes", "recv_rows"} {
		want, desc := []int64{int64(q)}, "[num_parts]"
		if name == "recv_rows" {
			want, desc = []int64{int64(q), int64(q)}, "[num_parts, num_parts]"
		}
		if arrays[name] = h5.ReadArray[int64](a, "/stats/"+name, desc, want...); a.Err() != nil {
			return nil, a.Err()
		}
	}
	st := &PartitionStats{NumParts: q, Parts: make([]PartStats, q), EdgeCut: cut, CommRows: comm}
	var edges, train, recvTotal int64
	for p := range st.Parts {
		ps := &st.Parts[p]
		if got := arrays["nodes"][p]; got != count[p] {
			return nil, a.Errorf("/stats/nodes", "part %d has %d nodes, but /parts assigns it %d", p, got, count[p])
		}
		ps.Nodes = int(count[p])
		ps.Edges = arrays["edges"][p]
		if ps.Edges < 0 || ps.Edges > m.NumEdges {
			return nil, a.Errorf("/stats/edges", "part %d has %d edges, expected a count in [0, num_edges = %d]", p, ps.Edges, m.NumEdges)
		}
		edges += ps.Edges
		t := arrays["train_nodes"][p]
		if t < 0 || t > count[p] {
			return nil, a.Errorf("/stats/train_nodes", "part %d has %d training nodes, expected a count in [0, %d]", p, t, count[p])
		}
		ps.TrainNodes = int(t)
		train += t
		ps.RecvRows, ps.SendRows = make([]int, q), make([]int, q)
	}
	for p := range st.Parts {
		for o := 0; o < q; o++ {
			v := arrays["recv_rows"][p*q+o]
			if v < 0 || v > count[o] || (o == p && v != 0) {
				return nil, a.Errorf("/stats/recv_rows", "[%d, %d] is %d, expected a count in [0, %d] (0 on the diagonal)", p, o, v, count[o])
			}
			st.Parts[p].RecvRows[o] = int(v)
			st.Parts[o].SendRows[p] = int(v)
			recvTotal += v
		}
	}
	switch {
	case edges != m.NumEdges:
		return nil, a.Errorf("/stats/edges", "sums to %d, expected num_edges = %d", edges, m.NumEdges)
	case train != int64(m.GlobalTrain):
		return nil, a.Errorf("/stats/train_nodes", "sums to %d, expected global_train = %d", train, m.GlobalTrain)
	case recvTotal != comm:
		return nil, a.Errorf("/stats/recv_rows", "sums to %d, expected comm_rows = %d", recvTotal, comm)
	}
	st.setBalance()
	m.Stats = st
	return m, nil
}

func readShard(a *h5.File, m *PartitionMeta, part int) (*Shard, error) {
	gotPart := a.Int("part", 0, math.MaxInt32)
	q := a.Int("num_parts", 1, math.MaxInt32)
	fp := a.Uint64("dataset_fingerprint")
	id := a.Uint64("partition_id")
	if a.Err() != nil {
		return nil, a.Err()
	}
	switch {
	case fp != m.Fingerprint:
		return nil, a.Errorf("attribute dataset_fingerprint", "is %016x, but meta.h5 has %016x: the file belongs to a partition of another dataset; re-run gnn-spmd partition", fp, m.Fingerprint)
	case q != int64(m.NumParts):
		return nil, a.Errorf("attribute num_parts", "is %d, but meta.h5 has %d: the file belongs to another partition; re-run gnn-spmd partition", q, m.NumParts)
	case id != m.PartitionID:
		return nil, a.Errorf("attribute partition_id", "is %016x, but meta.h5 has %016x: the file belongs to another partition of this dataset; re-run gnn-spmd partition", id, m.PartitionID)
	case gotPart != int64(part):
		return nil, a.Errorf("attribute part", "is %d, expected %d: the file belongs to another part", gotPart, part)
	}
	mustEqual(a, "num_nodes", int64(m.NumNodes))
	mustEqual(a, "num_features", int64(m.NumFeatures))
	mustEqual(a, "num_classes", int64(m.NumClasses))
	mustEqual(a, "global_train", int64(m.GlobalTrain))
	mustEqual(a, "global_valid", int64(m.GlobalValid))
	mustEqual(a, "global_test", int64(m.GlobalTest))
	if a.Err() != nil {
		return nil, a.Err()
	}

	ps := &m.Stats.Parts[part]
	nOwn, nHalo, nSend := ps.Nodes, ps.HaloRows(), 0
	for _, v := range ps.SendRows {
		nSend += v
	}
	s := &Shard{Part: part, NumParts: m.NumParts, NumNodes: m.NumNodes, NumFeatures: m.NumFeatures, NumClasses: m.NumClasses,
		GlobalTrain: m.GlobalTrain, GlobalValid: m.GlobalValid, GlobalTest: m.GlobalTest}
	i32 := func(p string, n int64, desc string) []int32 { return h5.ReadArray[int32](a, p, desc, n) }
	i64 := func(p string, n int64, desc string) []int64 { return h5.ReadArray[int64](a, p, desc, n) }
	s.Owned = i32("/owned", int64(nOwn), "[owned nodes of this part in meta.h5]")
	s.Halo = i32("/halo", int64(nHalo), "[halo rows of this part in meta.h5]")
	recvStart := i64("/recv_start", int64(m.NumParts+1), "[num_parts+1]")
	sendPtr := i64("/send/indptr", int64(m.NumParts+1), "[num_parts+1]")
	sendRows := i32("/send/rows", int64(nSend), "[rows sent by this part in meta.h5]")
	s.Indptr = i64("/graph/indptr", int64(nOwn+1), "[owned+1]")
	s.Indices = i32("/graph/indices", ps.Edges, "[edges of this part in meta.h5]")
	s.LoopDegree = i32("/node/loop_degree", int64(nOwn+nHalo), "[owned+halo]")
	s.Labels = i32("/node/labels", int64(nOwn), "[owned]")
	s.Train = i32("/split/train", int64(ps.TrainNodes), "[training nodes of this part in meta.h5]")
	s.Valid = i32("/split/valid", -1, "[n] with n <= owned")
	s.Test = i32("/split/test", -1, "[n] with n <= owned")
	if a.Err() != nil {
		return nil, a.Err()
	}
	if m.NumFeatures > 0 || a.Exists("/node/features") {
		// The halo rows follow the owned ones (Shard.Features), read into
		// one allocation.
		s.Features = h5.ReadArrayRoom[float32](a, "/node/features", "[owned, num_features]", nHalo*m.NumFeatures,
			int64(nOwn), int64(m.NumFeatures))
		if a.Err() != nil {
			return nil, a.Err()
		}
		s.Features = s.Features[:(nOwn+nHalo)*m.NumFeatures]
		if m.NumFeatures == 0 {
			s.Features = nil
		}
	}
	if err := checkShard(a, s, m, recvStart, sendPtr, sendRows); err != nil {
		return nil, err
	}
	return s, nil
}

// checkShard validates a shard read from a part file against meta.h5: the
// owned and halo nodes against the assignment, the CSR, degrees, labels,
// features and splits. It also unpacks the send lists.
func checkShard(f *h5.File, s *Shard, m *PartitionMeta, recvStart, sendPtr []int64, sendRows []int32) error {
	q, p, parts := m.NumParts, s.Part, m.Parts
	ps := &m.Stats.Parts[p]
	nOwn, nCols := len(s.Owned), len(s.Owned)+len(s.Halo)
	for i, v := range s.Owned {
		if v < 0 || int(v) >= m.NumNodes || parts[v] != int32(p) || (i > 0 && v <= s.Owned[i-1]) {
			return f.Errorf("/owned", "entry %d is node %d, expected the nodes of part %d in /parts of meta.h5, ascending", i, v, p)
		}
	}
	// RecvStart and the send pointers are fixed by the counts in meta.h5.
	s.RecvStart = make([]int, q+1)
	for o := 0; o <= q; o++ {
		want := 0
		if o > 0 {
			want = s.RecvStart[o-1] + ps.RecvRows[o-1]
		}
		if recvStart[o] != int64(want) {
			return f.Errorf("/recv_start", "entry %d is %d, expected %d from the halo counts in meta.h5", o, recvStart[o], want)
		}
		s.RecvStart[o] = want
	}
	for o := 0; o < q; o++ {
		seg := s.Halo[s.RecvStart[o]:s.RecvStart[o+1]]
		for k, v := range seg {
			if v < 0 || int(v) >= m.NumNodes || parts[v] != int32(o) || (k > 0 && v <= seg[k-1]) {
				return f.Errorf("/halo", "entry %d is node %d, expected the nodes of part %d ascending there", s.RecvStart[o]+k, v, o)
			}
		}
	}
	s.Send = make([][]int32, q)
	var at int64
	for o := 0; o < q; o++ {
		if sendPtr[o] != at {
			return f.Errorf("/send/indptr", "entry %d is %d, expected %d from the send counts in meta.h5", o, sendPtr[o], at)
		}
		rows := sendRows[at : at+int64(ps.SendRows[o])]
		for k, v := range rows {
			if v < 0 || int(v) >= nOwn || (k > 0 && v <= rows[k-1]) {
				return f.Errorf("/send/rows", "entry %d is row %d, expected ascending owned rows in [0, %d)", at+int64(k), v, nOwn)
			}
		}
		s.Send[o] = rows
		at += int64(len(rows))
	}
	if sendPtr[q] != at {
		return f.Errorf("/send/indptr", "entry %d is %d, expected %d", q, sendPtr[q], at)
	}
	if s.Indptr[0] != 0 || s.Indptr[nOwn] != int64(len(s.Indices)) {
		return f.Errorf("/graph/indptr", "must start at 0 and end at len(indices) = %d", len(s.Indices))
	}
	for i := 0; i < nOwn; i++ {
		if s.Indptr[i+1] < s.Indptr[i] {
			return f.Errorf("/graph/indptr", "decreases at row %d", i)
		}
	}
	var bad atomic.Int64
	bad.Store(-1)
	par.Range(len(s.Indices), func(lo, hi int) {
		for k, c := range s.Indices[lo:hi] {
			if c < 0 || int(c) >= nCols {
				par.StoreMin(&bad, int64(lo+k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		i := sort.Search(nOwn, func(i int) bool { return s.Indptr[i+1] > k }) // the row holding entry k
		return f.Errorf("/graph/indices", "row %d entry %d is column %d, expected a column in [0, owned+halo = %d)", i, k-s.Indptr[i], s.Indices[k], nCols)
	}
	// An owned row's own column is its row id, so the local CSR gives the
	// owned rows' degrees in A+I exactly as the shard builder computed them.
	want, err := loopDegrees(&data.Graph{N: nOwn, Indptr: s.Indptr, Indices: s.Indices})
	if err != nil {
		return f.Errorf("/graph/indptr", "%v", err)
	}
	for i, d := range want {
		if s.LoopDegree[i] != d {
			return f.Errorf("/node/loop_degree", "row %d has loop degree %d, but its CSR row gives %d", i, s.LoopDegree[i], d)
		}
	}
	for k, d := range s.LoopDegree[nOwn:] {
		if d < 1 {
			return f.Errorf("/node/loop_degree", "halo column %d has loop degree %d, expected at least 1", nOwn+k, d)
		}
	}
	for i, y := range s.Labels {
		if y < -1 || int(y) >= m.NumClasses {
			return f.Errorf("/node/labels", "row %d has label %d, expected -1 or a class in [0, %d)", i, y, m.NumClasses)
		}
	}
	own := s.Features[:len(s.Owned)*m.NumFeatures]
	par.Range(len(own), func(lo, hi int) {
		for k, v := range own[lo:hi] {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				par.StoreMin(&bad, int64(lo+k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		nf := int64(m.NumFeatures)
		return f.Errorf("/node/features", "row %d column %d is %v, expected a finite number", k/nf, k%nf, s.Features[k])
	}
	in := make([]uint8, nOwn)
	for sp, ids := range [3][]int32{s.Train, s.Valid, s.Test} {
		name := [3]string{"train", "valid", "test"}[sp]
		for k, i := range ids {
			if i < 0 || int(i) >= nOwn || (k > 0 && i <= ids[k-1]) {
				return f.Errorf("/split/"+name, "entry %d is row %d, expected ascending owned rows in [0, %d)", k, i, nOwn)
			}
			if in[i] != 0 {
				return f.Errorf("/split/"+name, "row %d is also in %s, expected disjoint train/valid/test", i, [3]string{"train", "valid", "test"}[in[i]-1])
			}
			in[i] = uint8(sp + 1)
		}
	}
	if m.Split == "" && len(s.Valid)+len(s.Test) > 0 {
		return f.Errorf("/split/valid", "is not empty, but the partition has no split")
	}
	return nil
}

// partitionID digests what identifies a partition: the dataset, the part
// count, the split and the assignment.
func (m *PartitionMeta) partitionID() uint64 {
	return data.Digest([]uint64{m.Fingerprint, uint64(m.NumParts), m.splitDigest}, []byte(m.Split), m.Parts)
}

// PartitionID is the id that WritePartition would record for assigning the
// nodes of ds (whose Fingerprint is fingerprint) to q parts under split, so
// that a partition made on the fly is known by the same id as its directory.
func PartitionID(ds *data.Dataset, fingerprint uint64, split string, parts []int32, q int) uint64 {
	m := &PartitionMeta{Fingerprint: fingerprint, NumParts: q, Split: split, Parts: parts, splitDigest: splitDigest(ds, split)}
	return m.partitionID()
}

// splitDigest digests the node ids of a split, 0 for none.
func splitDigest(ds *data.Dataset, split string) uint64 {
	if split == "" {
		return 0
	}
	sp := ds.Splits[split]
	return data.Digest(sp.Train, sp.Valid, sp.Test)
}
