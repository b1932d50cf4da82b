// Package metrics is the record of a training run: what every epoch
// measured (Epoch) and the run's result (Summary). The Epoch struct is the
// one schema of that record: its JSON keys are the fields of a --metrics
// line (JSONL, written and read here), and Columns turns the same fields
// into the /metrics table of a checkpoint.
package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// Epoch is what one epoch measured. Accuracies are over all ranks, for the
// parameters that entered the epoch (the same ones the loss saw), and NaN
// in an epoch that was not evaluated (train --eval-every; null in a
// metrics line); byte counts are summed over ranks. Fields tagged derived
// follow from the others (Derive), so a table need not store them.
type Epoch struct {
	Epoch    int     `json:"epoch" check:"count"`
	Loss     float64 `json:"loss" check:"finite"`
	TrainAcc float64 `json:"train_acc" check:"accuracy"`
	ValAcc   float64 `json:"val_acc" check:"accuracy"`
	TestAcc  float64 `json:"test_acc" check:"accuracy"`
	Seconds  float64 `json:"epoch_seconds" check:"count"`
	// CommSeconds is this rank's time inside the transport (halo exchanges
	// and all-reduces), HaloSeconds the halo exchanges' part of it,
	// CodecSeconds its time encoding and decoding; ComputeSeconds is the
	// rest of Seconds.
	CommSeconds    float64 `json:"comm_seconds" check:"count"`
	HaloSeconds    float64 `json:"halo_seconds" check:"count"`
	CodecSeconds   float64 `json:"compress_seconds" check:"count"`
	ComputeSeconds float64 `json:"compute_seconds" metrics:"derived" check:"finite"`
	// BytesFwd and BytesBwd are the epoch's training halo bytes, BytesCum
	// the run's up to and including this epoch.
	BytesFwd int64 `json:"bytes_fwd" metrics:"derived" check:"count"`
	BytesBwd int64 `json:"bytes_bwd" metrics:"derived" check:"count"`
	BytesCum int64 `json:"bytes_cum" metrics:"derived" check:"count"`
	// Halo bytes handed to the transport per layer. BytesEvalLayer counts
	// the evaluation pass's forward exchanges, kept apart so that budgets
	// compare training traffic.
	BytesFwdLayer  []int64 `json:"bytes_fwd_layer" check:"count"`
	BytesBwdLayer  []int64 `json:"bytes_bwd_layer" check:"count"`
	BytesEvalLayer []int64 `json:"bytes_eval_layer" check:"count"`
	// Rates are the compression rates per layer (1 = raw); Bits the bits
	// per value (quant) or columns kept (trunc) per layer, 32 when raw;
	// CompError the relative error ||x - x^|| / ||x|| of the forward
	// training payloads per layer.
	Rates     []float64 `json:"ratio" check:"rate"`
	Bits      []int     `json:"bits" check:"count"`
	CompError []float64 `json:"comp_error" check:"count"`
	// GradNorm is the norm of the all-reduced parameter gradient (before
	// weight decay), which closed-loop schedules watch.
	GradNorm float64 `json:"grad_norm" check:"count"`
	// ValAUC and TestAUC are the ROC AUC of two-class tasks; nil for other
	// tasks and where a split lacks one of the classes (AUC undefined).
	ValAUC  *float64 `json:"val_auc,omitempty" check:"fraction"`
	TestAUC *float64 `json:"test_auc,omitempty" check:"fraction"`
	// Stop says that a rank asked to stop during this epoch: the run ends
	// after it on every rank. Not part of the record.
	Stop bool `json:"-"`
}

