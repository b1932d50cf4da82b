// Package ckpt reads and writes training checkpoints: one HDF5 file holding a
// run's configuration, its parameters with Adam's moments and step, the rate
// schedule's state and the metrics history, from which the run resumes bit
// for bit. docs/FORMATS.md documents the layout for h5py and h5dump users.
package ckpt

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// Format and Version are the root attributes format and version.
const (
	Format  = "gnn-spmd-checkpoint"
	Version = 3
)

// rngScheme describes the random state for h5dump readers: dropout masks and
// codec draws are keyed by counters, so the seed and the epoch are all of it.
const rngScheme = "counter-based: dropout masks and codec draws are keyed by (rng_seed, epoch, layer); rng_epoch is the next epoch"

// Checkpoint is the state of a run after Epoch finished epochs.
type Checkpoint struct {
	Config      Config
	DatasetName string // recorded for people; the fingerprint identifies the data
	Epoch       int    // finished epochs: the run continues at this epoch index
	Step        int    // Adam's step count
	Params      []Param
	// Adaptive is the adaptive schedule's state; nil for the stateless
	// fixed and varco schedules.
	Adaptive *compress.AdaptiveState
	// Residual is the residual coding's state of every rank, one table per
	// exchange that has run with it (none without residual coding).
	Residual []halo.ResidualTable
	// Kept is the parameters of the best epochs so far, one set per
	// criterion.
	Kept []gnn.Kept
	// Exact is the full-precision accuracies of the parameter sets, which a
	// finished run measured after its last epoch; nil in a checkpoint
	// written before that, or by a run whose accuracies are read under
	// compression (--eval compressed).
	Exact   *Accuracies
	History []metrics.Epoch // one per finished epoch
}

// Accuracies are the validation and test accuracies of the kept best
// parameters (/best/acc) and of the final ones (/params).
type Accuracies struct {
	BestVal, BestTest, FinalVal, FinalTest float64
}

// accuracyAttrs names Accuracies' root attributes, in field order.
var accuracyAttrs = [...]string{"best_val_acc", "best_test_acc", "final_val_acc", "final_test_acc"}

func (a *Accuracies) fields() []*float64 {
	return []*float64{&a.BestVal, &a.BestTest, &a.FinalVal, &a.FinalTest}
}

// Param is one parameter with its Adam moments, all [Rows, Cols] row-major.
type Param struct {
	Name       string
	Rows, Cols int
	W, M, V    []float32
}

// Capture takes the state of t after the epochs in history, sharing t's
// slices: write it before t trains on. Every rank holds the same parameters
// and moments (gradients are all-reduced), so any rank's trainer will do;
// residual is every rank's residual state (halo.GatherResidual).
func Capture(cfg Config, datasetName string, t *gnn.Trainer, history []metrics.Epoch, residual []halo.ResidualTable) *Checkpoint {
	c := &Checkpoint{Config: cfg, DatasetName: datasetName, Epoch: len(history), Step: t.Step(), History: history, Residual: residual}
	t.Model.SyncToHost()
	for _, p := range t.Model.Params {
		c.Params = append(c.Params, Param{p.Name, p.Rows, p.Cols, p.W, p.M, p.V})
	}
	if a := t.Adaptive(); a != nil {
		st := a.State()
		c.Adaptive = &st
	}
	c.Kept = t.Kept()
	return c
}

