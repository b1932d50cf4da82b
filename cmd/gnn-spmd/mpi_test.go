package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// TestMain lets mpirun start this test binary as the CLI: with
// GNN_SPMD_AS_CLI=1 it runs the command line and exits, so the MPI tests
// exercise exactly the code (and build tags) under test. With
// GNN_SPMD_PEAK_FILE set, the command writes its peak resident memory in
// MiB there as it ends: the child's wait4 figure holds this test
// process's own peak (job.PeakRSSMiB says why).
func TestMain(m *testing.M) {
	if os.Getenv("GNN_SPMD_AS_CLI") == "1" {
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		if f := os.Getenv("GNN_SPMD_PEAK_FILE"); f != "" {
			os.WriteFile(f, []byte(strconv.FormatInt(job.PeakRSSMiB(), 10)), 0o644)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func sharedData(t *testing.T, name string) string {
	dir := filepath.Join("..", "..", "..", "shared", "data", name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not found: the shared datasets live beside the repository in ../shared/data", dir)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// mpiLauncher is the MPI launcher the tests start ranks with: the one of
// the MPI library this binary is built against (launcher_*_test.go).
type mpiLauncher struct {
	name     string   // the command
	install  string   // what installs it
	np       string   // its flag for the number of processes
	rankEnv  string   // the variable that holds a rank's number in its environment
	localEnv string   // and its node-local rank
	srunMPI  string   // srun's --mpi plugin that this MPI library speaks
	env      []string // what the tests add to its environment
}

// mpirunCmd runs q ranks of this binary as the CLI under the launcher.
func mpirunCmd(ctx context.Context, t *testing.T, q int, args ...string) *exec.Cmd {
	if _, err := exec.LookPath(launcher.name); err != nil {
		t.Skipf("%s not on PATH (%s)", launcher.name, launcher.install)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, launcher.name, append([]string{launcher.np, strconv.Itoa(q), self}, args...)...)
	cmd.Env = append(append(os.Environ(), "GNN_SPMD_AS_CLI=1"), launcher.env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// rankPids are the processes below pid (at any depth) that are MPI ranks,
// by rank: those with the launcher's rank variable in their environment.
func rankPids(pid int) map[int]int {
	out := map[int]int{}
	var walk func(p int)
	walk = func(p int) {
		b, _ := exec.Command("pgrep", "-P", strconv.Itoa(p)).Output()
		for _, f := range strings.Fields(string(b)) {
			c, _ := strconv.Atoi(f)
			env, _ := os.ReadFile("/proc/" + f + "/environ")
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, launcher.rankEnv+"="); ok {
					if r, err := strconv.Atoi(v); err == nil {
						out[r] = c
					}
				}
			}
			walk(c)
		}
	}
	walk(pid)
	return out
}

type epochLine struct {
	Epoch                     int
	Loss                      float64
	TrainAcc, ValAcc, TestAcc float64
	BytesFwd                  int64 `json:"bytes_fwd"`
	Summary                   bool
}

func readMetrics(t *testing.T, path string) []epochLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []epochLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			epochLine
			TrainAcc float64 `json:"train_acc"`
			ValAcc   float64 `json:"val_acc"`
			TestAcc  float64 `json:"test_acc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if !e.Summary {
			e.epochLine.TrainAcc, e.epochLine.ValAcc, e.epochLine.TestAcc = e.TrainAcc, e.ValAcc, e.TestAcc
			out = append(out, e.epochLine)
		}
	}
	return out
}

// sameRun holds a distributed run to the one-process reference: per-epoch
// loss within 1e-4 (relative above 1), final accuracies within 0.2 points.
func sameRun(t *testing.T, got, want []epochLine) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d epochs, want %d", len(got), len(want))
	}
	for e := range want {
		if math.Abs(got[e].Loss-want[e].Loss) > 1e-4*math.Max(1, math.Abs(want[e].Loss)) {
			t.Fatalf("epoch %d: loss %.8f, one process %.8f", e, got[e].Loss, want[e].Loss)
		}
	}
	g, w := got[len(got)-1], want[len(want)-1]
	for _, a := range [][2]float64{{g.TrainAcc, w.TrainAcc}, {g.ValAcc, w.ValAcc}, {g.TestAcc, w.TestAcc}} {
		if math.Abs(a[0]-a[1]) > 0.002 {
			t.Errorf("final accuracy %.4f, one process %.4f", a[0], a[1])
		}
	}
}

// TestMPIEqualsOneProcess trains under real mpirun with Q = 1, 2, 4, 8 ranks,
// random and METIS partitions, and compares every epoch with one process;
// --ranks 8 (goroutine ranks) is held to the same standard. GraphSAGE on
// both datasets, GAT (two heads concatenated, two averaged, coefficient
// dropout) on Cora.
func TestMPIEqualsOneProcess(t *testing.T) {
	epochs := "50"
	if testing.Short() {
		epochs = "5"
	}
	gat := []string{"--model", "gat", "--heads", "2", "--out-heads", "2", "--attn-dropout", "0.2", "--hidden", "8"}
	for _, c := range []struct {
		name, data string
		model      []string
	}{{"cora", "cora", nil}, {"amazon_photo", "amazon_photo", nil}, {"cora-gat", "cora", gat}} {
		name, dir := c.name, sharedData(t, c.data)
		common := append([]string{"train", "--data", dir, "--normalize-features", "--epochs", epochs, "--hidden", "32",
			"--dropout", "0.2", "--seed", "3", "--quiet"}, c.model...)
		tmp := t.TempDir()
		ref := filepath.Join(tmp, "ref.jsonl")
		if code, _, stderr := runCLI(append(common, "--metrics", ref)...); code != 0 {
			t.Fatalf("one process: %s", stderr)
		}
		want := readMetrics(t, ref)
		for _, method := range []string{"random", "metis"} {
			for _, q := range []int{1, 2, 4, 8} {
				t.Run(fmt.Sprintf("%s/%s/%s-np-%d", name, method, launcher.name, q), func(t *testing.T) {
					out := filepath.Join(t.TempDir(), "m.jsonl")
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					cmd := mpirunCmd(ctx, t, q, append(common, "--partition", method, "--metrics", out)...)
					if b, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("%s: %v\n%s", launcher.name, err, b)
					}
					sameRun(t, readMetrics(t, out), want)
				})
			}
			t.Run(fmt.Sprintf("%s/%s/ranks-8", name, method), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "m.jsonl")
				if code, _, stderr := runCLI(append(common, "--ranks", "8", "--partition", method, "--metrics", out)...); code != 0 {
					t.Fatalf("--ranks 8: %s", stderr)
				}
				sameRun(t, readMetrics(t, out), want)
			})
		}
	}
}

// TestMPICompressedEqualsGoroutines trains with the recommended compression
// (residual coding with skipped rows, gradient rows left out, shared
// headers: payloads whose size only their sender knows) under mpirun and
// as goroutine ranks: every epoch must send the same bytes and reach the
// same numbers, up to the order of MPI's sums.
func TestMPICompressedEqualsGoroutines(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "3000", "--classes", "4", "--features", "16", "--seed", "5"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	common := []string{"train", "--data", g, "--epochs", "8", "--hidden", "16", "--compress", "recommended", "--partition", "random", "--quiet"}
	ref := filepath.Join(dir, "ref.jsonl")
	if code, _, stderr := runCLI(append(common, "--ranks", "4", "--metrics", ref)...); code != 0 {
		t.Fatalf("--ranks 4: %s", stderr)
	}
	out := filepath.Join(dir, "mpi.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if b, err := mpirunCmd(ctx, t, 4, append(common, "--metrics", out)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", launcher.name, err, b)
	}
	// Every field but the clocks.
	epochs := func(path string) []map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var ms []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			if m["summary"] == true {
				continue
			}
			for k := range m {
				if strings.HasSuffix(k, "_seconds") {
					delete(m, k)
				}
			}
			ms = append(ms, m)
		}
		return ms
	}
	got, want := epochs(out), epochs(ref)
	if len(got) != len(want) || len(want) != 8 {
		t.Fatalf("%d epochs under mpirun, %d as goroutines, want 8", len(got), len(want))
	}
	// The bytes exactly; the numbers up to the order of MPI's sums.
	for e := range want {
		if len(got[e]) != len(want[e]) {
			t.Fatalf("epoch %d: fields %v, goroutines %v", e, got[e], want[e])
		}
		for k, w := range want[e] {
			if !closeJSON(got[e][k], w, strings.HasPrefix(k, "bytes")) {
				t.Fatalf("epoch %d: %s is %v under mpirun, %v as goroutines", e, k, got[e][k], w)
			}
		}
	}
	if sent := want[len(want)-1]["bytes_cum"].(float64); sent == 0 {
		t.Fatal("no halo bytes sent")
	}
}

// closeJSON compares two decoded JSON values: numbers within a relative
// 1e-4, as sameRun does (exactly if exact), arrays element by element, the
// rest as equal.
func closeJSON(a, b any, exact bool) bool {
	switch b := b.(type) {
	case float64:
		a, ok := a.(float64)
		return ok && (a == b || !exact && math.Abs(a-b) <= 1e-4*math.Max(1, math.Abs(b)))
	case []any:
		a, ok := a.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range b {
			if !closeJSON(a[i], b[i], exact) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// TestMPIRankKilled SIGKILLs one rank of a running 3-rank job: mpirun and
// every rank must be gone, with a non-zero status, within 30 s.
func TestMPIRankKilled(t *testing.T) {
	dir := sharedData(t, "amazon_photo")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpirunCmd(ctx, t, 3, "train", "--data", dir, "--epochs", "100000", "--hidden", "32")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until training runs, then kill a rank that is not rank 0.
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "epoch    2") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	pids, killed := killLastRank(t, cmd, 3)
	err = cmd.Wait()
	took := time.Since(killed)
	t.Logf("mpirun exited %v after the kill: %v", took, err)
	if err == nil {
		t.Errorf("mpirun exited 0 after a rank was killed")
	}
	if took > 30*time.Second {
		t.Errorf("the job took %v to end after a rank was killed, want < 30s", took)
	}
	// Every rank must be gone (or a zombie awaiting its reaper) within the
	// same 30 s.
	for _, p := range pids {
		for !exited(p) && time.Since(killed) < 30*time.Second {
			time.Sleep(100 * time.Millisecond)
		}
		if !exited(p) {
			t.Errorf("rank process %s still running %v after the kill", p, time.Since(killed))
		}
	}
	t.Logf("all ranks gone %v after the kill", time.Since(killed))
}

// exited reports whether process pid has ended (absent, or a zombie).
func exited(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// TestMPIWrongWorldSize: a partition directory made for another world size
// is refused before training, with one line and exit code 2.
func TestMPIWrongWorldSize(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCLI("partition", "--data", writeOGB(t, nil, false), "--parts", "2", "--method", "random", "--out", dir); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := mpirunCmd(ctx, t, 3, "train", "--parts", dir, "--epochs", "1")
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != job.ExitBadInput {
		t.Fatalf("want exit %d, got %v\n%s", job.ExitBadInput, err, b)
	}
	if !strings.Contains(string(b), "job has 3 ranks") {
		t.Errorf("message does not say the world size: %s", b)
	}
	if code, _, stderr := runCLI("train", "--parts", dir, "--ranks", "3", "--epochs", "1"); code != job.ExitBadInput || !strings.Contains(stderr, "3 ranks") {
		t.Errorf("--ranks 3: exit %d, %q", code, stderr)
	}
}

// killLastRank sends SIGKILL to the highest of the launcher's want rank
// processes and returns the ranks' pids and when it killed.
func killLastRank(t *testing.T, cmd *exec.Cmd, want int) ([]string, time.Time) {
	t.Helper()
	ranks := rankPids(cmd.Process.Pid)
	if len(ranks) != want {
		t.Fatalf("found rank pids %v, want %d", ranks, want)
	}
	var pids []string
	for r := range want {
		pids = append(pids, strconv.Itoa(ranks[r]))
	}
	killed := time.Now()
	syscall.Kill(ranks[want-1], syscall.SIGKILL)
	return pids, killed
}

// TestCPUProfile: --cpuprofile writes a profile of the training loop with
// goroutine ranks and under mpirun (rank 0's): a gzip stream, as
// runtime/pprof writes it, that holds samples of the epochs.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "5")
	args := []string{"train", "--data", g, "--epochs", "100", "--hidden", "64", "--quiet"}
	check := func(t *testing.T, path string) {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("no profile: %v", err)
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, err := io.ReadAll(z)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// Function names are stored as strings in the profile.
		if !bytes.Contains(b, []byte("gnn.(*Trainer).Epoch")) {
			t.Errorf("%s (%d bytes) holds no sample of an epoch", path, len(b))
		}
	}
	t.Run("goroutines", func(t *testing.T) {
		p := filepath.Join(dir, "local.prof")
		if code, _, stderr := runCLI(append(args, "--ranks", "2", "--cpuprofile", p)...); code != 0 {
			t.Fatalf("train: %s", stderr)
		}
		check(t, p)
	})
	t.Run("mpirun-np-2", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p := filepath.Join(dir, "mpi.prof")
		if b, err := mpirunCmd(ctx, t, 2, append(args, "--cpuprofile", p)...).CombinedOutput(); err != nil {
			t.Fatalf("mpirun: %v\n%s", err, b)
		}
		check(t, p)
	})
}
