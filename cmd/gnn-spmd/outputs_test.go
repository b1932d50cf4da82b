package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// wantRefused runs the command line and requires exit 2 with one line
// holding want, and every file under dirs as it was before: no input
// changed, no output (or temporary file) written.
func wantRefused(t *testing.T, dirs []string, want string, args ...string) {
	t.Helper()
	var before []map[string][32]byte
	for _, d := range dirs {
		before = append(before, digestFiles(t, d))
	}
	code, _, stderr := runCLI(args...)
	if code != job.ExitBadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", args, code, stderr, want)
	}
	for i, d := range dirs {
		if after := digestFiles(t, d); !equalDigests(before[i], after) {
			t.Errorf("%v: files under %s changed or appeared", args, d)
		}
	}
}

// TestOutputIsInput: every subcommand refuses an output that is one of its
// inputs (by name, by hard or symbolic link, inside an input directory) or
// another of its outputs, before writing anything.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	g, ck, parts := filepath.Join(dir, "g.h5"), filepath.Join(dir, "ck.h5"), filepath.Join(dir, "parts")
	for _, args := range [][]string{
		{"gen", "--out", g, "--nodes", "200", "--features", "4", "--seed", "1"},
		{"partition", "--data", g, "--parts", "2", "--out", parts},
		{"train", "--data", g, "--epochs", "1", "--hidden", "4", "--quiet", "--checkpoint", ck},
	} {
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	os.Link(g, filepath.Join(dir, "hard.h5"))
	os.Symlink(g, filepath.Join(dir, "soft.h5"))
	inParts := filepath.Join(parts, "part-0.h5")
	ogb := writeOGB(t, nil, false)
	train := []string{"train", "--epochs", "1", "--hidden", "4", "--quiet"}
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--metrics " + g + " is the input --data " + g, append(train, "--data", g, "--metrics", g)},
		{"--checkpoint " + g + " is the input --data", append(train, "--data", g, "--checkpoint", g)},
		{"--metrics " + ck + " is the input --resume", append(train, "--data", g, "--resume", ck, "--metrics", ck)},
		{"are the same file", append(train, "--data", g, "--checkpoint", filepath.Join(dir, "x"), "--metrics", filepath.Join(dir, "x"))},
		{"are the same file", append(train, "--data", g, "--checkpoint", filepath.Join(dir, "y"), "--keep", "3", "--metrics", filepath.Join(dir, "y.2"))},
		{"is the input --data", append(train, "--data", g, "--metrics", filepath.Join(dir, "hard.h5"))},
		{"is the input --data", append(train, "--data", g, "--cpuprofile", filepath.Join(dir, "soft.h5"))},
		{"is the input --parts", append(train, "--parts", parts, "--metrics", filepath.Join(parts, "meta.h5"))},
		{"--out " + inParts + " is the input --data", []string{"partition", "--data", inParts, "--parts", "2", "--out", parts}},
		{"--out " + filepath.Join(ogb, "raw", "edge.csv") + " is the input --data", []string{"convert", "--data", ogb, "--out", filepath.Join(ogb, "raw", "edge.csv")}},
		{"--out " + ck + " is the input --checkpoint", []string{"export", "--checkpoint", ck, "--out", ck}},
	} {
		wantRefused(t, []string{dir, ogb}, c.want, c.args...)
	}
}

// TestOutputProbed: an output that cannot be written is refused at start,
// before the data are read, with one line; a name as long as a file name
// may be works, temporary files and older versions included.
func TestOutputProbed(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	train := []string{"train", "--data", g, "--epochs", "2", "--hidden", "4", "--quiet"}
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--checkpoint " + filepath.Join(dir, "no", "ck.h5") + ": the directory " + filepath.Join(dir, "no") + " does not exist", append(train, "--checkpoint", filepath.Join(dir, "no", "ck.h5"))},
		{"--checkpoint " + dir + ": is a directory", append(train, "--checkpoint", dir)},
		{"--metrics /proc/m.jsonl: cannot create files in /proc", append(train, "--metrics", "/proc/m.jsonl")},
		{"--checkpoint " + filepath.Join(dir, strings.Repeat("c", 254)+".1") + ": the file name has 256 bytes", append(train, "--checkpoint", filepath.Join(dir, strings.Repeat("c", 254)), "--keep", "2")},
		{"--out " + g + ": is a file, expected a directory", []string{"partition", "--data", g, "--parts", "2", "--out", g}},
		{"--out " + filepath.Join(dir, "no", "g.h5") + ": the directory", []string{"gen", "--out", filepath.Join(dir, "no", "g.h5")}},
	} {
		wantRefused(t, []string{dir}, c.want, c.args...)
	}
	long := filepath.Join(dir, strings.Repeat("c", 250)+".h5")
	if code, _, stderr := runCLI(append(train, "--checkpoint", long, "--checkpoint-every", "1", "--keep", "2")...); code != 0 {
		t.Fatalf("a 253-byte checkpoint name: %s", stderr)
	}
	if verified(t, long) != 2 || verified(t, long+".1") != 1 {
		t.Errorf("the checkpoints of a long name do not hold epochs 2 and 1")
	}
}

