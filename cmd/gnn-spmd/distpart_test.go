package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/ptscotch"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// communityGraph writes a small generated graph with communities (where a
// partitioner has something to find) and returns its path.
func communityGraph(t *testing.T, dir string) string {
	t.Helper()
	g := filepath.Join(dir, "g.h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "3000", "--classes", "4", "--features", "8",
		"--communities", "8", "--locality", "0.9", "--seed", "2"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	return g
}

// leftovers are the hidden files and directories a partition into dir
// could leave beside it.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+"*"))
	return names
}

// TestMPIPartitionBySlices: under mpirun every process reads its slice and
// writes its part; the directory reads back (ReadShard) exactly as the
// one-process writer's for the same assignment (every node owned once,
// the same halos, send lists, digests and partition id), random by slices
// is PartitionRandom's assignment, and nothing is left beside it.
func TestMPIPartitionBySlices(t *testing.T) {
	dir := t.TempDir()
	g := communityGraph(t, dir)
	ds, err := datafile.Read(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"ptscotch", "random"} {
		for _, q := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s-np-%d", method, q), func(t *testing.T) {
				if method == "ptscotch" && !ptscotch.Available {
					t.Skip("this build has no PT-Scotch (-tags mpich or nompi)")
				}
				out := filepath.Join(t.TempDir(), "parts")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := mpirunCmd(ctx, t, q, "partition", "--data", g, "--parts", strconv.Itoa(q), "--method", method, "--seed", "5", "--out", out)
				b, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", launcher.name, err, b)
				}
				if !strings.Contains(string(b), "each read only its slice") || !strings.Contains(string(b), "peak memory per process") {
					t.Errorf("output:\n%s", b)
				}
				meta, err := partition.ReadPartitionMeta(out)
				if err != nil {
					t.Fatal(err)
				}
				if method == "random" {
					want, _ := partition.PartitionRandom(ds.Graph, q, 5)
					if !reflect.DeepEqual(meta.Parts, want) {
						t.Errorf("random by slices is not PartitionRandom's assignment")
					}
				}
				ref := filepath.Join(t.TempDir(), "ref")
				if err := partition.WritePartition(ref, ds, meta.Split, method, 5, meta.Parts, q); err != nil {
					t.Fatal(err)
				}
				owned := 0
				for p := range q {
					got, gm, err := partition.ReadShard(out, p, q)
					if err != nil {
						t.Fatalf("part %d: %v", p, err)
					}
					want, wm, err := partition.ReadShard(ref, p, q)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gm, wm) {
						t.Errorf("part %d differs from the one-process writer's for the same assignment", p)
					}
					owned += got.NumOwned()
				}
				if owned != ds.Graph.N {
					t.Errorf("%d nodes owned, want each of %d once", owned, ds.Graph.N)
				}
				if l := leftovers(t, out); len(l) > 0 {
					t.Errorf("left beside the output: %v", l)
				}
			})
		}
	}
	// Processes started with different settings stop at once: one line
	// naming the rank and the setting, exit 2.
	t.Run("settings-differ", func(t *testing.T) {
		if _, err := exec.LookPath(launcher.name); err != nil {
			t.Skip(launcher.name + " not on PATH")
		}
		self, _ := os.Executable()
		out := filepath.Join(t.TempDir(), "parts")
		args := func(seed string) []string {
			return []string{self, "partition", "--data", g, "--parts", "2", "--method", "random", "--seed", seed, "--out", out}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		all := append(append(append([]string{launcher.np, "1"}, args("1")...), ":", launcher.np, "1"), args("2")...)
		cmd := exec.CommandContext(ctx, launcher.name, all...)
		cmd.Env = append(append(os.Environ(), "GNN_SPMD_AS_CLI=1"), launcher.env...)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != job.ExitBadInput {
			t.Fatalf("want exit %d, got %v\n%s", job.ExitBadInput, err, b)
		}
		if lines := gnnLines(strings.Split(string(b), "\n")); len(lines) != 1 || !strings.Contains(lines[0], "rank 1: --seed is 2, rank 0 has 1") {
			t.Errorf("want one line naming rank 1 and --seed, got %q", lines)
		}
		if _, err := os.Stat(out); err == nil || len(leftovers(t, out)) > 0 {
			t.Errorf("a refused partition left %s or %v", out, leftovers(t, out))
		}
	})
}

