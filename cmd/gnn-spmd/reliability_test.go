package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// specialFiles makes, in a directory of their own, a FIFO, a character
// device like /dev/null (as root), a socket and a directory, and returns
// them by kind.
func specialFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{"FIFO": filepath.Join(dir, "fifo"), "directory": filepath.Join(dir, "dir")}
	if err := syscall.Mkfifo(out["FIFO"], 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(out["directory"], 0o755)
	dev := filepath.Join(dir, "null")
	if syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3) == nil {
		out["character device"] = dev
	}
	sock := filepath.Join(dir, "sock")
	if l, err := net.Listen("unix", sock); err == nil {
		t.Cleanup(func() { l.Close() })
		out["socket"] = sock
	}
	return out
}

// modes are the kinds of the files in special, to check that none was
// replaced.
func modes(special map[string]string) map[string]os.FileMode {
	m := map[string]os.FileMode{}
	for _, p := range special {
		if st, err := os.Lstat(p); err == nil {
			m[p] = st.Mode().Type()
		}
	}
	return m
}

// TestOutputNotRegularRefused: every writer refuses, with one line and
// exit 2 before any work, an output that is a FIFO, a device, a socket or
// a directory, and leaves it as it was.
func TestOutputNotRegularRefused(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck := filepath.Join(dir, "ck.h5")
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "1", "--hidden", "4", "--quiet", "--checkpoint", ck); code != 0 {
		t.Fatal(stderr)
	}
	ogb := writeOGB(t, nil, false)
	special := specialFiles(t)
	before := modes(special)
	train := []string{"train", "--data", g, "--epochs", "1", "--hidden", "4", "--quiet"}
	for kind, x := range special {
		want := "is a " + kind
		if kind == "directory" {
			want = "is a directory"
		}
		for _, args := range [][]string{
			{"gen", "--out", x, "--nodes", "100", "--features", "4"},
			{"convert", "--data", ogb, "--out", x},
			{"export", "--checkpoint", ck, "--out", x},
			append(train, "--checkpoint", x),
			append(train, "--metrics", x),
			append(train, "--cpuprofile", x),
			append(train, "--predict", x),
			{"predict", "--checkpoint", ck, "--data", g, "--out", x},
		} {
			wantRefused(t, []string{dir, ogb}, want, args...)
		}
		if kind != "directory" {
			wantRefused(t, []string{dir}, "is a "+kind+", expected a directory", "partition", "--data", g, "--parts", "2", "--out", x)
		}
	}
	if after := modes(special); len(after) != len(before) {
		t.Errorf("special files gone: %v, was %v", after, before)
	} else {
		for p, m := range before {
			if after[p] != m {
				t.Errorf("%s is now %v, was %v", p, after[p], m)
			}
		}
	}
}

// TestOutputLinkReplaced: an output that is a symbolic link is replaced by
// the file, never written through: the file it pointed at is untouched.
func TestOutputLinkReplaced(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	var links, victims []string
	for _, n := range []string{"m.jsonl", "prof", "ck.h5"} {
		l, victim := filepath.Join(dir, n), filepath.Join(dir, "victim-"+n)
		os.WriteFile(victim, []byte("precious\n"), 0o644)
		os.Symlink(victim, l)
		links, victims = append(links, l), append(victims, victim)
	}
	code, _, stderr := runCLI("train", "--data", g, "--epochs", "2", "--hidden", "4", "--quiet",
		"--metrics", links[0], "--cpuprofile", links[1], "--checkpoint", links[2])
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, v := range victims {
		if b, _ := os.ReadFile(v); string(b) != "precious\n" {
			t.Errorf("the link's target %s was written: %q", v, b)
		}
	}
	for _, l := range links {
		if st, err := os.Lstat(l); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
			t.Errorf("%s: not replaced by a regular file: %v", l, err)
		}
	}
}