// checks are the ranges of the fields, by their check tag, and what a
// value outside one is said to break.
var checks = map[string]struct {
	ok   func(float64) bool
	want string
}{
	"finite":   {func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }, "a finite number"},
	"count":    {func(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }, "a finite number >= 0"},
	"fraction": {func(x float64) bool { return x >= 0 && x <= 1 }, "a fraction in [0, 1]"},
	"accuracy": {func(x float64) bool { return x >= 0 && x <= 1 || math.IsNaN(x) }, "a fraction in [0, 1] (NaN: not evaluated)"},
	"rate":     {func(x float64) bool { return x >= 1 && !math.IsInf(x, 1) }, "a compression rate >= 1"},
}

// Check returns the first value of e outside its field's range (an
// accuracy above 1, a negative byte count, a rate below 1, a NaN loss):
// its column, the layer for a per-layer column (else -1), the value and
// what was expected; column is "" when every value holds. Read from a
// file, such a value means corruption.
func (e *Epoch) Check() (column string, layer int, value float64, want string) {
	for _, c := range columns {
		ck := checks[c.check]
		v := c.field(e)
		switch c.Kind {
		case OptFloat:
			if !v.IsNil() && !ck.ok(v.Elem().Float()) {
				return c.Name, -1, v.Elem().Float(), ck.want
			}
		case Float:
			if !ck.ok(v.Float()) {
				return c.Name, -1, v.Float(), ck.want
			}
		case Int:
			if !ck.ok(float64(v.Int())) {
				return c.Name, -1, float64(v.Int()), ck.want
			}
		default:
			for l := range v.Len() {
				x := v.Index(l)
				f := 0.0
				if x.CanFloat() {
					f = x.Float()
				} else {
					f = float64(x.Int())
				}
				if !ck.ok(f) {
					return c.Name, l, f, ck.want
				}
			}
		}
	}
	return "", -1, 0, ""
}

// Derive sets the derived fields from the others, given the run's halo
// bytes before this epoch.
func (e *Epoch) Derive(bytesBefore int64) {
	e.ComputeSeconds = e.Seconds - e.CommSeconds - e.CodecSeconds
	e.BytesFwd, e.BytesBwd = 0, 0
	for l := range e.BytesFwdLayer {
		e.BytesFwd += e.BytesFwdLayer[l]
		e.BytesBwd += e.BytesBwdLayer[l]
	}
	e.BytesCum = bytesBefore + e.BytesFwd + e.BytesBwd
}

// Evaluated reports whether the epoch measured its accuracies.
func (e *Epoch) Evaluated() bool { return !math.IsNaN(e.ValAcc) }

// NotEvaluated marks the epoch's accuracies as not measured.
func (e *Epoch) NotEvaluated() {
	e.TrainAcc, e.ValAcc, e.TestAcc = math.NaN(), math.NaN(), math.NaN()
	e.ValAUC, e.TestAUC = nil, nil
}

// plainEpoch is Epoch without its JSON methods.
type plainEpoch Epoch

// epochJSON is an epoch line whose accuracies may be null where not
// evaluated (JSON has no NaN); they come last in such a line.
type epochJSON struct {
	plainEpoch
	TrainAcc *float64 `json:"train_acc"`
	ValAcc   *float64 `json:"val_acc"`
	TestAcc  *float64 `json:"test_acc"`
}

func (e Epoch) MarshalJSON() ([]byte, error) {
	if e.Evaluated() && !math.IsNaN(e.TrainAcc) && !math.IsNaN(e.TestAcc) {
		return json.Marshal(plainEpoch(e)) // the keys in field order
	}
	opt := func(x float64) *float64 {
		if math.IsNaN(x) {
			return nil
		}
		return &x
	}
	return json.Marshal(epochJSON{plainEpoch(e), opt(e.TrainAcc), opt(e.ValAcc), opt(e.TestAcc)})
}

