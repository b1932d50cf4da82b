package ckpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// toyCheckpoint is a two-class, two-layer adaptive run after three epochs.
func toyCheckpoint() *Checkpoint {
	plan := compress.MustPreset(compress.PresetNone)
	plan.Fwd, plan.Bwd, plan.Schedule = codec.KindQuant, codec.KindQuant, compress.ScheduleAdaptive
	run := gnn.Config{Model: "sage", Layers: 2, Hidden: 3, InDim: 4, Classes: 2, LR: 0.01, Seed: 7, Epochs: 5, Compress: plan}
	cfg := NewConfig(run, Data{Split: "s", Ranks: 2, PartitionMethod: "random", Fingerprint: 0xabc, PartitionID: 0xdef})
	c := &Checkpoint{Config: cfg, DatasetName: "toy", Epoch: 3, Step: 3, Exact: &Accuracies{BestVal: 0.5, BestTest: 0.75, FinalVal: 0.25, FinalTest: 0.625},
		Adaptive: &compress.AdaptiveState{Smoothed: 1.5, GMin: 1, GMax: 2, Rates: []float64{32, 1}, RefErr: []float64{0.1, 0}, RefRate: []float64{32, 0}}}
	for i, s := range run.ModelConfig().ParamShapes() {
		p := Param{Name: s.Name, Rows: s.Rows, Cols: s.Cols}
		for k := range s.Rows * s.Cols {
			x := float32(i) + float32(k)/8
			p.W, p.M, p.V = append(p.W, x), append(p.M, -x/2), append(p.V, x*x)
		}
		c.Params = append(c.Params, p)
	}
	for e := range 3 {
		valAUC, testAUC := 0.6, 0.7
		st := metrics.Epoch{Epoch: e, Loss: 1 / float64(e+1), TrainAcc: 0.5, ValAcc: 0.25 * float64(e),
			TestAcc: 0.75, Seconds: 0.125, CommSeconds: 0.0625, HaloSeconds: 0.03, CodecSeconds: 0.01,
			BytesFwdLayer: []int64{100, 0}, BytesBwdLayer: []int64{90, 0}, BytesEvalLayer: []int64{400, 50}, Rates: []float64{32, 1},
			Bits: []int{1, 32}, CompError: []float64{0.2, 0}, GradNorm: 3, ValAUC: &valAUC, TestAUC: &testAUC}
		st.Derive(int64(190 * e))
		c.History = append(c.History, st)
	}
	// A confirming run keeps its best epochs'
	// parameters: validation accuracy's best is epoch 2, the AUC's 0.
	for _, k := range []gnn.Kept{{Criterion: "acc", Epoch: 2}, {Criterion: "auc", Epoch: 0}} {
		for _, p := range c.Params {
			w := make([]float32, len(p.W))
			for i := range w {
				w[i] = p.W[i] + float32(k.Epoch) + 0.5
			}
			k.W = append(k.W, w)
		}
		c.Kept = append(c.Kept, k)
	}
	return c
}

// TestMissingAttribute: every setting is required (a file of an older
// format version is refused by its version), a missing one is named, and
// a changed value fails the attributes' digest.
func TestMissingAttribute(t *testing.T) {
	c := toyCheckpoint()
	dir := t.TempDir()
	write := func(name string, a []h5.Attr) string {
		path := filepath.Join(dir, name)
		if err := h5.WriteFile(path, a, c.arrays()); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var without, changed []h5.Attr
	for _, at := range c.baseAttrs() {
		if at.Name != "cache_input" {
			without = append(without, at)
		}
		if at.Name == "ratio_min" {
			at.Val = 2.0
		}
		changed = append(changed, at)
	}
	without = append(without, h5.Attr{Name: attrsDigestName, Val: attrsDigest(without)})
	changed = append(changed, h5.Attr{Name: attrsDigestName, Val: attrsDigest(c.baseAttrs())})
	for path, want := range map[string]string{
		write("without.h5", without): "cache_input",
		write("changed.h5", changed): attrsDigestName,
	} {
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", path, err, want)
		}
	}
	old := c.baseAttrs()
	for i, at := range old {
		if at.Name == "version" {
			old[i].Val = int32(Version - 1)
		}
	}
	old = append(old, h5.Attr{Name: attrsDigestName, Val: attrsDigest(old)})
	if _, err := Read(write("old.h5", old)); err == nil || !strings.Contains(err.Error(), "unsupported version") {
		t.Errorf("a file of version %d: %v, want an unsupported version", Version-1, err)
	}
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.h5")
	c := toyCheckpoint()
	if err := Write(path, 1, c); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("read back\n%+v\nwrote\n%+v", got, c)
	}
	if err := got.Verify(path); err != nil {
		t.Error(err)
	}
	if names, _ := filepath.Glob(path + "*"); len(names) != 1 {
		t.Errorf("files after a write: %v, want only %s", names, path)
	}
}

