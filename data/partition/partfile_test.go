package partition

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/gen"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/h5/h5test"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// writeTestPartition partitions ds and writes it to a new directory.
func writeTestPartition(t *testing.T, ds *data.Dataset, split string, q int, method string, seed uint64) (string, []int32) {
	t.Helper()
	parts, err := Partition(ds, split, q, method, seed)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "parts")
	if err := WritePartition(dir, ds, split, method, seed, parts, q); err != nil {
		t.Fatal(err)
	}
	return dir, parts
}

func checkRoundTrip(t *testing.T, ds *data.Dataset, split string, q int, method string, seed uint64) {
	t.Helper()
	dir, parts := writeTestPartition(t, ds, split, q, method, seed)
	shards, err := BuildShards(ds, split, parts, q)
	if err != nil {
		t.Fatal(err)
	}
	var train []int32
	if split != "" {
		train = ds.Splits[split].Train
	}
	stats, _ := ComputePartitionStats(ds.Graph, parts, q, train)
	for p := 0; p < q; p++ {
		s, m, err := ReadShard(dir, p, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameShard(s, shards[p]); err != nil {
			t.Fatalf("part %d: %v", p, err)
		}
		// Room for the halo rows after the features (gnn.NewModel uses it).
		if want := s.NumCols() * s.NumFeatures; len(s.Features) > 0 && cap(s.Features) != want {
			t.Fatalf("part %d: features capacity %d, expected %d (owned + halo rows)", p, cap(s.Features), want)
		}
		if m.NumParts != q || m.Method != method || m.Seed != seed || m.DatasetName != ds.Name || m.Split != split ||
			m.Fingerprint != ds.Fingerprint() || !slices.Equal(m.Parts, parts) || m.NumNodes != ds.Graph.N ||
			m.NumEdges != ds.Graph.NumEdges() || m.NumFeatures != ds.NumFeatures || m.NumClasses != ds.NumClasses {
			t.Fatalf("meta %+v", m)
		}
		if m.Stats.String() != stats.String() {
			t.Fatalf("stats differ:\n%s\nvs\n%s", m.Stats, stats)
		}
	}
	// Nothing but the partition's files is left behind.
	want := []string{"meta.h5"}
	for p := 0; p < q; p++ {
		want = append(want, PartFileName(p))
	}
	slices.Sort(want)
	if got := datatest.DirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

func TestPartitionFileRoundTrip(t *testing.T) {
	ds := datatest.RandomDataset(t, 22, 300, 2000, 4, 3, "a", "b")
	for _, q := range []int{1, 3} {
		for _, m := range []string{MethodMETIS, MethodRandom} {
			checkRoundTrip(t, ds, "a", q, m, 77)
		}
	}
	checkRoundTrip(t, ds, "", 4, MethodRandom, 1) // no split
	nf := datatest.RandomDataset(t, 23, 100, 500, 0, 3, "a")
	checkRoundTrip(t, nf, "a", 2, MethodMETIS, 3) // no features
}

func TestPartitionFileCora(t *testing.T) {
	ds := loadShared(t, "cora")
	checkRoundTrip(t, ds, "public", 4, MethodMETIS, 1)
}

func TestPartitionFileEmptyPart(t *testing.T) {
	ds, _ := tinyPartitioned(t)
	parts := []int32{0, 0, 2, 2, 0, 2}
	dir := t.TempDir()
	if err := WritePartition(dir, ds, "s", "manual", 0, parts, 3); err != nil {
		t.Fatal(err)
	}
	want, _ := BuildShards(ds, "s", parts, 3)
	for p := 0; p < 3; p++ {
		s, _, err := ReadShard(dir, p, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameShard(s, want[p]); err != nil {
			t.Errorf("part %d: %v", p, err)
		}
	}
}

// wantInputError checks that err is an *data.InputError for file with a message
// containing each of parts.
func wantInputError(t *testing.T, name string, err error, file string, parts ...string) {
	t.Helper()
	t.Logf("%s: %v", name, err)
	var ie *data.InputError
	if !errors.As(err, &ie) {
		t.Errorf("%s: got %v (%T), want an *data.InputError", name, err, err)
		return
	}
	if ie.File != file {
		t.Errorf("%s: error names file %s, want %s (%v)", name, ie.File, file, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q lacks %q", name, err.Error(), p)
		}
	}
}

func TestPartitionFileWorldSize(t *testing.T) {
	ds := datatest.RandomDataset(t, 24, 200, 1000, 2, 3, "a")
	dir, _ := writeTestPartition(t, ds, "a", 4, MethodRandom, 1)
	_, _, err := ReadShard(dir, 0, 2)
	meta := filepath.Join(dir, "meta.h5")
	want := meta + ": num_parts: partitioned into 4 parts, but the job has 2 ranks; re-run gnn-spmd partition --parts 2"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	wantInputError(t, "world size", err, meta)
	if _, _, err := ReadShard(dir, 3, 0); err != nil { // 0 = any part count
		t.Error(err)
	}
	if _, _, err := ReadShard(dir, 4, 4); err == nil {
		t.Error("part 4 of 4 accepted")
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionFileMismatch(t *testing.T) {
	ds := datatest.RandomDataset(t, 25, 200, 1000, 2, 3, "a", "b")
	other := datatest.RandomDataset(t, 26, 200, 1000, 2, 3, "a")
	base, _ := writeTestPartition(t, ds, "a", 3, MethodRandom, 1)
	seed2, _ := writeTestPartition(t, ds, "a", 3, MethodRandom, 2)
	splitB, _ := writeTestPartition(t, ds, "b", 3, MethodRandom, 1)
	q2, _ := writeTestPartition(t, ds, "a", 2, MethodRandom, 1)
	otherDS, _ := writeTestPartition(t, other, "a", 3, MethodRandom, 1)
	target := filepath.Join(base, PartFileName(1))
	cases := []struct {
		name, src string
		want      []string
	}{
		{"other dataset", filepath.Join(otherDS, PartFileName(1)), []string{"attribute dataset_fingerprint", "another dataset"}},
		{"other part count", filepath.Join(q2, PartFileName(1)), []string{"attribute num_parts: is 2, but meta.h5 has 3", "another partition"}},
		{"other seed", filepath.Join(seed2, PartFileName(1)), []string{"attribute partition_id", "another partition of this dataset"}},
		{"other split", filepath.Join(splitB, PartFileName(1)), []string{"attribute partition_id"}},
		{"other part", filepath.Join(base, PartFileName(0)), []string{"attribute part: is 0, expected 1"}},
	}
	keep := filepath.Join(t.TempDir(), "keep.h5")
	copyFile(t, target, keep)
	for _, c := range cases {
		copyFile(t, c.src, target)
		_, _, err := ReadShard(base, 1, 3)
		wantInputError(t, c.name, err, target, c.want...)
		copyFile(t, keep, target)
	}
	if _, _, err := ReadShard(base, 1, 3); err != nil {
		t.Fatal(err)
	}

	os.Remove(target)
	_, _, err := ReadShard(base, 1, 3)
	wantInputError(t, "missing part", err, target, "missing: the partition in", "incomplete")
	empty := t.TempDir()
	_, err = ReadPartitionMeta(empty)
	wantInputError(t, "missing meta", err, filepath.Join(empty, "meta.h5"), "missing: not a partition directory")
}

func TestPartitionFileOverwrite(t *testing.T) {
	ds := datatest.RandomDataset(t, 27, 200, 1000, 2, 3, "a")
	dir, _ := writeTestPartition(t, ds, "a", 5, MethodRandom, 1)
	parts, _ := PartitionRandom(ds.Graph, 2, 9)
	if err := WritePartition(dir, ds, "a", MethodRandom, 9, parts, 2); err != nil {
		t.Fatal(err)
	}
	if got := datatest.DirNames(t, dir); !slices.Equal(got, []string{"meta.h5", "part-0.h5", "part-1.h5"}) {
		t.Errorf("after repartitioning into 2: %v", got)
	}
	if _, _, err := ReadShard(dir, 1, 2); err != nil {
		t.Error(err)
	}
}

func TestPartitionFileCorrupt(t *testing.T) {
	ds := datatest.RandomDataset(t, 28, 400, 3000, 3, 3, "a")
	dir, parts := writeTestPartition(t, ds, "a", 3, MethodRandom, 1)
	path := filepath.Join(dir, PartFileName(2))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(path, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{0, 7, 100, len(good) / 2, len(good) - 100} {
		os.WriteFile(path, good[:n], 0o644)
		_, _, err := ReadShard(dir, 2, 3)
		wantInputError(t, "truncated", err, path)
		if err != nil && !strings.Contains(err.Error(), "truncated or corrupt") && !strings.Contains(err.Error(), "not an HDF5 file") {
			t.Errorf("truncated to %d bytes: %v", n, err)
		}
	}
	restore()

	// Overwrite the /owned data in place (found by its bytes) with another
	// node: the file is readable, its content is not, and its digest says
	// so (TestPartitionFileMalformed covers the checks of the values).
	shards, _ := BuildShards(ds, "a", parts, 3)
	owned := h5test.LE(shards[2].Owned)
	at := bytes.Index(good, owned)
	if at < 0 {
		t.Fatal("owned array not found in the file")
	}
	bad := slices.Clone(good)
	bad[at] ^= 1
	os.WriteFile(path, bad, 0o644)
	_, _, err = ReadShard(dir, 2, 3)
	wantInputError(t, "corrupt owned", err, path, "/owned: holds values whose digest", "the file is corrupt")
	restore()

	// Corrupt meta.h5's assignment.
	metaPath := filepath.Join(dir, "meta.h5")
	mb, _ := os.ReadFile(metaPath)
	at = bytes.Index(mb, h5test.LE(parts))
	if at < 0 {
		t.Fatal("parts array not found in meta.h5")
	}
	v := parts[0]
	mb[at] = byte((v + 1) % 3)
	os.WriteFile(metaPath, mb, 0o644)
	_, err = ReadPartitionMeta(dir)
	wantInputError(t, "corrupt meta", err, metaPath, "/parts: holds values whose digest", "the file is corrupt")

	os.WriteFile(metaPath, []byte("not hdf5"), 0o644)
	_, err = ReadPartitionMeta(dir)
	wantInputError(t, "not hdf5", err, metaPath, "not an HDF5 file")
}

// TestPartitionFileMalformed writes part files with one thing wrong each and
// checks the error names the HDF5 object.
func TestPartitionFileMalformed(t *testing.T) {
	ds := datatest.RandomDataset(t, 29, 300, 2500, 3, 3, "a")
	dir, parts := writeTestPartition(t, ds, "a", 3, MethodRandom, 4)
	m, err := ReadPartitionMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	shards, _ := BuildShards(ds, "a", parts, 3)
	const p = 1
	path := filepath.Join(dir, PartFileName(p))
	clone := func() *Shard {
		s := *shards[p]
		s.Owned, s.Halo, s.Indices, s.LoopDegree = slices.Clone(s.Owned), slices.Clone(s.Halo), slices.Clone(s.Indices), slices.Clone(s.LoopDegree)
		s.Labels, s.Features, s.Indptr = slices.Clone(s.Labels), slices.Clone(s.Features), slices.Clone(s.Indptr)
		s.Train, s.Valid, s.Test = slices.Clone(s.Train), slices.Clone(s.Valid), slices.Clone(s.Test)
		s.Send = slices.Clone(s.Send)
		for o := range s.Send {
			s.Send[o] = slices.Clone(s.Send[o])
		}
		return &s
	}
	nOwn := len(shards[p].Owned)
	cases := []struct {
		name  string
		shard func(s *Shard)
		edit  func(attrs []h5.Attr, arrays []h5.Array) ([]h5.Attr, []h5.Array)
		want  []string
	}{
		{name: "owned order", shard: func(s *Shard) { s.Owned[0], s.Owned[1] = s.Owned[1], s.Owned[0] }, want: []string{"/owned: entry 1"}},
		{name: "halo owner", shard: func(s *Shard) { s.Halo[0] = s.Owned[0] }, want: []string{"/halo: entry 0", "part 0"}},
		{name: "index range", shard: func(s *Shard) { s.Indices[5] = int32(s.NumCols()) }, want: []string{"/graph/indices: row", "expected a column in [0, owned+halo"}},
		{name: "indptr", shard: func(s *Shard) { s.Indptr[1], s.Indptr[2] = s.Indptr[2], s.Indptr[1] }, want: []string{"/graph/indptr: decreases at row"}},
		{name: "loop degree", shard: func(s *Shard) { s.LoopDegree[3]++ }, want: []string{"/node/loop_degree: row 3 has loop degree"}},
		{name: "halo degree", shard: func(s *Shard) { s.LoopDegree[nOwn] = 0 }, want: []string{"/node/loop_degree: halo column"}},
		{name: "label", shard: func(s *Shard) { s.Labels[4] = 3 }, want: []string{"/node/labels: row 4 has label 3"}},
		{name: "feature", shard: func(s *Shard) { s.Features[7] = float32(math.Inf(1)) }, want: []string{"/node/features: row 2 column 1 is +Inf"}},
		{name: "split overlap", shard: func(s *Shard) { s.Valid = []int32{s.Train[0]} }, want: []string{"/split/valid: row", "also in train"}},
		{name: "split range", shard: func(s *Shard) { s.Test = append(s.Test, int32(nOwn)) }, want: []string{"/split/test: entry"}},
		{name: "send order", shard: func(s *Shard) { s.Send[0][0], s.Send[0][1] = s.Send[0][1], s.Send[0][0] }, want: []string{"/send/rows: entry 1"}},
		{name: "owned dtype", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			for i := range arr {
				if arr[i].Path == "/owned" {
					w := make([]int64, nOwn)
					arr[i].Data = w
				}
			}
			return a, arr
		}, want: []string{"/owned: has element type integer of 8 bytes, expected int32"}},
		{name: "missing dataset", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			return a, slices.DeleteFunc(arr, func(x h5.Array) bool { return x.Path == "/graph/indices" })
		}, want: []string{"/graph/indices: missing dataset"}},
		{name: "short halo", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			for i := range arr {
				if arr[i].Path == "/halo" {
					arr[i].Data = arr[i].Data.([]int32)[1:]
					arr[i].Dims = []uint{arr[i].Dims[0] - 1}
				}
			}
			return a, arr
		}, want: []string{"/halo: has shape"}},
		{name: "missing attribute", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			return slices.DeleteFunc(a, func(x h5.Attr) bool { return x.Name == "partition_id" }), arr
		}, want: []string{"attribute partition_id: missing"}},
		{name: "wrong format", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			a[0].Val = partMetaFormat
			return a, arr
		}, want: []string{`attribute format: is "gnn-spmd-partition", expected "gnn-spmd-partition-part"`}},
		{name: "global count", edit: func(a []h5.Attr, arr []h5.Array) ([]h5.Attr, []h5.Array) {
			for i := range a {
				if a[i].Name == "global_test" {
					a[i].Val = int64(1)
				}
			}
			return a, arr
		}, want: []string{"attribute global_test: is 1, but meta.h5 has"}},
	}
	for _, c := range cases {
		s := clone()
		if c.shard != nil {
			c.shard(s)
		}
		attrs, arrays := partContent(s, m)
		if c.edit != nil {
			attrs, arrays = c.edit(attrs, arrays)
		}
		if err := h5.WriteFile(path, attrs, arrays); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadShard(dir, p, 3)
		wantInputError(t, c.name, err, path, c.want...)
	}
	// The unmodified content reads back.
	attrs, arrays := partContent(clone(), m)
	if err := h5.WriteFile(path, attrs, arrays); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadShard(dir, p, 3); err != nil {
		t.Fatal(err)
	}
}

// TestPartitionFileMetaMalformed: meta.h5 inconsistencies.
func TestPartitionFileMetaMalformed(t *testing.T) {
	ds := datatest.RandomDataset(t, 30, 200, 1500, 2, 3, "a")
	dir, _ := writeTestPartition(t, ds, "a", 3, MethodRandom, 4)
	m, err := ReadPartitionMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "meta.h5")
	cases := []struct {
		name string
		edit func(m *PartitionMeta)
		want string
	}{
		{"parts range", func(m *PartitionMeta) { m.Parts[5] = 3; m.PartitionID = m.partitionID() }, "/parts: node 5 is in part 3"},
		{"node count", func(m *PartitionMeta) { m.Stats.Parts[0].Nodes++ }, "/stats/nodes: part 0 has"},
		{"edge sum", func(m *PartitionMeta) { m.Stats.Parts[1].Edges++ }, "/stats/edges: sums to"},
		{"train sum", func(m *PartitionMeta) { m.Stats.Parts[1].TrainNodes-- }, "/stats/train_nodes: sums to"},
		{"diagonal", func(m *PartitionMeta) { m.Stats.Parts[1].RecvRows[1] = 1 }, "/stats/recv_rows: [1, 1] is 1"},
		{"comm", func(m *PartitionMeta) { m.Stats.CommRows++ }, "/stats/recv_rows: sums to"},
		{"num parts", func(m *PartitionMeta) { m.NumParts = 0 }, "attribute num_parts: is 0, expected a value in [1,"},
	}
	for _, c := range cases {
		mm := *m
		mm.Parts = slices.Clone(m.Parts)
		st := *m.Stats
		st.Parts = slices.Clone(st.Parts)
		for p := range st.Parts {
			st.Parts[p].RecvRows = slices.Clone(st.Parts[p].RecvRows)
		}
		mm.Stats = &st
		c.edit(&mm)
		attrs, arrays := metaContent(&mm)
		if err := h5.WriteFile(path, attrs, arrays); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPartitionMeta(dir)
		wantInputError(t, c.name, err, path, c.want)
	}
}

