package metis

import (
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliques builds k cliques of size m, clique c joined to clique c+1 by one
// edge: the best k-way cut is k-1.
func cliques(k, m int) Graph {
	n := k * m
	adj := make([][]int32, n)
	link := func(a, b int) {
		adj[a] = append(adj[a], int32(b))
		adj[b] = append(adj[b], int32(a))
	}
	for c := 0; c < k; c++ {
		for i := 0; i < m; i++ {
			for j := i + 1; j < m; j++ {
				link(c*m+i, c*m+j)
			}
		}
		if c+1 < k {
			link(c*m+m-1, (c+1)*m)
		}
	}
	g := Graph{Xadj: []int32{0}}
	for _, a := range adj {
		g.Adjncy = append(g.Adjncy, a...)
		g.Xadj = append(g.Xadj, int32(len(g.Adjncy)))
	}
	return g
}

func TestPartGraphKwayCliques(t *testing.T) {
	g := cliques(4, 10)
	part, cut, err := PartGraphKway(g, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cut != 3 {
		t.Errorf("edge cut %d, want 3", cut)
	}
	for c := 0; c < 4; c++ {
		for i := 1; i < 10; i++ {
			if part[c*10+i] != part[c*10] {
				t.Fatalf("clique %d split across parts: %v", c, part)
			}
		}
	}
}

func TestPartGraphKwaySeedDeterministic(t *testing.T) {
	g := cliques(6, 7)
	for _, seed := range []int32{1, 2, 3} {
		o := DefaultOptions()
		o[OptionSeed] = seed
		a, ca, err := PartGraphKway(g, 3, &o)
		if err != nil {
			t.Fatal(err)
		}
		b, cb, err := PartGraphKway(g, 3, &o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a, b) || ca != cb {
			t.Errorf("seed %d: two runs differ", seed)
		}
	}
}

func TestPartGraphKwayMultiConstraint(t *testing.T) {
	// Two cliques; the second weight is on clique 0 only, so balancing it
	// forces the cut through clique 0.
	g := cliques(2, 20)
	g.NCon = 2
	g.Vwgt = make([]int32, 2*40)
	for i := 0; i < 40; i++ {
		g.Vwgt[2*i] = 1
		if i < 20 {
			g.Vwgt[2*i+1] = 1
		}
	}
	g.UBVec = []float32{1.05, 1.2}
	part, _, err := PartGraphKway(g, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var w [2][2]int
	for i, p := range part {
		w[p][0] += int(g.Vwgt[2*i])
		w[p][1] += int(g.Vwgt[2*i+1])
	}
	for c := 0; c < 2; c++ {
		if w[0][c] == 0 || w[1][c] == 0 {
			t.Errorf("constraint %d unbalanced: %v", c, w)
		}
	}
}

func TestPartGraphKwayTrivial(t *testing.T) {
	g := cliques(2, 3)
	part, cut, err := PartGraphKway(g, 1, nil)
	if err != nil || cut != 0 || slices.Max(part) != 0 {
		t.Errorf("nparts=1: %v %d %v", part, cut, err)
	}
	// An edgeless graph.
	part, cut, err = PartGraphKway(Graph{Xadj: make([]int32, 101)}, 4, nil)
	if err != nil || cut != 0 || len(part) != 100 {
		t.Fatalf("edgeless: %d %v", cut, err)
	}
	sizes := make([]int, 4)
	for _, p := range part {
		sizes[p]++
	}
	if slices.Min(sizes) < 20 {
		t.Errorf("edgeless sizes %v", sizes)
	}
}

func TestPartGraphKwayInputErrors(t *testing.T) {
	good := cliques(2, 3)
	cases := []struct {
		name string
		edit func(g *Graph) int
		want string
	}{
		{"empty xadj", func(g *Graph) int { g.Xadj = nil; return 2 }, "xadj is empty"},
		{"xadj start", func(g *Graph) int { g.Xadj[0] = 1; return 2 }, "xadj[0] = 1"},
		{"xadj end", func(g *Graph) int { g.Adjncy = g.Adjncy[:3]; return 2 }, "adjncy has 3"},
		{"decreasing", func(g *Graph) int { g.Xadj[2] = 0; return 2 }, "decreases"},
		{"range", func(g *Graph) int { g.Adjncy[0] = 6; return 2 }, "neighbour 6"},
		{"self loop", func(g *Graph) int { g.Adjncy[0] = 0; return 2 }, "self loop"},
		{"vwgt len", func(g *Graph) int { g.Vwgt = []int32{1}; return 2 }, "1 vertex weights"},
		{"vwgt sign", func(g *Graph) int { g.Vwgt = []int32{1, 1, -1, 1, 1, 1}; return 2 }, "weight -1"},
		{"ncon", func(g *Graph) int { g.NCon = 2; return 2 }, "no vertex weights"},
		{"nparts", func(g *Graph) int { return 0 }, "0 parts"},
		{"ubvec len", func(g *Graph) int { g.UBVec = []float32{1.1, 1.1}; return 2 }, "2 imbalance tolerances for 1"},
		{"ubvec value", func(g *Graph) int { g.UBVec = []float32{0.9}; return 2 }, "tolerance 0.9"},
	}
	for _, c := range cases {
		g := Graph{Xadj: slices.Clone(good.Xadj), Adjncy: slices.Clone(good.Adjncy)}
		nparts := c.edit(&g)
		_, _, err := PartGraphKway(g, nparts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestSignalsSurviveMETIS: METIS swaps the SIGTERM handler during a call;
// afterwards Go must still own it, with the flags its runtime needs.
func TestSignalsSurviveMETIS(t *testing.T) {
	if _, _, err := PartGraphKway(cliques(4, 10), 4, nil); err != nil {
		t.Fatal(err)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	defer signal.Stop(ch)
	// Signal this very thread, so that the handler runs on a goroutine
	// stack: the case that needs SA_ONSTACK.
	runtime.LockOSThread()
	err := syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGTERM)
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM not delivered to signal.Notify")
	}
}
