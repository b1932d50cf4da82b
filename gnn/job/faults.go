package job

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// Exit codes: 1 for a failure while running (including a diverged loss and
// a communication timeout), 2 for bad input or usage, 130 and 143 for a run
// stopped by SIGINT or SIGTERM (128 + the signal, as a shell reports a
// process killed by it).
const (
	ExitFailure  = 1
	ExitBadInput = 2
	ExitSIGINT   = 128 + int(syscall.SIGINT)  // 130
	ExitSIGTERM  = 128 + int(syscall.SIGTERM) // 143
)

// Exit ends a rank with a code after the cause has been reported (by this
// rank or another).
type Exit struct{ Code int }

func (e *Exit) Error() string  { return fmt.Sprintf("exit %d (reported by another rank)", e.Code) }
func (e *Exit) ExitCode() int  { return e.Code }
func (e *Exit) Reported() bool { return true }

// ExitCode is the process exit code for an error Run returned: the error's
// own (bad input, usage, an interrupted run, a reported exit), else
// ExitFailure.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return ExitFailure
}

// exitCodeOf is the exit code of a run stopped by s (0: a signal another
// rank received, which under mpirun is SIGTERM as a rule).
func exitCodeOf(s syscall.Signal) int {
	if s == syscall.SIGINT {
		return ExitSIGINT
	}
	return ExitSIGTERM
}

// interrupts turns the first SIGINT or SIGTERM the process receives into a
// request to stop after the epoch in progress (every rank agrees on the
// epoch through the trainer's Stop callback). A second signal ends the
// process at once, after removing the temporary files of writes in
// progress.
type interrupts struct {
	sig  atomic.Int32 // the first signal, 0 until one came
	ch   chan os.Signal
	done chan struct{}
	wg   sync.WaitGroup
}

