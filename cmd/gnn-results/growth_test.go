package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGrowthWritesFigure(t *testing.T) {
	dir := t.TempDir()
	sweep := filepath.Join(dir, "sweep.tsv")
	os.WriteFile(sweep, []byte("# axis value seconds MiB\nnodes 100000 1.4 700\nnodes 1000000 16 5900\nwidth 64 4 3000\nwidth 256 16 5900\n\nranks 1 3 1200\nranks 2 2.6 1100\n"), 0o644)
	out := filepath.Join(dir, "figs", "growth")
	code, stdout, stderr := runCLI("growth", "--out", out, sweep)
	if code != 0 {
		t.Fatalf("growth: exit %d: %s", code, stderr)
	}
	checkFigure(t, out+".png")
	checkFigure(t, out+".svg")
	svg, _ := os.ReadFile(out + ".svg")
	for _, want := range []string{"nodes: epoch time", "width: peak memory", "ranks: epoch time", "linear"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("figure has no %q", want)
		}
	}
	if !strings.Contains(stdout, out+".png") {
		t.Errorf("stdout does not name the figure: %q", stdout)
	}
}

// TestGrowthBadInput: each malformed sweep gives one line naming the file
// (and line), exit code 2, and no figure.
func TestGrowthBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"nodes 1 2\n", "sweep.tsv:1: 3 fields"},
		{"nodes 1 2 3\nsize 2 3 4\n", "sweep.tsv:2: axis \"size\""},
		{"nodes 1 2 3\nnodes 2 -1 4\n", "sweep.tsv:2: EPOCH_SECONDS \"-1\""},
		{"nodes 1 2 3\nnodes 2 NaN 4\n", "sweep.tsv:2: EPOCH_SECONDS \"NaN\""},
		{"nodes 2 2 3\nnodes 1 3 4\n", "sweep.tsv:2: nodes 1 after 2"},
		{"nodes 1 2 3\n", "axis nodes has 1 run"},
		{"# nothing\n", "no runs"},
	} {
		sweep := filepath.Join(dir, "sweep.tsv")
		os.WriteFile(sweep, []byte(c.text), 0o644)
		out := filepath.Join(dir, "out", "g")
		code, _, stderr := runCLI("growth", "--out", out, sweep)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line naming %q", c.text, code, stderr, c.want)
		}
		if _, err := os.Stat(out + ".png"); err == nil {
			t.Errorf("%q: a figure was written", c.text)
		}
	}
	code, _, stderr := runCLI("growth", "--out", filepath.Join(dir, "g"), filepath.Join(dir, "absent.tsv"))
	if code != 2 || !strings.Contains(stderr, "absent.tsv") {
		t.Errorf("absent file: exit %d, %q", code, stderr)
	}
}
