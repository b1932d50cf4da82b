package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// writeTimedRun writes a finished metrics file whose epoch i took secs[i]
// seconds and reached test (and validation) accuracy acc[i], sending 100
// bytes an epoch.
func writeTimedRun(t *testing.T, path string, acc, secs []float64) string {
	t.Helper()
	w := metrics.NewWriter(path)
	defer w.Close()
	var before int64
	for i := range acc {
		m := metrics.Epoch{Epoch: i, Loss: 1, ValAcc: acc[i], TestAcc: acc[i], Seconds: secs[i],
			BytesFwdLayer: []int64{100}, BytesBwdLayer: []int64{0}, BytesEvalLayer: []int64{0},
			Rates: []float64{1}, Bits: []int{32}, CompError: []float64{0}}
		m.Derive(before)
		before = m.BytesCum
		if err := w.Epoch(&m); err != nil {
			t.Fatal(err)
		}
	}
	s := metrics.NewSummary()
	if err := w.Summary(&s); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompareEpochAndTimeTo checks compare's columns against runs whose
// numbers are known: the median epoch leaves out the first (warm-up) epoch,
// its ratio is to the reference's, and the time to accuracy is the
// cumulative time of the first epoch at the reference's mean minus the
// margin.
func TestCompareEpochAndTimeTo(t *testing.T) {
	dir := t.TempDir()
	acc := []float64{0.2, 0.5, 0.7, 0.8, 0.8, 0.8}
	full1 := writeTimedRun(t, filepath.Join(dir, "full1.jsonl"), acc, []float64{0.9, 0.1, 0.1, 0.1, 0.1, 0.1})
	full2 := writeTimedRun(t, filepath.Join(dir, "full2.jsonl"), acc, []float64{0.9, 0.1, 0.1, 0.12, 0.1, 0.1})
	quant := writeTimedRun(t, filepath.Join(dir, "quant.jsonl"), acc, []float64{0.6, 0.2, 0.2, 0.3, 0.2, 0.25})
	code, out, errOut := runCLI("compare", "full="+full1+","+full2, "quant="+quant)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows, got:\n%s", out)
	}
	for i, want := range [][]string{
		{"s/epoch", "of full", "seconds to 79.50%"},
		{"full", "2", "100.0%", "0.1000", "1.00x", "1.2"},
		{"quant", "1", "100.0%", "0.2000", "2.00x", "1.3"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d lacks %q:\n%s", i, w, lines[i])
			}
		}
	}
	// full: 0.9+0.1+0.1+0.1 (or 0.12) to reach 0.8 at epoch 3; quant:
	// 0.6+0.2+0.2+0.3.
	if f := strings.Fields(lines[1]); f[len(f)-1] != "1.2" {
		t.Errorf("full's time to accuracy %q, want 1.2", f[len(f)-1])
	}
	if f := strings.Fields(lines[2]); f[len(f)-1] != "1.3" {
		t.Errorf("quant's time to accuracy %q, want 1.3", f[len(f)-1])
	}
}

// TestCompareUnfinished: a run without its summary line (killed, or still
// running) is marked unfinished instead of showing 0 seconds.
func TestCompareUnfinished(t *testing.T) {
	dir := t.TempDir()
	acc := []float64{0.2, 0.5, 0.7}
	full := writeTimedRun(t, filepath.Join(dir, "full.jsonl"), acc, []float64{0.9, 0.1, 0.1})
	cut := filepath.Join(dir, "cut.jsonl")
	b, _ := os.ReadFile(full)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(cut, []byte(strings.Join(lines[:2], "")), 0o644)
	code, out, errOut := runCLI("compare", "full="+full, "cut="+cut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 || !strings.Contains(rows[2], "unfinished") || strings.Contains(rows[1], "unfinished") {
		t.Errorf("want the cut run alone marked unfinished:\n%s", out)
	}
}