// TestNoAUC: a task without AUC stores NaN and reads back the zero a live
// run's statistics hold.
func TestNoAUC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.h5")
	c := toyCheckpoint()
	c.Config.Run.Classes = 3
	c.Params = nil
	for _, s := range c.Config.Run.ModelConfig().ParamShapes() {
		n := s.Rows * s.Cols
		c.Params = append(c.Params, Param{s.Name, s.Rows, s.Cols, make([]float32, n), make([]float32, n), make([]float32, n)})
	}
	for i := range c.History {
		c.History[i].ValAUC, c.History[i].TestAUC = nil, nil
	}
	// Three classes have no AUC: one kept set, of the new shapes.
	acc := gnn.Kept{Criterion: "acc", Epoch: c.Kept[0].Epoch}
	for _, p := range c.Params {
		acc.W = append(acc.W, slices.Clone(p.W))
	}
	c.Kept = []gnn.Kept{acc}
	if err := Write(path, 1, c); err != nil {
		t.Fatal(err)
	}
	err := h5.Read(path, Format, Version, "no such file", func(f *h5.File) error {
		if v := h5.ReadArray[float64](f, "/metrics/val_auc", "", 3); !math.IsNaN(v[0]) {
			t.Errorf("val_auc in the file %v, want NaN", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.History, c.History) {
		t.Errorf("history read back %+v, wrote %+v", got.History, c.History)
	}
}

// TestRotate keeps the newest three checkpoints, and a failed write (a
// directory in the way of the temporary file) leaves the last one intact.
func TestRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.h5")
	c := toyCheckpoint()
	write := func(name string) error {
		c.DatasetName = name
		return Write(path, 3, c)
	}
	name := func(p string) string {
		got, err := Read(p)
		if err != nil {
			return err.Error()
		}
		return got.DatasetName
	}
	for _, n := range []string{"v1", "v2", "v3", "v4"} {
		if err := write(n); err != nil {
			t.Fatal(err)
		}
	}
	if a, b, c := name(path), name(path+".1"), name(path+".2"); a != "v4" || b != "v3" || c != "v2" {
		t.Errorf("rotation holds %s, %s, %s; want v4, v3, v2", a, b, c)
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Errorf("%s.3 exists with --keep 3", path)
	}
	blocker := outfile.TempName(path, os.Getpid())
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := write("v5"); err == nil {
		t.Fatal("write succeeded with a directory in the way of its temporary file")
	}
	// Nothing rotated: every version is still there, each its own file.
	if a, b, c := name(path), name(path+".1"), name(path+".2"); a != "v4" || b != "v3" || c != "v2" {
		t.Errorf("after a failed write the rotation holds %s, %s, %s; want v4, v3, v2", a, b, c)
	}
	s0, _ := os.Stat(path)
	s1, _ := os.Stat(path + ".1")
	if os.SameFile(s0, s1) {
		t.Errorf("%s and %s are one file after a failed write", path, path+".1")
	}
}

func TestVerify(t *testing.T) {
	cases := []struct {
		edit func(c *Checkpoint)
		want string
	}{
		{func(c *Checkpoint) { c.Params[1].W[2] = float32(math.NaN()) }, "/params/layer0.neigh_weight: entry 2 is NaN"},
		{func(c *Checkpoint) { c.Params[0].V[0] = -1 }, "/adam/v/layer0.self_weight: entry 0 is -1"},
		{func(c *Checkpoint) { c.Step = 2 }, "attribute adam_step: is 2"},
		{func(c *Checkpoint) { c.Config.Data.Fingerprint = 0 }, "attribute dataset_fingerprint: is 0"},
		{func(c *Checkpoint) { c.History[1].Epoch = 5 }, "/metrics/epoch: row 1 is epoch 5"},
		{func(c *Checkpoint) { c.Adaptive.GMax = math.Inf(1) }, "attribute adaptive_gmax: holds +Inf"},
	}
	for _, tc := range cases {
		c := toyCheckpoint()
		tc.edit(c)
		if err := c.Verify("c.h5"); err == nil || !strings.Contains(err.Error(), "c.h5: "+tc.want) {
			t.Errorf("Verify: %v, want %q", err, tc.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	a, b := toyCheckpoint().Config, toyCheckpoint().Config
	if err := a.Check("c.h5", &b); err != nil {
		t.Fatal(err)
	}
	b.Run.Hidden, b.Data.PartitionID = 64, 1
	err := a.Check("c.h5", &b)
	if err == nil || err.Error() != "c.h5: hidden: checkpoint has 3, this run 64" {
		t.Errorf("got %v", err)
	}
	b.Run.Hidden = 3
	if err := a.Check("c.h5", &b); err == nil || !strings.Contains(err.Error(), "partition_id: checkpoint has 0000000000000def, this run 0000000000000001") {
		t.Errorf("got %v", err)
	}
}

func TestNPYHeader(t *testing.T) {
	for _, shape := range [][2]int{{1, 4}, {128, 256}, {123456, 7}} {
		h := npyHeader(shape[0], shape[1])
		if len(h)%64 != 0 || h[len(h)-1] != '\n' || !bytes.HasPrefix(h, []byte("\x93NUMPY\x01\x00")) {
			t.Errorf("%v: header %q", shape, h)
		}
		if n := int(h[8]) | int(h[9])<<8; n != len(h)-10 {
			t.Errorf("%v: header length field %d, want %d", shape, n, len(h)-10)
		}
	}
}

// TestHistoryValues: Read refuses a metrics history with a value no run
// writes, naming the column and row, so that no reader downstream (the
// JSON of inspect, the metrics file of a resumed run) meets it.
func TestHistoryValues(t *testing.T) {
	cases := []struct {
		edit func(e *metrics.Epoch)
		want string
	}{
		{func(e *metrics.Epoch) { e.Rates[0] = math.Inf(-1) }, "/metrics/ratio: row 1 layer 0 is -Inf, expected a compression rate >= 1"},
		{func(e *metrics.Epoch) { e.TestAcc = 1.5 }, "/metrics/test_acc: row 1 is 1.5, expected a fraction in [0, 1]"},
		{func(e *metrics.Epoch) { e.Loss = math.NaN() }, "/metrics/loss: row 1 is NaN"},
		{func(e *metrics.Epoch) { e.BytesEvalLayer[1] = -3 }, "/metrics/bytes_eval_layer: row 1 layer 1 is -3"},
	}
	for _, tc := range cases {
		c := toyCheckpoint()
		tc.edit(&c.History[1])
		path := filepath.Join(t.TempDir(), "c.h5")
		if err := h5.WriteFile(path, c.attrs(), c.arrays()); err != nil {
			t.Fatal(err)
		}
		_, err := Read(path)
		if err == nil || !strings.Contains(err.Error(), path+": "+tc.want) {
			t.Errorf("Read: %v, want %q", err, tc.want)
		}
	}
}

// TestNotEvaluatedHistory: an epoch without evaluation (--eval-every)
// keeps its NaN accuracies through a checkpoint, the others their values.
func TestNotEvaluatedHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.h5")
	c := toyCheckpoint()
	c.History[1].NotEvaluated()
	if err := Write(path, 1, c); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for e, h := range got.History {
		if h.Evaluated() != (e != 1) || h.Loss != c.History[e].Loss || h.BytesCum != c.History[e].BytesCum {
			t.Fatalf("epoch %d read back %+v, wrote %+v", e, h, c.History[e])
		}
		if e != 1 && (h.ValAcc != c.History[e].ValAcc || h.TestAcc != c.History[e].TestAcc) {
			t.Fatalf("epoch %d: accuracies %v/%v, wrote %v/%v", e, h.ValAcc, h.TestAcc, c.History[e].ValAcc, c.History[e].TestAcc)
		}
	}
}

// TestCorruptValue: a checkpoint whose parameter bytes changed on disk (one
// bit of a weight: still a plausible number) is refused on read, naming the
// parameter, instead of resuming from it.
func TestCorruptValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.h5")
	c := toyCheckpoint()
	p := &c.Params[1]
	p.W[2] = math.Float32frombits(0x3f9a_bcde) // bytes found once in the file
	if err := Write(path, 1, c); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mark := binary.LittleEndian.AppendUint32(nil, math.Float32bits(p.W[2]))
	at := bytes.Index(b, mark)
	if at < 0 || bytes.Index(b[at+1:], mark) >= 0 {
		t.Fatal("the marked weight is not in the file once")
	}
	b[at] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Read(path)
	var ie *data.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "/params/"+p.Name+": holds values whose digest") {
		t.Errorf("got %v, want an input error naming /params/%s", err, p.Name)
	}
}
