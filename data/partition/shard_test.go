package partition

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// tinyPartitioned is a 6-node graph in 3 parts with a self loop and a
// duplicate edge; TestShardTiny spells out its shards by hand.
func tinyPartitioned(t testing.TB) (*data.Dataset, []int32) {
	g := graphFromEdges(t, 6, [][2]int32{
		{1, 0}, {3, 0}, {0, 0}, {4, 2}, {3, 2}, {1, 2}, {0, 1},
		{2, 3}, {5, 3}, {5, 3}, {0, 4}, {1, 5}, {4, 5},
	})
	ds := &data.Dataset{Name: "tiny", Graph: g, NumFeatures: 2, NumClasses: 3,
		Features: []float32{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5},
		Labels:   []int32{0, 1, 2, -1, 1, 0},
		Splits:   map[string]*data.Split{"s": {Train: []int32{0, 3, 5}, Valid: []int32{1, 4}, Test: []int32{2}}}}
	if err := ds.Validate("tiny"); err != nil {
		t.Fatal(err)
	}
	return ds, []int32{0, 1, 0, 1, 2, 2}
}

func TestShardTiny(t *testing.T) {
	ds, parts := tinyPartitioned(t)
	shards, err := BuildShards(ds, "s", parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []*Shard{
		{Owned: []int32{0, 2}, Halo: []int32{1, 3, 4}, RecvStart: []int{0, 0, 2, 3},
			Send:   [][]int32{{}, {0, 1}, {0}},
			Indptr: []int64{0, 3, 6}, Indices: []int32{2, 3, 0, 4, 3, 2}, LoopDegree: []int32{3, 4, 2, 4, 2},
			Features: []float32{0, 0.5, 2, 2.5, 0, 0, 0, 0, 0, 0}, Labels: []int32{0, 2},
			Train: []int32{0}, Valid: []int32{}, Test: []int32{1}},
		{Owned: []int32{1, 3}, Halo: []int32{0, 2, 5}, RecvStart: []int{0, 2, 2, 3},
			Send:   [][]int32{{0, 1}, {}, {0}},
			Indptr: []int64{0, 1, 4}, Indices: []int32{2, 3, 4, 4}, LoopDegree: []int32{2, 4, 3, 4, 3},
			Features: []float32{1, 1.5, 3, 3.5, 0, 0, 0, 0, 0, 0}, Labels: []int32{1, -1},
			Train: []int32{1}, Valid: []int32{0}, Test: []int32{}},
		{Owned: []int32{4, 5}, Halo: []int32{0, 1}, RecvStart: []int{0, 1, 2, 2},
			Send:   [][]int32{{0}, {1}, {}},
			Indptr: []int64{0, 1, 3}, Indices: []int32{2, 3, 0}, LoopDegree: []int32{2, 3, 3, 2},
			Features: []float32{4, 4.5, 5, 5.5, 0, 0, 0, 0}, Labels: []int32{1, 0},
			Train: []int32{1}, Valid: []int32{0}, Test: []int32{}},
	}
	for p, w := range want {
		w.Part, w.NumParts, w.NumNodes, w.NumFeatures, w.NumClasses = p, 3, 6, 2, 3
		w.GlobalTrain, w.GlobalValid, w.GlobalTest = 3, 2, 1
		if err := sameShard(shards[p], w); err != nil {
			t.Errorf("part %d: %v", p, err)
		}
	}
	nc := shards[0].NoComm()
	if !slices.Equal(nc.Indptr, []int64{0, 1, 1}) || !slices.Equal(nc.Indices, []int32{0}) ||
		!slices.Equal(nc.LoopDegree, []int32{1, 1}) || len(nc.Halo) != 0 || !slices.Equal(nc.RecvStart, []int{0, 0, 0, 0}) {
		t.Errorf("NoComm: %+v", nc)
	}
	for p, s := range nc.Send {
		if len(s) != 0 {
			t.Errorf("NoComm Send[%d] = %v", p, s)
		}
	}
	if err := sameShard(shards[0], want[0]); err != nil {
		t.Errorf("NoComm changed its source: %v", err)
	}
}

// sameShard reports the first difference between two shards (floats by bits).
func sameShard(a, b *Shard) error {
	type cmp struct {
		name string
		eq   bool
	}
	sendEq := len(a.Send) == len(b.Send)
	for p := 0; sendEq && p < len(a.Send); p++ {
		sendEq = slices.Equal(a.Send[p], b.Send[p])
	}
	featEq := len(a.Features) == len(b.Features)
	for i := 0; featEq && i < len(a.Features); i++ {
		featEq = math.Float32bits(a.Features[i]) == math.Float32bits(b.Features[i])
	}
	for _, c := range []cmp{
		{"Part", a.Part == b.Part}, {"NumParts", a.NumParts == b.NumParts}, {"NumNodes", a.NumNodes == b.NumNodes},
		{"Owned", slices.Equal(a.Owned, b.Owned)}, {"Halo", slices.Equal(a.Halo, b.Halo)},
		{"RecvStart", slices.Equal(a.RecvStart, b.RecvStart)}, {"Send", sendEq},
		{"Indptr", slices.Equal(a.Indptr, b.Indptr)}, {"Indices", slices.Equal(a.Indices, b.Indices)},
		{"LoopDegree", slices.Equal(a.LoopDegree, b.LoopDegree)},
		{"NumFeatures", a.NumFeatures == b.NumFeatures}, {"Features", featEq},
		{"Labels", slices.Equal(a.Labels, b.Labels)}, {"NumClasses", a.NumClasses == b.NumClasses},
		{"Train", slices.Equal(a.Train, b.Train)}, {"Valid", slices.Equal(a.Valid, b.Valid)}, {"Test", slices.Equal(a.Test, b.Test)},
		{"Global", a.GlobalTrain == b.GlobalTrain && a.GlobalValid == b.GlobalValid && a.GlobalTest == b.GlobalTest},
	} {
		if !c.eq {
			return fmt.Errorf("%s differs", c.name)
		}
	}
	return nil
}

// checkShards verifies every invariant of a partition's shards against the
// global dataset, from the definitions.
func checkShards(t *testing.T, ds *data.Dataset, split string, parts []int32, q int, shards []*Shard) {
	t.Helper()
	g := ds.Graph
	f := ds.NumFeatures
	if len(shards) != q {
		t.Fatalf("%d shards, want %d", len(shards), q)
	}
	seen := make([]bool, g.N)
	var halo int64
	for p, s := range shards {
		if s.Part != p || s.NumParts != q || s.NumNodes != g.N || s.NumFeatures != f || s.NumClasses != ds.NumClasses {
			t.Fatalf("part %d: header %d/%d/%d", p, s.Part, s.NumParts, s.NumNodes)
		}
		if !slices.IsSorted(s.Owned) {
			t.Fatalf("part %d: Owned not ascending", p)
		}
		for _, v := range s.Owned {
			if parts[v] != int32(p) || seen[v] {
				t.Fatalf("part %d owns node %d of part %d (seen %v)", p, v, parts[v], seen[v])
			}
			seen[v] = true
		}
		// Halo: exactly the other parts' nodes with an edge into an owned
		// node, grouped by owner, ascending within.
		var wantHalo []int32
		inHalo := map[int32]bool{}
		for _, d := range s.Owned {
			for _, v := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				if parts[v] != int32(p) && !inHalo[v] {
					inHalo[v] = true
					wantHalo = append(wantHalo, v)
				}
			}
		}
		slices.SortFunc(wantHalo, func(a, b int32) int {
			if parts[a] != parts[b] {
				return int(parts[a] - parts[b])
			}
			return int(a - b)
		})
		if !slices.Equal(s.Halo, wantHalo) {
			t.Fatalf("part %d: halo %v, want %v", p, s.Halo, wantHalo)
		}
		halo += int64(len(s.Halo))
		if len(s.RecvStart) != q+1 || s.RecvStart[0] != 0 || s.RecvStart[q] != len(s.Halo) || s.RecvStart[p+1] != s.RecvStart[p] {
			t.Fatalf("part %d: RecvStart %v", p, s.RecvStart)
		}
		for o := 0; o < q; o++ {
			for _, v := range s.Halo[s.RecvStart[o]:s.RecvStart[o+1]] {
				if parts[v] != int32(o) {
					t.Fatalf("part %d: halo node %d listed under part %d, owned by %d", p, v, o, parts[v])
				}
			}
		}
		// Every edge into an owned node, in the global row order.
		cols := slices.Concat(s.Owned, s.Halo)
		if len(s.Indptr) != len(s.Owned)+1 || s.Indptr[0] != 0 || s.Indptr[len(s.Owned)] != int64(len(s.Indices)) {
			t.Fatalf("part %d: Indptr shape", p)
		}
		for i, d := range s.Owned {
			row := s.Indices[s.Indptr[i]:s.Indptr[i+1]]
			grow := g.Indices[g.Indptr[d]:g.Indptr[d+1]]
			if len(row) != len(grow) {
				t.Fatalf("part %d row %d: %d edges, want %d", p, i, len(row), len(grow))
			}
			for k, c := range row {
				if c < 0 || int(c) >= len(cols) || cols[c] != grow[k] {
					t.Fatalf("part %d row %d edge %d: column %d, want node %d", p, i, k, c, grow[k])
				}
			}
		}
		// LoopDegree of every column.
		if len(s.LoopDegree) != len(cols) {
			t.Fatalf("part %d: %d loop degrees for %d columns", p, len(s.LoopDegree), len(cols))
		}
		for c, v := range cols {
			row := g.Indices[g.Indptr[v]:g.Indptr[v+1]]
			want := int32(len(row))
			if !slices.Contains(row, v) {
				want++
			}
			if s.LoopDegree[c] != want {
				t.Fatalf("part %d column %d (node %d): loop degree %d, want %d", p, c, v, s.LoopDegree[c], want)
			}
		}
		for i, v := range s.Owned {
			if s.Labels[i] != ds.Labels[v] || !slices.Equal(s.Features[i*f:(i+1)*f], ds.Features[int(v)*f:(int(v)+1)*f]) {
				t.Fatalf("part %d row %d: label or features differ from node %d", p, i, v)
			}
		}
		// Send[o] matches o's halo rows from p, in order.
		if len(s.Send) != q || len(s.Send[p]) != 0 {
			t.Fatalf("part %d: Send has %d lists, own list %v", p, len(s.Send), s.Send[p])
		}
		for o, r := range shards {
			got := make([]int32, len(s.Send[o]))
			for k, row := range s.Send[o] {
				got[k] = s.Owned[row]
			}
			if want := r.Halo[r.RecvStart[p]:r.RecvStart[p+1]]; !slices.Equal(got, want) {
				t.Fatalf("part %d sends %v to %d, which expects %v", p, got, o, want)
			}
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("node %d owned by no shard", v)
		}
	}
	// The splits: union over shards = the global split.
	if split != "" {
		sp := ds.Splits[split]
		for k, global := range [3][]int32{sp.Train, sp.Valid, sp.Test} {
			var union []int32
			for _, s := range shards {
				local := [3][]int32{s.Train, s.Valid, s.Test}[k]
				if !slices.IsSorted(local) {
					t.Fatalf("part %d split %d not ascending", s.Part, k)
				}
				for _, i := range local {
					union = append(union, s.Owned[i])
				}
				if g := [3]int{s.GlobalTrain, s.GlobalValid, s.GlobalTest}[k]; g != len(global) {
					t.Fatalf("part %d: global count %d, want %d", s.Part, g, len(global))
				}
			}
			slices.Sort(union)
			if !slices.Equal(union, global) {
				t.Fatalf("split part %d: shards hold %d nodes, want %d", k, len(union), len(global))
			}
		}
	}
	var train []int32
	if split != "" {
		train = ds.Splits[split].Train
	}
	st, err := ComputePartitionStats(g, parts, q, train)
	if err != nil {
		t.Fatal(err)
	}
	if st.CommRows != halo {
		t.Fatalf("stats comm rows %d, shards' halos %d", st.CommRows, halo)
	}
	for p, s := range shards {
		if st.Parts[p].Nodes != len(s.Owned) || st.Parts[p].Edges != int64(len(s.Indices)) || st.Parts[p].HaloRows() != len(s.Halo) ||
			(split != "" && st.Parts[p].TrainNodes != len(s.Train)) {
			t.Fatalf("part %d: stats %+v disagree with the shard", p, st.Parts[p])
		}
	}
}

