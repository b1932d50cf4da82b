package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// TestMPMDMismatch launches 4 ranks with Open MPI's MPMD syntax, ranks 2
// and 3 with one thing different from ranks 0 and 1: a flag, the
// partition directory, the dataset. Every case must stop the job within
// 10 s with exit 2 and one line naming what differs, its two values and
// the ranks, with no metrics file written and every input as it was.
func TestMPMDMismatch(t *testing.T) {
	dir := t.TempDir()
	d, d2 := filepath.Join(dir, "d.h5"), filepath.Join(dir, "d2.h5")
	p1, p2 := filepath.Join(dir, "p1"), filepath.Join(dir, "p2")
	for _, args := range [][]string{
		{"gen", "--out", d, "--nodes", "300", "--features", "8", "--seed", "1"},
		{"gen", "--out", d2, "--nodes", "300", "--features", "8", "--seed", "2"},
		{"partition", "--data", d, "--parts", "4", "--method", "metis", "--out", p1},
		{"partition", "--data", d, "--parts", "4", "--method", "random", "--out", p2},
	} {
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%s: %s", args[0], stderr)
		}
	}
	inputs := digestFiles(t, dir)
	base := []string{"train", "--epochs", "5", "--hidden", "8", "--quiet"}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		a, b   []string // the data and extra flags of ranks 0-1 and 2-3
		expect string
	}{
		{"seed", []string{"--data", d}, []string{"--data", d, "--seed", "2"}, "rank 2: --seed is 2, rank 0 has 0"},
		{"lr", []string{"--data", d}, []string{"--data", d, "--lr", "0.02"}, "rank 2: --lr is 0.02, rank 0 has 0.01"},
		{"model", []string{"--data", d}, []string{"--data", d, "--model", "gcn"}, "rank 2: --model is gcn, rank 0 has sage"},
		{"epochs", []string{"--data", d}, []string{"--data", d, "--epochs", "7"}, "rank 2: --epochs is 7, rank 0 has 5"},
		{"hidden", []string{"--data", d}, []string{"--data", d, "--hidden", "16"}, "rank 2: --hidden is 16, rank 0 has 8"},
		{"codec", []string{"--data", d}, []string{"--data", d, "--compress", "recommended"}, "rank 2: --codec is quant, rank 0 has none"},
		{"parts", []string{"--parts", p1}, []string{"--parts", p2}, "rank 2: the partition method (--partition or --parts) is random, rank 0 has metis"},
		// Random partitions of a .h5 file are made by slices, whose ranks
		// compare their input before reading it.
		{"data", []string{"--data", d}, []string{"--data", d2}, "rank 2: the input file (--data: its size and the digest of its first and last MiB) is "},
		{"missing data", []string{"--data", d}, []string{"--data", filepath.Join(dir, "none.h5")}, "rank 2: " + filepath.Join(dir, "none.h5") + ": "},
	} {
		t.Run(c.name, func(t *testing.T) {
			metrics := filepath.Join(t.TempDir(), "m.jsonl")
			args := append(append(append([]string{}, base...), c.a...), "--metrics", metrics, ":", "-np", "2", self)
			args = append(append(append(args, base...), c.b...), "--metrics", metrics)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			out, err := mpirunCmd(ctx, t, 2, args...).CombinedOutput()
			took := time.Since(start)
			lines := gnnLines(strings.Split(string(out), "\n"))
			t.Logf("%v: %q", took.Round(time.Millisecond), lines)
			if code := exitCodeOf(err); code != job.ExitBadInput {
				t.Errorf("exit %d, want %d:\n%s", code, job.ExitBadInput, out)
			}
			if took > 10*time.Second {
				t.Errorf("took %v, want under 10 s", took)
			}
			if len(lines) != 1 || !strings.Contains(lines[0], c.expect) || !strings.Contains(lines[0], "(rank 3 failed too)") {
				t.Errorf("want one line with %q and rank 3, got %q", c.expect, lines)
			}
			if exists(metrics) {
				t.Errorf("a metrics file was written")
			}
			if now := digestFiles(t, dir); !equalDigests(now, inputs) {
				t.Errorf("the inputs changed")
			}
		})
	}
}

// digestFiles is the SHA-256 of every regular file under dir, by path.
func digestFiles(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalDigests(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
