package comm

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
)

// Local is the Comm of one of Q ranks that run as goroutines of one process
// and exchange data through shared memory. Each rank is driven by its own
// goroutine; one Local must not be used by two goroutines at once.
//
// Every collective is a rendezvous of all Q ranks in two phases: each rank
// publishes its arguments in its slot and waits for the others; then each
// checks the arguments of all ranks (the same check everywhere, so either
// every rank fails or none does), does its share of the work reading the
// other ranks' buffers directly, and waits again so that no rank returns,
// and reuses its buffers, while another still reads them. Collectives make
// no allocations in steady state.
//
// Failures: when a rank's goroutine ends with an error or a panic, its
// driver calls Fail; a rank may also call Abort. Either marks the group
// failed and wakes every rank waiting in a collective, which then returns a
// *RankError or *AbortError naming the failed rank, as does every later
// collective. A rank that calls Close while another waits for it in a
// collective fails the group the same way. RunLocal does all of this.
// Cancel fails the group with an error of the caller's (a Watchdog's
// *TimeoutError).
type Local struct {
	g    *localGroup
	rank int
}

// RankError reports that a collective could not complete because another
// rank failed (Fail) or left (Close) while the caller waited for it.
type RankError struct {
	Rank int
	Err  error
}

func (e *RankError) Error() string { return fmt.Sprintf("comm: rank %d failed: %v", e.Rank, e.Err) }

func (e *RankError) Unwrap() error { return e.Err }

// AbortError reports that rank Rank called Abort(Code). The driver that runs
// the ranks turns it into the process's exit code.
type AbortError struct {
	Rank, Code int
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("comm: rank %d aborted (exit code %d)", e.Rank, e.Code)
}

// ErrRankClosed is the Err of the RankError collectives return when a peer
// closed its communicator before joining them.
var ErrRankClosed = errors.New("closed its communicator before joining the collective")

type localOp uint8

const (
	localNone localOp = iota
	localAllToAllV
	localAllToAllVShort
	localAllReduceFloat32
	localAllReduceFloat64
	localBcast
	localBarrier
)

var localOpNames = [...]string{"none", "AllToAllV", "AllToAllVShort", "AllReduceFloat32", "AllReduceFloat64", "Bcast", "Barrier"}

func (o localOp) String() string { return localOpNames[o] }

// localSlot holds one rank's arguments to the current collective.
type localSlot struct {
	op         localOp
	send, recv [][]byte
	got        []int
	f32        []float32
	f64        []float64
	buf        []byte
	root       int
}

type localGroup struct {
	q     int
	slots []localSlot // slot r is written by rank r only, outside the lock

	mu      sync.Mutex
	cond    sync.Cond
	arrived int    // ranks waiting in the current phase
	here    []bool // which ones
	phase   uint64 // completed phases
	left    []bool // ranks that called Close
	nleft   int
	err     error // first failure; every later wait returns it
}

// NewLocal returns the communicators of q ranks (q >= 1) of one process,
// rank r at index r.
func NewLocal(q int) []*Local {
	if q < 1 {
		panic(fmt.Sprintf("comm: NewLocal(%d): need at least one rank", q))
	}
	g := &localGroup{q: q, slots: make([]localSlot, q), left: make([]bool, q), here: make([]bool, q)}
	g.cond.L = &g.mu
	ls := make([]*Local, q)
	for r := range ls {
		ls[r] = &Local{g: g, rank: r}
	}
	return ls
}

// RunLocal runs f for each of q ranks on its own goroutine, over
// NewLocal(q), and waits for them all. A rank whose f returns an error or
// panics fails the group (Fail), so that its peers' collectives return
// instead of waiting for it, and every rank's communicator is closed when
// its f returns. RunLocal returns the group's first failure, which is the
// root cause: an *AbortError, or a *RankError wrapping the error of the rank
// that failed first (a panic becomes an error with its value and stack).
func RunLocal(q int, f func(c *Local) error) error {
	ls := NewLocal(q)
	var wg sync.WaitGroup
	for _, c := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			defer func() {
				if v := recover(); v != nil {
					c.Fail(fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
				}
			}()
			if err := f(c); err != nil {
				c.Fail(err)
			}
		}()
	}
	wg.Wait()
	return ls[0].Err()
}

// Rank returns this rank, in [0, Size()).
func (l *Local) Rank() int { return l.rank }

// Size returns the number of ranks Q.
func (l *Local) Size() int { return l.g.q }

// Err returns the group's first failure (a *RankError or *AbortError), or
// nil.
func (l *Local) Err() error {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	return l.g.err
}

