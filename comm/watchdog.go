package comm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Op names a blocking call for the watchdog's report: what the rank was
// doing, and whom it waited for.
type Op struct {
	Name string // e.g. "halo exchange forward layer 1", "metrics all-reduce"
	// Peers are the ranks the call waits for data from; nil means all
	// ranks (a collective).
	Peers []int
}

// Labeler is implemented by communicators that can say what a blocking
// call was for (Watchdog). Callers label a call with a long-lived *Op made
// once, so that labelling allocates nothing:
//
//	if l, ok := c.(Labeler); ok { l.Label(op) }
//	err := c.AllReduceFloat32(x)
type Labeler interface {
	// Label names the next blocking call this rank makes on the
	// communicator (that call only).
	Label(op *Op)
}

// Label labels the next blocking call on c, when c is a Labeler.
func Label(c any, op *Op) {
	if l, ok := c.(Labeler); ok {
		l.Label(op)
	}
}

// TimeoutError reports a blocking call that did not complete within the
// watchdog's timeout.
type TimeoutError struct {
	Rank    int
	Op      string
	Peers   []int // nil: all ranks
	Elapsed time.Duration
	Timeout time.Duration
	// Absent says which peers did not arrive, where the transport can
	// tell (Absentees); "" where it cannot.
	Absent string
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("comm: rank %d: %s did not complete within the %v timeout: waited %v for %s",
		e.Rank, e.Op, e.Timeout, e.Elapsed.Round(10*time.Millisecond), PeerText(e.Peers))
	if e.Absent != "" {
		msg += " (" + e.Absent + ")"
	}
	return msg
}

// Absentees is a Comm that can tell, while a call waits, which peers did
// not arrive: goroutine ranks know; an MPI rank sees the state of the
// processes on its own host.
type Absentees interface {
	Absent(peers []int) string
}

// PeerText is "all ranks" for nil, else "rank 1" or "ranks 1, 3".
func PeerText(peers []int) string {
	switch len(peers) {
	case 0:
		if peers == nil {
			return "all ranks"
		}
		return "no rank"
	case 1:
		return "rank " + strconv.Itoa(peers[0])
	}
	s := make([]string, len(peers))
	for i, p := range peers {
		s[i] = strconv.Itoa(p)
	}
	return "ranks " + strings.Join(s, ", ")
}

// WatchdogConfig sets up a Watchdog.
type WatchdogConfig struct {
	// Timeout is the longest a blocking call may take (> 0).
	Timeout time.Duration
	// OnTimeout runs on the watchdog's goroutine, once, when a call has
	// been blocked for Timeout; it should end the job. Nil: a Local's group
	// is cancelled with the error (Local.Cancel), any other communicator
	// prints the error on stderr and calls Abort(1).
	OnTimeout func(*TimeoutError)
	// OnSlow, if set, runs on the watchdog's goroutine once per call that
	// has been blocked for half of Timeout.
	OnSlow func(*TimeoutError)
}

// Watchdog is a Comm that ends the job when one of its blocking calls
// (collectives and halo exchanges) does not complete within a timeout:
// a peer that died without the transport noticing, or that stopped
// calling, would otherwise leave this rank waiting forever.
//
// A call costs three atomic operations and a clock read, and allocates
// nothing; one goroutine per Watchdog samples the call in progress ten
// times per timeout (at most once a second), so a stall is reported
// between Timeout and Timeout plus that interval after it began. Rank, Size, Abort and
// Close pass through unwatched (Close stops the goroutine).
//
// Like the Comm it wraps, a Watchdog is driven by one goroutine at a time.
type Watchdog struct {
	c         Comm
	rank      int
	timeout   time.Duration
	onTimeout func(*TimeoutError)
	onSlow    func(*TimeoutError)
	base      time.Time
	next      atomic.Pointer[Op] // label of the next call
	op        atomic.Pointer[Op] // the call in progress
	since     atomic.Int64       // its start, ns after base, plus 1; 0 when idle
	fired     atomic.Bool        // OnTimeout ran (or runs)
	done      chan struct{}
	stop      sync.Once
}

var _ Comm = (*Watchdog)(nil)
var _ Labeler = (*Watchdog)(nil)

// The names of unlabelled calls.
var (
	opAllToAllV        = Op{Name: "all-to-all exchange"}
	opAllReduceFloat32 = Op{Name: "all-reduce (float32)"}
	opAllReduceFloat64 = Op{Name: "all-reduce (float64)"}
	opBcast            = Op{Name: "broadcast"}
	opBarrier          = Op{Name: "barrier"}
	opNative           = Op{Name: "native MPI call"}
)

// NewWatchdog wraps c and starts its watchdog goroutine, which runs until
// Stop or Close.
func NewWatchdog(c Comm, cfg WatchdogConfig) *Watchdog {
	if cfg.Timeout <= 0 {
		panic(fmt.Sprintf("comm: NewWatchdog: timeout %v, expected > 0", cfg.Timeout))
	}
	w := &Watchdog{c: c, rank: c.Rank(), timeout: cfg.Timeout, onTimeout: cfg.OnTimeout, onSlow: cfg.OnSlow,
		base: time.Now(), done: make(chan struct{})}
	if w.onTimeout == nil {
		w.onTimeout = func(e *TimeoutError) {
			if l, ok := c.(*Local); ok {
				l.Cancel(e)
				return
			}
			fmt.Fprintln(os.Stderr, e)
			c.Abort(1)
		}
	}
	go w.watch()
	return w
}

