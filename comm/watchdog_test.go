package comm

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// watchedGroup runs body on q goroutine ranks, each behind a watchdog with
// the given timeout that cancels the group. It returns RunLocal's error and
// how long after the start the group failed.
func watchedGroup(t *testing.T, q int, timeout time.Duration, body func(w *Watchdog) error) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	var failedAt atomic.Int64
	err := RunLocal(q, func(c *Local) error {
		w := NewWatchdog(c, WatchdogConfig{Timeout: timeout, OnTimeout: func(e *TimeoutError) {
			failedAt.CompareAndSwap(0, int64(time.Since(start)))
			c.Cancel(e)
		}})
		defer w.Stop()
		return body(w)
	})
	return err, time.Duration(failedAt.Load())
}

// hang stops calling the communicator, as a hung rank would, until the
// group has failed.
func hang(w *Watchdog) {
	for w.Comm().(*Local).Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// TestWatchdogCollectiveStall: labelled and unlabelled collectives name
// themselves, waiting for all ranks.
func TestWatchdogCollectiveStall(t *testing.T) {
	grad := &Op{Name: "gradient all-reduce of layer0.bias"}
	for _, c := range []struct {
		name string
		call func(w *Watchdog) error
		want string
	}{
		{"labelled", func(w *Watchdog) error {
			Label(w, grad)
			return w.AllReduceFloat32(make([]float32, 5))
		}, "gradient all-reduce of layer0.bias"},
		{"barrier", func(w *Watchdog) error { return w.Barrier() }, "barrier"},
		{"bcast", func(w *Watchdog) error { return w.Bcast(make([]byte, 3), 0) }, "broadcast"},
	} {
		t.Run(c.name, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			start := time.Now()
			err, _ := watchedGroup(t, 3, timeout, func(w *Watchdog) error {
				if w.Rank() == 1 {
					hang(w)
					return nil
				}
				return c.call(w)
			})
			var te *TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("RunLocal returned %v, want a *TimeoutError", err)
			}
			t.Logf("%v (after %v)", err, time.Since(start))
			if te.Op != c.want {
				t.Errorf("op %q, want %q", te.Op, c.want)
			}
			if te.Peers != nil || PeerText(te.Peers) != "all ranks" {
				t.Errorf("peers %v, want all ranks", te.Peers)
			}
			if d := time.Since(start); d > timeout+time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestWatchdogQuiet: time outside the calls does not count, calls shorter
// than the timeout pass, and OnSlow reports a call past half the timeout.
func TestWatchdogQuiet(t *testing.T) {
	const timeout = 200 * time.Millisecond
	var slow atomic.Int32
	err := RunLocal(2, func(c *Local) error {
		w := NewWatchdog(c, WatchdogConfig{Timeout: timeout,
			OnTimeout: func(e *TimeoutError) { c.Cancel(e) },
			OnSlow: func(e *TimeoutError) {
				if e.Op == "slow barrier" {
					slow.Add(1)
				}
			}})
		defer w.Close()
		for i := 0; i < 3; i++ {
			if err := w.Barrier(); err != nil {
				return err
			}
			time.Sleep(2 * timeout) // computing, outside any call
		}
		if c.Rank() == 1 {
			time.Sleep(timeout * 3 / 4) // rank 0 waits 150 ms of its 200
		}
		Label(w, &Op{Name: "slow barrier"})
		return w.Barrier()
	})
	if err != nil {
		t.Fatalf("a job without a stall failed: %v", err)
	}
	if slow.Load() != 1 {
		t.Errorf("OnSlow ran %d times for the slow barrier, want once", slow.Load())
	}
}

// TestWatchdogNoAllocs: watched, labelled calls allocate nothing.
func TestWatchdogNoAllocs(t *testing.T) {
	c := NewLocal(1)[0]
	w := NewWatchdog(c, WatchdogConfig{Timeout: time.Minute})
	defer w.Close()
	op := &Op{Name: "gradient all-reduce of w"}
	x := make([]float32, 64)
	y := make([]float64, 8)
	// A label names one call only.
	Label(w, op)
	w.Barrier()
	if w.next.Load() != nil {
		t.Errorf("a label outlived its call")
	}
	allocs := testing.AllocsPerRun(100, func() {
		Label(w, op)
		w.AllReduceFloat32(x)
		w.AllReduceFloat64(y)
		w.Barrier()
	})
	base := testing.AllocsPerRun(100, func() {
		c.AllReduceFloat32(x)
		c.AllReduceFloat64(y)
		c.Barrier()
	})
	if allocs > base {
		t.Errorf("%v allocations per watched round, %v unwatched", allocs, base)
	}
}

func TestPeerText(t *testing.T) {
	for _, c := range []struct {
		peers []int
		want  string
	}{{nil, "all ranks"}, {[]int{3}, "rank 3"}, {[]int{1, 3}, "ranks 1, 3"}} {
		if got := PeerText(c.peers); got != c.want {
			t.Errorf("PeerText(%v) = %q, want %q", c.peers, got, c.want)
		}
	}
}

// TestWatchdogGuard: a wait outside the communicator (a GPU transport's
// NCCL exchange) that does not end is reported under its name, on time.
func TestWatchdogGuard(t *testing.T) {
	const timeout = 200 * time.Millisecond
	op := &Op{Name: "NCCL halo exchange", Peers: []int{1}}
	err, failed := watchedGroup(t, 2, timeout, func(w *Watchdog) error {
		if w.Rank() == 1 {
			hang(w)
			return nil
		}
		return w.Guard(op, func() error { hang(w); return w.Comm().(*Local).Err() })
	})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Op != op.Name || te.Rank != 0 {
		t.Fatalf("got %v, want rank 0's *TimeoutError for %q", err, op.Name)
	}
	if failed < timeout || failed > timeout+time.Second {
		t.Errorf("the group failed %v after the start, want within [%v, %v]", failed, timeout, timeout+time.Second)
	}
}

// TestWatchdogWaiting: Waiting names the call in progress, whom it waits
// for and since when, once it has waited long enough; nil when idle.
func TestWatchdogWaiting(t *testing.T) {
	op := &Op{Name: "halo exchange forward layer 0", Peers: []int{1}}
	var got atomic.Pointer[TimeoutError]
	var idle, early *TimeoutError
	done := make(chan struct{})
	watchedGroup(t, 2, 2*time.Second, func(w *Watchdog) error {
		if w.Rank() == 1 {
			<-done
			w.Comm().(*Local).Cancel(errors.New("done"))
			return nil
		}
		idle = w.Waiting(0)
		go func() {
			defer close(done)
			time.Sleep(50 * time.Millisecond)
			early = w.Waiting(time.Second)
			time.Sleep(250 * time.Millisecond)
			got.Store(w.Waiting(200 * time.Millisecond))
		}()
		Label(w, op)
		return w.Barrier()
	})
	<-done
	g := got.Load()
	if idle != nil || early != nil {
		t.Fatalf("Waiting before a call or before its time: %v, %v", idle, early)
	}
	if g == nil || g.Op != op.Name || len(g.Peers) != 1 || g.Peers[0] != 1 || g.Elapsed < 250*time.Millisecond || g.Timeout != 2*time.Second {
		t.Fatalf("Waiting = %+v", g)
	}
}

// TestWatchdogWaitingAfterTimeout: once the watchdog has fired, Waiting
// says nothing of the call still blocked: the timeout's line is the cause.
func TestWatchdogWaitingAfterTimeout(t *testing.T) {
	var before, after atomic.Pointer[TimeoutError]
	var fired atomic.Bool
	RunLocal(2, func(c *Local) error {
		var w *Watchdog
		w = NewWatchdog(c, WatchdogConfig{Timeout: 300 * time.Millisecond, OnTimeout: func(e *TimeoutError) {
			if c.Rank() == 0 {
				if got := w.Waiting(0); got != nil {
					after.Store(got)
				}
				fired.Store(true)
			}
			c.Cancel(e)
		}})
		defer w.Stop()
		if c.Rank() == 1 {
			time.Sleep(100 * time.Millisecond)
			if got := w.Waiting(0); got != nil {
				before.Store(got) // not in a call
			}
			hang(w)
			return nil
		}
		return w.Barrier()
	})
	if !fired.Load() || before.Load() != nil || after.Load() != nil {
		t.Fatalf("fired %v; Waiting when idle %v, after the timeout %v", fired.Load(), before.Load(), after.Load())
	}
}
