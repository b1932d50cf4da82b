package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// ep is one synthetic epoch: validation and test accuracy, cumulative
// bytes, and the rate of layer 0 (layer 1 is always raw; 0 means 1).
type ep struct {
	val, test float64
	bytes     int64
	rate      float64
}

// writeRunFile writes a metrics file as train --metrics does, with extra
// fields the reader must ignore, and a summary line when complete.
func writeRunFile(t *testing.T, path string, eps []ep, complete bool) string {
	t.Helper()
	var b strings.Builder
	for i, e := range eps {
		rate := e.rate
		if rate == 0 {
			rate = 1
		}
		line, _ := json.Marshal(map[string]any{"epoch": i, "loss": 1.5, "train_acc": 0.5, "val_acc": e.val, "test_acc": e.test,
			"bytes_cum": e.bytes, "bytes_fwd": 1, "bytes_bwd": 1, "epoch_seconds": 0.1, "ratio": []float64{rate, 1},
			"bits": []int{8, 32}, "comp_error": []float64{0.01, 0}, "some_future_field": "x"})
		b.Write(append(line, '\n'))
	}
	if complete {
		b.WriteString(`{"summary":true,"best_val_acc":0.9,"test_at_best_val":0.8,"bytes_total":1,"seconds":12.5}` + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustReadRun(t *testing.T, path string) *runLog {
	t.Helper()
	r, err := readRun(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReportAccAtBudget checks acc(B) on a hand-made run: undefined before
// the first epoch, the best-val epoch within the budget, the earliest on a
// tie, and the whole run's test-at-best-val beyond the last epoch.
func TestReportAccAtBudget(t *testing.T) {
	r := mustReadRun(t, writeRunFile(t, filepath.Join(t.TempDir(), "r.jsonl"), []ep{
		{0.5, 0.40, 100, 0}, {0.7, 0.60, 200, 0}, {0.7, 0.65, 300, 0}, {0.6, 0.99, 350, 0}, {0.9, 0.80, 400, 0},
	}, true))
	for _, c := range []struct {
		b    int64
		want float64 // NaN: undefined
	}{{0, math.NaN()}, {99, math.NaN()}, {100, 0.40}, {199, 0.40}, {250, 0.60}, {300, 0.60}, {350, 0.60}, {400, 0.80}, {1 << 40, 0.80}} {
		got, ok := r.accAt(c.b)
		if ok == math.IsNaN(c.want) || (ok && got != c.want) {
			t.Errorf("acc(%d) = %v, %v; want %v", c.b, got, ok, c.want)
		}
	}
	if got := r.testAtBestVal(); got != 0.80 {
		t.Errorf("test-at-best-val %v, want 0.80", got)
	}
	// The mean over seeds is defined only where every seed is.
	r2 := mustReadRun(t, writeRunFile(t, filepath.Join(t.TempDir(), "r2.jsonl"), []ep{{0.5, 0.50, 150, 0}}, true))
	if _, ok := meanAccAt([]*runLog{r, r2}, 120); ok {
		t.Errorf("mean defined at 120, where one seed has no model yet")
	}
	if m, ok := meanAccAt([]*runLog{r, r2}, 150); !ok || math.Abs(m-0.45) > 1e-12 {
		t.Errorf("mean acc(150) = %v, %v; want 0.45", m, ok)
	}
	if got := budgetGrid([]*runLog{r}, []*runLog{r2}); len(got) != 6 || got[0] != 100 || got[1] != 150 || got[5] != 400 {
		t.Errorf("budget grid %v", got)
	}
}

func TestReportMeanStd(t *testing.T) {
	m, s := meanStd([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(s-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("meanStd = %v, %v; want 2.5, %v (sample std)", m, s, math.Sqrt(5.0/3))
	}
	if m, s := meanStd([]float64{7}); m != 7 || s != 0 {
		t.Errorf("one value: %v, %v; want 7, 0", m, s)
	}
}

// TestTimeTo: training time until the test accuracy at the best
// validation epoch so far reaches a target.
func TestTimeTo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.jsonl")
	content := `{"epoch":0,"val_acc":0.5,"test_acc":0.9,"bytes_cum":1,"epoch_seconds":2}
{"epoch":1,"val_acc":0.6,"test_acc":0.7,"bytes_cum":2,"epoch_seconds":1.5}
{"epoch":2,"val_acc":0.55,"test_acc":0.95,"bytes_cum":3,"epoch_seconds":1}
{"epoch":3,"val_acc":0.7,"test_acc":0.8,"bytes_cum":4,"epoch_seconds":1}
`
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustReadRun(t, p)
	// Epoch 0 reaches 0.9 (best val so far); at epoch 1 the best-val epoch
	// has 0.7; epoch 2's 0.95 is not at the best val; epoch 3 has 0.8.
	for _, c := range []struct {
		target, secs float64
		ok           bool
	}{{0.85, 2, true}, {0.75, 2, true}, {0.95, 0, false}} {
		secs, ok := r.timeTo(c.target)
		if secs != c.secs || ok != c.ok {
			t.Errorf("timeTo(%v) = %v, %v; want %v, %v", c.target, secs, ok, c.secs, c.ok)
		}
	}
	if secs, _ := r.timeTo(0.8); secs != 2 {
		t.Errorf("timeTo(0.8) = %v, want 2 (epoch 0 already reached it)", secs)
	}
	if secs, ok := r.timeTo(0.5); !ok || secs != 2 {
		t.Errorf("timeTo(0.5) = %v, %v", secs, ok)
	}
	if r.epochs[3].secondsCum != 5.5 {
		t.Errorf("cumulative seconds %v, want 5.5", r.epochs[3].secondsCum)
	}
}

// TestReportReadRunFormats: the older scalar ratio, AUC, a cut-off last
// line, and the errors for a decreasing bytes_cum and lines after the summary.
func TestReportReadRunFormats(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := mustReadRun(t, write("old.jsonl", `{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10,"ratio":4,"bits":[8,8,8],"val_auc":0.7,"test_auc":0.6}
{"epoch":1,"val_acc":0.5,"test_acc":0.5,"bytes_cum":20,"ratio":4,"bits":[8,8,8],"val_auc":0.9,"test_auc":0.8}
{"summary":true,"seconds":3}
`))
	if got := r.epochs[0].rates; len(got) != 3 || got[2] != 4 {
		t.Errorf("scalar ratio read as %v, want [4 4 4]", got)
	}
	if auc, ok := r.testAUCAtBestValAUC(); !ok || auc != 0.8 {
		t.Errorf("AUC at best val AUC = %v, %v; want 0.8", auc, ok)
	}
	if !r.complete || r.seconds != 3 {
		t.Errorf("summary not read: complete %v, seconds %v", r.complete, r.seconds)
	}
	cut := mustReadRun(t, write("cut.jsonl", `{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}`+"\n"+`{"epoch":1,"val_a`))
	if cut.complete || len(cut.epochs) != 1 {
		t.Errorf("cut-off last line: complete %v, %d epochs; want an incomplete run of 1 epoch", cut.complete, len(cut.epochs))
	}
	for name, c := range map[string]struct{ content, want string }{
		"down.jsonl":  {`{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}` + "\n" + `{"epoch":1,"val_acc":0.5,"test_acc":0.4,"bytes_cum":9}` + "\n", "down.jsonl:2: bytes_cum"},
		"after.jsonl": {`{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}` + "\n" + `{"summary":true}` + "\n" + `{"epoch":1}` + "\n", "after.jsonl:3"},
		"range.jsonl": {`{"epoch":0,"val_acc":50,"test_acc":0.4,"bytes_cum":10}` + "\n", "range.jsonl:1: val_acc"},
	} {
		_, err := readRun(write(name, c.content))
		var ie *data.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an InputError containing %q", name, err, c.want)
		}
	}
}

// TestReportClaim1 flips the verdict with crafted numbers: a pass, a
// failure on accuracy, a failure on bytes, and the 0.5-point floor.
func TestReportClaim1(t *testing.T) {
	full := methodStats{n: 3, acc: 80, accStd: 1, bytes: 1000}
	for _, c := range []struct {
		name  string
		full  methodStats
		varco methodStats
		pass  bool
	}{
		{"within the std and 20% of bytes", full, methodStats{acc: 79.2, bytes: 200}, true},
		{"accuracy below full - std", full, methodStats{acc: 78.9, bytes: 200}, false},
		{"bytes above 25%", full, methodStats{acc: 80.5, bytes: 260}, false},
		{"exactly 25% of bytes", full, methodStats{acc: 80, bytes: 250}, true},
		{"margin floor 0.5 passes", methodStats{acc: 80, accStd: 0.1, bytes: 1000}, methodStats{acc: 79.6, bytes: 100}, true},
		{"margin floor 0.5 fails", methodStats{acc: 80, accStd: 0.1, bytes: 1000}, methodStats{acc: 79.4, bytes: 100}, false},
	} {
		if got := claim1(c.full, c.varco); got.pass != c.pass {
			t.Errorf("%s: pass %v (diff %.2f, margin %.2f), want %v", c.name, got.pass, got.diff, got.margin, c.pass)
		}
	}
}

// TestReportClaim2 finds the worst budget on a crafted example, and fails
// a varco whose first model comes after fixed's.
func TestReportClaim2(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, eps ...ep) []*runLog {
		return []*runLog{mustReadRun(t, writeRunFile(t, filepath.Join(dir, name), eps, true))}
	}
	fixed := run("fixed.jsonl", ep{0.1, 0.70, 100, 4}, ep{0.2, 0.75, 200, 4}, ep{0.3, 0.80, 300, 4})
	varco := run("varco.jsonl", ep{0.1, 0.60, 50, 8}, ep{0.2, 0.78, 150, 8}, ep{0.3, 0.85, 400, 2})
	// Budgets 50 (fixed undefined), 100: 60-70, 150: 78-70, 200: 78-75,
	// 300: 78-80, 400: 85-80. The worst is -10 + margin at 100.
	c := claim2(varco, fixed, 0.5)
	if math.Abs(c.worst-(-9.5)) > 1e-9 || c.at != 100 || c.pass || c.gapFrom < c.gapTo {
		t.Errorf("got %+v, want worst -9.5 at 100, no gap, FAIL", c)
	}
	if c := claim2(varco, fixed, 10); !c.pass || math.Abs(c.worst) > 1e-9 {
		t.Errorf("margin 10: got %+v, want worst 0, PASS", c)
	}
	late := run("late.jsonl", ep{0.1, 0.90, 150, 8}, ep{0.2, 0.95, 400, 2})
	if c := claim2(late, fixed, 0.5); c.pass || c.worst < 0 || c.gapFrom != 100 || c.gapTo != 150 {
		t.Errorf("varco without a model at [100, 150): got %+v, want a gap and FAIL", c)
	}
}

// TestReportDirectory writes a small results directory and checks the
// report: the header note, the setup, the verdicts, the figures and their
// links, and the runs listed as missing: a .jsonl without a summary line,
// a .jsonl.tmp, and a .log without metrics (a failed run).
func TestReportDirectory(t *testing.T) {
	res := t.TempDir()
	g := filepath.Join(res, "core", "toy", "metis-q4")
	curve := func(final float64, bytesPerEpoch int64, rate float64) []ep {
		var eps []ep
		for i := range 6 {
			a := final * float64(i+1) / 6
			eps = append(eps, ep{a, a, bytesPerEpoch * int64(i+1), rate})
		}
		return eps
	}
	writeRunFile(t, filepath.Join(g, "full-s0.jsonl"), curve(0.80, 1000, 1), true)
	writeRunFile(t, filepath.Join(g, "full-s1.jsonl"), curve(0.80, 1000, 1), true)
	writeRunFile(t, filepath.Join(g, "nocomm-s0.jsonl"), curve(0.60, 0, 1), true)
	writeRunFile(t, filepath.Join(g, "fixed4-quant-s0.jsonl"), curve(0.78, 250, 4), true)
	writeRunFile(t, filepath.Join(g, "varco-quant-s0.jsonl"), curve(0.81, 150, 8), true)
	writeRunFile(t, filepath.Join(g, "adaptive-quant-s0.jsonl"), curve(0.805, 100, 16), true)
	writeRunFile(t, filepath.Join(g, "varco-quant-s1.jsonl"), curve(0.5, 150, 8), false)
	writeRunFile(t, filepath.Join(g, "varco-quant-s2.jsonl.tmp"), curve(0.5, 150, 8), false)
	for _, log := range []string{"varco-quant-s0.log", "varco-quant-s2.log", "varco-quant-s3.log"} {
		if err := os.WriteFile(filepath.Join(g, log), []byte("output\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRunFile(t, filepath.Join(res, "scaling", "toy", "random-q8", "full-s0.jsonl"), curve(0.8, 1000, 1), true)
	writeRunFile(t, filepath.Join(res, "scaling", "toy", "random-q8", "varco-quant-s0.jsonl"), curve(0.7, 100, 8), true)
	config := "gnn-spmd train --epochs 6 --hidden 16\n"
	if err := os.WriteFile(filepath.Join(res, "config.txt"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "docs", "RESULTS.md")
	notes := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(notes, []byte("Hand-written reading.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI("report", "--dir", res, "--out", out, "--notes", notes); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"# Experiment results\n\nHand-written reading.\n\n_The rest of this file is generated by `gnn-spmd report`",
		"```\n" + config + "```",
		"| core / toy / metis / Q=4 | varco-quant | +1.00 | 0.50 | 15.0% | PASS |",
		"| scaling / toy / random / Q=8 | varco-quant | -10.00 | 0.50 | 10.0% | FAIL |",
		"- varco-quant: 1 / 2 PASS",
		"| core / toy / metis / Q=4 | quant | fixed4-quant |",
		"| core / toy / metis / Q=4 | quant | +0.50 | 600 B | 900 B | yes |",
		"](figures/core-toy-metis-q4-quant-acc-bytes.png)",
		"](figures/core-toy-metis-q4-quant-rate-epoch.png)",
		"- `core/toy/metis-q4/varco-quant-s1.jsonl`: no summary line",
		"- `core/toy/metis-q4/varco-quant-s2.jsonl`: still running or killed",
		"- `core/toy/metis-q4/varco-quant-s3.jsonl`: failed",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "- `core/toy/metis-q4/"); n != 3 {
		t.Errorf("%d runs listed as missing, want 3", n)
	}
	if !strings.HasPrefix(md, "# Experiment results\n") {
		t.Errorf("report does not start with its title")
	}
	for _, f := range []string{"quant-acc-bytes.png", "quant-acc-bytes.svg", "quant-rate-epoch.png", "quant-rate-epoch.svg"} {
		checkFigure(t, filepath.Join(filepath.Dir(out), "figures", "core-toy-metis-q4-"+f))
	}
}