// TestMPIPartitionRankFails: a process that dies mid-partition, or stops,
// ends the job quickly (mpirun names the dead rank; the watchdog the
// stopped one), and no output directory or temporary one is left.
func TestMPIPartitionRankFails(t *testing.T) {
	if !ptscotch.Available {
		t.Skip("this build has no PT-Scotch (-tags mpich or nompi)")
	}
	dir := t.TempDir()
	g := communityGraph(t, dir)
	for _, kill := range []bool{true, false} {
		name := map[bool]string{true: "killed", false: "stopped"}[kill]
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "parts")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			timeout := "2s"
			if kill {
				timeout = "2m" // the job must end because the process died, not by the watchdog
			}
			cmd := mpirunCmd(ctx, t, 3, "partition", "--data", g, "--parts", "3", "--method", "ptscotch", "--out", out, "--comm-timeout", timeout)
			cmd.Env = append(cmd.Env, "GNN_SPMD_TEST_STOP_RANK=2")
			r := start(t, cmd, nil)
			// Rank 2 stops itself after partitioning, before writing.
			var pid int
			deadline := time.Now().Add(time.Minute)
			for pid == 0 || !stoppedProc(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("rank 2 never stopped")
				}
				time.Sleep(20 * time.Millisecond)
				pid = rankPids(cmd.Process.Pid)[2]
			}
			at := time.Now()
			if kill {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			err, _, stderr := r.wait()
			took := time.Since(at)
			all := strings.Join(stderr, "\n")
			t.Logf("%s: %v after %v", launcher.name, err, took)
			if err == nil {
				t.Errorf("the job exited 0")
			}
			if took > 30*time.Second {
				t.Errorf("the job took %v to end, want < 30s", took)
			}
			switch {
			case kill && !strings.Contains(all, "rank 2"):
				t.Errorf("the output does not name the dead rank 2:\n%s", all)
			case !kill:
				lines := gnnLines(stderr)
				if len(lines) < 1 || !strings.Contains(lines[0], "did not complete within the 2s timeout") ||
					!strings.Contains(lines[0], fmt.Sprintf("rank 2 (pid %d, this host) is stopped", pid)) {
					t.Errorf("want a first line naming the stopped rank 2, got %q\n%s", lines, all)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed partition published %s", out)
			}
			// A leader ended by SIGKILL (mpirun's, after its SIGTERM) leaves
			// its temporary directory and lock file: the next partition into
			// the directory removes them.
			if l := leftovers(t, out); len(l) > 0 {
				t.Logf("left beside the output: %v", l)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if b, err := mpirunCmd(ctx, t, 3, "partition", "--data", g, "--parts", "3", "--method", "ptscotch", "--out", out).CombinedOutput(); err != nil {
					t.Fatalf("the next partition: %v\n%s", err, b)
				}
				if l := leftovers(t, out); len(l) > 0 {
					t.Errorf("left beside the output after the next partition: %v", l)
				}
			}
		})
	}
}

// stoppedProc reports whether process pid is stopped (state T).
func stoppedProc(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "T"
}

// TestMPIPTScotchEqualsOneProcess: training on PT-Scotch's parts with full
// communication, from a partition directory and partitioned on the fly,
// equals one-process training up to the order of float sums.
func TestMPIPTScotchEqualsOneProcess(t *testing.T) {
	if !ptscotch.Available {
		t.Skip("this build has no PT-Scotch (-tags mpich or nompi)")
	}
	dir := t.TempDir()
	g := communityGraph(t, dir)
	common := []string{"train", "--data", g, "--normalize-features", "--epochs", "8", "--hidden", "16", "--dropout", "0.2", "--seed", "3", "--quiet"}
	ref := filepath.Join(dir, "ref.jsonl")
	if code, _, stderr := runCLI(append(common, "--metrics", ref)...); code != 0 {
		t.Fatalf("one process: %s", stderr)
	}
	want := readMetrics(t, ref)
	for _, q := range []int{2, 4} {
		t.Run(fmt.Sprintf("%s-np-%d", launcher.name, q), func(t *testing.T) {
			tmp := t.TempDir()
			parts := filepath.Join(tmp, "parts")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if b, err := mpirunCmd(ctx, t, q, "partition", "--data", g, "--parts", strconv.Itoa(q), "--method", "ptscotch",
				"--normalize-features", "--out", parts).CombinedOutput(); err != nil {
				t.Fatalf("partition: %v\n%s", err, b)
			}
			fromDir := filepath.Join(tmp, "dir.jsonl")
			args := append(slices.Clone(common[:1]), "--parts", parts)
			args = append(args, common[4:]...)
			if b, err := mpirunCmd(ctx, t, q, append(args, "--metrics", fromDir)...).CombinedOutput(); err != nil {
				t.Fatalf("train --parts: %v\n%s", err, b)
			}
			sameRun(t, readMetrics(t, fromDir), want)
			onTheFly := filepath.Join(tmp, "fly.jsonl")
			if b, err := mpirunCmd(ctx, t, q, append(common, "--partition", "ptscotch", "--metrics", onTheFly)...).CombinedOutput(); err != nil {
				t.Fatalf("train --partition ptscotch: %v\n%s", err, b)
			}
			sameRun(t, readMetrics(t, onTheFly), want)
		})
	}
}
