package halo

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestWatchdogHaloStall: one rank of four stops calling; every other rank's
// halo exchange names the operation and the peers it expects data from,
// and the group fails within timeout + 1 s.
func TestWatchdogHaloStall(t *testing.T) {
	const q, stall, f = 4, 2, 3
	const timeout = 300 * time.Millisecond
	// Ring: rank r holds one halo row of rank r-1 and one of rank r+1.
	send := func(r int) [][]int32 {
		s := make([][]int32, q)
		s[(r+1)%q] = []int32{0}
		s[(r+q-1)%q] = []int32{1}
		return s
	}
	recvStart := func(r int) []int {
		rs := make([]int, q+1)
		for p := 0; p < q; p++ {
			rs[p+1] = rs[p]
			if p == (r+1)%q || p == (r+q-1)%q {
				rs[p+1]++
			}
		}
		return rs
	}
	start := time.Now()
	var failedAt atomic.Int64
	err := comm.RunLocal(q, func(c *comm.Local) error {
		w := comm.NewWatchdog(c, comm.WatchdogConfig{Timeout: timeout, OnTimeout: func(e *comm.TimeoutError) {
			failedAt.CompareAndSwap(0, int64(time.Since(start)))
			c.Cancel(e)
		}})
		defer w.Stop()
		r := w.Rank()
		plan, err := NewPlan(r, 2, send(r), recvStart(r))
		if err != nil {
			return err
		}
		x, err := NewHost(plan, w, 2)
		if err != nil {
			return err
		}
		h := kernels.NewMat(4, f)
		for e := 0; e < 3; e++ {
			if err := x.Forward(0, h); err != nil {
				return err
			}
			if err := backward(x, 0, h); err != nil {
				return err
			}
		}
		if r == stall { // stop calling, as a hung rank would
			for c.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			return nil
		}
		return x.Forward(1, h)
	})
	took, failed := time.Since(start), time.Duration(failedAt.Load())
	t.Logf("%v; the group failed %v after the start, RunLocal returned after %v", err, failed, took)
	var te *comm.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("RunLocal returned %v, want a *TimeoutError", err)
	}
	if te.Op != "halo exchange forward layer 1" {
		t.Errorf("op %q, want halo exchange forward layer 1", te.Op)
	}
	// The ring neighbours of the reporting rank.
	want := []int{(te.Rank + q - 1) % q, (te.Rank + 1) % q}
	slices.Sort(want)
	if !slices.Equal(te.Peers, want) {
		t.Errorf("rank %d waited for %v, want %v", te.Rank, te.Peers, want)
	}
	if te.Elapsed < timeout || failed < timeout {
		t.Errorf("timed out after %v (group failed at %v), before the %v timeout", te.Elapsed, failed, timeout)
	}
	if took > timeout+time.Second {
		t.Errorf("the group took %v to fail, want < %v", took, timeout+time.Second)
	}
	if te.Rank == stall {
		t.Errorf("the stalled rank %d reported the timeout", stall)
	}
}

// TestExchangeWatchedAllocs: a raw exchange behind a watchdog labels its
// calls without allocating.
func TestExchangeWatchedAllocs(t *testing.T) {
	c := comm.NewLocal(1)[0]
	w := comm.NewWatchdog(c, comm.WatchdogConfig{Timeout: time.Minute, OnTimeout: func(*comm.TimeoutError) {}})
	defer w.Stop()
	plan, err := NewPlan(0, 2, [][]int32{nil}, []int{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := NewHost(plan, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	h := kernels.NewMat(2, 4)
	dh, own := h.View(2, 2), h.View(0, 2)
	if n := testing.AllocsPerRun(100, func() {
		ex.Forward(1, h)
		ex.BackwardSend(1, dh)
		ex.BackwardAdd(1, own)
	}); n != 0 {
		t.Errorf("%v allocations per watched halo exchange", n)
	}
}