// TestMetricsLockedByIdentity: while a run writes its metrics file and
// checkpoint, a second run naming either through a hard link or a
// symbolic link is refused with one line.
func TestMetricsLockedByIdentity(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck, m := filepath.Join(dir, "ck.h5"), filepath.Join(dir, "m.jsonl")
	first := startWriting(t, g, "--checkpoint", ck, "--checkpoint-every", "1", "--metrics", m)
	// Both files published (the metrics file at its first line, the
	// checkpoint after the first epoch).
	for begin := time.Now(); !exists(m) || !exists(ck); time.Sleep(20 * time.Millisecond) {
		if time.Since(begin) > 30*time.Second {
			t.Fatal("the first run published no metrics file or checkpoint")
		}
	}
	// Links to what the names hold now (the published files).
	os.Link(m, filepath.Join(dir, "hard.jsonl"))
	os.Symlink(m, filepath.Join(dir, "soft.jsonl"))
	os.Link(ck, filepath.Join(dir, "hard.h5"))
	os.Symlink(ck, filepath.Join(dir, "soft.h5"))
	for _, args := range [][]string{
		{"--metrics", filepath.Join(dir, "hard.jsonl")},
		{"--metrics", filepath.Join(dir, "soft.jsonl")},
		{"--checkpoint", filepath.Join(dir, "soft.h5")},
	} {
		code, _, stderr := runCLI(append([]string{"train", "--data", g, "--epochs", "1", "--hidden", "4"}, args...)...)
		if code != job.ExitBadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "another run is writing the same file") {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line saying another run writes it", args, code, stderr)
		}
	}
	first.cmd.Process.Signal(syscall.SIGINT)
	if err, _, stderr := first.wait(); exitCodeOf(err) != job.ExitSIGINT {
		t.Errorf("the first run: %v, %q", err, stderr)
	}
	checkMetricsLines(t, m)
}

// checkMetricsLines requires every line of a metrics file to be whole
// JSON.
func checkMetricsLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s ends in a torn line: %q", path, b[max(0, len(b)-40):])
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("%s:%d: not JSON: %.60q", path, i+1, l)
		}
	}
	return len(lines)
}

// TestMetricsPublished: on a full file system a rerun leaves the previous
// complete metrics file as it was, and a run that fills the disk midway
// leaves only whole lines.
func TestMetricsPublished(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	fs := smallFS(t, dir, "1m")
	m := filepath.Join(fs, "m.jsonl")
	train := []string{"train", "--data", g, "--hidden", "4", "--quiet", "--metrics", m}
	if code, _, stderr := runCLI(append(train, "--epochs", "2")...); code != 0 {
		t.Fatal(stderr)
	}
	prev, _ := os.ReadFile(m)
	spare := filepath.Join(fs, "spare")
	os.WriteFile(spare, make([]byte, 4096), 0o644)
	fillFS(fs, 4096)
	code, _, stderr := runCLI(append(train, "--epochs", "50")...)
	if code != job.ExitFailure || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("on a full disk: exit %d, %q; want exit 1 and one line saying no space is left", code, stderr)
	}
	if now, _ := os.ReadFile(m); string(now) != string(prev) {
		t.Errorf("the previous metrics file changed on a failed rerun:\n%s", now)
	}
	if tmp, _ := filepath.Glob(filepath.Join(fs, ".*.tmp")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	// One page free: the first lines fit, a later one does not.
	os.Remove(m)
	os.Remove(spare)
	code, _, stderr = runCLI(append(train, "--epochs", "50")...)
	if code != job.ExitFailure || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("filling the disk: exit %d, %q; want exit 1 and no space left", code, stderr)
	}
	if n := checkMetricsLines(t, m); n < 2 {
		t.Errorf("%d lines written before the disk filled, want some", n)
	}
}

// TestLongLineRefused: a text file holding one endless line (a small gzip
// file of gigabytes of digits, as raw/num-node-list.csv.gz) is refused at
// the first block past what its fields can take, naming the file and the
// line, instead of growing a buffer without bound.
func TestLongLineRefused(t *testing.T) {
	digits := strings.Repeat("7", 4<<20)
	for _, c := range []struct{ file, want string }{
		{"raw/num-node-list.csv.gz", "raw/num-node-list.csv.gz:1: line longer than 512 bytes"},
		{"raw/edge.csv", "raw/edge.csv:3: line longer than 768 bytes"},
	} {
		content := digits
		if c.file == "raw/edge.csv" {
			content = "0,1\n1,0\n" + digits
		}
		over := map[string]string{c.file: content}
		if strings.HasSuffix(c.file, ".gz") {
			over[strings.TrimSuffix(c.file, ".gz")] = "<absent>"
		}
		ogb := writeOGB(t, over, false)
		out := filepath.Join(t.TempDir(), "g.h5")
		wantRefused(t, []string{ogb}, c.want, "convert", "--data", ogb, "--out", out)
	}
}

