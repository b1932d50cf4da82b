package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runWithin is runCLI that fails the test instead of hanging past d.
func runWithin(t *testing.T, d time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := runCLI(args...)
		done <- result{c, o, e}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(d):
		t.Fatalf("%v did not end within %v", args, d)
	}
	return
}

// TestInputsNotRegular: compare, plot, growth and report refuse, at once
// and with one line, a FIFO, /dev/zero (also through a symbolic link in a
// report --dir tree), a directory, and a metrics line longer than any
// metrics file has.
func TestInputsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.jsonl")
	os.WriteFile(long, []byte(strings.Repeat("1", 17<<20)), 0o644)
	tree := filepath.Join(dir, "results")
	run := filepath.Join(tree, "core", "cora", "random-q4")
	os.MkdirAll(run, 0o755)
	os.Symlink("/dev/zero", filepath.Join(run, "full-s1.jsonl"))
	for _, c := range []struct {
		want string
		args []string
	}{
		{"fifo.jsonl: cannot open (is a FIFO, expected a regular file)", []string{"compare", fifo}},
		{"zero: cannot open (is a character device, expected a regular file)", []string{"compare", "z=/dev/zero"}},
		{"fifo.jsonl: cannot open (is a FIFO", []string{"plot", "--out", filepath.Join(dir, "fig"), "a=" + fifo}},
		{"long.jsonl:1: line longer than", []string{"compare", long}},
		{"growth: " + fifo + ": is a FIFO", []string{"growth", "--out", filepath.Join(dir, "gr"), fifo}},
		{"full-s1.jsonl: cannot open (is a character device", []string{"report", "--dir", tree, "--out", filepath.Join(dir, "r.md")}},
		{`compare: series ".": is a directory`, []string{"compare", "."}},
	} {
		code, _, stderr := runWithin(t, 20*time.Second, c.args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
}