func TestShardInvariantsTiny(t *testing.T) {
	ds, parts := tinyPartitioned(t)
	shards, err := BuildShards(ds, "s", parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkShards(t, ds, "s", parts, 3, shards)
}

func TestShardRandomDatasets(t *testing.T) {
	ds := datatest.RandomDataset(t, 11, 400, 3000, 3, 4, "a") // duplicates and self loops
	for _, q := range []int{1, 2, 5, 16} {
		for _, method := range []string{MethodRandom, MethodMETIS} {
			parts, err := Partition(ds, "a", q, method, 9)
			if err != nil {
				t.Fatal(err)
			}
			shards, err := BuildShards(ds, "a", parts, q)
			if err != nil {
				t.Fatal(err)
			}
			checkShards(t, ds, "a", parts, q, shards)
		}
	}
}

func TestShardCora(t *testing.T) {
	ds := loadShared(t, "cora")
	for _, q := range []int{1, 2, 4, 8} {
		for _, method := range []string{MethodRandom, MethodMETIS} {
			t.Run(fmt.Sprintf("%s-%d", method, q), func(t *testing.T) {
				parts, err := Partition(ds, "public", q, method, 5)
				if err != nil {
					t.Fatal(err)
				}
				shards, err := BuildShards(ds, "public", parts, q)
				if err != nil {
					t.Fatal(err)
				}
				checkShards(t, ds, "public", parts, q, shards)
				if q == 1 && (len(shards[0].Halo) != 0 || len(shards[0].Send[0]) != 0) {
					t.Error("Q=1 has a halo or sends")
				}
				// BuildShard for one part equals that part of BuildShards.
				one, err := BuildShard(ds, "public", parts, q, q-1)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameShard(one, shards[q-1]); err != nil {
					t.Error(err)
				}
				checkNoComm(t, ds, parts, shards)
			})
		}
	}
}

// checkNoComm: the no-communication shard is the induced subgraph of the
// owned nodes, with degrees counted on it.
func checkNoComm(t *testing.T, ds *data.Dataset, parts []int32, shards []*Shard) {
	g := ds.Graph
	for p, s := range shards {
		nc := s.NoComm()
		if len(nc.Halo) != 0 || len(nc.LoopDegree) != len(s.Owned) || !slices.Equal(nc.Owned, s.Owned) {
			t.Fatalf("part %d: NoComm has a halo or wrong degrees", p)
		}
		for i, d := range s.Owned {
			var want []int32
			loop := false
			for _, v := range g.Indices[g.Indptr[d]:g.Indptr[d+1]] {
				if parts[v] == int32(p) {
					want = append(want, v)
					loop = loop || v == d
				}
			}
			row := nc.Indices[nc.Indptr[i]:nc.Indptr[i+1]]
			got := make([]int32, len(row))
			for k, c := range row {
				got[k] = s.Owned[c]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("part %d row %d: %v, want %v", p, i, got, want)
			}
			wd := int32(len(want))
			if !loop {
				wd++
			}
			if nc.LoopDegree[i] != wd {
				t.Fatalf("part %d row %d: loop degree %d, want %d", p, i, nc.LoopDegree[i], wd)
			}
		}
	}
}

func TestShardNoSplitAndEmptyPart(t *testing.T) {
	ds, _ := tinyPartitioned(t)
	parts := []int32{0, 0, 2, 2, 0, 2} // part 1 owns nothing
	shards, err := BuildShards(ds, "", parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkShards(t, ds, "", parts, 3, shards)
	e := shards[1]
	if len(e.Owned) != 0 || len(e.Indptr) != 1 || len(e.Halo) != 0 || e.Train == nil || len(e.Train) != 0 || e.GlobalTrain != 0 {
		t.Errorf("empty part: %+v", e)
	}
}

func TestShardErrors(t *testing.T) {
	ds, parts := tinyPartitioned(t)
	cases := []struct {
		split string
		parts []int32
		q, p  int
		want  string
	}{
		{"s", parts, 3, 3, "part 3, expected a part in [0, 3)"},
		{"s", parts, 3, -1, "part -1"},
		{"x", parts, 3, 0, `no split "x"`},
		{"s", parts[:4], 3, 0, "4 entries for 6 nodes"},
		{"s", []int32{0, 1, 0, 1, 2, 3}, 3, 0, "node 5 is in part 3"},
		{"s", parts, 0, 0, "part 0, expected a part in [0, 0)"},
	}
	for _, c := range cases {
		_, err := BuildShard(ds, c.split, c.parts, c.q, c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v", c, err)
		}
	}
}