// TestHeaderBlamedOnItsLine: a header or a blank line in an edge, label or
// feature file is named on its own line, not as "more than N lines" at the
// end of the file.
func TestHeaderBlamedOnItsLine(t *testing.T) {
	for _, c := range []struct{ file, content, want string }{
		{"raw/edge.csv", "src,dst\n0,1\n1,0\n2,3\n3,2\n", "raw/edge.csv:1: src: is \"src\""},
		{"raw/edge.csv", "0,1\n\n1,0\n2,3\n3,2\n", "raw/edge.csv:2: empty line"},
		{"raw/node-label.csv", "label\n0\n1\n0\n1\n", "raw/node-label.csv:1: label: is \"label\""},
		{"raw/node-feat.csv", "0.5,1\n1,0.25\n\n-1,2\n3,4\n", "raw/node-feat.csv:3: empty line"},
	} {
		ogb := writeOGB(t, map[string]string{c.file: c.content}, false)
		out := filepath.Join(t.TempDir(), "g.h5")
		wantRefused(t, []string{ogb}, c.want, "convert", "--data", ogb, "--out", out)
		wantRefused(t, []string{ogb}, c.want, "train", "--data", ogb, "--epochs", "1")
	}
}

// TestCannotOpenSaysWhy: a dataset this process may not read is refused as
// unreadable (permission denied), not as "not an HDF5 file"; a missing one
// or one whose name is too long says so. Root reads every file, so the
// unreadable case runs the CLI as nobody.
func TestCannotOpenSaysWhy(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	long := filepath.Join(dir, strings.Repeat("x", 300)+".h5")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"cannot open (file name too long)", []string{"inspect", long}},
		{"cannot open (no such file or directory)", []string{"inspect", filepath.Join(dir, "none.h5")}},
		{"cannot open (file name too long)", []string{"train", "--data", long, "--epochs", "1"}},
	} {
		wantRefused(t, []string{dir}, c.want, c.args...)
	}
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	// A directory nobody may enter, holding a copy of this binary and a
	// dataset only root may read.
	pub := t.TempDir()
	for d := pub; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	self, _ := os.Executable()
	bin := filepath.Join(pub, "gnn-spmd")
	copyFile(t, self, bin)
	os.Chmod(bin, 0o755)
	secret := filepath.Join(pub, "secret.h5")
	copyFile(t, g, secret)
	os.Chmod(secret, 0o600)
	for _, args := range [][]string{{"inspect", secret}, {"train", "--data", secret, "--epochs", "1"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GNN_SPMD_AS_CLI=1")
		cmd.Dir = pub
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if exitCodeOf(err) != job.ExitBadInput || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "secret.h5: cannot open: permission denied") {
			t.Errorf("%v as nobody: exit %d, %q; want exit 2 and one line saying permission denied", args, exitCodeOf(err), out)
		}
	}
}

// TestBoundsFast: --keep and --parts far beyond any use are refused (or
// checked) in time linear in them: at once, not after minutes of pairwise
// checks.
func TestBoundsFast(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--keep: got 1000000, expected 1 to 1000", []string{"train", "--data", g, "--epochs", "1", "--checkpoint", filepath.Join(dir, "ck.h5"), "--keep", "1000000"}},
		{"partition: 5000000 parts for 2000 nodes", []string{"partition", "--data", g, "--parts", "5000000", "--out", filepath.Join(dir, "p")}},
	} {
		begin := time.Now()
		wantRefused(t, []string{dir}, c.want, c.args...)
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("%v: refused after %v, want at once", c.args, took)
		}
	}
	// The most versions allowed: checked and written at once.
	begin := time.Now()
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "2", "--hidden", "4", "--quiet", "--checkpoint", filepath.Join(dir, "ck.h5"),
		"--checkpoint-every", "1", "--keep", "1000"); code != 0 {
		t.Fatal(stderr)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("--keep 1000 took %v", took)
	}
}

// TestErrorsNameTheirCommand: an error names the command that failed and
// gives advice that fits the path.
func TestErrorsNameTheirCommand(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	wantRefused(t, []string{dir}, `partition: --split "nosuch": `+g+" has no such split", "partition", "--data", g, "--parts", "2", "--split", "nosuch", "--out", filepath.Join(dir, "p"))
	ogb := writeOGB(t, nil, false)
	code, stdout, stderr := runCLI("inspect", ogb)
	if code != 0 || strings.Contains(stderr, "partition --out") || !strings.Contains(stdout, "4 nodes") {
		t.Errorf("inspect of a dataset directory: exit %d, %q %q; want its summary", code, stdout, stderr)
	}
}

