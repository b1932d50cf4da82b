package metrics

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// An epoch that was not evaluated goes out with null accuracies and comes
// back NaN; a line with one of val_acc and test_acc null is an error that
// names the field.
func TestNotEvaluatedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	w := NewWriter(path)
	e0 := Epoch{Epoch: 0, Loss: 1, TrainAcc: 0.5, ValAcc: 0.25, TestAcc: 0.75, BytesFwdLayer: []int64{3}, BytesBwdLayer: []int64{4},
		BytesEvalLayer: []int64{0}, Rates: []float64{1}, Bits: []int{32}, CompError: []float64{0}}
	e1 := e0
	e1.Epoch = 1
	e1.NotEvaluated()
	for i, e := range []*Epoch{&e0, &e1} {
		e.Derive(int64(7 * i))
		if c, _, v, want := e.Check(); c != "" {
			t.Fatalf("epoch %d: %s = %v, expected %s", i, c, v, want)
		}
		if err := w.Epoch(e); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSummary()
	s.Add(e0)
	s.Add(e1)
	if err := w.Summary(&s); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"val_acc":null`) {
		t.Fatalf("the unevaluated epoch's line has no null val_acc:\n%s", b)
	}
	log, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := log.Epochs
	if !got[0].Evaluated() || got[0].ValAcc != 0.25 || got[0].TrainAcc != 0.5 || got[1].Evaluated() || !math.IsNaN(got[1].TestAcc) || !math.IsNaN(got[1].TrainAcc) {
		t.Fatalf("read back %+v", got)
	}
	if log.Summary.BestEpoch != 0 || log.Summary.FinalTestAcc != 0.75 {
		t.Fatalf("summary %+v: expected best and final from epoch 0", log.Summary)
	}
	bad := strings.Replace(strings.SplitN(string(b), "\n", 2)[0], `"test_acc":0.75`, `"test_acc":null`, 1)
	if err := os.WriteFile(path, []byte(bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ie *data.InputError
	if _, err := ReadFile(path); !errors.As(err, &ie) || ie.Field != "test_acc" || ie.Line != 1 {
		t.Fatalf("one accuracy null: got %v, expected an input error at line 1, field test_acc", err)
	}
}
