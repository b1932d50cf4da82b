package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// cliCmd runs this test binary as the CLI, in a subprocess of its own.
func cliCmd(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "GNN_SPMD_AS_CLI=1")
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// running is a started command whose stdout and stderr are read line by
// line as they come.
type running struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	out     []string // stdout lines
	errOut  []string // stderr lines
	watch   func(stdout bool, line string)
	readers sync.WaitGroup
}

// start starts cmd; watch (if set) sees every line as it arrives, on the
// goroutine reading that stream.
func start(t *testing.T, cmd *exec.Cmd, watch func(stdout bool, line string)) *running {
	t.Helper()
	r := &running{cmd: cmd, watch: watch}
	o, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	e, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		stdout bool
		sc     *bufio.Scanner
	}{{true, bufio.NewScanner(o)}, {false, bufio.NewScanner(e)}} {
		r.readers.Add(1)
		go func() {
			defer r.readers.Done()
			for s.sc.Scan() {
				line := s.sc.Text()
				r.mu.Lock()
				if s.stdout {
					r.out = append(r.out, line)
				} else {
					r.errOut = append(r.errOut, line)
				}
				r.mu.Unlock()
				if r.watch != nil {
					r.watch(s.stdout, line)
				}
			}
		}()
	}
	return r
}

// wait waits for the command and returns its error and output.
func (r *running) wait() (err error, stdout, stderr []string) {
	r.readers.Wait()
	err = r.cmd.Wait()
	return err, r.out, r.errOut
}

// lineSeen returns a watch function that closes the returned channel at
// the first line (of either stream) that starts with prefix, and the time
// it came.
func lineSeen(prefix string) (func(bool, string), <-chan time.Time) {
	ch := make(chan time.Time, 1)
	var once sync.Once
	return func(_ bool, line string) {
		if strings.HasPrefix(line, prefix) {
			once.Do(func() { ch <- time.Now() })
		}
	}, ch
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// verified runs inspect --verify on a checkpoint and returns its epoch.
func verified(t *testing.T, path string) int {
	t.Helper()
	if code, stdout, stderr := runCLI("inspect", "--verify", path); code != 0 || stdout != "ok\n" {
		t.Fatalf("inspect --verify %s: exit %d, %q %q", path, code, stdout, stderr)
	}
	return readCheckpoint(t, path).Epoch
}

// gnnLines are the lines of the program's own errors (not mpirun's).
func gnnLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "gnn-spmd: ") {
			out = append(out, l)
		}
	}
	return out
}

func epochLines(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "epoch ") {
			n++
		}
	}
	return n
}

// rankPid is the process of MPI rank r below the launcher (which puts the
// rank in the process's environment).
func rankPid(t *testing.T, cmd *exec.Cmd, r int) int {
	t.Helper()
	ranks := rankPids(cmd.Process.Pid)
	if pid, ok := ranks[r]; ok {
		return pid
	}
	t.Fatalf("no process of rank %d below %s (ranks %v)", r, launcher.name, ranks)
	return 0
}

// TestCommTimeoutMPI: under mpirun, rank 1 of 2 is stopped (SIGSTOP) after
// epoch 2, as a hung rank would be; rank 0's watchdog aborts the job, which
// ends non-zero within the timeout plus a few seconds, with one line.
func TestCommTimeoutMPI(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := mpirunCmd(ctx, t, 2, "train", "--data", g, "--epochs", "1000000", "--hidden", "8", "--comm-timeout", "2s")
	watch, seen := lineSeen("epoch    2")
	r := start(t, cmd, watch)
	stoppedAt := <-seen
	stopped := rankPid(t, cmd, 1)
	syscall.Kill(stopped, syscall.SIGSTOP)
	err, stdout, stderr := r.wait()
	took := time.Since(stoppedAt)
	t.Logf("mpirun: %v, %v after rank 1 was stopped; %q", err, took, gnnLines(stderr))
	if err == nil {
		t.Errorf("mpirun exited 0 after a stall")
	}
	// mpirun wakes the stopped rank (SIGCONT) to end it, and that rank's
	// own watchdog may then count the stop as a wait: a second line.
	lines := gnnLines(stderr)
	if len(lines) < 1 || len(lines) > 2 || !strings.Contains(lines[0], "gnn-spmd: comm: rank 0: ") ||
		!strings.Contains(lines[0], "did not complete within the 2s timeout: waited 2") || !strings.Contains(lines[0], "(--comm-timeout)") ||
		!strings.Contains(lines[0], fmt.Sprintf("(rank 1 (pid %d, this host) is stopped)", stopped)) {
		t.Errorf("want a first line naming the operation rank 0 waited in and the stopped rank, got %q\nall stderr:\n%s", lines, strings.Join(stderr, "\n"))
	}
	if epochLines(stdout) < 3 {
		t.Errorf("%d epoch lines, want at least 3", epochLines(stdout))
	}
	// The timeout, up to a second for MPI_Abort to give way to the stuck
	// call, and mpirun's SIGTERM-then-SIGKILL of the hung rank.
	if took > 2*time.Second+8*time.Second {
		t.Errorf("the job ended %v after the stall, want < timeout + 8s", took)
	}
}

