package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// group is q goroutine ranks meeting in collectives: a Comm for the tests
// of the distributed partition (the comm package lies above this one).
type group struct {
	q    int
	mu   sync.Mutex
	cond *sync.Cond
	gen  int
	in   int
	box  []any // rank r's contribution to the collective in progress
	out  []any
}

type member struct {
	g    *group
	rank int
}

func newGroup(q int) *group {
	g := &group{q: q, box: make([]any, q)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// meet runs a collective: every rank puts its value, and all get all.
func (m member) meet(v any) []any {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.gen
	g.box[m.rank] = v
	g.in++
	if g.in == g.q {
		g.out, g.box, g.in = g.box, make([]any, g.q), 0
		g.gen++
		g.cond.Broadcast()
	} else {
		for g.gen == gen {
			g.cond.Wait()
		}
	}
	return g.out
}

func (m member) Rank() int { return m.rank }
func (m member) Size() int { return m.g.q }
func (m member) AllToAllV(send, recv [][]byte) error {
	all := m.meet(send)
	for p := range recv {
		from := all[p].([][]byte)[m.rank]
		if len(from) != len(recv[p]) {
			return fmt.Errorf("rank %d: %d bytes from rank %d, expected %d", m.rank, len(from), p, len(recv[p]))
		}
		copy(recv[p], from)
	}
	m.meet(nil) // the senders keep their buffers until every rank has copied
	return nil
}
func (m member) AllReduceFloat64(x []float64) error {
	all := m.meet(slices.Clone(x))
	clear(x)
	for _, a := range all {
		for i, v := range a.([]float64) {
			x[i] += v
		}
	}
	return nil
}
func (m member) Bcast(buf []byte, root int) error {
	all := m.meet(slices.Clone(buf))
	copy(buf, all[root].([]byte))
	return nil
}

// runRanks runs fn as q goroutine ranks and returns their results.
func runRanks[T any](q int, fn func(c Comm) (T, error)) ([]T, []error) {
	g := newGroup(q)
	out, errs := make([]T, q), make([]error, q)
	var wg sync.WaitGroup
	for r := range q {
		wg.Go(func() { out[r], errs[r] = fn(member{g, r}) })
	}
	wg.Wait()
	return out, errs
}

// TestDistributeRandom: ranks that each read a slice of the file give the
// shards, statistics, fingerprint and partition id of the one-process
// path for the same assignment, which for the random method is
// PartitionRandom's; with many exchange rounds too, and with normalised
// features.
func TestDistributeRandom(t *testing.T) {
	ds := datatest.RandomDataset(t, 31, 500, 4000, 5, 4, "a", "b")
	path := filepath.Join(t.TempDir(), "d.h5")
	if err := datafile.Write(path, ds); err != nil {
		t.Fatal(err)
	}
	defer func(b int64) { roundBytes = b }(roundBytes)
	for _, c := range []struct {
		q         int
		round     int64
		normalize bool
	}{{1, 64 << 20, false}, {2, 64 << 20, false}, {3, 100, false}, {4, 64 << 20, true}, {7, 1000, false}} {
		t.Run(fmt.Sprintf("q%d-round%d-norm%v", c.q, c.round, c.normalize), func(t *testing.T) {
			roundBytes = c.round
			ref := ds
			if c.normalize {
				ref = &data.Dataset{Name: ds.Name, Graph: ds.Graph, NumFeatures: ds.NumFeatures, Features: slices.Clone(ds.Features),
					Labels: ds.Labels, NumClasses: ds.NumClasses, Splits: ds.Splits}
				ref.NormalizeFeatureRows()
			}
			parts, err := PartitionRandom(ds.Graph, c.q, 9)
			if err != nil {
				t.Fatal(err)
			}
			want, err := BuildShards(ref, "b", parts, c.q)
			if err != nil {
				t.Fatal(err)
			}
			wantStats, _ := ComputePartitionStats(ds.Graph, parts, c.q, ds.Splits["b"].Train)
			fp := ref.Fingerprint()
			id := PartitionID(ref, fp, "b", parts, c.q)
			got, errs := runRanks(c.q, func(cm Comm) (*Distributed, error) {
				return Distribute(cm, DistOptions{Path: path, Split: "b", Method: MethodRandom, Seed: 9, Normalize: c.normalize})
			})
			for r, d := range got {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if len(d.Shard.Halo) == 0 && len(want[r].Halo) == 0 {
					d.Shard.Halo = want[r].Halo // nil or empty alike
				}
				if !reflect.DeepEqual(d.Shard, want[r]) {
					t.Errorf("rank %d: the shard differs from BuildShard's:\n%s", r, shardDiff(d.Shard, want[r]))
				}
				m := d.Meta
				if m.Fingerprint != fp || m.PartitionID != id || m.Split != "b" || m.NumParts != c.q {
					t.Errorf("rank %d: fingerprint %x id %x split %q, want %x %x", r, m.Fingerprint, m.PartitionID, m.Split, fp, id)
				}
				if !reflect.DeepEqual(m.Stats, wantStats) {
					t.Errorf("rank %d: stats %+v, want %+v", r, m.Stats, wantStats)
				}
				lo, _ := datafile.SliceRange(int64(ds.Graph.N), r, c.q)
				if !slices.Equal(d.sliceParts, parts[lo:lo+int64(len(d.sliceParts))]) {
					t.Errorf("rank %d: its slice's parts differ from PartitionRandom's", r)
				}
			}
		})
	}
}

// shardDiff names the fields in which two shards differ.
func shardDiff(a, b *Shard) string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s: %v vs %v", va.Type().Field(i).Name, va.Field(i), vb.Field(i)))
		}
	}
	s := strings.Join(out, "\n")
	if len(s) > 2000 {
		s = s[:2000]
	}
	return s
}

