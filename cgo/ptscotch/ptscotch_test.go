//go:build !mpich && !nompi

package ptscotch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/mpi"
)

// The test binary runs itself under mpirun: with PTSCOTCH_RANK_TEST set it
// is one rank of a job that partitions graphs, checks the result with its
// peers and prints "ok rank R".
func TestMain(m *testing.M) {
	if os.Getenv("PTSCOTCH_RANK_TEST") == "1" {
		os.Exit(rankMain())
	}
	os.Exit(m.Run())
}

// cliques is k cliques of m vertices, clique c joined to clique c+1 by one
// edge: the best k-way partition cuts k-1 edges. Process r of procs gets
// vertices [n*r/procs, n*(r+1)/procs).
func cliques(k, m, r, procs int) (Graph, int) {
	n := k * m
	lo, hi := n*r/procs, n*(r+1)/procs
	g := Graph{Ptr: []Num{0}}
	for v := lo; v < hi; v++ {
		c, i := v/m, v%m
		for j := 0; j < m; j++ {
			if j != i {
				g.Adj = append(g.Adj, Num(c*m+j))
			}
		}
		if i == m-1 && c+1 < k {
			g.Adj = append(g.Adj, Num((c+1)*m))
		}
		if i == 0 && c > 0 {
			g.Adj = append(g.Adj, Num(c*m-1))
		}
		g.Ptr = append(g.Ptr, Num(len(g.Adj)))
	}
	return g, lo
}

func rankMain() int {
	fail := func(format string, args ...any) int {
		fmt.Printf("FAIL "+format+"\n", args...)
		return 1
	}
	if _, err := mpi.InitThread(mpi.ThreadSerialized); err != nil {
		return fail("%v", err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	r, _ := w.Rank()
	procs, _ := w.Size()
	const k, m = 4, 10
	g, lo := cliques(k, m, r, procs)
	if err := Check(w.Fortran(), g); err != nil {
		return fail("rank %d: check: %v", r, err)
	}
	// Every vertex's part, summed over the ranks (each fills its own).
	gather := func(part []Num) []float64 {
		all := make([]float64, k*m)
		for i, p := range part {
			all[lo+i] = float64(p)
		}
		w.AllreduceSumFloat64(all)
		return all
	}
	part, err := Part(w.Fortran(), procs, g, k, 7, 0.03)
	if err != nil {
		return fail("rank %d: %v", r, err)
	}
	all := gather(part)
	for c := 0; c < k; c++ {
		for i := 1; i < m; i++ {
			if all[c*m+i] != all[c*m] {
				return fail("rank %d: clique %d split across parts: %v", r, c, all)
			}
		}
	}
	again, err := Part(w.Fortran(), procs, g, k, 7, 0.03)
	if err != nil {
		return fail("rank %d: again: %v", r, err)
	}
	if fmt.Sprint(again) != fmt.Sprint(part) {
		return fail("rank %d: the same seed gave %v, then %v", r, part, again)
	}
	// An edge in one direction only.
	bad := Graph{Ptr: append([]Num(nil), g.Ptr...), Adj: append([]Num(nil), g.Adj...)}
	if r == 0 {
		bad.Adj[0] = Num(k*m - 1)
	}
	err = Check(w.Fortran(), bad)
	if err == nil || !strings.Contains(err.Error(), "SCOTCH_dgraphCheck failed: ") {
		return fail("rank %d: a one-way edge: got %v, want SCOTCH_dgraphCheck's error", r, err)
	}
	fmt.Printf("ok rank %d\n", r)
	return 0
}

func TestPartUnderMPI(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not on PATH (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, procs := range []int{1, 2, 3} {
		t.Run(strconv.Itoa(procs), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "mpirun", "-np", strconv.Itoa(procs), "--oversubscribe", self, "-test.run", "^$")
			cmd.Env = append(os.Environ(), "PTSCOTCH_RANK_TEST=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun -np %d: %v\n%s", procs, err, out)
			}
			for r := range procs {
				if !strings.Contains(string(out), fmt.Sprintf("ok rank %d\n", r)) {
					t.Errorf("no \"ok rank %d\":\n%s", r, out)
				}
			}
		})
	}
}