var interruptLine = regexp.MustCompile(`^gnn-spmd: interrupted by (SIGINT|SIGTERM) after epoch (\d+) of 100000; (.*)$`)

// interruptedAt checks the one interruption line and returns its epoch.
func interruptedAt(t *testing.T, stderr []string, sig, rest string) int {
	t.Helper()
	lines := gnnLines(stderr)
	if len(lines) != 1 {
		t.Fatalf("want one gnn-spmd line on stderr, got %q\nall stderr:\n%s", lines, strings.Join(stderr, "\n"))
	}
	m := interruptLine.FindStringSubmatch(lines[0])
	if m == nil || m[1] != sig || !strings.HasPrefix(m[3], rest) {
		t.Fatalf("line %q, want interrupted by %s ... %s", lines[0], sig, rest)
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

// TestInterruptLocal: SIGTERM (with --checkpoint) and SIGINT (without) to a
// process with two goroutine ranks: both ranks finish the epoch, rank 0
// writes the checkpoint of that epoch, and the process exits 143 or 130
// with one line.
func TestInterruptLocal(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	for _, c := range []struct {
		sig        syscall.Signal
		name       string
		code       int
		checkpoint bool
	}{{syscall.SIGTERM, "SIGTERM", 143, true}, {syscall.SIGINT, "SIGINT", 130, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ck, metrics := filepath.Join(dir, "c.h5"), filepath.Join(dir, "m.jsonl")
			args := []string{"train", "--data", g, "--ranks", "2", "--epochs", "100000", "--hidden", "8", "--metrics", metrics}
			rest := "no checkpoint written"
			if c.checkpoint {
				args = append(args, "--checkpoint", ck, "--checkpoint-every", "100000")
				rest = "checkpoint written to " + ck + " (continue with --resume " + ck + ")"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := cliCmd(ctx, t, args...)
			watch, seen := lineSeen("epoch    5")
			r := start(t, cmd, watch)
			<-seen
			sent := time.Now()
			cmd.Process.Signal(c.sig)
			err, stdout, stderr := r.wait()
			t.Logf("exit %v %v after the signal; %q", err, time.Since(sent), gnnLines(stderr))
			if code := exitCodeOf(err); code != c.code {
				t.Errorf("exit code %d, want %d", code, c.code)
			}
			n := interruptedAt(t, stderr, c.name, rest)
			if got := epochLines(stdout); got != n {
				t.Errorf("%d epoch lines, the message says %d epochs", got, n)
			}
			if got := len(readMetrics(t, metrics)); got != n {
				t.Errorf("%d metrics lines, want %d", got, n)
			}
			if c.checkpoint {
				if e := verified(t, ck); e != n {
					t.Errorf("the checkpoint holds epoch %d, want %d", e, n)
				}
			} else if _, err := os.Stat(ck); err == nil {
				t.Errorf("a checkpoint was written without --checkpoint")
			}
		})
	}
}

// TestInterruptMPI: SIGTERM to mpirun, which forwards it to every rank;
// the ranks stop after the same epoch, rank 0 writes that epoch's
// checkpoint and reports. Open MPI forwards the signal after
// odls_base_sigkill_timeout seconds (default 1) and sends SIGKILL as long
// after that: the test allows 3 s.
func TestInterruptMPI(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	dir := t.TempDir()
	ck, metrics := filepath.Join(dir, "c.h5"), filepath.Join(dir, "m.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpirunCmd(ctx, t, 2, "train", "--data", g, "--epochs", "100000", "--hidden", "8", "--metrics", metrics,
		"--checkpoint", ck, "--checkpoint-every", "100000")
	cmd.Env = append(cmd.Env, "OMPI_MCA_odls_base_sigkill_timeout=3")
	watch, seen := lineSeen("epoch    5")
	r := start(t, cmd, watch)
	<-seen
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err, stdout, stderr := r.wait()
	t.Logf("mpirun: %v, %v after the signal; %q", err, time.Since(sent), gnnLines(stderr))
	if err == nil {
		t.Errorf("mpirun exited 0 after SIGTERM")
	}
	rest := "checkpoint written to " + ck
	n := interruptedAt(t, stderr, "SIGTERM", rest)
	// mpirun stops forwarding the ranks' stdout once told to terminate:
	// the epoch lines end there, the metrics file goes on.
	if got := epochLines(stdout); got > n {
		t.Errorf("%d epoch lines, the message says %d epochs", got, n)
	}
	if got := len(readMetrics(t, metrics)); got != n {
		t.Errorf("%d metrics lines, want %d", got, n)
	}
	if e := verified(t, ck); e != n {
		t.Errorf("the checkpoint holds epoch %d, want %d", e, n)
	}
}

var divergedLine = regexp.MustCompile(`^gnn-spmd: epoch (\d+): loss is (NaN|\+Inf|-Inf); lower --lr`)

// TestDivergedLoss: a one-layer model at lr 4e36 overflows within a few
// epochs; the job stops with one line naming the epoch, exit code 1, and
// the checkpoint of the last even epoch before stays and verifies, with
// goroutine ranks and under mpirun.
func TestDivergedLoss(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	args := func(ck string) []string {
		return []string{"train", "--data", g, "--epochs", "100", "--layers", "1", "--hidden", "8", "--lr", "4e36", "--quiet",
			"--checkpoint", ck, "--checkpoint-every", "2"}
	}
	check := func(t *testing.T, lines []string, ck string) {
		t.Helper()
		if len(lines) != 1 {
			t.Fatalf("want one error line, got %q", lines)
		}
		m := divergedLine.FindStringSubmatch(lines[0])
		if m == nil {
			t.Fatalf("error %q does not name the epoch and the loss", lines[0])
		}
		k, _ := strconv.Atoi(m[1])
		if k < 3 {
			t.Fatalf("diverged at epoch %d: too early to have a checkpoint before", k)
		}
		if e := verified(t, ck); e != k-k%2 {
			t.Errorf("the checkpoint holds epoch %d, want %d (the last even one before epoch %d)", e, k-k%2, k)
		}
	}
	t.Run("ranks-2", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "c.h5")
		code, _, stderr := runCLI(append(args(ck), "--ranks", "2")...)
		t.Log(strings.TrimSpace(stderr))
		if code != job.ExitFailure {
			t.Errorf("exit code %d, want %d", code, job.ExitFailure)
		}
		check(t, strings.Split(strings.TrimSpace(stderr), "\n"), ck)
	})
	t.Run("mpirun-np-2", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "c.h5")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err, _, stderr := start(t, mpirunCmd(ctx, t, 2, args(ck)...), nil).wait()
		t.Logf("mpirun: %v; %q", err, gnnLines(stderr))
		if exitCodeOf(err) != job.ExitFailure {
			t.Errorf("mpirun: %v, want exit code %d", err, job.ExitFailure)
		}
		check(t, gnnLines(stderr), ck)
	})
}