func (e *Epoch) UnmarshalJSON(b []byte) error {
	var j epochJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Epoch(j.plainEpoch)
	for _, f := range []struct {
		dst *float64
		src *float64
	}{{&e.TrainAcc, j.TrainAcc}, {&e.ValAcc, j.ValAcc}, {&e.TestAcc, j.TestAcc}} {
		*f.dst = math.NaN()
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	return nil
}

// ClearTimes zeroes the wall-clock fields, which are all that differs
// between two runs of the same settings (a resumed run and an
// uninterrupted one, say).
func (e *Epoch) ClearTimes() {
	e.Seconds, e.CommSeconds, e.HaloSeconds, e.CodecSeconds, e.ComputeSeconds = 0, 0, 0, 0, 0
}

// Summary is the result of a run: the test accuracy at the best validation
// accuracy (earliest epoch on ties) and at the last evaluated epoch, and,
// for the record, the run's size and peak memory.
type Summary struct {
	IsSummary     bool    `json:"summary"` // true: tells the summary line from the epochs
	BestValAcc    float64 `json:"best_val_acc"`
	BestEpoch     int     `json:"best_epoch"`
	TestAtBestVal float64 `json:"test_at_best_val"`
	// FinalValAcc and FinalTestAcc are the accuracies of the parameters the
	// run ends with, at full precision after the last epoch (under --eval
	// compressed, the last evaluated epoch's, under compression).
	FinalValAcc  float64 `json:"final_val_acc"`
	FinalTestAcc float64 `json:"final_test_acc"`
	Epochs       int     `json:"epochs"`
	Seconds      float64 `json:"seconds"`
	BytesTotal   int64   `json:"bytes_total"` // halo bytes over all epochs, ranks and directions
	// EvalBytesOnce is what the evaluation passes at full precision of a
	// distributed run sent once, over all ranks: the first layer's input
	// features, which then stay cached (absent where none were sent). Like
	// the epochs' evaluation bytes, it is not part of BytesTotal.
	EvalBytesOnce int64 `json:"eval_bytes_once,omitempty"`
	// ResumeInputBytes is what a resumed distributed run sent, over all
	// ranks, to cache the first layer's input again (gnn.Model.CacheTrainingInput):
	// the uninterrupted run counts that exchange in its epoch 0, so it is
	// not part of BytesTotal (absent where none was sent).
	ResumeInputBytes int64   `json:"resume_input_bytes,omitempty"`
	Ranks            int     `json:"ranks"`
	MaxRSSMiB        int64   `json:"max_rss_mb"`
	RankRSSMiB       []int64 `json:"rank_rss_mb"`
	// RankResidualBytes is the memory residual coding's state holds on each
	// rank (absent without residual coding).
	RankResidualBytes []int64 `json:"rank_residual_bytes,omitempty"`
	// For two-class tasks: the best validation AUC and the test AUC then.
	BestValAUC       *float64 `json:"best_val_auc,omitempty"`
	TestAtBestValAUC *float64 `json:"test_at_best_val_auc,omitempty"`
	// Confirmed: the epochs' accuracies were read under compression, and
	// the accuracies above at full precision, after the last epoch, from
	// the parameters of the best epochs (chosen by the validation scores
	// under compression, SelectedValAcc and SelectedValAUC) and the final
	// ones (compress.EvalConfirm). ConfirmBytes is what the passes after
	// the last epoch sent, over all ranks; like the evaluation bytes, not
	// part of BytesTotal.
	Confirmed      bool     `json:"confirmed,omitempty"`
	SelectedValAcc float64  `json:"selected_val_acc,omitempty"`
	SelectedValAUC *float64 `json:"selected_val_auc,omitempty"`
	ConfirmBytes   int64    `json:"confirm_bytes,omitempty"`
}

// NewSummary is the summary of a run before its first epoch.
func NewSummary() Summary { return Summary{IsSummary: true, BestValAcc: -1} }

// Add accounts for one finished epoch.
func (s *Summary) Add(e Epoch) {
	if e.ValAcc > s.BestValAcc {
		s.BestValAcc, s.BestEpoch, s.TestAtBestVal = e.ValAcc, e.Epoch, e.TestAcc
	}
	if e.ValAUC != nil && e.TestAUC != nil && (s.BestValAUC == nil || *e.ValAUC > *s.BestValAUC) {
		s.BestValAUC, s.TestAtBestValAUC = ptr(*e.ValAUC), ptr(*e.TestAUC)
	}
	if e.Evaluated() {
		s.FinalValAcc, s.FinalTestAcc = e.ValAcc, e.TestAcc
	}
	s.BytesTotal += e.BytesFwd + e.BytesBwd
	s.Epochs = e.Epoch + 1
}

func ptr(v float64) *float64 { return &v }

// ColumnKind is the type of a column's values.
type ColumnKind int

const (
	Float       ColumnKind = iota // one float64 per epoch
	OptFloat                      // one float64 per epoch, NaN where absent
	Int                           // one int64 per epoch
	FloatLayers                   // [epochs, layers] float64
	IntLayers                     // [epochs, layers] int64
	SmallLayers                   // [epochs, layers] int32 (bits)
)

// Column is one field of Epoch as a column of a table, named by its JSON
// key.
type Column struct {
	Name    string
	Kind    ColumnKind
	Derived bool // Derive computes it: a reader need not read it
	index   int
	check   string // the key of its range in checks
}

var columns = func() []Column {
	var cs []Column
	t := reflect.TypeFor[Epoch]()
	kinds := map[reflect.Type]ColumnKind{
		reflect.TypeFor[float64](): Float, reflect.TypeFor[*float64](): OptFloat, reflect.TypeFor[int](): Int,
		reflect.TypeFor[int64](): Int, reflect.TypeFor[[]float64](): FloatLayers, reflect.TypeFor[[]int64](): IntLayers,
		reflect.TypeFor[[]int](): SmallLayers,
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		kind, ok := kinds[f.Type]
		if !ok {
			panic(fmt.Sprintf("metrics: field %s has type %s, which no column kind stores", f.Name, f.Type))
		}
		check := f.Tag.Get("check")
		if _, ok := checks[check]; !ok {
			panic(fmt.Sprintf("metrics: field %s has check %q, expected one of the checks", f.Name, check))
		}
		cs = append(cs, Column{Name: name, Kind: kind, Derived: f.Tag.Get("metrics") == "derived", index: i, check: check})
	}
	return cs
}()

// Columns lists the record's columns in the order of a metrics line.
func Columns() []Column { return columns }

func (c Column) field(e *Epoch) reflect.Value { return reflect.ValueOf(e).Elem().Field(c.index) }

// Float is the column's value in e, for Float and OptFloat columns (NaN
// for an absent OptFloat).
func (c Column) Float(e *Epoch) float64 {
	v := c.field(e)
	if c.Kind == OptFloat {
		if v.IsNil() {
			return math.NaN()
		}
		return v.Elem().Float()
	}
	return v.Float()
}

// SetFloat sets the column's value in e (NaN for an OptFloat column sets
// it absent).
func (c Column) SetFloat(e *Epoch, x float64) {
	v := c.field(e)
	switch {
	case c.Kind != OptFloat:
		v.SetFloat(x)
	case math.IsNaN(x):
		v.SetZero()
	default:
		v.Set(reflect.ValueOf(&x))
	}
}

// Int is the column's value in e, for Int columns; SetInt sets it.
func (c Column) Int(e *Epoch) int64       { return c.field(e).Int() }
func (c Column) SetInt(e *Epoch, x int64) { c.field(e).SetInt(x) }

// Floats, Ints and Smalls point at the column's per-layer values in e, for
// the FloatLayers, IntLayers and SmallLayers columns.
func (c Column) Floats(e *Epoch) *[]float64 { return c.field(e).Addr().Interface().(*[]float64) }
func (c Column) Ints(e *Epoch) *[]int64     { return c.field(e).Addr().Interface().(*[]int64) }
func (c Column) Smalls(e *Epoch) *[]int     { return c.field(e).Addr().Interface().(*[]int) }
