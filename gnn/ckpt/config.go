package ckpt

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// Config identifies a run: everything that changes its numbers, from the
// data and its partition to the optimizer and the compression. A checkpoint
// resumes only a run with an equal Config; in particular the same Epochs,
// since the varco schedule's ramp depends on the run's length.
type Config struct {
	Run gnn.Config
	// Adam's constants, recorded for readers of the file.
	AdamBeta1, AdamBeta2, AdamEps float64
	Data                          Data
}

// Data identifies the data a run trains on and how it was prepared.
type Data struct {
	Split                     string
	NormalizeFeatures, NoComm bool
	Ranks                     int // the world size
	PartitionMethod           string
	PartitionSeed             uint64
	// Fingerprint is data.Dataset.Fingerprint of the data trained on;
	// PartitionID identifies the assignment of its nodes to the ranks
	// (partition.PartitionID).
	Fingerprint, PartitionID uint64
}

// NewConfig is the identity of a run with these settings on these data.
func NewConfig(run gnn.Config, data Data) Config {
	t := run.TrainConfig()
	return Config{Run: run, AdamBeta1: decimal(t.Beta1), AdamBeta2: decimal(t.Beta2), AdamEps: decimal(t.Eps), Data: data}
}

// decimal is the shortest decimal that rounds to x (0.9 for float32 0.9),
// which reads better in a file than x's exact float64 value.
func decimal(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// maxLayers bounds the layer count read from a file: far above any real
// model, low enough that per-layer tables stay small.
const maxLayers = 1 << 10

// field is one Config value, stored as a root attribute of that name.
type field struct {
	name   string
	ptr    any   // *string, *int, *float64, *uint64, *bool, or an encoding.TextUnmarshaler (a named value, stored as its name)
	lo, hi int64 // the range of an int
	hex    bool  // a digest, shown in hex
	// flag is what sets it, for people: a train flag, or what decides it;
	// data marks a value the data decide (compared once they are loaded).
	flag string
	data bool
}

// fields lists c's values in the order a mismatch is looked for: the
// settings a user types first, then the world size and partition, then the
// data.
func (c *Config) fields() []field {
	const maxInt = math.MaxInt32
	r, d, p := &c.Run, &c.Data, &c.Run.Compress
	return []field{
		{name: "model", flag: "--model", ptr: &r.Model},
		{name: "layers", flag: "--layers", ptr: &r.Layers, lo: 1, hi: maxLayers},
		{name: "hidden", flag: "--hidden", ptr: &r.Hidden, lo: 0, hi: maxInt},
		{name: "lr", flag: "--lr", ptr: &r.LR},
		{name: "weight_decay", flag: "--weight-decay", ptr: &r.WeightDecay},
		{name: "dropout", flag: "--dropout", ptr: &r.Dropout},
		{name: "heads", flag: "--heads", ptr: &r.Heads, lo: 0, hi: maxInt},
		{name: "out_heads", flag: "--out-heads", ptr: &r.OutHeads, lo: 0, hi: maxInt},
		{name: "attn_dropout", flag: "--attn-dropout", ptr: &r.AttnDropout},
		{name: "adam_beta1", flag: "Adam beta1", ptr: &c.AdamBeta1},
		{name: "adam_beta2", flag: "Adam beta2", ptr: &c.AdamBeta2},
		{name: "adam_eps", flag: "Adam epsilon", ptr: &c.AdamEps},
		{name: "seed", flag: "--seed", ptr: &r.Seed},
		{name: "epochs", flag: "--epochs", ptr: &r.Epochs, lo: 1, hi: maxInt},
		{name: "codec", flag: "--codec", ptr: &p.Fwd},
		{name: "codec_bwd", flag: "--codec-bwd", ptr: &p.Bwd},
		{name: "schedule", flag: "--schedule", ptr: &p.Schedule},
		{name: "ratio", flag: "--ratio", ptr: &p.Ratio},
		{name: "ratio_max", flag: "--ratio-max", ptr: &p.RatioMax},
		{name: "ratio_min", flag: "--ratio-min", ptr: &p.RatioMin},
		{name: "slope", flag: "--slope", ptr: &p.Slope},
		{name: "kappa", flag: "--kappa", ptr: &p.Kappa},
		{name: "bits_bwd", flag: "--bits-bwd", ptr: &p.BitsBwd, lo: 0, hi: 16},
		{name: "eval", flag: "--eval", ptr: &p.Eval},
		{name: "raw_last_layer", flag: "--raw-last-layer", ptr: &p.RawLastLayer},
		{name: "residual", flag: "--residual", ptr: &p.Residual},
		{name: "residual_skip", flag: "--residual-skip", ptr: &p.ResidualSkip},
		{name: "residual_refresh", flag: "--residual-refresh", ptr: &p.ResidualRefresh, lo: 0, hi: maxInt},
		{name: "grad_skip", flag: "--grad-skip", ptr: &p.GradSkip},
		{name: "group_width", flag: "--group-width", ptr: &p.GroupWidth, lo: 0, hi: maxInt},
		{name: "cache_input", flag: "--cache-input", ptr: &p.CacheInput},
		{name: "normalize_features", flag: "--normalize-features", ptr: &d.NormalizeFeatures},
		{name: "no_comm", flag: "--no-comm", ptr: &d.NoComm},
		{name: "split", flag: "--split", ptr: &d.Split},
		{name: "ranks", flag: "the world size", ptr: &d.Ranks, lo: 1, hi: maxInt},
		{name: "partition_method", flag: "the partition method (--partition or --parts)", ptr: &d.PartitionMethod},
		{name: "partition_seed", flag: "the partition seed (--partition-seed or --parts)", ptr: &d.PartitionSeed},
		{name: "dataset_fingerprint", flag: "the dataset fingerprint (--data or --parts)", ptr: &d.Fingerprint, hex: true, data: true},
		{name: "in_dim", flag: "the feature width", ptr: &r.InDim, lo: 1, hi: maxInt, data: true},
		{name: "classes", flag: "the class count", ptr: &r.Classes, lo: 1, hi: maxInt, data: true},
		{name: "partition_id", flag: "the partition id (--parts or --partition)", ptr: &d.PartitionID, hex: true, data: true},
	}
}

func (f field) get() any { return reflect.ValueOf(f.ptr).Elem().Interface() }

// attr is the field's attribute value: ints as int64, bools as int32 0/1,
// named values by their names.
func (f field) attr() any {
	switch v := f.get().(type) {
	case int:
		return int64(v)
	case bool:
		if v {
			return int32(1)
		}
		return int32(0)
	case encoding.TextMarshaler:
		b, _ := v.MarshalText()
		return string(b)
	}
	if rv := reflect.ValueOf(f.get()); rv.Kind() == reflect.String {
		return rv.String() // a named string: the attribute is its text
	}
	return f.get()
}

// read sets the field from its attribute in h.
func (f field) read(h *h5.File) {
	switch p := f.ptr.(type) {
	case *string:
		*p = h.String(f.name)
	case *int:
		*p = int(h.Int(f.name, f.lo, f.hi))
	case *float64:
		// Every float setting is finite (a corrupt byte can make one NaN,
		// which no run has and JSON cannot carry).
		if *p = h.Float64(f.name); math.IsNaN(*p) || math.IsInf(*p, 0) {
			h.Errorf("attribute "+f.name, "is %v, expected a finite number", *p)
		}
	case *uint64:
		*p = h.Uint64(f.name)
	case *bool:
		*p = h.Int(f.name, 0, 1) == 1
	case encoding.TextUnmarshaler:
		if s := h.String(f.name); h.Err() == nil {
			if err := p.UnmarshalText([]byte(s)); err != nil {
				h.Errorf("attribute "+f.name, "%v", err)
			}
		}
	}
}

// show formats a value of the field for people.
func (f field) show(v any) string {
	if f.hex {
		return fmt.Sprintf("%016x", v)
	}
	return fmt.Sprint(v)
}

// Check returns an *data.InputError about file naming the first field in
// which the checkpoint's config c differs from run's.
func (c *Config) Check(file string, run *Config) error {
	theirs := run.fields()
	for i, f := range c.fields() {
		if have, want := f.get(), theirs[i].get(); have != want {
			return &data.InputError{File: file, Field: f.name,
				Msg: fmt.Sprintf("checkpoint has %s, this run %s%s", f.show(have), f.show(want), mismatchHint[f.name])}
		}
	}
	return nil
}

var mismatchHint = map[string]string{
	"epochs":              " (a resumed run keeps --epochs: the varco ramp depends on it)",
	"dataset_fingerprint": " (another dataset)",
	"partition_id":        " (another partition)",
}

// Setting is one value of a Config for comparing runs: what sets it (a
// train flag, or what decides it) and its value as shown to people. Data
// marks a value that the data decide.
type Setting struct {
	Name, Value string
	Data        bool
}

// Settings lists c's values in the order of Check.
func (c *Config) Settings() []Setting {
	var s []Setting
	for _, f := range c.fields() {
		s = append(s, Setting{Name: f.flag, Value: f.show(f.get()), Data: f.data})
	}
	return s
}

// Map is c as attribute name -> value, for JSON.
func (c *Config) Map() map[string]any {
	m := map[string]any{}
	for _, f := range c.fields() {
		m[f.name] = f.get()
		if f.hex {
			m[f.name] = f.show(f.get())
		}
	}
	return m
}

// Text is c as "name value" pairs in field order, for people.
func (c *Config) Text() string {
	var s []string
	for _, f := range c.fields() {
		s = append(s, f.name+" "+f.show(f.get()))
	}
	return strings.Join(s, ", ")
}
