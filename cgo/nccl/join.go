//go:build !cpu

package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Setting up a communicator is collective: ncclCommInitRank returns only
// when every rank has joined, outside any watchdog of the host
// communicator. A rank that fails before joining (no libnccl on its node,
// no GPU) or in it (out of memory) would leave its peers blocked there and
// its error unprinted. So the ranks agree over the host communicator
// before they join and after, and no rank waits in ncclCommInitRank for
// longer than a bound: every rank learns which rank failed, and that rank
// returns its own error, which names the cause.

// Host is the host communicator the ranks agree over (MPI); comm.Comm is
// one.
type Host interface {
	Rank() int
	Size() int
	Bcast(buf []byte, root int) error
	AllReduceFloat64(x []float64) error
}

// PeerError is what a rank whose own setup went well returns when another
// rank's failed; that rank returns (and reports) the cause.
type PeerError struct{ Rank int }

func (e *PeerError) Error() string { return fmt.Sprintf("nccl: rank %d failed to set up NCCL", e.Rank) }

// TimeoutError is a rank that waited its bound in ncclCommInitRank: some
// peer stopped in its setup.
type TimeoutError struct{ Wait time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("nccl: ncclCommInitRank did not complete within %v: a peer did not join", e.Wait)
}

// Join makes this rank's communicator of host's ranks. ready is this
// rank's failure before NCCL's setup (nil: none): a failed rank still
// takes part in the agreement, where its peers wait for it. bind makes the
// rank's GPU current on the calling thread (ncclCommInitRank uses it);
// wait bounds the time in ncclCommInitRank (0: no bound).
//
// It returns the communicator on every rank, or an error on every rank:
// a rank that failed returns its own error, the others a *PeerError
// naming the lowest rank that did. A rank that failed because a peer did
// (ncclRemoteError, or the wait ran out) counts as failed only when no
// rank failed on its own.
func Join(host Host, ready error, bind func() error, wait time.Duration) (*Comm, error) {
	return join(host, ready, &setup{bind: bind, wait: wait})
}

// steps is the local work of Join (tests replace it: there is no GPU).
type steps interface {
	load() error
	uniqueID() (UniqueID, error)
	initRank(nranks int, id UniqueID, rank int) (*Comm, error)
}

func join(host Host, ready error, s steps) (*Comm, error) {
	rank, err := host.Rank(), ready
	if err == nil {
		err = s.load()
	}
	var id UniqueID
	if err == nil && rank == 0 {
		id, err = s.uniqueID()
	}
	if err := agreeOn(host, err); err != nil {
		return nil, err
	}
	if err := host.Bcast(id[:], 0); err != nil {
		return nil, fmt.Errorf("nccl: broadcasting the unique id: %w", err)
	}
	c, err := s.initRank(host.Size(), id, rank)
	own := err
	if followed(err) {
		own = nil // heard in the second round, if no rank has a cause
	}
	aerr := agreeOn(host, own)
	if aerr == nil {
		aerr = agreeOn(host, err)
	}
	if aerr != nil {
		if c != nil {
			_ = c.Abort()
		}
		return nil, aerr
	}
	return c, nil
}

// followed reports an error that a peer's failure causes here.
func followed(err error) bool {
	var te *TimeoutError
	var ne *Error
	return errors.As(err, &te) || errors.As(err, &ne) && ne.Code == ncclRemoteError
}

// agreeOn tells every rank whether any failed: a failed rank gets its own
// error back, the others a *PeerError naming the lowest failed rank.
func agreeOn(host Host, err error) error {
	failed := make([]float64, host.Size())
	if err != nil {
		failed[host.Rank()] = 1
	}
	if rerr := host.AllReduceFloat64(failed); rerr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("nccl: setup agreement: %w", rerr)
	}
	if err != nil {
		return err
	}
	for r, f := range failed {
		if f != 0 {
			return &PeerError{Rank: r}
		}
	}
	return nil
}

// setup is Join's real work.
type setup struct {
	bind func() error
	wait time.Duration
}

func (*setup) load() error                 { return loaded() }
func (*setup) uniqueID() (UniqueID, error) { return GetUniqueID() }
func (s *setup) initRank(n int, id UniqueID, rank int) (*Comm, error) {
	return bounded(s.wait, func() (*Comm, error) {
		if err := s.bind(); err != nil {
			return nil, err
		}
		return InitRank(n, id, rank)
	})
}

// bounded runs f on a thread of its own (it ends with f: it holds the
// GPU that f made current) and waits at most wait for it (0: no bound).
// A communicator f makes after the wait ran out is aborted.
func bounded(wait time.Duration, f func() (*Comm, error)) (*Comm, error) {
	type result struct {
		c   *Comm
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		c, err := f()
		done <- result{c, err}
	}()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case r := <-done:
		return r.c, r.err
	case <-timeout:
		go func() {
			if r := <-done; r.c != nil {
				_ = r.c.Abort()
			}
		}()
		return nil, &TimeoutError{Wait: wait}
	}
}
