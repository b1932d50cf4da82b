package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkFigure asserts that path is a non-empty PNG or SVG file.
func checkFigure(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		t.Error(err)
	case strings.HasSuffix(path, ".png") && !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		t.Errorf("%s: not a PNG (%d bytes)", path, len(b))
	case strings.HasSuffix(path, ".svg") && !bytes.Contains(b, []byte("<svg")):
		t.Errorf("%s: not an SVG (%d bytes)", path, len(b))
	}
}

// TestPlotWritesFigures plots a two-seed series, a single-file series and
// a run still in progress, into a directory that does not exist yet.
func TestPlotWritesFigures(t *testing.T) {
	dir := t.TempDir()
	a0 := writeRunFile(t, filepath.Join(dir, "a0.jsonl"), []ep{{0.5, 0.5, 100, 8}, {0.6, 0.6, 150, 4}, {0.7, 0.7, 180, 2}}, true)
	a1 := writeRunFile(t, filepath.Join(dir, "a1.jsonl"), []ep{{0.4, 0.5, 120, 8}, {0.6, 0.65, 160, 4}, {0.8, 0.75, 190, 2}}, true)
	full := writeRunFile(t, filepath.Join(dir, "full.jsonl"), []ep{{0.5, 0.5, 1000, 1}, {0.7, 0.8, 2000, 1}}, false)
	nocomm := writeRunFile(t, filepath.Join(dir, "nocomm.jsonl"), []ep{{0.5, 0.4, 0, 1}, {0.6, 0.5, 0, 1}}, true)
	out := filepath.Join(dir, "figs", "sub", "p")
	code, stdout, stderr := runCLI("plot", "--out", out, "--title", "toy", "varco="+a0+","+a1, full, nocomm)
	if code != 0 {
		t.Fatalf("plot: exit %d: %s", code, stderr)
	}
	for _, kind := range []string{"acc-bytes", "acc-epoch", "rate-epoch"} {
		checkFigure(t, out+"-"+kind+".png")
		checkFigure(t, out+"-"+kind+".svg")
		if !strings.Contains(stdout, out+"-"+kind) {
			t.Errorf("stdout does not name %s: %q", kind, stdout)
		}
	}
	svg, _ := os.ReadFile(out + "-rate-epoch.svg")
	if !bytes.Contains(svg, []byte("varco layer 0")) || bytes.Contains(svg, []byte("varco layer 1")) {
		t.Errorf("rate legend should show varco's compressed layer 0 only")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "figs", "sub", "*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestPlotBadInput: a malformed line, a missing file, a file without
// epochs and a bad series argument each give one line and exit code 2.
func TestPlotBadInput(t *testing.T) {
	dir := t.TempDir()
	good := `{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}` + "\n"
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(good+"{\"epoch\":1,\"val_acc\":oops}\n"+good), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte(`{"summary":true}`+"\n"), 0o644)
	out := filepath.Join(dir, "out", "p")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"x=" + bad}, "bad.jsonl:2"},
		{[]string{filepath.Join(dir, "absent.jsonl")}, "absent.jsonl"},
		{[]string{empty}, "empty.jsonl"},
		{[]string{"=" + bad}, "series"},
		{nil, "SERIES"},
	} {
		code, _, stderr := runCLI(append([]string{"plot", "--out", out}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want exit %d and one line naming %q", c.args, code, stderr, 2, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Errorf("bad input left an output directory")
	}
}