// catchInterrupts starts catching; onSignal runs once, when the first
// signal arrives.
func catchInterrupts(onSignal func(syscall.Signal)) *interrupts {
	i := &interrupts{ch: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(i.ch, syscall.SIGINT, syscall.SIGTERM)
	i.wg.Add(1)
	go func() {
		defer i.wg.Done()
		select {
		case s := <-i.ch:
			sig := s.(syscall.Signal)
			i.sig.Store(int32(sig))
			onSignal(sig)
		case <-i.done:
			return
		}
		// The next one ends the process at once, without leaving the
		// temporary file of a checkpoint or metrics write in progress.
		select {
		case s := <-i.ch:
			outfile.RemoveTemps()
			os.Exit(exitCodeOf(s.(syscall.Signal)))
		case <-i.done:
		}
	}()
	return i
}

// stop restores the default handling of the signals.
func (i *interrupts) stop() {
	signal.Stop(i.ch)
	close(i.done)
	i.wg.Wait()
}

// signal returns the signal received, 0 for none.
func (i *interrupts) signal() syscall.Signal { return syscall.Signal(i.sig.Load()) }

// requested is a trainer's Stop: true once a signal came.
func (i *interrupts) requested(int) bool { return i.sig.Load() != 0 }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// onSignal is the record a rank logs when the first signal comes: a
// warning from the reporting rank, an info record from the others.
func onSignal(s *Spec, log *slog.Logger, reporting bool) func(syscall.Signal) {
	return func(sig syscall.Signal) {
		then := "stopping"
		if s.Checkpoint != "" {
			then = "writing a checkpoint to " + s.Checkpoint + " and stopping"
		}
		msg := signalName(sig) + " received: finishing the epoch in progress, then " + then + " (send it again to quit at once)"
		if reporting {
			log.Warn(msg)
		} else {
			log.Info(msg)
		}
	}
}

// waitingReported is how long a rank must have been blocked in one
// collective or exchange for a signal to make it say what it waits for: a
// healthy run's calls take milliseconds.
const waitingReported = time.Second

// SignalWhileWaitingError is the line a rank prints when a signal finds
// it blocked in a collective or exchange. Under mpirun the signal is, as a
// rule, the launcher ending the job (Open MPI on losing a host's daemon
// behind a dead link, before --comm-timeout fires) and SIGKILL follows
// within a second (odls_base_sigkill_timeout): this line is then the only
// word of what the rank was waiting for.
type SignalWhileWaitingError struct {
	Signal syscall.Signal
	*comm.TimeoutError
}

func (e *SignalWhileWaitingError) Error() string {
	msg := fmt.Sprintf("comm: rank %d: %s received after waiting %v in %s for %s", e.Rank, signalName(e.Signal), e.Elapsed.Round(100*time.Millisecond), e.Op, comm.PeerText(e.Peers))
	if e.Absent != "" {
		msg += " (" + e.Absent + ")"
	}
	return msg + fmt.Sprintf(", before the %v --comm-timeout; under mpirun the launcher is ending the job (a rank or a host lost)", e.Timeout)
}

// signalWhileWaiting reports, on one line, a rank that the first signal
// finds blocked in a watched call for waitingReported or longer, then
// runs next (the request to stop after the epoch, which goes on should
// the call complete).
func (j *job) signalWhileWaiting(next func(syscall.Signal)) func(syscall.Signal) {
	return func(sig syscall.Signal) {
		if w := j.wd.Load(); w != nil {
			if e := w.Waiting(waitingReported); e != nil {
				j.report(&SignalWhileWaitingError{Signal: sig, TimeoutError: e})
			}
		}
		next(sig)
	}
}

// InterruptedError ends a run that a signal stopped at an epoch boundary.
type InterruptedError struct {
	Signal        syscall.Signal // 0: received by another rank
	Epochs, Total int            // finished epochs, of Total
	Checkpoint    string         // written there; "" without --checkpoint
}

// ExitCode is 128 + the signal.
func (e *InterruptedError) ExitCode() int { return exitCodeOf(e.Signal) }

func (e *InterruptedError) Error() string {
	by := "a signal to another rank"
	if e.Signal != 0 {
		by = signalName(e.Signal)
	}
	ck := "no checkpoint written (run with --checkpoint FILE to keep the state)"
	if e.Checkpoint != "" {
		ck = fmt.Sprintf("checkpoint written to %s (continue with --resume %s)", e.Checkpoint, e.Checkpoint)
	}
	return fmt.Sprintf("interrupted by %s after epoch %d of %d; %s", by, e.Epochs, e.Total, ck)
}

// interrupted is the error of rank 0 (an *InterruptedError) or of another
// rank (a silent exit with the same class of code) once Run stopped on
// request.
func (j *job) interrupted(rank int, st *gnn.StoppedError) error {
	sig := j.intr.signal()
	if rank != 0 {
		return &Exit{Code: exitCodeOf(sig)}
	}
	return &InterruptedError{Signal: sig, Epochs: st.Epochs, Total: j.spec.Run.Epochs, Checkpoint: j.spec.Checkpoint}
}

// CommTimeoutError is the error that ends a job whose watchdog fired.
type CommTimeoutError struct{ *comm.TimeoutError }

func (e *CommTimeoutError) Error() string {
	return e.TimeoutError.Error() + "; aborting the job (--comm-timeout)"
}

func (e *CommTimeoutError) Unwrap() error { return e.TimeoutError }

// watch wraps a rank's communicator in the --comm-timeout watchdog, which
// calls onTimeout (which ends the job), after a warning at half the
// timeout when that is a minute or more; it returns c itself when the
// timeout is 0. The returned function stops the watchdog.
func (j *job) watch(c comm.Comm, log *slog.Logger, onTimeout func(error)) (comm.Comm, func()) {
	timeout := j.spec.CommTimeout
	if timeout <= 0 {
		return c, func() {}
	}
	cfg := comm.WatchdogConfig{
		Timeout:   timeout,
		OnTimeout: func(e *comm.TimeoutError) { onTimeout(&CommTimeoutError{e}) },
	}
	if timeout >= time.Minute {
		// A wait of half the timeout is long enough for a person to
		// wonder: say what the rank waits for.
		cfg.OnSlow = func(e *comm.TimeoutError) {
			log.Warn("communication is slow", "op", e.Op, "waited", e.Elapsed.Round(time.Second).String(),
				"for", comm.PeerText(e.Peers), "timeout", e.Timeout.String())
		}
	}
	w := comm.NewWatchdog(c, cfg)
	return w, w.Stop
}

// The watchdog's names of the setup and teardown collectives.
var (
	opAgree    = comm.Op{Name: "setup check all-reduce"}
	opHaloRows = comm.Op{Name: "setup all-reduce"}
	opMemory   = comm.Op{Name: "peak memory all-reduce"}
	opBarrier  = comm.Op{Name: "barrier"}
)
