package job

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
)

// notCompared are the Spec fields that ranks may hold different values of
// (see Spec.settings), and the fields the data decide (compared after
// loading, by dataSettings).
var notCompared = map[string]bool{
	"Data": true, "Parts": false, "Resume": false, // paths; Parts and Resume count as given or not
	"Threads": true, "CommTimeout": true, "Comm": true, "Metrics": true, "Checkpoint": true, "CheckpointEvery": true,
	"Keep": true, "CPUProfile": true, "Ranks": true, // goroutine ranks: 1 under a launcher
	"GPU": true, "Run.InDim": true, "Run.Classes": true, // --gpu: nodes may differ in their GPUs
}

// TestSettingsCoverEverySpecField changes every field of a Spec in turn and
// requires the settings the ranks compare to change, except for the fields
// listed in notCompared: a field added to Spec without a thought for
// MPMD launches fails here.
func TestSettingsCoverEverySpecField(t *testing.T) {
	base := DefaultSpec()
	want := encodeSettings(base.settings(4))
	// Spec is walked by pointer so that fields can be set in place.
	spec := base
	root := reflect.ValueOf(&spec).Elem()
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			f, ft := v.Field(i), v.Type().Field(i)
			name := prefix + ft.Name
			if f.Kind() == reflect.Struct && ft.Type != reflect.TypeFor[time.Duration]() {
				p := name + "."
				if ft.Anonymous {
					p = prefix
				}
				walk(f, p)
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString(f.String() + "x")
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.Int, reflect.Int64:
				f.SetInt(f.Int() + 1)
			case reflect.Uint64, reflect.Uint8:
				f.SetUint(f.Uint() + 1)
			case reflect.Float64:
				f.SetFloat(f.Float() + 0.5)
			default:
				t.Fatalf("field %s of kind %s: extend this test", name, f.Kind())
			}
			changed := string(encodeSettings(spec.settings(4))) != string(want)
			if changed == notCompared[name] {
				t.Errorf("field %s: compared between ranks %v, want %v", name, changed, !notCompared[name])
			}
			f.Set(old)
		}
	}
	walk(root, "")
}

// TestAgreeSettings: goroutine ranks with one setting changed on ranks 2
// and 3 all stop; rank 2 reports the setting, both values and rank 3.
func TestAgreeSettings(t *testing.T) {
	for _, c := range []struct {
		edit func(s *Spec)
		want string
	}{
		{func(s *Spec) { s.Run.Seed = 2 }, "rank 2: --seed is 2, rank 0 has 0: every rank must be started with the same settings and data (rank 3 failed too)"},
		{func(s *Spec) { s.Run.Model = "gcn" }, "rank 2: --model is gcn, rank 0 has sage"},
		{func(s *Spec) { s.Parts = "p" }, "rank 2: --parts is given, rank 0 has not given"},
	} {
		errs := make([]error, 4)
		comm.RunLocal(4, func(lc *comm.Local) error {
			s := DefaultSpec()
			if lc.Rank() >= 2 {
				c.edit(&s)
			}
			errs[lc.Rank()] = agreeSettings(lc, s.settings(4), nil)
			return nil
		})
		for r, err := range errs {
			var ex *Exit
			switch {
			case r == 2 && (err == nil || !strings.Contains(err.Error(), c.want) || ExitCode(err) != ExitBadInput):
				t.Errorf("rank 2: %v, want %q (exit 2)", err, c.want)
			case r != 2 && !asExit(err, &ex):
				t.Errorf("rank %d: %v, want an *Exit", r, err)
			}
		}
	}
}

func asExit(err error, ex **Exit) bool {
	e, ok := err.(*Exit)
	*ex = e
	return ok && e.Code == ExitBadInput
}