// Restore copies the checkpoint's state into t, a fresh trainer built with
// the checkpoint's Config, so that t.Run continues at epoch c.Epoch.
func (c *Checkpoint) Restore(t *gnn.Trainer) error {
	ps := t.Model.Params
	if len(ps) != len(c.Params) {
		return fmt.Errorf("restore: the model has %d parameters, the checkpoint %d", len(ps), len(c.Params))
	}
	for i, p := range ps {
		q := c.Params[i]
		if p.Name != q.Name || p.Rows != q.Rows || p.Cols != q.Cols {
			return fmt.Errorf("restore: parameter %s [%d, %d], the checkpoint has %s [%d, %d]", p.Name, p.Rows, p.Cols, q.Name, q.Rows, q.Cols)
		}
		copy(p.W, q.W)
		copy(p.M, q.M)
		copy(p.V, q.V)
	}
	t.Model.SyncToDevice()
	if a := t.Adaptive(); a != nil {
		if c.Adaptive == nil {
			return fmt.Errorf("restore: the checkpoint has no adaptive schedule state")
		}
		if err := a.SetState(*c.Adaptive); err != nil {
			return err
		}
	}
	if len(c.Residual) > 0 && t.Halo != nil {
		if err := t.Halo.RestoreResidual(c.Residual); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := t.Resume(c.Step, c.History); err != nil {
		return err
	}
	return t.RestoreKept(c.History, c.Kept)
}

// Write saves c at path atomically (outfile.Write): the new checkpoint is
// written completely first; only then do the ones before it move to
// path.1 (the newest) ... path.<keep-1>. A failed write leaves every
// checkpoint as it was.
func Write(path string, keep int, c *Checkpoint) error {
	return outfile.Write(path, keep, func(tmp string) error { return h5.Create(tmp, c.attrs(), c.arrays()) })
}

// ParamDigest digests the parameters and Adam moments, so that the ranks
// of a resumed job can check they resume the same state.
func (c *Checkpoint) ParamDigest() uint64 {
	var arrays []any
	for _, p := range c.Params {
		arrays = append(arrays, p.W, p.M, p.V)
	}
	return data.Digest(arrays...)
}

// attrsDigestName is the attribute that holds a digest of all the others:
// a corrupt byte can make libhdf5 read a scalar attribute from the wrong
// place (a damaged attribute header shifts its data), giving a plausible
// value such as a subnormal dropout; the digest catches that.
const attrsDigestName = "attrs_digest"

func (c *Checkpoint) attrs() []h5.Attr {
	a := c.baseAttrs()
	return append(a, h5.Attr{Name: attrsDigestName, Val: attrsDigest(a)})
}

// attrsDigest is FNV-1a over the attributes' names and values as Go prints
// them (floats in their shortest exact form).
func attrsDigest(a []h5.Attr) uint64 {
	h := fnv.New64a()
	for _, at := range a {
		fmt.Fprintf(h, "%s=%v;", at.Name, at.Val)
	}
	return h.Sum64()
}

func (c *Checkpoint) baseAttrs() []h5.Attr {
	a := []h5.Attr{
		{Name: "format", Val: Format}, {Name: "version", Val: int32(Version)},
		{Name: "epoch", Val: int64(c.Epoch)}, {Name: "adam_step", Val: int64(c.Step)},
		{Name: "rng", Val: rngScheme}, {Name: "rng_seed", Val: c.Config.Run.Seed}, {Name: "rng_epoch", Val: int64(c.Epoch)},
		{Name: "dataset_name", Val: c.DatasetName},
	}
	for _, f := range c.Config.fields() {
		a = append(a, h5.Attr{Name: f.name, Val: f.attr()})
	}
	for _, k := range c.Kept {
		a = append(a, h5.Attr{Name: keptEpochAttr(k.Criterion), Val: int64(k.Epoch)})
	}
	if s := c.Adaptive; s != nil {
		a = append(a, h5.Attr{Name: "adaptive_smoothed", Val: s.Smoothed},
			h5.Attr{Name: "adaptive_gmin", Val: s.GMin}, h5.Attr{Name: "adaptive_gmax", Val: s.GMax})
	}
	if x := c.Exact; x != nil {
		for i, v := range x.fields() {
			a = append(a, h5.Attr{Name: accuracyAttrs[i], Val: *v})
		}
	}
	return a
}

func (c *Checkpoint) arrays() []h5.Array {
	var a []h5.Array
	for _, p := range c.Params {
		dims := []uint{uint(p.Rows), uint(p.Cols)}
		a = append(a, h5.Array{Path: "/params/" + p.Name, Data: p.W, Dims: dims},
			h5.Array{Path: "/adam/m/" + p.Name, Data: p.M, Dims: dims},
			h5.Array{Path: "/adam/v/" + p.Name, Data: p.V, Dims: dims})
	}
	for _, k := range c.Kept {
		for i, p := range c.Params {
			a = append(a, h5.Array{Path: keptGroup(k.Criterion) + p.Name, Data: k.W[i], Dims: []uint{uint(p.Rows), uint(p.Cols)}})
		}
	}
	if s := c.Adaptive; s != nil {
		dims := []uint{uint(len(s.Rates))}
		a = append(a, h5.Array{Path: "/adaptive/rates", Data: s.Rates, Dims: dims},
			h5.Array{Path: "/adaptive/ref_err", Data: s.RefErr, Dims: dims},
			h5.Array{Path: "/adaptive/ref_rate", Data: s.RefRate, Dims: dims})
	}
	for _, r := range c.Residual {
		if len(r.Data) == 0 {
			continue // no rows: what a reader assumes of a missing group
		}
		q := len(r.Rows)
		rows := make([]int64, 0, q*q)
		for _, v := range r.Rows {
			rows = append(rows, v...)
		}
		g := residualGroup(r.Layer, r.Dir)
		a = append(a, h5.Array{Path: g + "/rows", Data: rows, Dims: []uint{uint(q), uint(q)}},
			h5.Array{Path: g + "/values", Data: r.Data, Dims: []uint{uint(len(r.Data) / r.Cols), uint(r.Cols)}})
	}
	return append(a, historyArrays(c.History, c.Config.Run.Layers)...)
}

// residualGroup holds the residual state of one exchange: rows[s][r], the
// rows rank s sends rank r, and values, those rows' reconstructions in
// (s, r) order.
func residualGroup(layer, dir int) string {
	return fmt.Sprintf("/residual/%s/layer%d", [2]string{"forward", "backward"}[dir], layer)
}

// Read reads the checkpoint at path, checking its structure: the attributes'
// types and ranges, and every dataset's type and shape against the config
// (Verify checks the values). Every problem is an *data.InputError naming the
// file and the HDF5 object.
func Read(path string) (*Checkpoint, error) {
	c := &Checkpoint{}
	if err := h5.Read(path, Format, Version, "no such file", c.read); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Checkpoint) read(f *h5.File) error {
	for _, fl := range c.Config.fields() {
		fl.read(f)
	}
	if f.Err() != nil {
		return f.Err()
	}
	if m := c.Config.Run.Model; m != "sage" && m != "gcn" && m != "gat" {
		return f.Errorf("attribute model", "is %q, expected sage, gcn or gat", m)
	}
	c.DatasetName = f.String("dataset_name")
	c.Epoch = int(f.Int("epoch", 1, int64(c.Config.Run.Epochs)))
	c.Step = int(f.Int("adam_step", 0, math.MaxInt32))
	if seed := f.Uint64("rng_seed"); f.Err() == nil && seed != c.Config.Run.Seed {
		return f.Errorf("attribute rng_seed", "is %d, but seed is %d: the file is corrupt", seed, c.Config.Run.Seed)
	}
	if e := f.Int("rng_epoch", 0, math.MaxInt32); f.Err() == nil && e != int64(c.Epoch) {
		return f.Errorf("attribute rng_epoch", "is %d, but epoch is %d: the file is corrupt", e, c.Epoch)
	}
	c.readParams(f)
	c.readKept(f)
	c.readExact(f)
	if p := &c.Config.Run.Compress; p.Enabled() && p.Schedule == compress.ScheduleAdaptive {
		c.readAdaptive(f)
	}
	if c.Config.Run.Compress.CodesResiduals() {
		c.readResidual(f)
	}
	c.History = readHistory(f, c.Epoch, c.Config.Run.Layers)
	if want, got := f.Uint64(attrsDigestName), attrsDigest(c.baseAttrs()); f.Err() == nil && got != want {
		return f.Errorf("attribute "+attrsDigestName, "is %#x, but the attributes read give %#x: the file is corrupt", want, got)
	}
	return f.Err()
}

func (c *Checkpoint) readParams(f *h5.File) {
	for _, s := range c.Config.Run.ModelConfig().ParamShapes() {
		shape := []int64{int64(s.Rows), int64(s.Cols)}
		desc := "[rows, cols] from the config"
		c.Params = append(c.Params, Param{Name: s.Name, Rows: s.Rows, Cols: s.Cols,
			W: h5.ReadArray[float32](f, "/params/"+s.Name, desc, shape...),
			M: h5.ReadArray[float32](f, "/adam/m/"+s.Name, desc, shape...),
			V: h5.ReadArray[float32](f, "/adam/v/"+s.Name, desc, shape...)})
	}
}

func keptEpochAttr(criterion string) string { return "best_" + criterion + "_epoch" }
func keptGroup(criterion string) string     { return "/best/" + criterion + "/" }

// readKept reads the kept parameters present: a run keeps them from its
// first evaluated epoch on (gnn.Trainer.RestoreKept checks them against the
// run and its history).
func (c *Checkpoint) readKept(f *h5.File) {
	for _, crit := range gnn.KeptCriteria {
		name := keptEpochAttr(crit)
		if !f.HasAttr(name) {
			continue
		}
		k := gnn.Kept{Criterion: crit, Epoch: int(f.Int(name, 0, int64(c.Epoch)-1))}
		for _, s := range c.Config.Run.ModelConfig().ParamShapes() {
			k.W = append(k.W, h5.ReadArray[float32](f, keptGroup(crit)+s.Name, "[rows, cols] from the config", int64(s.Rows), int64(s.Cols)))
		}
		c.Kept = append(c.Kept, k)
	}
}

// readExact reads the recorded accuracies, all four or none.
func (c *Checkpoint) readExact(f *h5.File) {
	if !f.HasAttr(accuracyAttrs[0]) {
		return
	}
	c.Exact = &Accuracies{}
	for i, v := range c.Exact.fields() {
		if *v = f.Float64(accuracyAttrs[i]); f.Err() == nil && !(*v >= 0 && *v <= 1) {
			f.Errorf("attribute "+accuracyAttrs[i], "is %v, expected an accuracy in [0, 1]", *v)
		}
	}
}

// BestParams is the kept parameters of the best validation accuracy's
// epoch, named and shaped as Params (Adam's moments left out), and that
// epoch; an *data.InputError naming path where the checkpoint keeps none
// (no epoch was evaluated before it).
func (c *Checkpoint) BestParams(path string) ([]Param, int, error) {
	for _, k := range c.Kept {
		if k.Criterion != "acc" {
			continue
		}
		out := make([]Param, len(c.Params))
		for i, p := range c.Params {
			out[i] = Param{Name: p.Name, Rows: p.Rows, Cols: p.Cols, W: k.W[i]}
		}
		return out, k.Epoch, nil
	}
	return nil, 0, &data.InputError{File: path, Field: strings.TrimSuffix(keptGroup("acc"), "/"), Msg: "is absent: no epoch was evaluated before this checkpoint; use --params final"}
}

func (c *Checkpoint) readAdaptive(f *h5.File) {
	s := &compress.AdaptiveState{Smoothed: f.Float64("adaptive_smoothed"), GMin: f.Float64("adaptive_gmin"), GMax: f.Float64("adaptive_gmax")}
	// Empty before the schedule's first observation, else one per layer.
	s.Rates = h5.ReadArray[float64](f, "/adaptive/rates", "[layers] or [0]", -1)
	n := int64(len(s.Rates))
	if f.Err() == nil && n != 0 && n != int64(c.Config.Run.Layers) {
		f.Errorf("/adaptive/rates", "has %d entries, expected layers = %d (or none)", n, c.Config.Run.Layers)
	}
	s.RefErr = h5.ReadArray[float64](f, "/adaptive/ref_err", "[len(/adaptive/rates)]", n)
	s.RefRate = h5.ReadArray[float64](f, "/adaptive/ref_rate", "[len(/adaptive/rates)]", n)
	c.Adaptive = s
}

// readResidual reads the residual groups present (an exchange that has not
// run with residual coding has none).
func (c *Checkpoint) readResidual(f *h5.File) {
	q := int64(c.Config.Data.Ranks)
	for l := range c.Config.Run.Layers {
		for dir := range 2 {
			g := residualGroup(l, dir)
			if !f.Exists(g + "/rows") {
				continue
			}
			flat := h5.ReadArray[int64](f, g+"/rows", "[ranks, ranks]", q, q)
			var n int64
			for _, v := range flat {
				if f.Err() == nil && (v < 0 || v > math.MaxInt32) {
					f.Errorf(g+"/rows", "holds %d, expected row counts in [0, 2^31)", v)
				}
				n += v
			}
			data := h5.ReadArray[float32](f, g+"/values", "[sum of rows, width]", n, -1)
			if f.Err() != nil {
				return
			}
			t := halo.ResidualTable{Layer: l, Dir: dir, Data: data, Rows: make([][]int64, q)}
			for s := range t.Rows {
				t.Rows[s] = flat[int64(s)*q : int64(s+1)*q]
			}
			if n == 0 || len(data) == 0 {
				f.Errorf(g+"/values", "is empty, expected the reconstructions of layer %d's rows", l)
				return
			}
			t.Cols = len(data) / int(n)
			c.Residual = append(c.Residual, t)
		}
	}
}

// Verify checks the values Read does not: one Adam step per epoch, the
// history numbered 0, 1, ..., finite parameters and moments (second moments
// >= 0), a finite schedule state, and fingerprints present. path names the
// file in the *data.InputError it returns.
func (c *Checkpoint) Verify(path string) error {
	var bad badFunc = func(field, format string, args ...any) error {
		return &data.InputError{File: path, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Config.Data.Fingerprint == 0:
		return bad("attribute dataset_fingerprint", "is 0, expected the fingerprint of the dataset trained on")
	case c.Config.Data.PartitionID == 0:
		return bad("attribute partition_id", "is 0, expected the id of the partition trained on")
	case c.Step != c.Epoch:
		return bad("attribute adam_step", "is %d, expected one step per finished epoch = %d", c.Step, c.Epoch)
	}
	for i, st := range c.History {
		if st.Epoch != i {
			return bad("/metrics/epoch", "row %d is epoch %d, expected %d", i, st.Epoch, i)
		}
	}
	if err := c.verifyParams(bad); err != nil {
		return err
	}
	for _, kp := range c.Kept {
		for i, w := range kp.W {
			if err := finite(bad, keptGroup(kp.Criterion)+c.Params[i].Name, w); err != nil {
				return err
			}
		}
	}
	for _, r := range c.Residual {
		if err := finite(bad, residualGroup(r.Layer, r.Dir)+"/values", r.Data); err != nil {
			return err
		}
	}
	return c.verifyAdaptive(bad)
}

type badFunc func(field, format string, args ...any) error

// finite reports the first entry of the dataset at field that is NaN or
// infinite.
func finite(bad badFunc, field string, v []float32) error {
	for k, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return bad(field, "entry %d is %v, expected a finite number", k, x)
		}
	}
	return nil
}

func (c *Checkpoint) verifyParams(bad badFunc) error {
	for _, p := range c.Params {
		for _, a := range []struct {
			group string
			v     []float32
		}{{"/params/", p.W}, {"/adam/m/", p.M}, {"/adam/v/", p.V}} {
			for k, x := range a.v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (a.group == "/adam/v/" && x < 0) {
					return bad(a.group+p.Name, "entry %d is %v, expected a finite number (>= 0 for a second moment)", k, x)
				}
			}
		}
	}
	return nil
}

func (c *Checkpoint) verifyAdaptive(bad badFunc) error {
	s := c.Adaptive
	if s == nil {
		return nil
	}
	for _, v := range []struct {
		field string
		x     []float64
	}{{"attribute adaptive_smoothed", []float64{s.Smoothed}}, {"attribute adaptive_gmin", []float64{s.GMin}},
		{"attribute adaptive_gmax", []float64{s.GMax}}, {"/adaptive/rates", s.Rates},
		{"/adaptive/ref_err", s.RefErr}, {"/adaptive/ref_rate", s.RefRate}} {
		for _, x := range v.x {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return bad(v.field, "holds %v, expected finite numbers >= 0", x)
			}
		}
	}
	return nil
}