// TestGenEstimatesFirst: a graph beyond the machine's memory is refused
// with one line before it is drawn (it was killed by the kernel, or died
// in the runtime, while drawing).
func TestGenEstimatesFirst(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--nodes", "20000", "--features", "100000000"},
		{"--nodes", "2147483647"},
	} {
		begin := time.Now()
		wantRefused(t, []string{dir}, "of memory but", append([]string{"gen", "--out", filepath.Join(dir, "g.h5")}, args...)...)
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("%v: refused after %v", args, took)
		}
	}
}

// TestCheckpointFitsSmallDisk: a checkpoint that fits the file system is
// written: the free-space check estimates its size closely (a small
// model's checkpoint of 40 KB was estimated at 69 KB and refused on a
// 64 KiB file system).
func TestCheckpointFitsSmallDisk(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	fs := smallFS(t, dir, "64k")
	ck := filepath.Join(fs, "ck.h5")
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "2", "--hidden", "4", "--quiet", "--checkpoint", ck); code != 0 {
		t.Fatalf("a checkpoint that fits was refused: %s", stderr)
	}
	st, _ := os.Stat(ck)
	t.Logf("checkpoint of %d bytes on a 64 KiB file system", st.Size())
	if verified(t, ck) != 2 {
		t.Errorf("the checkpoint does not hold epoch 2")
	}
}

