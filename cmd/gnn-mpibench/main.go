// Command gnn-mpibench measures the MPI transport of gnn-spmd on the
// machines it runs on: AllToAllV (the halo exchange) and AllReduceFloat32
// (the gradient sum) at a range of sizes, printed by rank 0:
//
//	mpirun -np Q gnn-mpibench
package main

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
)

func main() {
	m, err := comm.NewMPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gnn-mpibench:", err)
		os.Exit(2)
	}
	if err := bench(m); err != nil {
		fmt.Fprintf(os.Stderr, "gnn-mpibench: rank %d: %v\n", m.Rank(), err)
		m.Abort(1)
	}
	if err := m.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "gnn-mpibench: rank %d: %v\n", m.Rank(), err)
		os.Exit(1)
	}
}

// timeIt runs f for about 0.3 s after a warm-up and returns the median of
// five timings per call. The iteration count is the ranks' mean, the same
// on every rank. Each timing spans barrier to barrier.
func timeIt(m *comm.MPI, f func() error) (float64, error) {
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := m.Barrier(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := f(); err != nil {
		return 0, err
	}
	iters := []float64{max(1, min(2000, 0.06/time.Since(t0).Seconds()))}
	if err := m.AllReduceFloat64(iters); err != nil {
		return 0, err
	}
	n := int(iters[0]/float64(m.Size())) + 1
	var ts []float64
	for rep := 0; rep < 5; rep++ {
		if err := m.Barrier(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if err := m.Barrier(); err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(t0).Seconds()/float64(n))
	}
	sort.Float64s(ts)
	return ts[2], nil
}

// bench prints, from rank 0, the time and bandwidth of AllToAllV at sizes
// from 1 KiB to 64 MiB per rank (both MPI call modes), and of
// AllReduceFloat32.
func bench(m *comm.MPI) error {
	q, r := m.Size(), m.Rank()
	say := func(format string, a ...any) {
		if r == 0 {
			fmt.Printf(format, a...)
		}
	}
	say("# AllToAllV, %d ranks: B bytes per peer, S = Q*B sent per rank; time is the median per call;\n", q)
	say("# algbw = Q*S/time (all bytes, self copies included), offbw = Q*(Q-1)*B/time (bytes between processes)\n")
	say("%-11s %10s %10s %12s %10s %10s\n", "mode", "B", "S", "time_us", "algbw_GB/s", "offbw_GB/s")
	for _, mode := range []comm.AllToAllVMode{comm.AllToAllVContiguous, comm.AllToAllVScattered} {
		m.SetAllToAllVMode(mode)
		name := map[comm.AllToAllVMode]string{comm.AllToAllVContiguous: "alltoallv", comm.AllToAllVScattered: "alltoallw"}[mode]
		for s := 1 << 10; s <= 64<<20; s *= 4 {
			b := s / q
			send, recv := make([][]byte, q), make([][]byte, q)
			for p := range send {
				send[p], recv[p] = make([]byte, b), make([]byte, b)
			}
			t, err := timeIt(m, func() error { return m.AllToAllV(send, recv) })
			if err != nil {
				return err
			}
			say("%-11s %10d %10d %12.1f %10.3f %10.3f\n", name, b, b*q, t*1e6,
				float64(q*q*b)/t/1e9, float64(q*(q-1)*b)/t/1e9)
		}
	}
	m.SetAllToAllVMode(comm.AllToAllVContiguous)
	say("# AllReduceFloat32 (MPI_Reduce to rank 0 + MPI_Bcast): n floats per rank\n")
	say("%-11s %10s %12s\n", "n", "bytes", "time_us")
	for _, n := range []int{1 << 8, 1 << 14, 1 << 18, 1 << 22} {
		x := make([]float32, n)
		t, err := timeIt(m, func() error { return m.AllReduceFloat32(x) })
		if err != nil {
			return err
		}
		say("%-11d %10d %12.1f\n", n, 4*n, t*1e6)
	}
	return nil
}