// TestMPIRankKilledCheckpoint: SIGKILL of a rank that is not rank 0, in a
// job that checkpoints every 2 epochs: every rank is gone, mpirun exits
// non-zero, within 30 s, and the last checkpoint verifies.
func TestMPIRankKilledCheckpoint(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	ck := filepath.Join(t.TempDir(), "c.h5")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpirunCmd(ctx, t, 3, "train", "--data", g, "--epochs", "100000", "--hidden", "8", "--checkpoint", ck, "--checkpoint-every", "2")
	watch, seen := lineSeen("epoch   20")
	r := start(t, cmd, watch)
	<-seen
	pids, killed := killLastRank(t, cmd, 3)
	err, _, _ := r.wait()
	t.Logf("mpirun exited %v after the kill: %v", time.Since(killed), err)
	if err == nil {
		t.Errorf("mpirun exited 0 after a rank was killed")
	}
	for _, p := range pids {
		for !exited(p) && time.Since(killed) < 30*time.Second {
			time.Sleep(100 * time.Millisecond)
		}
		if !exited(p) {
			t.Errorf("rank process %s still running %v after the kill", p, time.Since(killed))
		}
	}
	t.Logf("all ranks gone %v after the kill", time.Since(killed))
	if e := verified(t, ck); e < 20 || e%2 != 0 {
		t.Errorf("the checkpoint holds epoch %d, want an even one >= 20", e)
	}
}