// interval is how often the watchdog samples: a tenth of the timeout,
// between 5 ms and a second.
func (w *Watchdog) interval() time.Duration {
	return min(max(w.timeout/10, 5*time.Millisecond), time.Second)
}

func (w *Watchdog) watch() {
	t := time.NewTicker(w.interval())
	defer t.Stop()
	var warned int64 // the call OnSlow ran for
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		s := w.since.Load()
		if s == 0 {
			continue
		}
		op := w.op.Load()
		if w.since.Load() != s {
			continue // a new call began meanwhile
		}
		elapsed := time.Since(w.base) - time.Duration(s-1)
		e := &TimeoutError{Rank: w.rank, Op: op.Name, Peers: op.Peers, Elapsed: elapsed, Timeout: w.timeout}
		if elapsed >= w.timeout {
			if a, ok := w.c.(Absentees); ok {
				e.Absent = a.Absent(op.Peers)
			}
			w.fired.Store(true)
			w.onTimeout(e)
			return
		}
		if w.onSlow != nil && elapsed >= w.timeout/2 && warned != s {
			warned = s
			w.onSlow(e)
		}
	}
}

// Waiting returns the call in progress when it has been blocked for at
// least least, nil when the rank is not waiting that long: what it waits
// in, for whom, and since when (Elapsed; Timeout is the watchdog's). Nil
// too once the call has reached the timeout: the watchdog reports that
// itself. Safe from any goroutine: a signal handler asks it what the rank
// was doing.
func (w *Watchdog) Waiting(least time.Duration) *TimeoutError {
	s := w.since.Load()
	if s == 0 || w.fired.Load() {
		return nil
	}
	op := w.op.Load()
	if w.since.Load() != s || op == nil {
		return nil // the call ended or a new one began meanwhile
	}
	elapsed := time.Since(w.base) - time.Duration(s-1)
	if elapsed < least || elapsed >= w.timeout {
		return nil
	}
	e := &TimeoutError{Rank: w.rank, Op: op.Name, Peers: op.Peers, Elapsed: elapsed, Timeout: w.timeout}
	if a, ok := w.c.(Absentees); ok {
		e.Absent = a.Absent(op.Peers)
	}
	return e
}

// Label implements Labeler.
func (w *Watchdog) Label(op *Op) { w.next.Store(op) }

// enter marks the start of a call, named by its label or by def.
func (w *Watchdog) enter(def *Op) {
	op := w.next.Swap(nil)
	if op == nil {
		op = def
	}
	w.op.Store(op)
	w.since.Store(int64(time.Since(w.base)) + 1)
}

func (w *Watchdog) leave() { w.since.Store(0) }

// Guard runs f, a blocking call made outside this communicator (a GPU
// transport's NCCL exchange), under the same timeout, named op.
func (w *Watchdog) Guard(op *Op, f func() error) error {
	w.enter(op)
	defer w.leave()
	return f()
}

// Stop ends the watchdog goroutine; calls are no longer watched. Stopping
// twice is harmless.
func (w *Watchdog) Stop() { w.stop.Do(func() { close(w.done) }) }

// Comm returns the wrapped communicator.
func (w *Watchdog) Comm() Comm { return w.c }

func (w *Watchdog) Rank() int { return w.rank }
func (w *Watchdog) Size() int { return w.c.Size() }

func (w *Watchdog) AllToAllV(send, recv [][]byte) error {
	w.enter(&opAllToAllV)
	err := w.c.AllToAllV(send, recv)
	w.leave()
	return err
}

func (w *Watchdog) AllToAllVShort(send, recv [][]byte, got []int) error {
	w.enter(&opAllToAllV)
	err := w.c.AllToAllVShort(send, recv, got)
	w.leave()
	return err
}

func (w *Watchdog) AllReduceFloat32(x []float32) error {
	w.enter(&opAllReduceFloat32)
	err := w.c.AllReduceFloat32(x)
	w.leave()
	return err
}

func (w *Watchdog) AllReduceFloat64(x []float64) error {
	w.enter(&opAllReduceFloat64)
	err := w.c.AllReduceFloat64(x)
	w.leave()
	return err
}

func (w *Watchdog) Bcast(buf []byte, root int) error {
	w.enter(&opBcast)
	err := w.c.Bcast(buf, root)
	w.leave()
	return err
}

func (w *Watchdog) Barrier() error {
	w.enter(&opBarrier)
	err := w.c.Barrier()
	w.leave()
	return err
}

// CallNative implements Native when the wrapped Comm does, under the
// timeout like the collectives.
func (w *Watchdog) CallNative(f func(fcomm int32) error) error {
	n, ok := w.c.(Native)
	if !ok {
		return fmt.Errorf("comm: rank %d: a native MPI call needs MPI ranks (mpirun), not %T", w.rank, w.c)
	}
	w.enter(&opNative)
	defer w.leave()
	return n.CallNative(f)
}

// LabelName is Label for a name made at run time (it allocates: for
// setup steps, not for the calls of every epoch).
func (w *Watchdog) LabelName(name string) { w.Label(&Op{Name: name}) }

func (w *Watchdog) Abort(code int) { w.c.Abort(code) }

// Close stops the watchdog and closes the wrapped communicator.
func (w *Watchdog) Close() error {
	w.Stop()
	return w.c.Close()
}
