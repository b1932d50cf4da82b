package comm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The MPI tests build testdata/mpicheck (cgo is not allowed in tests, and a
// test is one process) and run it under mpirun.

// mpiDriver builds the driver into a temporary directory, or skips the test
// when mpirun or the go command is missing.
func mpiDriver(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not on PATH (Debian: apt-get install openmpi-bin libopenmpi-dev); skipping the MPI tests")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; cannot build the MPI test driver")
	}
	exe := filepath.Join(t.TempDir(), "mpicheck")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, gocmd, "build", "-o", exe, "./testdata/mpicheck").CombinedOutput(); err != nil {
		t.Fatalf("building the MPI test driver: %v\n%s", err, out)
	}
	return exe
}

// mpirun prepares `mpirun -np q exe args...` as root, with more ranks than
// cores allowed. On timeout mpirun gets SIGTERM, which it passes on to the
// ranks, and SIGKILL five seconds later.
func mpirun(ctx context.Context, q int, exe string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "mpirun", append([]string{"-np", strconv.Itoa(q), "--oversubscribe", exe}, args...)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func TestMPICheck(t *testing.T) {
	exe := mpiDriver(t)
	for _, q := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("Q=", q), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := mpirun(ctx, q, exe, "-mode", "check").CombinedOutput()
			if err != nil {
				t.Fatalf("mpirun -np %d mpicheck: %v\n%s", q, err, out)
			}
			for r := 0; r < q; r++ {
				if !bytes.Contains(out, []byte(fmt.Sprintf("ok rank %d\n", r))) {
					t.Errorf("no \"ok rank %d\" in the output:\n%s", r, out)
				}
			}
		})
	}
}

// TestMPIAbort checks that Abort ends the job with its code, both when the
// aborting rank is idle and when its MPI call is stuck in a collective.
func TestMPIAbort(t *testing.T) {
	exe := mpiDriver(t)
	for _, c := range []struct {
		mode string
		q    int
		code int
	}{{"abort", 3, 3}, {"abortbusy", 2, 4}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		out, err := mpirun(ctx, c.q, exe, "-mode", c.mode).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code {
			t.Errorf("%s: mpirun ended with %v, want exit code %d\n%s", c.mode, err, c.code, out)
		}
		t.Logf("%s: mpirun exited with code %d after %v", c.mode, c.code, time.Since(start).Round(time.Millisecond))
	}
}

// TestMPIKill SIGKILLs one rank of three in the middle of its collectives:
// mpirun must end the job, non-zero, and no rank may outlive it.
func TestMPIKill(t *testing.T) {
	exe := mpiDriver(t)
	const q, victim = 3, 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpirun(ctx, q, exe, "-mode", "loop", "-seconds", "100")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each rank prints "pid rank r PID" before it starts looping.
	pids := make(chan [2]int, q)
	var mu sync.Mutex
	var output strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			fmt.Fprintln(&output, sc.Text())
			mu.Unlock()
			var r, pid int
			if _, err := fmt.Sscanf(sc.Text(), "pid rank %d %d", &r, &pid); err == nil {
				pids <- [2]int{r, pid}
			}
		}
	}()
	pid := make([]int, q)
	for range q {
		select {
		case p := <-pids:
			pid[p[0]] = p[1]
		case <-time.After(time.Minute):
			cancel()
			cmd.Wait()
			t.Fatalf("the ranks did not report their pids:\n%s", stderr.String())
		}
	}
	time.Sleep(500 * time.Millisecond) // well into the loop
	killed := time.Now()
	if err := syscall.Kill(pid[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	exited := time.Since(killed)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("mpirun ended with %v after rank %d was killed, want a non-zero exit", err, victim)
	}
	if exited > 30*time.Second {
		t.Errorf("mpirun took %v to end after rank %d was killed", exited, victim)
	}
	// mpirun reaps its ranks before it exits; allow a moment regardless.
	for r, p := range pid {
		for deadline := time.Now().Add(5 * time.Second); running(p); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("rank %d (pid %d) still runs after mpirun ended", r, p)
				syscall.Kill(p, syscall.SIGKILL)
				break
			}
		}
	}
	mu.Lock()
	t.Logf("rank %d SIGKILLed: mpirun exited (%v) after %v; all %d ranks gone\nstdout:\n%sstderr:\n%s",
		victim, err, exited.Round(time.Millisecond), q, output.String(), stderr.String())
	mu.Unlock()
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// TestMPINoLauncher: started without mpirun, the driver fails with the
// message that says how to run it.
func TestMPINoLauncher(t *testing.T) {
	exe := mpiDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMPI_") && !strings.HasPrefix(kv, "PMI") && !strings.HasPrefix(kv, "SLURM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("mpirun -np Q")) {
		t.Fatalf("without mpirun the driver ended with %v and printed:\n%s", err, out)
	}
}