// TestMPICheckpointWriterKilled: rank 0 is SIGKILLed inside a checkpoint
// write, once the temporary file exists (here a FIFO put in its place,
// whose open blocks the writer): the checkpoint of the write before stays
// and verifies, the temporary file is not mistaken for a checkpoint,
// and a later run resumes from the checkpoint, leaving the stale temporary
// file alone.
func TestMPICheckpointWriterKilled(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck := filepath.Join(dir, "c.h5")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"train", "--data", g, "--epochs", "100", "--hidden", "8", "--quiet", "--checkpoint", ck, "--checkpoint-every", "30"}
	r := start(t, mpirunCmd(ctx, t, 2, args...), nil)
	for !exists(ck) {
		time.Sleep(time.Millisecond)
	}
	// Rank 0 is stopped between two writes (30 epochs apart; on a loaded
	// machine not always the first and second): the next one's temporary
	// file becomes a FIFO.
	pid := rankPid(t, r.cmd, 0)
	tmp := outfile.TempName(ck, pid)
	for {
		stop(pid)
		if !exists(tmp) {
			break
		}
		syscall.Kill(pid, syscall.SIGCONT)
		time.Sleep(time.Millisecond)
	}
	first := verified(t, ck)
	if first >= 90 {
		t.Fatalf("rank 0 was stopped after its last write (epoch %d): the run outpaced the test", first)
	}
	if err := syscall.Mkfifo(tmp, 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	for !blockedOnFIFO(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	err, _, _ := r.wait()
	t.Logf("mpirun exited %v after rank 0 was killed: %v", time.Since(killed), err)
	if err == nil {
		t.Errorf("mpirun exited 0")
	}
	if time.Since(killed) > 30*time.Second {
		t.Errorf("the job took %v to end", time.Since(killed))
	}
	if e := verified(t, ck); e != first {
		t.Errorf("the checkpoint holds epoch %d, want %d (the last whole write)", e, first)
	}
	if st, err := os.Stat(tmp); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the temporary file of the killed write: %v, %v", st, err)
	}
	if code, _, stderr := runCLI("inspect", "--verify", tmp); code != job.ExitBadInput {
		t.Errorf("inspect --verify of the temporary file: exit %d (%s), want %d", code, strings.TrimSpace(stderr), job.ExitBadInput)
	}
	// Resume from the checkpoint with goroutine ranks (same world size and
	// partition) and checkpoint again, twice, over it.
	code, _, stderr := runCLI(append(args, "--ranks", "2", "--resume", ck, "--checkpoint-every", "49", "--keep", "2")...)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if e := verified(t, ck); e != 100 {
		t.Errorf("after the resumed run the checkpoint holds epoch %d, want 100", e)
	}
	if e := verified(t, ck+".1"); e != 98 {
		t.Errorf("%s.1 holds epoch %d, want 98", ck, e)
	}
	if exists(tmp) {
		t.Errorf("the temporary file of the killed write is still there")
	}
}

// stop sends SIGSTOP to process pid and waits until it is stopped.
func stop(pid int) {
	syscall.Kill(pid, syscall.SIGSTOP)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command name's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] == 'T' {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// blockedOnFIFO reports whether a thread of process pid waits in the open
// of a FIFO for the other end.
func blockedOnFIFO(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	for _, w := range tasks {
		if b, _ := os.ReadFile(w); string(b) == "wait_for_partner" {
			return true
		}
	}
	return false
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestProgressAndLogs: --progress bar redraws one line per epoch in place,
// --quiet prints no epoch output, and --verbose logs records with the rank.
func TestProgressAndLogs(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	base := []string{"train", "--data", g, "--ranks", "2", "--epochs", "3", "--hidden", "8"}
	code, stdout, stderr := runCLI(append(base, "--progress", "bar", "--verbose")...)
	if code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	if !strings.Contains(stdout, "\r\x1b[Kepoch 3/3 [####################] 100%  ETA ") ||
		!strings.Contains(stdout, "\r\x1b[Kepoch 1/3 [") || strings.Contains(stdout, "\nepoch ") ||
		!strings.Contains(stdout, "\ndone: ") {
		t.Errorf("--progress bar output:\n%q", stdout)
	}
	for _, w := range []string{`level=INFO msg="rank ready" rank=0`, `level=INFO msg="rank ready" rank=1`} {
		if !strings.Contains(stderr, w) {
			t.Errorf("--verbose stderr lacks %s:\n%s", w, stderr)
		}
	}
	code, stdout, stderr = runCLI(append(base, "--quiet")...)
	if code != 0 || strings.Contains(stdout, "\nepoch ") || strings.Contains(stdout, "\r") || !strings.Contains(stdout, "\ndone: ") || stderr != "" {
		t.Errorf("--quiet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	var b bytes.Buffer
	if newConsole(&b, &b, "auto").bar {
		t.Errorf("auto draws a bar into a buffer")
	}
}