// TestResumeFinishedNewCheckpoint: resuming a finished run with a new
// --checkpoint writes that checkpoint.
func TestResumeFinishedNewCheckpoint(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	a, b := filepath.Join(dir, "a.h5"), filepath.Join(dir, "b.h5")
	train := []string{"train", "--data", g, "--epochs", "2", "--hidden", "4", "--quiet"}
	if code, _, stderr := runCLI(append(train, "--checkpoint", a)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCLI(append(train, "--resume", a, "--checkpoint", b)...); code != 0 {
		t.Fatal(stderr)
	}
	if verified(t, b) != 2 {
		t.Errorf("%s does not hold epoch 2", b)
	}
}

// TestBuildFlagsNeedText: --add-inverse and --self-loops, which complete
// an OGB edge list while it loads, are refused for a .h5 dataset or a
// partition, whose edges are final (they were ignored without a word).
func TestBuildFlagsNeedText(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	parts := filepath.Join(dir, "parts")
	if code, _, stderr := runCLI("partition", "--data", g, "--parts", "2", "--out", parts); code != 0 {
		t.Fatal(stderr)
	}
	for _, flag := range []string{"--add-inverse", "--self-loops"} {
		wantRefused(t, []string{dir}, "train: "+flag+" applies to an OGB-layout directory", "train", "--data", g, "--epochs", "1", flag)
		wantRefused(t, []string{dir}, "train: "+flag+" applies to an OGB-layout directory", "train", "--parts", parts, "--epochs", "1", flag)
		wantRefused(t, []string{dir}, "partition: --add-inverse and --self-loops apply to an OGB-layout directory", "partition", "--data", g, "--parts", "2", "--out", filepath.Join(dir, "p2"), flag)
	}
	ogb := writeOGB(t, nil, false)
	if code, _, stderr := runCLI("train", "--data", ogb, "--epochs", "1", "--hidden", "4", "--quiet", "--add-inverse", "--self-loops"); code != 0 {
		t.Errorf("an OGB directory with both flags: %s", stderr)
	}
}

// TestMETISEmptyPartsWarned: METIS leaving parts without nodes (a tiny
// graph in as many parts as nodes) is said, naming the parts.
func TestMETISEmptyPartsWarned(t *testing.T) {
	ogb := writeOGB(t, nil, false)
	for _, q := range []string{"3", "4"} {
		code, _, stderr := runCLI("partition", "--data", ogb, "--parts", q, "--method", "metis", "--out", filepath.Join(t.TempDir(), "p"))
		t.Logf("%s parts: exit %d, %q", q, code, stderr)
		if code != 0 {
			t.Fatal(stderr)
		}
		if q == "4" && !strings.Contains(stderr, "warning: partition: metis left parts 1, 2 of 4 without nodes") {
			t.Errorf("no warning of empty parts: %q", stderr)
		}
	}
}

// TestSignalRemovesTemps: SIGTERM, SIGINT or SIGHUP while gen or convert
// writes its output ends the process with 128 + the signal, and removes
// the temporary file: nothing is left behind.
func TestSignalRemovesTemps(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		dir := t.TempDir()
		out := filepath.Join(dir, "g.h5")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := cliCmd(ctx, t, "gen", "--out", out, "--nodes", "400000", "--features", "64", "--seed", "1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Signal once the temporary file is there.
		var tmp []string
		for begin := time.Now(); len(tmp) == 0 && time.Since(begin) < 50*time.Second; time.Sleep(time.Millisecond) {
			tmp, _ = filepath.Glob(filepath.Join(dir, ".*.tmp"))
		}
		if len(tmp) == 0 {
			cancel()
			cmd.Wait()
			t.Fatalf("%v: no temporary file appeared", sig)
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		cancel()
		left, _ := os.ReadDir(dir)
		switch code := exitCodeOf(err); {
		case code == 0:
			t.Logf("%v came after the write: the output is complete", sig)
		case code != 128+int(sig):
			t.Errorf("%v: exit %d, want %d", sig, code, 128+int(sig))
		case len(left) != 0:
			t.Errorf("%v: left %v", sig, left)
		}
	}
}

// TestSecondSignalRemovesTemps: a second SIGTERM or SIGINT to train, sent
// while the checkpoint that the first one asked for is being written,
// ends the process at once with 128 + the signal and removes the
// checkpoint's temporary file.
func TestSecondSignalRemovesTemps(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "5")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			out := filepath.Join(dir, sig.String())
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A checkpoint of about 50 MB (hidden 1024: the weights and
			// Adam's two moments) takes long enough to write to be caught.
			cmd := cliCmd(ctx, t, "train", "--data", g, "--epochs", "100000", "--hidden", "1024", "--progress", "lines",
				"--checkpoint", filepath.Join(out, "ck.h5"))
			watch, seen := lineSeen("epoch    1")
			r := start(t, cmd, watch)
			select {
			case <-seen:
			case <-time.After(40 * time.Second):
				cmd.Process.Kill()
				_, o, e := r.wait()
				t.Fatalf("no epoch 1 within 40 s:\n%s\n%s", strings.Join(o, "\n"), strings.Join(e, "\n"))
			}
			cmd.Process.Signal(sig)
			var tmp []string
			for begin := time.Now(); len(tmp) == 0 && time.Since(begin) < 30*time.Second; time.Sleep(time.Millisecond) {
				tmp, _ = filepath.Glob(filepath.Join(out, ".*.tmp"))
			}
			if len(tmp) == 0 {
				cmd.Process.Kill()
				r.wait()
				t.Fatalf("no temporary checkpoint file appeared after the first %v", sig)
			}
			cmd.Process.Signal(sig)
			err, _, errOut := r.wait()
			left, _ := filepath.Glob(filepath.Join(out, ".*.tmp"))
			if code := exitCodeOf(err); code != 128+int(sig) {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, 128+int(sig), strings.Join(errOut, "\n"))
			}
			if len(left) != 0 {
				t.Errorf("temporary files left after the second %v: %v", sig, left)
			}
		})
	}
}

// TestPathNewlineOneLine: a path holding a newline (or a carriage return,
// or a terminal escape) is printed escaped, so each error stays one line.
func TestPathNewlineOneLine(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "6")
	odd := filepath.Join(dir, "a\nb")
	for _, args := range [][]string{
		{"train", "--data", "a\nb"},
		{"train", "--data", odd + "\r\x1b[2K.h5"},
		{"inspect", odd},
		{"partition", "--data", odd, "--parts", "2", "--out", filepath.Join(dir, "p")},
		{"train", "--data", g, "--epochs", "1", "--checkpoint", filepath.Join(odd, "ck.h5")},
		{"train", "--data", g, "--epochs", "1", "--metrics", filepath.Join(odd, "m.jsonl")},
		{"gen", "--out", filepath.Join(odd, "g.h5"), "--nodes", "100"},
	} {
		code, _, stderr := runCLI(args...)
		if code == 0 {
			t.Errorf("%q: exit 0", args)
			continue
		}
		if n := strings.Count(stderr, "\n"); n != 1 || strings.ContainsAny(stderr[:len(stderr)-1], "\r\x1b") ||
			!strings.Contains(stderr, `a\nb`) {
			t.Errorf("%q: want one line naming the path as a\\nb, got %d lines: %q", args, n, stderr)
		}
	}
}
