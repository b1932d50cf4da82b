package results

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
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

func mustReadRun(t *testing.T, path string) *Run {
	t.Helper()
	r, err := ReadRun(path)
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
		got, ok := r.AccAt(c.b)
		if ok == math.IsNaN(c.want) || (ok && got != c.want) {
			t.Errorf("acc(%d) = %v, %v; want %v", c.b, got, ok, c.want)
		}
	}
	if got := r.TestAtBestVal(); got != 0.80 {
		t.Errorf("test-at-best-val %v, want 0.80", got)
	}
	// The mean over seeds is defined only where every seed is.
	r2 := mustReadRun(t, writeRunFile(t, filepath.Join(t.TempDir(), "r2.jsonl"), []ep{{0.5, 0.50, 150, 0}}, true))
	if _, ok := MeanAccAt([]*Run{r, r2}, 120); ok {
		t.Errorf("mean defined at 120, where one seed has no model yet")
	}
	if m, ok := MeanAccAt([]*Run{r, r2}, 150); !ok || math.Abs(m-0.45) > 1e-12 {
		t.Errorf("mean acc(150) = %v, %v; want 0.45", m, ok)
	}
	if got := BudgetGrid([]*Run{r}, []*Run{r2}); len(got) != 6 || got[0] != 100 || got[1] != 150 || got[5] != 400 {
		t.Errorf("budget grid %v", got)
	}
}