// benchParts writes a 4-part random partition of a 1M-node graph (128
// features) and returns its directory and the size of part 1's file.
func benchParts(b *testing.B) (string, int64) {
	b.Helper()
	ds, err := gen.Generate(gen.Options{Nodes: 1 << 20, Classes: 16, AvgDegree: 20, Homophily: 0.6, Features: 128, SNR: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	split := ds.SplitNames()[0]
	parts, err := Partition(ds, split, 4, MethodRandom, 1)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := WritePartition(dir, ds, split, MethodRandom, 1, parts, 4); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, PartFileName(1)))
	if err != nil {
		b.Fatal(err)
	}
	return dir, st.Size()
}

// BenchmarkReadShard reads part 1 of 4 of a 1M-node graph (meta.h5 and its
// part file) from a warm page cache, their scans remembered;
// BenchmarkScanShard is what a fresh process adds: both files' scans.
func BenchmarkReadShard(b *testing.B) {
	dir, size := benchParts(b)
	b.SetBytes(size)
	for b.Loop() {
		if _, _, err := ReadShard(dir, 1, 4); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanShard(b *testing.B) {
	dir, size := benchParts(b)
	b.SetBytes(size)
	for b.Loop() {
		for _, f := range []string{MetaPath(dir), filepath.Join(dir, PartFileName(1))} {
			if err := h5.Scan(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
