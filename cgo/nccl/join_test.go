//go:build !cpu

package nccl_test

// The setup agreement of Join with goroutine ranks (comm.Local) as the
// host communicator: its local steps are real where this machine allows
// (loading NCCL) and given by the test where they need a GPU. Every rank
// must return, each with its own error or the failing rank's number.

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/nccl"
	"github.com/gnn-spmd/gnn-spmd/comm"
)

// ranks runs f as q goroutine ranks and returns each rank's error; it
// fails the test if a rank has not returned within a minute.
func ranks(t *testing.T, q int, f func(h *comm.Local) error) []error {
	t.Helper()
	ls := comm.NewLocal(q)
	errs := make([]error, q)
	done := make(chan int, q)
	for r, l := range ls {
		go func() {
			errs[r] = f(l)
			done <- r
		}()
	}
	deadline := time.After(time.Minute)
	for range q {
		select {
		case <-done:
		case <-deadline:
			t.Fatal("a rank is still in Join after a minute")
		}
	}
	return errs
}

// fine is a setup whose every step succeeds (a Comm that is never used).
func fine(calls *atomic.Int32) nccl.Steps {
	return nccl.Steps{
		Load:     func() error { return nil },
		UniqueID: func() (nccl.UniqueID, error) { return nccl.UniqueID{1}, nil },
		InitRank: func(n int, id nccl.UniqueID, rank int) (*nccl.Comm, error) {
			calls.Add(1)
			if id != (nccl.UniqueID{1}) || n != 4 {
				return nil, errors.New("rank 0's id or the size did not arrive")
			}
			return &nccl.Comm{}, nil
		},
	}
}

func peer(t *testing.T, err error, want int) {
	t.Helper()
	var pe *nccl.PeerError
	if !errors.As(err, &pe) || pe.Rank != want {
		t.Errorf("got %v, want rank %d's failure", err, want)
	}
}

func TestJoinAllWell(t *testing.T) {
	var calls atomic.Int32
	errs := ranks(t, 4, func(h *comm.Local) error {
		c, err := nccl.JoinWith(h, nil, fine(&calls))
		if err == nil && c == nil {
			return errors.New("no communicator")
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if calls.Load() != 4 {
		t.Errorf("%d ranks joined, want 4", calls.Load())
	}
}

// A rank that failed before NCCL's setup (ready), or rank 0 failing to
// make the id: nobody joins, the failed rank returns its error, the
// others its number.
func TestJoinFailsBefore(t *testing.T) {
	for _, c := range []struct {
		name    string
		failing int
		ready   bool
	}{{"ready", 2, true}, {"unique id", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			cause := errors.New("cuda: GPU 1 requested but this node has 1")
			errs := ranks(t, 4, func(h *comm.Local) error {
				s, ready := fine(&calls), error(nil)
				if c.ready && h.Rank() == c.failing {
					ready = cause
				}
				if !c.ready {
					s.UniqueID = func() (nccl.UniqueID, error) { return nccl.UniqueID{}, cause }
				}
				_, err := nccl.JoinWith(h, ready, s)
				return err
			})
			for r, err := range errs {
				if r == c.failing {
					if err != cause {
						t.Errorf("rank %d: %v, want its own error", r, err)
					}
					continue
				}
				peer(t, err, c.failing)
			}
			if calls.Load() != 0 {
				t.Errorf("%d ranks called ncclCommInitRank after a failure", calls.Load())
			}
		})
	}
}

// Without libnccl (this machine, as a node without NCCL would be), every
// rank returns the load error, none waits for another.
func TestJoinWithoutLibrary(t *testing.T) {
	if _, err := nccl.Version(); err == nil {
		t.Skip("NCCL loads here")
	}
	errs := ranks(t, 3, func(h *comm.Local) error {
		_, err := nccl.Join(h, nil, func() error { return errors.New("no device to bind") }, time.Second)
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.HasPrefix(err.Error(), "nccl: cannot load NCCL") {
			t.Errorf("rank %d: %v, want the load error", r, err)
		}
	}
}

// In ncclCommInitRank rank 1 fails on its own; rank 3 fails because of it
// (ncclRemoteError) and ranks 0 and 2 wait until their bound: rank 1's
// error is the one returned, the others name rank 1.
func TestJoinFailsInside(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cause := &nccl.Error{Fn: "ncclCommInitRank", Code: 1, Msg: "unhandled cuda error"}
	errs := ranks(t, 4, func(h *comm.Local) error {
		s := fine(new(atomic.Int32))
		s.InitRank = func(n int, id nccl.UniqueID, rank int) (*nccl.Comm, error) {
			switch rank {
			case 1:
				return nil, cause
			case 3:
				return nil, nccl.RemoteError("ncclCommInitRank")
			}
			return nccl.Bounded(50*time.Millisecond, func() (*nccl.Comm, error) {
				<-release
				return nil, nil
			})
		}
		_, err := nccl.JoinWith(h, nil, s)
		return err
	})
	if errs[1] != cause {
		t.Errorf("rank 1: %v, want its own error", errs[1])
	}
	for _, r := range []int{0, 2, 3} {
		peer(t, errs[r], 1)
	}
}

// When every rank only waited (no rank failed on its own), each returns
// its own wait, which names the bound.
func TestJoinAllWait(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	errs := ranks(t, 3, func(h *comm.Local) error {
		s := fine(new(atomic.Int32))
		s.InitRank = func(int, nccl.UniqueID, int) (*nccl.Comm, error) {
			return nccl.Bounded(20*time.Millisecond, func() (*nccl.Comm, error) {
				<-release
				return nil, nil
			})
		}
		_, err := nccl.JoinWith(h, nil, s)
		return err
	})
	for r, err := range errs {
		var te *nccl.TimeoutError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "within 20ms") {
			t.Errorf("rank %d: %v, want its wait", r, err)
		}
	}
}

// bounded returns f's result when f returns in time, and its own error
// otherwise without waiting for f.
func TestBounded(t *testing.T) {
	c, err := nccl.Bounded(0, func() (*nccl.Comm, error) { return &nccl.Comm{}, nil })
	if c == nil || err != nil {
		t.Errorf("no bound: %v, %v", c, err)
	}
	block := make(chan struct{})
	start := time.Now()
	_, err = nccl.Bounded(10*time.Millisecond, func() (*nccl.Comm, error) { <-block; return &nccl.Comm{}, nil })
	close(block)
	if _, ok := err.(*nccl.TimeoutError); !ok || time.Since(start) > 5*time.Second {
		t.Errorf("a step past its bound: %v after %v", err, time.Since(start))
	}
}
