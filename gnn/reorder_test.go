package gnn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestRCMShuffledPath: a path whose ids are shuffled comes back with every
// edge between neighbouring rows, and as a permutation.
func TestRCMShuffledPath(t *testing.T) {
	const n = 1000
	id := rand.New(rand.NewPCG(1, 2)).Perm(n) // path position -> node id
	nbrs := make([][]int32, n)
	for p := 0; p+1 < n; p++ {
		a, b := id[p], id[p+1]
		nbrs[a] = append(nbrs[a], int32(b))
		nbrs[b] = append(nbrs[b], int32(a))
	}
	ptr := make([]int64, n+1)
	var col []int32
	for i, l := range nbrs {
		col = append(col, l...)
		ptr[i+1] = int64(len(col))
	}
	a := kernels.NewAdj(n, n, ptr, col, nil)
	order := RCM(a, n)
	at := make([]int, n)
	for i := range at {
		at[i] = -1
	}
	for i, v := range order {
		if at[v] >= 0 {
			t.Fatalf("node %d at rows %d and %d", v, at[v], i)
		}
		at[v] = i
	}
	for v, l := range nbrs {
		for _, u := range l {
			if d := at[v] - at[u]; d != 1 && d != -1 {
				t.Fatalf("edge %d-%d lands %d rows apart", v, u, d)
			}
		}
	}
}

func TestPermuteRefusesNonPermutations(t *testing.T) {
	ds := randomDataset(t, 50, 4, 3, 1)
	v, err := SingleProcess(ds, ds.SplitNames()[0], "sage")
	if err != nil {
		t.Fatal(err)
	}
	n := v.NumOwned
	for _, order := range [][]int32{make([]int32, n-1), make([]int32, n), append(make([]int32, n-1), int32(n))} {
		if _, err := v.Permute(order); err == nil {
			t.Errorf("order %v accepted", order)
		}
	}
	if _, err := v.Reorder("random"); err == nil {
		t.Error("order \"random\" accepted")
	}
}

// TestReorderedTrainingEqualsPlain: with the rows in RCM or METIS-cluster
// order (clusters of 256 rows, so that Cora has some), one process
// and 4 ranks (random and METIS parts) train as with the rows as given, up
// to the order of floating-point sums over rows: the distributed equality
// tolerance on every epoch's loss, the final accuracies within 0.2 points.
// Dropout masks follow the nodes.
func TestReorderedTrainingEqualsPlain(t *testing.T) {
	defer func(r int) { clusterRows = r }(clusterRows)
	clusterRows = 256
	ds := coraNormalized(t)
	split := ds.SplitNames()[0]
	mc := ModelConfig{Model: "sage", Layers: 3, Hidden: 32, InDim: ds.NumFeatures, Classes: ds.NumClasses, Dropout: 0.2, Seed: 3}
	const epochs = 30
	random, err := partition.PartitionRandom(ds.Graph, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	metis, err := partition.PartitionMETIS(ds.Graph, 4, 1, ds.Splits[split].Train)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		q     int
		parts []int32
	}{{"one", 1, make([]int32, ds.Graph.N)}, {"random4", 4, random}, {"metis4", 4, metis}} {
		want := runRanksWith(t, ds, split, c.parts, c.q, mc, epochs, nil, rankOptions{order: OrderNone})
		for _, order := range []string{OrderRCM, OrderMETIS} {
			t.Run(c.name+"/"+order, func(t *testing.T) {
				got := runRanksWith(t, ds, split, c.parts, c.q, mc, epochs, nil, rankOptions{order: order})
				same := true
				for e := range want {
					if !closeLoss(got[e].Loss, want[e].Loss) {
						t.Fatalf("epoch %d: loss %.8f in %s order, %.8f as given", e, got[e].Loss, order, want[e].Loss)
					}
					same = same && got[e].Loss == want[e].Loss
				}
				if same {
					t.Log("losses equal bit for bit") // allowed, but rows did move
				}
				last, ref := got[epochs-1], want[epochs-1]
				for _, acc := range [][2]float64{{last.TrainAcc, ref.TrainAcc}, {last.ValAcc, ref.ValAcc}, {last.TestAcc, ref.TestAcc}} {
					if math.Abs(acc[0]-acc[1]) > 0.002 {
						t.Errorf("final accuracy %.4f in %s order vs %.4f as given", acc[0], order, acc[1])
					}
				}
			})
		}
	}
}

// TestOrdersMove: on Cora neither order is the identity (else the test above
// compares a run with itself), and METIS clusters of 256 rows keep more
// edges within 256 rows of each other than the ids as given do.
func TestOrdersMove(t *testing.T) {
	ds, err := ogb.Load(sharedData(t, "cora"), ogb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := SingleProcess(ds, ds.SplitNames()[0], "sage")
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := ClusterOrder(v.Adj, v.NumOwned, 256)
	if err != nil {
		t.Fatal(err)
	}
	identity := make([]int32, v.NumOwned)
	for i := range identity {
		identity[i] = int32(i)
	}
	near := func(order []int32) float64 {
		at := make([]int32, len(order))
		for i, r := range order {
			at[r] = int32(i)
		}
		n, all := 0, 0
		for i := range v.NumOwned {
			for _, c := range v.Adj.Col[v.Adj.Ptr[i]:v.Adj.Ptr[i+1]] {
				if d := at[i] - at[c]; d > -256 && d < 256 {
					n++
				}
				all++
			}
		}
		return float64(n) / float64(all)
	}
	for name, order := range map[string][]int32{"rcm": RCM(v.Adj, v.NumOwned), "metis": clusters} {
		moved := 0
		for i, r := range order {
			if int(r) != i {
				moved++
			}
		}
		if moved < v.NumOwned/2 {
			t.Errorf("%s moved %d of %d rows", name, moved, v.NumOwned)
		}
	}
	if c, id := near(clusters), near(identity); c <= id {
		t.Errorf("edges within 256 rows: %.3f in METIS-cluster order, %.3f as given", c, id)
	} else {
		t.Logf("edges within 256 rows: %.3f in METIS-cluster order, %.3f as given", c, id)
	}
}