// TestDistributeErrors: a bad file, settings that differ between ranks
// and a method that needs MPI stop every rank: the lowest failing rank
// says why, the others name it.
func TestDistributeErrors(t *testing.T) {
	ds := datatest.RandomDataset(t, 32, 100, 500, 2, 3, "a")
	dir := t.TempDir()
	path := filepath.Join(dir, "d.h5")
	if err := datafile.Write(path, ds); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  func(r int) DistOptions
		want string
	}{
		{"missing", func(int) DistOptions {
			return DistOptions{Path: filepath.Join(dir, "none.h5"), Method: MethodRandom}
		}, "none.h5: missing"},
		{"split", func(int) DistOptions { return DistOptions{Path: path, Split: "x", Method: MethodRandom} }, "/splits/x: no such split"},
		{"settings", func(r int) DistOptions {
			return DistOptions{Path: path, Method: MethodRandom, Settings: []Setting{{"--seed", fmt.Sprint(r / 2)}}}
		}, "rank 2: --seed is 1, rank 0 has 0"},
		{"ptscotch", func(int) DistOptions { return DistOptions{Path: path, Method: MethodPTScotch} }, "runs under mpirun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs := runRanks(3, func(cm Comm) (*Distributed, error) { return Distribute(cm, c.opt(cm.Rank())) })
			reporter := -1
			for r, err := range errs {
				var rf *RankFailed
				switch {
				case err == nil:
					t.Fatalf("rank %d: no error", r)
				case errors.As(err, &rf):
					if reporter >= 0 && rf.Rank != reporter {
						t.Errorf("rank %d names rank %d, the reporter is %d", r, rf.Rank, reporter)
					}
				default:
					if reporter >= 0 {
						t.Errorf("ranks %d and %d both report: %v", reporter, r, err)
					}
					reporter = r
					if !strings.Contains(err.Error(), c.want) {
						t.Errorf("rank %d: %v, want %q", r, err, c.want)
					}
				}
			}
			if reporter < 0 {
				t.Fatalf("no rank reports: %v", errs)
			}
		})
	}
}

