package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// Exit codes of an interrupted run: 128 + the signal's number, as a shell
// reports a process killed by it.
const (
	exitSIGINT  = 128 + int(syscall.SIGINT)  // 130
	exitSIGTERM = 128 + int(syscall.SIGTERM) // 143
)

// interrupts turns the first SIGINT or SIGTERM the process receives into a
// request to stop after the epoch in progress (every rank agrees on the
// epoch through the trainer's Stop callback). A second signal ends the
// process at once: the handler is gone by then.
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
			signal.Stop(i.ch) // the next one takes the default action
			onSignal(sig)
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

func (i *interrupts) requested() bool { return i.sig.Load() != 0 }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// exitCode is the exit code of a run stopped by s (0: a signal another rank
// received, which under mpirun is SIGTERM as a rule).
func exitCode(s syscall.Signal) int {
	if s == syscall.SIGINT {
		return exitSIGINT
	}
	return exitSIGTERM
}

// interruptedError ends a run that a signal stopped at an epoch boundary.
// report prints it as one line and exits with 128 + the signal.
type interruptedError struct {
	sig           syscall.Signal // 0: received by another rank
	epochs, total int            // finished epochs, of total
	checkpoint    string         // written there; "" without --checkpoint
}

func (e *interruptedError) Error() string {
	by := "a signal to another rank"
	if e.sig != 0 {
		by = signalName(e.sig)
	}
	ck := "no checkpoint written (run with --checkpoint FILE to keep the state)"
	if e.checkpoint != "" {
		ck = fmt.Sprintf("checkpoint written to %s (continue with --resume %s)", e.checkpoint, e.checkpoint)
	}
	return fmt.Sprintf("interrupted by %s after epoch %d of %d; %s", by, e.epochs, e.total, ck)
}

func (e *interruptedError) code() int { return exitCode(e.sig) }

// interrupted is the error of rank 0 (a *interruptedError) or of another
// rank (a silent exit with the same class of code) once Run stopped on
// request.
func (f *trainFlags) interrupted(rank int, st *gnn.StoppedError) error {
	sig := f.intr.signal()
	if rank != 0 {
		return &silentExit{code: exitCode(sig)}
	}
	return &interruptedError{sig: sig, epochs: st.Epochs, total: f.epochs, checkpoint: f.checkpoint}
}

// onSignal is the record a rank logs when the first signal comes: a
// warning from the reporting rank, an info record from the others.
func (f *trainFlags) onSignal(log *slog.Logger, reporting bool) func(syscall.Signal) {
	return func(s syscall.Signal) {
		then := "stopping"
		if f.checkpoint != "" {
			then = "writing a checkpoint to " + f.checkpoint + " and stopping"
		}
		msg := signalName(s) + " received: finishing the epoch in progress, then " + then + " (send it again to quit at once)"
		if reporting {
			log.Warn(msg)
		} else {
			log.Info(msg)
		}
	}
}

// stopFunc is a rank's gnn.Trainer.Stop: true once a signal came.
// c is the rank's communicator, for the test hook that stalls a rank.
func (f *trainFlags) stopFunc(rank int, c comm.Comm) func(int) bool {
	return func(epoch int) bool {
		if testStall(rank, epoch) {
			stallForever(c)
		}
		return f.intr.requested()
	}
}

// commTimeoutError is the error that ends a job whose watchdog fired.
type commTimeoutError struct{ *comm.TimeoutError }

func (e *commTimeoutError) Error() string {
	return e.TimeoutError.Error() + "; aborting the job (--comm-timeout)"
}

func (e *commTimeoutError) Unwrap() error { return e.TimeoutError }

// watch wraps a rank's communicator in the --comm-timeout watchdog, which
// calls onTimeout (which ends the job), after a warning at half the
// timeout when that is 30 s or more; it returns c itself when the timeout
// is 0. The returned function stops the watchdog.
func (f *trainFlags) watch(c comm.Comm, log *slog.Logger, onTimeout func(error)) (comm.Comm, func()) {
	if f.commTimeout <= 0 {
		return c, func() {}
	}
	cfg := comm.WatchdogConfig{
		Timeout:   f.commTimeout,
		OnTimeout: func(e *comm.TimeoutError) { onTimeout(&commTimeoutError{e}) },
	}
	if f.commTimeout >= time.Minute {
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

// mpiTimeout ends an MPI job whose watchdog fired: one line on stderr,
// then MPI_Abort (or, with the stuck call holding MPI, an exit that makes
// mpirun end the others).
func mpiTimeout(c comm.Comm, stderr io.Writer) func(error) {
	return func(err error) {
		fmt.Fprintf(stderr, "gnn-spmd: %v\n", err)
		c.Abort(exitFailure)
	}
}

// The watchdog's names of the setup collectives.
var (
	opAgree    = comm.Op{Name: "setup check all-reduce"}
	opHaloRows = comm.Op{Name: "setup all-reduce"}
	opMemory   = comm.Op{Name: "peak memory all-reduce"}
	opBarrier  = comm.Op{Name: "barrier"}
)

// rankFailure simplifies the error RunLocal returns: a failure every rank
// shares (a diverged loss) is reported as itself, not as one rank's.
func rankFailure(err error) error {
	var de *gnn.DivergedError
	if errors.As(err, &de) {
		return de
	}
	return err
}