// Fail marks this rank failed with err, for the driver to call when the
// rank's goroutine ends with an error or panics: the ranks waiting for it
// return a *RankError naming it instead of waiting forever.
func (l *Local) Fail(err error) {
	if err == nil {
		err = errors.New("failed")
	}
	l.g.fail(&RankError{Rank: l.rank, Err: err})
}

// Abort marks the group aborted with the given exit code; every rank's
// collectives then return an *AbortError. Unlike MPI.Abort it returns, so
// that tests can use it: the calling rank should return, and the driver
// (RunLocal's caller) turns the AbortError into the process's exit code.
func (l *Local) Abort(code int) {
	l.g.fail(&AbortError{Rank: l.rank, Code: code})
}

// Cancel fails the group with err itself, where Fail attributes the failure
// to this rank: every rank waiting in a collective, and every later
// collective, returns err. A watchdog that gave up waiting (Watchdog) uses
// it. The first failure of a group stays its error.
func (l *Local) Cancel(err error) {
	if err == nil {
		err = errors.New("cancelled")
	}
	l.g.fail(err)
}

// Close leaves the group: a rank that waits for this one in a collective
// from then on gets a *RankError with ErrRankClosed. Closing twice is
// harmless.
func (l *Local) Close() error {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.left[l.rank] {
		g.left[l.rank] = true
		g.nleft++
		g.cond.Broadcast()
	}
	return nil
}

func (g *localGroup) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cond.Broadcast()
}

// wait is one phase of the rendezvous: it returns nil once all q ranks have
// arrived, or the group's failure.
func (l *Local) wait() error {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left[l.rank] {
		return fmt.Errorf("comm: local rank %d: collective after Close", l.rank)
	}
	if g.err != nil {
		return g.err
	}
	phase := g.phase
	g.arrived++
	g.here[l.rank] = true
	if g.arrived == g.q {
		g.arrived = 0
		clear(g.here)
		g.phase++
		g.cond.Broadcast()
		return nil
	}
	for g.phase == phase && g.err == nil {
		if g.nleft > 0 {
			// A rank that left never arrives: the phase cannot complete.
			for r, left := range g.left {
				if left {
					g.err = &RankError{Rank: r, Err: ErrRankClosed}
					break
				}
			}
			g.cond.Broadcast()
			break
		}
		g.cond.Wait()
	}
	if g.phase != phase {
		return nil
	}
	return g.err
}

