package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gnn-spmd/gnn-spmd/gnn/job"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// console is the terminal side of a run: the per-epoch output on stdout (a
// progress bar redrawn in place, or one line per epoch) and the log records
// on stderr, which clear the bar before they print and redraw it after.
type console struct {
	mu    sync.Mutex
	out   io.Writer // stdout
	err   io.Writer // stderr
	bar   bool      // draw a progress bar instead of epoch lines
	width int       // the terminal's columns
	shown string    // the bar on screen, "" for none
}

// newConsole decides between bar and lines: --progress bar or lines, or
// for auto a bar when stdout is a terminal, except under an MPI launcher
// (Open MPI hands every rank a pseudo-terminal, whatever mpirun's own
// stdout is).
func newConsole(stdout, stderr io.Writer, progress string) *console {
	c := &console{out: stdout, err: stderr, width: 80}
	f, isFile := stdout.(*os.File)
	tty := isFile && isTerminal(f.Fd())
	switch progress {
	case "bar":
		c.bar = true
	case "auto":
		c.bar = tty && !job.UnderMPI()
	}
	if tty {
		if w := terminalWidth(f.Fd()); w > 0 {
			c.width = w
		}
	}
	return c
}

// setOut replaces stdout (by a queuedWriter).
func (c *console) setOut(w io.Writer) {
	c.mu.Lock()
	c.out = w
	c.mu.Unlock()
}

// stdout is a writer to stdout (or to what setOut put in its place).
func (c *console) stdout() io.Writer { return consoleOut{c} }

type consoleOut struct{ c *console }

func (w consoleOut) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(p)
}

// stderr is a writer to stderr that keeps the progress bar whole.
func (c *console) stderr() io.Writer { return consoleErr{c} }

type consoleErr struct{ c *console }

func (w consoleErr) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown != "" {
		io.WriteString(c.out, "\r\x1b[K")
	}
	n, err := c.err.Write(p)
	if c.shown != "" {
		io.WriteString(c.out, c.shown)
	}
	return n, err
}

// draw replaces the bar on screen by line, cut to the terminal's width.
func (c *console) draw(line string) {
	if max := c.width - 1; utf8.RuneCountInString(line) > max {
		line = string([]rune(line)[:max])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.out, "\r\x1b[K"+line)
	c.shown = line
}

// endBar moves past the bar, so that the next output starts a line.
func (c *console) endBar() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown != "" {
		io.WriteString(c.out, "\n")
		c.shown = ""
	}
}

// progress is rank 0's progress bar over the epochs of a run.
type progress struct {
	total      int       // epochs of the run
	first      int       // first epoch this process trains (after a resume)
	start      time.Time // when that epoch began
	multiRanks bool
}

// line is the bar after epoch s.
func (p *progress) line(s *metrics.Epoch) string {
	if p.start.IsZero() {
		p.first = s.Epoch
		p.start = time.Now().Add(-time.Duration(s.Seconds * float64(time.Second)))
	}
	done := s.Epoch + 1
	frac := float64(done) / float64(p.total)
	const cells = 20
	full := min(cells, int(frac*cells))
	bar := strings.Repeat("#", full) + strings.Repeat(".", cells-full)
	ran := done - p.first
	perEpoch := time.Since(p.start) / time.Duration(ran)
	eta := perEpoch * time.Duration(p.total-done)
	line := fmt.Sprintf("epoch %d/%d [%s] %3.0f%%  ETA %s  loss %.4f  train %s  val %s  %s/epoch",
		done, p.total, bar, 100*frac, shortDuration(eta), s.Loss, accText(s.TrainAcc), accText(s.ValAcc), shortDuration(perEpoch))
	if p.multiRanks {
		line += "  sent " + humanBytes(s.BytesCum)
		if rates := rateText(s.Rates); rates != "" {
			line += "  rate " + rates
		}
	}
	return line
}

// shortDuration formats d for the bar: 850ms, 12.3s, 4m05s, 2h07m.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// newLogger logs to w (text records) at level info with --verbose, else
// warn. Every record of a rank carries rank=N (the job adds it).
func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// queuedWriter hands what is written to a goroutine that writes it to w, so
// that writers never wait for w. Under mpirun rank 0 writes its stdout
// through one: mpirun stops reading the ranks' stdout once it is told to
// terminate (SIGTERM), and a rank blocked writing an epoch line would never
// reach the epoch boundary where the ranks agree to stop.
type queuedWriter struct {
	w       io.Writer
	mu      sync.Mutex
	pending []byte
	wake    chan struct{} // something is pending
	closing chan struct{}
	done    chan struct{} // the goroutine has flushed and ended
}

func newQueuedWriter(w io.Writer) *queuedWriter {
	q := &queuedWriter{w: w, wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go q.loop()
	return q
}

func (q *queuedWriter) Write(p []byte) (int, error) {
	q.mu.Lock()
	q.pending = append(q.pending, p...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (q *queuedWriter) loop() {
	defer close(q.done)
	var batch []byte
	for {
		closing := false
		select {
		case <-q.wake:
		case <-q.closing:
			closing = true
		}
		q.mu.Lock()
		batch, q.pending = q.pending, batch[:0]
		q.mu.Unlock()
		if len(batch) > 0 {
			q.w.Write(batch)
		}
		if closing {
			q.mu.Lock()
			left := len(q.pending) > 0
			q.mu.Unlock()
			if !left {
				return
			}
		}
	}
}

// close writes what is pending, giving up after timeout (the output may be
// blocked for good).
func (q *queuedWriter) close(timeout time.Duration) {
	close(q.closing)
	select {
	case <-q.done:
	case <-time.After(timeout):
	}
}

// accText is an accuracy as the epoch lines print it: "-" (padded to the
// same width) for an epoch that was not evaluated.
func accText(x float64) string {
	if math.IsNaN(x) {
		return "     -"
	}
	return fmt.Sprintf("%.4f", x)
}