func TestReportMeanStd(t *testing.T) {
	m, s := MeanStd([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(s-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("MeanStd = %v, %v; want 2.5, %v (sample std)", m, s, math.Sqrt(5.0/3))
	}
	if m, s := MeanStd([]float64{7}); m != 7 || s != 0 {
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
		secs, ok := r.TimeTo(c.target)
		if secs != c.secs || ok != c.ok {
			t.Errorf("TimeTo(%v) = %v, %v; want %v, %v", c.target, secs, ok, c.secs, c.ok)
		}
	}
	if secs, _ := r.TimeTo(0.8); secs != 2 {
		t.Errorf("TimeTo(0.8) = %v, want 2 (epoch 0 already reached it)", secs)
	}
	if secs, ok := r.TimeTo(0.5); !ok || secs != 2 {
		t.Errorf("TimeTo(0.5) = %v, %v", secs, ok)
	}
	if r.Points[3].SecondsCum != 5.5 {
		t.Errorf("cumulative seconds %v, want 5.5", r.Points[3].SecondsCum)
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
	if got := r.Points[0].Rates; len(got) != 3 || got[2] != 4 {
		t.Errorf("scalar ratio read as %v, want [4 4 4]", got)
	}
	if auc, ok := r.TestAUCAtBestValAUC(); !ok || auc != 0.8 {
		t.Errorf("AUC at best val AUC = %v, %v; want 0.8", auc, ok)
	}
	if !r.Complete || r.Seconds != 3 {
		t.Errorf("summary not read: complete %v, seconds %v", r.Complete, r.Seconds)
	}
	cut := mustReadRun(t, write("cut.jsonl", `{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}`+"\n"+`{"epoch":1,"val_a`))
	if cut.Complete || len(cut.Points) != 1 {
		t.Errorf("cut-off last line: complete %v, %d epochs; want an incomplete run of 1 epoch", cut.Complete, len(cut.Points))
	}
	for name, c := range map[string]struct{ content, want string }{
		"down.jsonl":  {`{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}` + "\n" + `{"epoch":1,"val_acc":0.5,"test_acc":0.4,"bytes_cum":9}` + "\n", "down.jsonl:2: bytes_cum"},
		"after.jsonl": {`{"epoch":0,"val_acc":0.5,"test_acc":0.4,"bytes_cum":10}` + "\n" + `{"summary":true}` + "\n" + `{"epoch":1}` + "\n", "after.jsonl:3"},
		"range.jsonl": {`{"epoch":0,"val_acc":50,"test_acc":0.4,"bytes_cum":10}` + "\n", "range.jsonl:1: val_acc"},
	} {
		_, err := ReadRun(write(name, c.content))
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

// TestReportRecommended flips the recommended setting's verdict: a pass,
// a failure on bytes with the accuracy held, and one on accuracy.
func TestReportRecommended(t *testing.T) {
	full := methodStats{n: 5, acc: 80, accStd: 0.2, bytes: 1000}
	for _, c := range []struct {
		name           string
		rec            methodStats
		accurate, pass bool
	}{
		{"within 0.5 points and 5% of bytes", methodStats{acc: 79.6, bytes: 50}, true, true},
		{"accurate, 6% of bytes", methodStats{acc: 80.3, bytes: 60}, true, false},
		{"0.6 points below", methodStats{acc: 79.4, bytes: 40}, false, false},
	} {
		if got := recommended(full, c.rec); got.accurate != c.accurate || got.pass != c.pass {
			t.Errorf("%s: accurate %v pass %v (diff %.2f, margin %.2f, share %.3f), want %v %v", c.name, got.accurate, got.pass, got.diff, got.margin, got.share, c.accurate, c.pass)
		}
	}
}

// TestReportClaim2 finds the worst budget on a crafted example, and fails
// a varco whose first model comes after fixed's.
func TestReportClaim2(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, eps ...ep) []*Run {
		return []*Run{mustReadRun(t, writeRunFile(t, filepath.Join(dir, name), eps, true))}
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

// TestRunNotEvaluated: epochs without evaluation (null accuracies) hold no
// model of their own: acc(B), time to accuracy, the best validation epoch
// and the first budget read the evaluated epochs only.
func TestRunNotEvaluated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	w := metrics.NewWriter(path)
	// epochs 0 and 2 not evaluated; 1: val 0.5, test 0.6; 3: val 0.9, test 1.0
	for e := range 4 {
		st := metrics.Epoch{Epoch: e, Loss: 1, Seconds: 1, BytesFwdLayer: []int64{10}, BytesBwdLayer: []int64{0},
			BytesEvalLayer: []int64{0}, Rates: []float64{1}, Bits: []int{32}, CompError: []float64{0}}
		st.TrainAcc, st.ValAcc, st.TestAcc = 0.5, 0.3+0.2*float64(e), 0.4+0.2*float64(e)
		if e%2 == 0 {
			st.NotEvaluated()
		}
		st.Derive(int64(10 * e))
		if err := w.Epoch(&st); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	r := mustReadRun(t, path)
	if _, ok := r.AccAt(15); ok {
		t.Error("acc(15 bytes) is defined, but the only epoch within it was not evaluated")
	}
	if acc, ok := r.AccAt(25); !ok || math.Abs(acc-0.6) > 1e-12 {
		t.Errorf("acc(25 bytes) = %v, %v; expected epoch 1's 0.6", acc, ok)
	}
	if acc, ok := r.AccAt(35); !ok || math.Abs(acc-0.6) > 1e-12 {
		t.Errorf("acc(35 bytes) = %v, %v; expected epoch 1's 0.6 (epoch 2 was not evaluated)", acc, ok)
	}
	if got := r.TestAtBestVal(); math.Abs(got-1.0) > 1e-12 {
		t.Errorf("test at best val %v, expected epoch 3's 1.0", got)
	}
	if s, ok := r.TimeTo(0.9); !ok || s != 4 {
		t.Errorf("time to 0.9: %v, %v; expected 4 s (epoch 3)", s, ok)
	}
	if b := r.FirstBudget(); b != 20 {
		t.Errorf("first budget %d, expected epoch 1's 20 bytes", b)
	}
}

// TestRunConfirmed: a confirmed run's test accuracy at best validation is
// its summary's, at full precision, not its epochs', read under
// compression (the curves keep those); AUC likewise.
func TestRunConfirmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	writeRunFile(t, path, []ep{{0.5, 0.6, 10, 0}, {0.7, 0.8, 20, 0}}, false)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"summary":true,"best_val_acc":0.72,"best_epoch":1,"test_at_best_val":0.81,"test_at_best_val_auc":0.9,"confirmed":true,"selected_val_acc":0.7}` + "\n")
	f.Close()
	r := mustReadRun(t, path)
	if got := r.TestAtBestVal(); got != 0.81 {
		t.Errorf("test at best val %v, want the confirmed 0.81", got)
	}
	if auc, ok := r.TestAUCAtBestValAUC(); !ok || auc != 0.9 {
		t.Errorf("test AUC at best val AUC %v, %v; want the confirmed 0.9", auc, ok)
	}
	if acc, ok := r.AccAt(20); !ok || acc != 0.8 {
		t.Errorf("acc(20 bytes) = %v, %v; want epoch 1's 0.8, as the epochs recorded it", acc, ok)
	}
}
