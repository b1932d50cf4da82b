package partition

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5/h5test"
)

// The part FuzzReadShard reads, of how many.
const fuzzShardPart, fuzzShardParts = 1, 3

// FuzzReadShard reads edited copies of a partition: meta.h5 and the file of
// part 1 of 3, edited as one address space (meta.h5 first). ReadShard
// returns an *data.InputError or a shard that holds the invariants the trainer
// relies on.
func FuzzReadShard(f *testing.F) {
	const q, part = fuzzShardParts, fuzzShardPart
	partName := PartFileName(part)
	ds, parts := tinyPartitioned(f)
	files := h5test.Base(f, []string{partMetaName, partName},
		func(dir string) error { return WritePartition(dir, ds, "s", MethodRandom, 1, parts, q) },
		func(dir string) error { _, _, err := ReadShard(dir, part, q); return err })
	im := h5test.NewImage(files[partMetaName], files[partName])

	shards, err := BuildShards(ds, "s", parts, q)
	if err != nil {
		f.Fatal(err)
	}
	sh, g := shards[part], ds.Graph
	s := &h5test.Seeds{F: f, Im: im}
	s.Structure(0)
	s.Structure(1)
	s.Attr(0, "num_parts", q, math.MaxInt32)
	s.Attr(0, "num_parts", q, int64(g.N+1))
	s.Attr(0, "num_nodes", int64(g.N), math.MaxInt32)
	s.Attr(0, "num_edges", g.NumEdges(), -1)
	s.Attr(0, "global_train", int64(len(ds.Splits["s"].Train)), int64(g.N+1))
	s.Array(0, []byte(partMetaFormat), []byte("gnn-spmd-partitiox"))
	s.Array(0, h5test.LE(parts), h5test.LE(append([]int32{q}, parts[1:]...)))
	s.Attr(1, "part", part, part+1)
	s.Attr(1, "num_features", int64(ds.NumFeatures), int64(ds.NumFeatures+1))
	s.Array(1, h5test.LE(sh.Owned), h5test.LE(slices.Repeat([]int32{sh.Owned[0]}, len(sh.Owned))))
	s.Array(1, h5test.LE(sh.Halo), h5test.LE(slices.Repeat([]int32{-1}, len(sh.Halo))))
	s.Array(1, h5test.LE(sh.Indptr), h5test.LE(append([]int64{1}, sh.Indptr[1:]...)))
	s.Array(1, h5test.LE(sh.Indices), h5test.LE(append([]int32{int32(sh.NumCols())}, sh.Indices[1:]...)))
	s.Array(1, h5test.LE(sh.LoopDegree), h5test.LE(append(slices.Clone(sh.LoopDegree[:len(sh.LoopDegree)-1]), 0)))
	s.Array(1, h5test.LE(sh.Features), h5test.LE(append([]float32{float32(math.Inf(1))}, sh.Features[1:]...)))
	s.Array(1, h5test.LE(sh.Labels), h5test.LE(append([]int32{int32(ds.NumClasses)}, sh.Labels[1:]...)))
	f.Add([]byte(nil), uint16(0))
	for _, e := range s.Edits {
		f.Add(e, uint16(0))
	}
	f.Add([]byte(nil), uint16(len(files[partName])/3))

	dir := f.TempDir() // rewritten for each input
	f.Fuzz(func(t *testing.T, edits []byte, cut uint16) {
		fs := im.Apply(edits, cut)
		metaPath, partPath := filepath.Join(dir, partMetaName), filepath.Join(dir, partName)
		if err := os.WriteFile(metaPath, fs[0], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(partPath, fs[1], 0o644); err != nil {
			t.Fatal(err)
		}
		var s *Shard
		var m *PartitionMeta
		err := h5test.Call(t, h5test.FileLimits(len(fs[0])+len(fs[1])), func() (err error) {
			s, m, err = ReadShard(dir, part, q)
			return err
		})
		if err != nil {
			h5test.RequireInputError(t, err, metaPath, partPath)
			return
		}
		if err := checkFuzzedShard(s, m, part); err != nil {
			t.Fatalf("ReadShard returned a shard that breaks an invariant: %v", err)
		}
	})
}

// checkFuzzedShard restates the invariants the trainer relies on for a
// shard read from a file.
func checkFuzzedShard(s *Shard, m *PartitionMeta, part int) error {
	q, own, cols := m.NumParts, s.NumOwned(), s.NumCols()
	bad := func(format string, args ...any) error { return data.InputErrorf("shard", 0, "", format, args...) }
	switch {
	case s.Part != part || s.NumParts != q || len(m.Parts) != m.NumNodes || len(m.Stats.Parts) != q:
		return bad("part %d of %d, meta with %d parts for %d nodes and %d part stats", s.Part, s.NumParts, len(m.Parts), m.NumNodes, len(m.Stats.Parts))
	case len(s.Indptr) != own+1 || s.Indptr[0] != 0 || s.Indptr[own] != int64(len(s.Indices)):
		return bad("indptr %v for %d rows and %d indices", s.Indptr, own, len(s.Indices))
	case len(s.LoopDegree) != cols || len(s.Labels) != own || len(s.Features) != cols*s.NumFeatures:
		return bad("%d loop degrees, %d labels, %d features for %d rows, %d columns", len(s.LoopDegree), len(s.Labels), len(s.Features), own, cols)
	case len(s.RecvStart) != q+1 || s.RecvStart[0] != 0 || s.RecvStart[q] != len(s.Halo) || len(s.Send) != q:
		return bad("recv start %v, %d send lists for %d halo rows", s.RecvStart, len(s.Send), len(s.Halo))
	case len(s.Send[part]) != 0 || s.RecvStart[part] != s.RecvStart[part+1]:
		return bad("the part sends to or receives from itself")
	}
	for _, p := range m.Parts {
		if p < 0 || int(p) >= q {
			return bad("node in part %d", p)
		}
	}
	for i, v := range s.Owned {
		if v < 0 || int(v) >= m.NumNodes || int(m.Parts[v]) != part {
			return bad("owned node %d is %d", i, v)
		}
	}
	for o := range q {
		if s.RecvStart[o] > s.RecvStart[o+1] {
			return bad("recv start %v decreases", s.RecvStart)
		}
		for _, v := range s.Halo[s.RecvStart[o]:s.RecvStart[o+1]] {
			if v < 0 || int(v) >= m.NumNodes || int(m.Parts[v]) != o {
				return bad("halo node %d is not in part %d", v, o)
			}
		}
		for _, r := range s.Send[o] {
			if r < 0 || int(r) >= own {
				return bad("send row %d to part %d", r, o)
			}
		}
	}
	for i := range own {
		if s.Indptr[i+1] < s.Indptr[i] {
			return bad("indptr decreases at %d", i)
		}
	}
	for _, c := range s.Indices {
		if c < 0 || int(c) >= cols {
			return bad("column %d of %d", c, cols)
		}
	}
	for _, d := range s.LoopDegree {
		if d < 1 {
			return bad("loop degree %d", d)
		}
	}
	for _, y := range s.Labels {
		if y < -1 || int(y) >= s.NumClasses {
			return bad("label %d of %d classes", y, s.NumClasses)
		}
	}
	for _, v := range s.Features {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return bad("feature %v", v)
		}
	}
	for _, ids := range [][]int32{s.Train, s.Valid, s.Test} {
		for _, r := range ids {
			if r < 0 || int(r) >= own {
				return bad("split row %d of %d", r, own)
			}
		}
	}
	return nil
}