// Absent implements Absentees: the peers (nil: all) that have not
// arrived at the rendezvous this rank waits in.
func (l *Local) Absent(peers []int) string {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	var missing []int
	for r := range g.q {
		if !g.here[r] && r != l.rank && (peers == nil || slices.Contains(peers, r)) {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return PeerText(missing) + " did not arrive"
}

// collective runs one rendezvous for op, whose arguments this rank has put
// in its slot: check runs on every rank once all have published, then work
// unless check failed.
func (l *Local) collective(op localOp, check func() error, work func()) error {
	g := l.g
	g.slots[l.rank].op = op
	if err := l.wait(); err != nil {
		return err
	}
	err := g.sameOp()
	if err == nil && check != nil {
		err = check()
	}
	if err == nil && work != nil {
		work()
	}
	if werr := l.wait(); werr != nil {
		return werr
	}
	// Every rank is past its reads: drop the references to the buffers.
	g.slots[l.rank] = localSlot{}
	return err
}

func (g *localGroup) sameOp() error {
	for p := 1; p < g.q; p++ {
		if g.slots[p].op != g.slots[0].op {
			return fmt.Errorf("comm: local: rank 0 called %v while rank %d called %v; every rank must call the same collectives in the same order",
				g.slots[0].op, p, g.slots[p].op)
		}
	}
	return nil
}

// AllToAllV implements Comm. Every rank checks every rank's sizes, so a
// mismatch is an error on all ranks.
func (l *Local) AllToAllV(send, recv [][]byte) error {
	g, r := l.g, l.rank
	s := &g.slots[r]
	s.send, s.recv = send, recv
	return l.collective(localAllToAllV, g.checkAllToAllV, func() {
		for p := range recv {
			copy(recv[p], g.slots[p].send[r])
		}
	})
}

func (g *localGroup) checkAllToAllV() error { return g.checkSizes("AllToAllV", false) }

// AllToAllVShort implements Comm: AllToAllV where a message may be shorter
// than its receive buffer. Every rank checks every rank's sizes.
func (l *Local) AllToAllVShort(send, recv [][]byte, got []int) error {
	g, r := l.g, l.rank
	s := &g.slots[r]
	s.send, s.recv, s.got = send, recv, got
	return l.collective(localAllToAllVShort, func() error { return g.checkSizes("AllToAllVShort", true) }, func() {
		for p := range recv {
			got[p] = copy(recv[p], g.slots[p].send[r])
		}
	})
}

// checkSizes checks the all-to-all's buffers on every rank: a send to rank
// d must fit what d receives from the sender, exactly unless short.
func (g *localGroup) checkSizes(op string, short bool) error {
	for p := range g.slots {
		s := &g.slots[p]
		if len(s.send) != g.q || len(s.recv) != g.q || (short && len(s.got) != g.q) {
			return fmt.Errorf("comm: local %s: rank %d passed %d send and %d receive buffers for %d ranks", op, p, len(s.send), len(s.recv), g.q)
		}
	}
	for p := range g.slots {
		for d := range g.slots {
			ns, nr := len(g.slots[p].send[d]), len(g.slots[d].recv[p])
			switch {
			case ns > nr && short:
				return fmt.Errorf("comm: local %s: rank %d sends %d bytes to rank %d, which takes at most %d", op, p, ns, d, nr)
			case ns != nr && !short:
				return fmt.Errorf("comm: local %s: rank %d sends %d bytes to rank %d, which expects %d", op, p, ns, d, nr)
			}
		}
	}
	return nil
}

// AllReduceFloat32 implements Comm. Element i of the result is
// s = x0[i]; s += x1[i]; ...; s += x(Q-1)[i] in float32 arithmetic, x_p being
// rank p's input: the same bits on every rank and for every run. Each rank
// sums one slice of the elements and writes it into every rank's x.
func (l *Local) AllReduceFloat32(x []float32) error {
	l.g.slots[l.rank].f32 = x
	return localAllReduce(l, localAllReduceFloat32, x, func(s *localSlot) []float32 { return s.f32 })
}

// AllReduceFloat64 is AllReduceFloat32 in float64.
func (l *Local) AllReduceFloat64(x []float64) error {
	l.g.slots[l.rank].f64 = x
	return localAllReduce(l, localAllReduceFloat64, x, func(s *localSlot) []float64 { return s.f64 })
}

func localAllReduce[T float32 | float64](l *Local, op localOp, x []T, get func(*localSlot) []T) error {
	g := l.g
	check := func() error {
		for p := range g.slots {
			if n := len(get(&g.slots[p])); n != len(get(&g.slots[0])) {
				return fmt.Errorf("comm: local %v: rank %d passed %d elements, rank 0 passed %d", op, p, n, len(get(&g.slots[0])))
			}
		}
		return nil
	}
	return l.collective(op, check, func() {
		// Rank r owns elements [lo, hi): a multiple of 16 elements per
		// rank keeps two ranks off one cache line.
		n := len(x)
		c := ((n+g.q-1)/g.q + 15) &^ 15
		lo := min(l.rank*c, n)
		hi := min(lo+c, n)
		var acc [256]T
		for b := lo; b < hi; b += len(acc) {
			a := acc[:min(len(acc), hi-b)]
			copy(a, get(&g.slots[0])[b:])
			for p := 1; p < g.q; p++ {
				xp := get(&g.slots[p])[b : b+len(a)]
				for i := range a {
					a[i] += xp[i]
				}
			}
			for p := range g.slots {
				copy(get(&g.slots[p])[b:], a)
			}
		}
	})
}

// Bcast implements Comm.
func (l *Local) Bcast(buf []byte, root int) error {
	g := l.g
	s := &g.slots[l.rank]
	s.buf, s.root = buf, root
	check := func() error {
		r0 := g.slots[0].root
		for p := range g.slots {
			if g.slots[p].root != r0 {
				return fmt.Errorf("comm: local Bcast: rank 0 passed root %d, rank %d root %d", r0, p, g.slots[p].root)
			}
		}
		if r0 < 0 || r0 >= g.q {
			return fmt.Errorf("comm: local Bcast: root %d outside [0, %d)", r0, g.q)
		}
		for p := range g.slots {
			if n := len(g.slots[p].buf); n != len(g.slots[r0].buf) {
				return fmt.Errorf("comm: local Bcast: rank %d passed %d bytes, root %d passed %d", p, n, r0, len(g.slots[r0].buf))
			}
		}
		return nil
	}
	return l.collective(localBcast, check, func() {
		if l.rank != root {
			copy(buf, g.slots[root].buf)
		}
	})
}

// Barrier implements Comm.
func (l *Local) Barrier() error { return l.collective(localBarrier, nil, nil) }