// TestSizesRefused: sizes beyond the graph or the machine are refused
// before anything is allocated or written: more ranks or parts than nodes,
// a model wider than memory, a class id beyond the node count.
func TestSizesRefused(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3") // 2000 nodes
	wantRefused(t, []string{dir}, "train: 100000 ranks for 2000 nodes", "train", "--data", g, "--ranks", "100000", "--epochs", "1")
	wantRefused(t, []string{dir}, "partition: 5000 parts for 2000 nodes", "partition", "--data", g, "--parts", "5000", "--out", filepath.Join(dir, "p"))
	wantRefused(t, []string{dir}, "train: the model and halo buffers need an estimated", "train", "--data", g, "--hidden", "1000000000", "--epochs", "1",
		"--metrics", filepath.Join(dir, "m.jsonl"))
	ogb := writeOGB(t, map[string]string{"raw/node-label.csv": "0\n1\n16777215\n1\n"}, false)
	wantRefused(t, []string{dir, ogb}, "node-label.csv:3: label: is 16777215, expected -1 (unlabelled) or a class id in [0, 1024)", "train", "--data", ogb, "--epochs", "1",
		"--metrics", filepath.Join(dir, "m.jsonl"))
}

// TestCheckpointLocked: a second run naming the checkpoint (or the
// metrics file) of a run in progress is refused, naming the holder; the
// first run is undisturbed.
func TestCheckpointLocked(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck, m := filepath.Join(dir, "ck.h5"), filepath.Join(dir, "m.jsonl")
	first := startWriting(t, g, "--checkpoint", ck, "--metrics", m)
	pid := first.cmd.Process.Pid
	for _, args := range [][]string{
		{"train", "--data", g, "--epochs", "1", "--checkpoint", ck},
		{"train", "--data", g, "--epochs", "1", "--metrics", m},
	} {
		code, _, stderr := runCLI(args...)
		want := "another process (pid " + strconv.Itoa(pid) + ") is writing it"
		if code != job.ExitBadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", args, code, stderr, want)
		}
	}
	first.cmd.Process.Signal(syscall.SIGINT)
	if err, _, stderr := first.wait(); exitCodeOf(err) != job.ExitSIGINT {
		t.Errorf("the first run: %v, %q", err, stderr)
	}
	if verified(t, ck) < 1 {
		t.Errorf("the first run's checkpoint does not verify")
	}
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "1", "--hidden", "8", "--quiet", "--checkpoint", filepath.Join(dir, "ck2.h5"), "--metrics", m); code != 0 {
		t.Errorf("after the first run ended: %s", stderr)
	}
}

// TestCheckpointDiskFull fills a small file system under a run that
// checkpoints into it: the failed write says no space is left, in one
// line, and every older checkpoint is still there and verifies.
func TestCheckpointDiskFull(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	fs := smallFS(t, dir, "4m")
	ck := filepath.Join(fs, "ck.h5")
	train := []string{"train", "--data", g, "--hidden", "64", "--quiet", "--checkpoint", ck, "--checkpoint-every", "1", "--keep", "3"}
	if code, _, stderr := runCLI(append(train, "--epochs", "3")...); code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	versions := []string{ck, ck + ".1", ck + ".2"}
	before := map[string][32]byte{}
	for _, v := range versions {
		before[v] = digestFiles(t, fs)[v]
	}
	// Fill what is left.
	fillFS(fs, 64<<10)
	code, _, stderr := runCLI(append(train, "--epochs", "3")...)
	if code != job.ExitFailure || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("on a full disk: exit %d, %q; want exit 1 and one line saying no space is left", code, stderr)
	}
	now := digestFiles(t, fs)
	for i, v := range versions {
		if now[v] != before[v] {
			t.Errorf("%s changed", v)
		}
		if e := verified(t, v); e != 3-i {
			t.Errorf("%s holds epoch %d, want %d", v, e, 3-i)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(fs, ".*.tmp")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// TestPartitionStaleTemps: the temporary files a killed partition left in
// its output directory are removed by the next partition into it.
func TestPartitionStaleTemps(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	out := filepath.Join(dir, "parts")
	os.Mkdir(out, 0o755)
	dead := deadPid(t)
	var stale []string
	for _, n := range []string{"part-0.h5", "part-1.h5"} {
		p := outfile.TempName(filepath.Join(out, n), dead)
		os.WriteFile(p, make([]byte, 1<<20), 0o644)
		stale = append(stale, p)
	}
	if code, _, stderr := runCLI("partition", "--data", g, "--parts", "3", "--out", out); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	for _, p := range stale {
		if exists(p) {
			t.Errorf("%s left", p)
		}
	}
}

// smallFS mounts a tmpfs of the given size under dir, unmounted when the
// test ends, and skips the test where it cannot (mounting needs root).
func smallFS(t *testing.T, dir, size string) string {
	t.Helper()
	fs := filepath.Join(dir, "fs")
	os.Mkdir(fs, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", fs).CombinedOutput(); err != nil {
		t.Skipf("a small tmpfs is needed to fill a file system (mount as root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", fs).Run() })
	return fs
}

// fillFS writes into fs, chunk bytes at a time, until no chunk fits.
func fillFS(fs string, chunk int) {
	fill, _ := os.Create(filepath.Join(fs, "fill"))
	buf := make([]byte, chunk)
	for {
		if _, err := fill.Write(buf); err != nil {
			break
		}
	}
	fill.Close()
}

// startWriting starts a run on g that trains until stopped (at most a
// minute), with its outputs given by args, and returns once it has
// printed an epoch.
func startWriting(t *testing.T, g string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	watch, seen := lineSeen("epoch ")
	r := start(t, cliCmd(ctx, t, append([]string{"train", "--data", g, "--epochs", "100000", "--hidden", "8", "--progress", "lines"}, args...)...), watch)
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the first run printed no epoch")
	}
	return r
}