// TestDistributedWrite: the directory the ranks write reads back (ReadShard)
// as the one WritePartition writes for the same assignment, digests
// included, replaces an older partition whole, and a failure leaves the
// older one as it was, with no temporary directory behind.
func TestDistributedWrite(t *testing.T) {
	ds := datatest.RandomDataset(t, 33, 300, 2000, 3, 3, "a")
	dir := t.TempDir()
	path := filepath.Join(dir, "d.h5")
	if err := datafile.Write(path, ds); err != nil {
		t.Fatal(err)
	}
	defer func(b int64) { roundBytes = b }(roundBytes)
	roundBytes = 64 // meta.h5's /parts in many broadcasts
	const q = 3
	parts, _ := PartitionRandom(ds.Graph, q, 4)
	one := filepath.Join(dir, "one")
	if err := WritePartition(one, ds, "a", MethodRandom, 4, parts, q); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := WritePartition(out, ds, "a", MethodRandom, 1, parts, 2*q); err != nil { // an older partition there
		t.Fatal(err)
	}
	_, errs := runRanks(q, func(c Comm) (any, error) {
		o, err := PrepareOutput(c, out)
		if err != nil {
			return nil, err
		}
		d, err := Distribute(c, DistOptions{Path: path, Method: MethodRandom, Seed: 4})
		if err != nil {
			o.Abort()
			return nil, err
		}
		return nil, o.Write(c, d)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if got, want := datatest.DirNames(t, dir), []string{"d.h5", "one", "out"}; !slices.Equal(got, want) {
		t.Errorf("files beside the output: %v, want %v", got, want)
	}
	if got := datatest.DirNames(t, out); !slices.Equal(got, datatest.DirNames(t, one)) {
		t.Errorf("output holds %v, the one-process directory %v", got, datatest.DirNames(t, one))
	}
	for p := range q {
		a, ma, err := ReadShard(one, p, q)
		if err != nil {
			t.Fatal(err)
		}
		b, mb, err := ReadShard(out, p, q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ma, mb) {
			t.Errorf("part %d reads back otherwise than the one-process partition's:\n%s", p, shardDiff(b, a))
		}
		for _, name := range []string{partMetaName, PartFileName(p)} {
			format := partFileFormat
			if name == partMetaName {
				format = partMetaFormat
			}
			if da, db := digestAttrs(t, filepath.Join(one, name), format), digestAttrs(t, filepath.Join(out, name), format); da != db || da == "" {
				t.Errorf("%s: digests %s, one process %s", name, db, da)
			}
		}
	}
	// A rank that fails (a missing input) leaves the partition as it was.
	_, errs = runRanks(q, func(c Comm) (any, error) {
		o, err := PrepareOutput(c, out)
		if err != nil {
			return nil, err
		}
		p := path
		if c.Rank() == 1 {
			p += ".missing"
		}
		d, err := Distribute(c, DistOptions{Path: p, Method: MethodRandom, Seed: 4})
		if err != nil {
			o.Abort()
			return nil, err
		}
		return nil, o.Write(c, d)
	})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "d.h5.missing: missing") {
		t.Errorf("rank 1: %v, want its missing input named", errs[1])
	}
	if got, want := datatest.DirNames(t, dir), []string{"d.h5", "one", "out"}; !slices.Equal(got, want) {
		t.Errorf("after a failure, files beside the output: %v, want %v", got, want)
	}
	if _, _, err := ReadShard(out, 0, q); err != nil {
		t.Errorf("after a failure the partition does not read: %v", err)
	}
}

// digestAttrs is a file's digest attributes, as text.
func digestAttrs(t *testing.T, path, format string) string {
	t.Helper()
	var s string
	err := h5.Read(path, format, partVersion, "", func(f *h5.File) error {
		paths := f.String(h5.DigestPathsAttr)
		for _, p := range strings.Split(paths, "\n") {
			d, _ := f.Digest(p)
			s += fmt.Sprintf("%s=%x ", p, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
