package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"gonum.org/v1/hdf5"
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

// PartFileName is the name of part p's file in a partition directory.
func PartFileName(p int) string { return fmt.Sprintf("part-%d.h5", p) }

// PartitionMeta describes a partition directory (its meta.h5).
type PartitionMeta struct {
	NumParts    int
	Method      string // "metis", "random", ...: recorded, not interpreted
	Seed        uint64
	DatasetName string
	Fingerprint uint64 // Dataset.Fingerprint of the partitioned dataset
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
func WritePartition(dir string, ds *Dataset, split string, method string, seed uint64, parts []int32, q int) error {
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
		if err := WriteH5File(filepath.Join(dir, PartFileName(p)), attrs, arrays); err != nil {
			return err
		}
	}
	attrs, arrays := metaContent(meta)
	if err := WriteH5File(metaPath, attrs, arrays); err != nil {
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
func metaContent(m *PartitionMeta) ([]H5Attr, []H5Array) {
	st, q := m.Stats, m.NumParts
	attrs := []H5Attr{
		{"format", partMetaFormat}, {"version", int32(partVersion)},
		{"num_parts", int32(q)}, {"method", m.Method}, {"seed", m.Seed},
		{"dataset_name", m.DatasetName}, {"dataset_fingerprint", m.Fingerprint},
		{"partition_id", m.PartitionID}, {"split", m.Split}, {"split_digest", m.splitDigest},
		{"num_nodes", int64(m.NumNodes)}, {"num_edges", m.NumEdges},
		{"num_features", int32(m.NumFeatures)}, {"num_classes", int32(m.NumClasses)},
		{"global_train", int64(m.GlobalTrain)}, {"global_valid", int64(m.GlobalValid)}, {"global_test", int64(m.GlobalTest)},
		{"edge_cut", st.EdgeCut}, {"comm_rows", st.CommRows},
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
	return attrs, []H5Array{
		vec("/parts", m.Parts),
		vec("/stats/nodes", nodes), vec("/stats/edges", edges), vec("/stats/train_nodes", train),
		{"/stats/recv_rows", recv, []uint{uint(k), uint(k)}},
	}
}

// partContent is part-<p>.h5's attributes and datasets.
func partContent(s *Shard, m *PartitionMeta) ([]H5Attr, []H5Array) {
	attrs := []H5Attr{
		{"format", partFileFormat}, {"version", int32(partVersion)},
		{"part", int32(s.Part)}, {"num_parts", int32(s.NumParts)},
		{"dataset_fingerprint", m.Fingerprint}, {"partition_id", m.PartitionID}, {"split", m.Split},
		{"num_nodes", int64(s.NumNodes)}, {"num_features", int32(s.NumFeatures)}, {"num_classes", int32(s.NumClasses)},
		{"global_train", int64(s.GlobalTrain)}, {"global_valid", int64(s.GlobalValid)}, {"global_test", int64(s.GlobalTest)},
	}
	sendPtr := make([]int64, len(s.Send)+1)
	for p, rows := range s.Send {
		sendPtr[p+1] = sendPtr[p] + int64(len(rows))
	}
	recvStart := make([]int64, len(s.RecvStart))
	for i, v := range s.RecvStart {
		recvStart[i] = int64(v)
	}
	arrays := []H5Array{
		vec("/owned", s.Owned), vec("/halo", s.Halo), vec("/recv_start", recvStart),
		vec("/send/indptr", sendPtr), vec("/send/rows", slices.Concat(s.Send...)),
		vec("/graph/indptr", s.Indptr), vec("/graph/indices", s.Indices),
		vec("/node/loop_degree", s.LoopDegree), vec("/node/labels", s.Labels),
		vec("/split/train", s.Train), vec("/split/valid", s.Valid), vec("/split/test", s.Test),
	}
	if s.NumFeatures > 0 {
		arrays = append(arrays, H5Array{"/node/features", s.Features[:len(s.Owned)*s.NumFeatures], []uint{uint(len(s.Owned)), uint(s.NumFeatures)}})
	}
	return attrs, arrays
}

// ReadPartitionMeta reads and validates dir/meta.h5. Every problem is an
// *InputError naming the file and the HDF5 object.
func ReadPartitionMeta(dir string) (*PartitionMeta, error) {
	path := filepath.Join(dir, partMetaName)
	var m *PartitionMeta
	err := readH5File(path, partMetaFormat, partVersion, "not a partition directory; create it with gnn-spmd partition --out "+dir,
		func(r *h5Reader, root *hdf5.Group) error {
			var err error
			m, err = r.readMeta(root)
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
// with the files is an *InputError naming the file and the HDF5 object.
func ReadShard(dir string, part int, wantParts int) (*Shard, *PartitionMeta, error) {
	m, err := ReadPartitionMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	if wantParts > 0 && m.NumParts != wantParts {
		return nil, nil, inputErrorf(filepath.Join(dir, partMetaName), 0, "num_parts",
			"partitioned into %d parts, but the job has %d ranks; re-run gnn-spmd partition --parts %d", m.NumParts, wantParts, wantParts)
	}
	if part < 0 || part >= m.NumParts {
		return nil, nil, fmt.Errorf("read shard: part %d, expected a part in [0, %d)", part, m.NumParts)
	}
	path := filepath.Join(dir, PartFileName(part))
	var s *Shard
	err = readH5File(path, partFileFormat, partVersion, "the partition in "+dir+" is incomplete; re-run gnn-spmd partition",
		func(r *h5Reader, root *hdf5.Group) error {
			var err error
			s, err = r.readShard(root, m, part)
			return err
		})
	if err != nil {
		return nil, nil, err
	}
	return s, m, nil
}

// mustEqual checks an attribute of a part file against meta.h5.
func (a *attrReader) mustEqual(name string, got, want int64) {
	if a.err == nil && got != want {
		a.err = a.r.errorf("attribute "+name, "is %d, but meta.h5 has %d: the file is corrupt", got, want)
	}
}

func (r *h5Reader) readMeta(root *hdf5.Group) (*PartitionMeta, error) {
	a := &attrReader{r: r, g: root}
	m := &PartitionMeta{}
	m.NumParts = int(a.int("num_parts", 1, math.MaxInt32))
	m.Method = a.str("method")
	m.Seed = a.u64("seed")
	m.DatasetName = a.str("dataset_name")
	m.Fingerprint = a.u64("dataset_fingerprint")
	m.PartitionID = a.u64("partition_id")
	m.Split = a.str("split")
	m.splitDigest = a.u64("split_digest")
	// The counts are bounded by the file size (4 bytes per node in /parts)
	// before anything is allocated.
	n := a.int("num_nodes", 1, min(math.MaxInt32, r.size/4))
	m.NumNodes = int(n)
	m.NumEdges = a.int("num_edges", 0, math.MaxInt64)
	m.NumFeatures = int(a.int("num_features", 0, math.MaxInt32))
	m.NumClasses = int(a.int("num_classes", 1, math.MaxInt32))
	m.GlobalTrain = int(a.int("global_train", 0, n))
	m.GlobalValid = int(a.int("global_valid", 0, n))
	m.GlobalTest = int(a.int("global_test", 0, n))
	cut := a.int("edge_cut", 0, m.NumEdges)
	comm := a.int("comm_rows", 0, math.MaxInt64)
	if a.err != nil {
		return nil, a.err
	}
	q := m.NumParts
	if q > m.NumNodes {
		return nil, r.errorf("attribute num_parts", "is %d, more parts than num_nodes = %d", q, n)
	}
	var err error
	if m.Parts, err = readArray[int32](r, "/parts", h5Int32, []int64{n}, "[num_nodes]"); err != nil {
		return nil, err
	}
	count := make([]int64, q)
	for v, p := range m.Parts {
		if p < 0 || int(p) >= q {
			return nil, r.errorf("/parts", "node %d is in part %d, expected a part in [0, num_parts = %d)", v, p, q)
		}
		count[p]++
	}
	if id := m.partitionID(); id != m.PartitionID {
		return nil, r.errorf("attribute partition_id", "is %016x, but /parts and the other attributes give %016x: the file is corrupt", m.PartitionID, id)
	}

	arrays := map[string][]int64{}
	for _, name := range []string{"nodes", "edges", "train_nodes", "recv_rows"} {
		want, desc := []int64{int64(q)}, "[num_parts]"
		if name == "recv_rows" {
			want, desc = []int64{int64(q), int64(q)}, "[num_parts, num_parts]"
		}
		if arrays[name], err = readArray[int64](r, "/stats/"+name, h5Int64, want, desc); err != nil {
			return nil, err
		}
	}
	st := &PartitionStats{NumParts: q, Parts: make([]PartStats, q), EdgeCut: cut, CommRows: comm}
	var edges, train, recvTotal int64
	for p := range st.Parts {
		ps := &st.Parts[p]
		if got := arrays["nodes"][p]; got != count[p] {
			return nil, r.errorf("/stats/nodes", "part %d has %d nodes, but /parts assigns it %d", p, got, count[p])
		}
		ps.Nodes = int(count[p])
		ps.Edges = arrays["edges"][p]
		if ps.Edges < 0 || ps.Edges > m.NumEdges {
			return nil, r.errorf("/stats/edges", "part %d has %d edges, expected a count in [0, num_edges = %d]", p, ps.Edges, m.NumEdges)
		}
		edges += ps.Edges
		t := arrays["train_nodes"][p]
		if t < 0 || t > count[p] {
			return nil, r.errorf("/stats/train_nodes", "part %d has %d training nodes, expected a count in [0, %d]", p, t, count[p])
		}
		ps.TrainNodes = int(t)
		train += t
		ps.RecvRows, ps.SendRows = make([]int, q), make([]int, q)
	}
	for p := range st.Parts {
		for o := 0; o < q; o++ {
			v := arrays["recv_rows"][p*q+o]
			if v < 0 || v > count[o] || (o == p && v != 0) {
				return nil, r.errorf("/stats/recv_rows", "[%d, %d] is %d, expected a count in [0, %d] (0 on the diagonal)", p, o, v, count[o])
			}
			st.Parts[p].RecvRows[o] = int(v)
			st.Parts[o].SendRows[p] = int(v)
			recvTotal += v
		}
	}
	switch {
	case edges != m.NumEdges:
		return nil, r.errorf("/stats/edges", "sums to %d, expected num_edges = %d", edges, m.NumEdges)
	case train != int64(m.GlobalTrain):
		return nil, r.errorf("/stats/train_nodes", "sums to %d, expected global_train = %d", train, m.GlobalTrain)
	case recvTotal != comm:
		return nil, r.errorf("/stats/recv_rows", "sums to %d, expected comm_rows = %d", recvTotal, comm)
	}
	st.setBalance()
	m.Stats = st
	return m, nil
}

func (r *h5Reader) readShard(root *hdf5.Group, m *PartitionMeta, part int) (*Shard, error) {
	a := &attrReader{r: r, g: root}
	gotPart := a.int("part", 0, math.MaxInt32)
	q := a.int("num_parts", 1, math.MaxInt32)
	fp := a.u64("dataset_fingerprint")
	id := a.u64("partition_id")
	if a.err != nil {
		return nil, a.err
	}
	switch {
	case fp != m.Fingerprint:
		return nil, r.errorf("attribute dataset_fingerprint", "is %016x, but meta.h5 has %016x: the file belongs to a partition of another dataset; re-run gnn-spmd partition", fp, m.Fingerprint)
	case q != int64(m.NumParts):
		return nil, r.errorf("attribute num_parts", "is %d, but meta.h5 has %d: the file belongs to another partition; re-run gnn-spmd partition", q, m.NumParts)
	case id != m.PartitionID:
		return nil, r.errorf("attribute partition_id", "is %016x, but meta.h5 has %016x: the file belongs to another partition of this dataset; re-run gnn-spmd partition", id, m.PartitionID)
	case gotPart != int64(part):
		return nil, r.errorf("attribute part", "is %d, expected %d: the file belongs to another part", gotPart, part)
	}
	a.mustEqual("num_nodes", a.int("num_nodes", 0, math.MaxInt64), int64(m.NumNodes))
	a.mustEqual("num_features", a.int("num_features", 0, math.MaxInt64), int64(m.NumFeatures))
	a.mustEqual("num_classes", a.int("num_classes", 0, math.MaxInt64), int64(m.NumClasses))
	a.mustEqual("global_train", a.int("global_train", 0, math.MaxInt64), int64(m.GlobalTrain))
	a.mustEqual("global_valid", a.int("global_valid", 0, math.MaxInt64), int64(m.GlobalValid))
	a.mustEqual("global_test", a.int("global_test", 0, math.MaxInt64), int64(m.GlobalTest))
	if a.err != nil {
		return nil, a.err
	}

	ps := &m.Stats.Parts[part]
	nOwn, nHalo, nSend := ps.Nodes, ps.HaloRows(), 0
	for _, v := range ps.SendRows {
		nSend += v
	}
	s := &Shard{Part: part, NumParts: m.NumParts, NumNodes: m.NumNodes, NumFeatures: m.NumFeatures, NumClasses: m.NumClasses,
		GlobalTrain: m.GlobalTrain, GlobalValid: m.GlobalValid, GlobalTest: m.GlobalTest}
	var err error
	i32 := func(p string, n int64, desc string) []int32 {
		if err != nil {
			return nil
		}
		var v []int32
		v, err = readArray[int32](r, p, h5Int32, []int64{n}, desc)
		return v
	}
	i64 := func(p string, n int64, desc string) []int64 {
		if err != nil {
			return nil
		}
		var v []int64
		v, err = readArray[int64](r, p, h5Int64, []int64{n}, desc)
		return v
	}
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
	if err != nil {
		return nil, err
	}
	if m.NumFeatures > 0 || r.f.LinkExists("/node/features") {
		// The halo rows follow the owned ones (Shard.Features), read into
		// one allocation.
		s.Features, err = readArrayRoom[float32](r, "/node/features", h5Float32, []int64{int64(nOwn), int64(m.NumFeatures)},
			"[owned, num_features]", nHalo*m.NumFeatures)
		if err != nil {
			return nil, err
		}
		s.Features = s.Features[:(nOwn+nHalo)*m.NumFeatures]
		if m.NumFeatures == 0 {
			s.Features = nil
		}
	}
	if err := r.checkShard(s, m, recvStart, sendPtr, sendRows); err != nil {
		return nil, err
	}
	return s, nil
}

// checkShard validates a shard read from a part file against meta.h5: the
// owned and halo nodes against the assignment, the CSR, degrees, labels,
// features and splits. It also unpacks the send lists.
func (r *h5Reader) checkShard(s *Shard, m *PartitionMeta, recvStart, sendPtr []int64, sendRows []int32) error {
	q, p, parts := m.NumParts, s.Part, m.Parts
	ps := &m.Stats.Parts[p]
	nOwn, nCols := len(s.Owned), len(s.Owned)+len(s.Halo)
	for i, v := range s.Owned {
		if v < 0 || int(v) >= m.NumNodes || parts[v] != int32(p) || (i > 0 && v <= s.Owned[i-1]) {
			return r.errorf("/owned", "entry %d is node %d, expected the nodes of part %d in /parts of meta.h5, ascending", i, v, p)
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
			return r.errorf("/recv_start", "entry %d is %d, expected %d from the halo counts in meta.h5", o, recvStart[o], want)
		}
		s.RecvStart[o] = want
	}
	for o := 0; o < q; o++ {
		seg := s.Halo[s.RecvStart[o]:s.RecvStart[o+1]]
		for k, v := range seg {
			if v < 0 || int(v) >= m.NumNodes || parts[v] != int32(o) || (k > 0 && v <= seg[k-1]) {
				return r.errorf("/halo", "entry %d is node %d, expected the nodes of part %d ascending there", s.RecvStart[o]+k, v, o)
			}
		}
	}
	s.Send = make([][]int32, q)
	var at int64
	for o := 0; o < q; o++ {
		if sendPtr[o] != at {
			return r.errorf("/send/indptr", "entry %d is %d, expected %d from the send counts in meta.h5", o, sendPtr[o], at)
		}
		rows := sendRows[at : at+int64(ps.SendRows[o])]
		for k, v := range rows {
			if v < 0 || int(v) >= nOwn || (k > 0 && v <= rows[k-1]) {
				return r.errorf("/send/rows", "entry %d is row %d, expected ascending owned rows in [0, %d)", at+int64(k), v, nOwn)
			}
		}
		s.Send[o] = rows
		at += int64(len(rows))
	}
	if sendPtr[q] != at {
		return r.errorf("/send/indptr", "entry %d is %d, expected %d", q, sendPtr[q], at)
	}
	if s.Indptr[0] != 0 || s.Indptr[nOwn] != int64(len(s.Indices)) {
		return r.errorf("/graph/indptr", "must start at 0 and end at len(indices) = %d", len(s.Indices))
	}
	for i := 0; i < nOwn; i++ {
		if s.Indptr[i+1] < s.Indptr[i] {
			return r.errorf("/graph/indptr", "decreases at row %d", i)
		}
	}
	var bad atomic.Int64
	bad.Store(-1)
	parallelRange(len(s.Indices), func(lo, hi int) {
		for k, c := range s.Indices[lo:hi] {
			if c < 0 || int(c) >= nCols {
				storeMin(&bad, int64(lo+k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		i := sort.Search(nOwn, func(i int) bool { return s.Indptr[i+1] > k }) // the row holding entry k
		return r.errorf("/graph/indices", "row %d entry %d is column %d, expected a column in [0, owned+halo = %d)", i, k-s.Indptr[i], s.Indices[k], nCols)
	}
	// An owned row's own column is its row id, so the local CSR gives the
	// owned rows' degrees in A+I exactly as the shard builder computed them.
	want, err := loopDegrees(&Graph{N: nOwn, Indptr: s.Indptr, Indices: s.Indices})
	if err != nil {
		return r.errorf("/graph/indptr", "%v", err)
	}
	for i, d := range want {
		if s.LoopDegree[i] != d {
			return r.errorf("/node/loop_degree", "row %d has loop degree %d, but its CSR row gives %d", i, s.LoopDegree[i], d)
		}
	}
	for k, d := range s.LoopDegree[nOwn:] {
		if d < 1 {
			return r.errorf("/node/loop_degree", "halo column %d has loop degree %d, expected at least 1", nOwn+k, d)
		}
	}
	for i, y := range s.Labels {
		if y < -1 || int(y) >= m.NumClasses {
			return r.errorf("/node/labels", "row %d has label %d, expected -1 or a class in [0, %d)", i, y, m.NumClasses)
		}
	}
	own := s.Features[:len(s.Owned)*m.NumFeatures]
	parallelRange(len(own), func(lo, hi int) {
		for k, v := range own[lo:hi] {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				storeMin(&bad, int64(lo+k))
				return
			}
		}
	})
	if k := bad.Load(); k >= 0 {
		f := int64(m.NumFeatures)
		return r.errorf("/node/features", "row %d column %d is %v, expected a finite number", k/f, k%f, s.Features[k])
	}
	in := make([]uint8, nOwn)
	for sp, ids := range [3][]int32{s.Train, s.Valid, s.Test} {
		name := [3]string{"train", "valid", "test"}[sp]
		for k, i := range ids {
			if i < 0 || int(i) >= nOwn || (k > 0 && i <= ids[k-1]) {
				return r.errorf("/split/"+name, "entry %d is row %d, expected ascending owned rows in [0, %d)", k, i, nOwn)
			}
			if in[i] != 0 {
				return r.errorf("/split/"+name, "row %d is also in %s, expected disjoint train/valid/test", i, [3]string{"train", "valid", "test"}[in[i]-1])
			}
			in[i] = uint8(sp + 1)
		}
	}
	if m.Split == "" && len(s.Valid)+len(s.Test) > 0 {
		return r.errorf("/split/valid", "is not empty, but the partition has no split")
	}
	return nil
}

// Fingerprint is a 64-bit digest of the dataset's content: N, F, C, the
// CSR, the labels and the features (not the name or the splits), so that a
// partition can be matched to the dataset it was made from. It hashes 1 MiB
// blocks in parallel with XXH64 and the block digests in order, so the
// result does not depend on the number of workers.
func (d *Dataset) Fingerprint() uint64 {
	g := d.Graph
	hdr := []uint64{uint64(g.N), uint64(d.NumFeatures), uint64(d.NumClasses)}
	return digestArrays(hdr, g.Indptr, g.Indices, d.Labels, d.Features)
}

// partitionID digests what identifies a partition: the dataset, the part
// count, the split and the assignment.
func (m *PartitionMeta) partitionID() uint64 {
	return digestArrays([]uint64{m.Fingerprint, uint64(m.NumParts), m.splitDigest}, []byte(m.Split), m.Parts)
}

// PartitionID is the id that WritePartition would record for assigning the
// nodes of ds (whose Fingerprint is fingerprint) to q parts under split, so
// that a partition made on the fly is known by the same id as its directory.
func PartitionID(ds *Dataset, fingerprint uint64, split string, parts []int32, q int) uint64 {
	m := &PartitionMeta{Fingerprint: fingerprint, NumParts: q, Split: split, Parts: parts, splitDigest: splitDigest(ds, split)}
	return m.partitionID()
}

// splitDigest digests the node ids of a split, 0 for none.
func splitDigest(ds *Dataset, split string) uint64 {
	if split == "" {
		return 0
	}
	sp := ds.Splits[split]
	return digestArrays(sp.Train, sp.Valid, sp.Test)
}

// digestBlock is the unit of parallel hashing.
const digestBlock = 1 << 20

// digestArrays hashes the little-endian bytes of each array (in 1 MiB
// blocks, in parallel), then each array's length and block digests, then
// the array digests.
func digestArrays(arrays ...any) uint64 {
	views := make([][]byte, len(arrays))
	for i, a := range arrays {
		switch v := a.(type) {
		case []byte:
			views[i] = v
		case []int32:
			views[i] = byteView(v)
		case []int64:
			views[i] = byteView(v)
		case []uint64:
			views[i] = byteView(v)
		case []float32:
			views[i] = byteView(v)
		default:
			panic(fmt.Sprintf("digestArrays: unsupported %T", a))
		}
	}
	type job struct{ view, block int }
	var jobs []job
	digests := make([][]uint64, len(views))
	for i, v := range views {
		nb := (len(v) + digestBlock - 1) / digestBlock
		digests[i] = make([]uint64, nb)
		for b := 0; b < nb; b++ {
			jobs = append(jobs, job{i, b})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(jobs)); w++ {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) {
					return
				}
				j := jobs[k]
				v := views[j.view]
				digests[j.view][j.block] = xxh64(v[j.block*digestBlock : min(len(v), (j.block+1)*digestBlock)])
			}
		})
	}
	wg.Wait()
	top := make([]uint64, len(views))
	for i, d := range digests {
		top[i] = xxh64(byteView(append([]uint64{uint64(len(views[i]))}, d...)))
	}
	return xxh64(byteView(top))
}

// byteView is the in-memory bytes of s (little-endian on every platform
// this project builds for, which the HDF5 format assumes too).
func byteView[T int32 | int64 | uint64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// XXH64 (seed 0), as specified at github.com/Cyan4973/xxHash.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

func xxRound(acc, in uint64) uint64 {
	return bits.RotateLeft64(acc+in*xxPrime2, 31) * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	return (acc^xxRound(0, v))*xxPrime1 + xxPrime4
}

func xxh64(b []byte) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		p1 := xxPrime1 // a variable: the seed lanes wrap around
		v1, v2, v3, v4 := p1+xxPrime2, xxPrime2, uint64(0), -p1
		for ; len(b) >= 32; b = b[32:] {
			v1 = xxRound(v1, binary.LittleEndian.Uint64(b[0:]))
			v2 = xxRound(v2, binary.LittleEndian.Uint64(b[8:]))
			v3 = xxRound(v3, binary.LittleEndian.Uint64(b[16:]))
			v4 = xxRound(v4, binary.LittleEndian.Uint64(b[24:]))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(xxMerge(xxMerge(xxMerge(h, v1), v2), v3), v4)
	} else {
		h = xxPrime5
	}
	h += uint64(n)
	for ; len(b) >= 8; b = b[8:] {
		h ^= xxRound(0, binary.LittleEndian.Uint64(b))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
