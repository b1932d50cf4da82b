package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// writeOGB writes a tiny valid OGB-layout dataset (4 nodes, 2 features,
// 2 classes), with files overridden by the given name -> content map.
// With truncate set, gzip files lose their last bytes.
func writeOGB(t *testing.T, override map[string]string, truncate bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"raw/num-node-list.csv": "4\n",
		"raw/num-edge-list.csv": "4\n",
		"raw/edge.csv":          "0,1\n1,0\n2,3\n3,2\n",
		"raw/node-feat.csv":     "0.5,1\n1,0.25\n-1,2\n3,4\n",
		"raw/node-label.csv":    "0\n1\n0\n1\n",
		"split/s/train.csv":     "0\n1\n",
		"split/s/valid.csv":     "2\n",
		"split/s/test.csv":      "3\n",
	}
	for k, v := range override {
		files[k] = v
	}
	for name, content := range files {
		if content == "<absent>" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write([]byte(content))
			zw.Close()
			content = b.String()
			if truncate {
				content = content[:len(content)-6]
			}
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestBadInput checks that each kind of bad input gives exit code 2, a single
// line naming the offending file and line or field, and no output file.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name     string
		override map[string]string
		truncate bool
		want     []string // substrings of the error line
	}{
		{"missing file", map[string]string{"raw/edge.csv": "<absent>"}, false, []string{"edge.csv"}},
		{"wrong column count", map[string]string{"raw/edge.csv": "0,1\n1,0,5\n2,3\n3,2\n"}, false, []string{"edge.csv:2"}},
		{"non-numeric field", map[string]string{"raw/node-feat.csv": "0.5,1\n1,abc\n-1,2\n3,4\n"}, false, []string{"node-feat.csv:2"}},
		{"node id >= N", map[string]string{"raw/edge.csv": "0,1\n1,0\n2,3\n3,4\n"}, false, []string{"edge.csv:4"}},
		{"negative id", map[string]string{"raw/edge.csv": "0,1\n-1,0\n2,3\n3,2\n"}, false, []string{"edge.csv:2"}},
		{"NaN feature", map[string]string{"raw/node-feat.csv": "0.5,1\n1,0.25\nnan,2\n3,4\n"}, false, []string{"node-feat.csv:3"}},
		{"Inf feature", map[string]string{"raw/node-feat.csv": "0.5,1\n1,0.25\n-1,2\n3,inf\n"}, false, []string{"node-feat.csv:4"}},
		{"edge count disagrees", map[string]string{"raw/num-edge-list.csv": "5\n"}, false, []string{"edge"}},
		{"node count disagrees", map[string]string{"raw/num-node-list.csv": "5\n"}, false, []string{"node-"}},
		{"empty split", map[string]string{"split/s/valid.csv": ""}, false, []string{"valid.csv"}},
		{"overlapping splits", map[string]string{"split/s/test.csv": "1\n"}, false, []string{"test.csv"}},
		{"split id out of range", map[string]string{"split/s/test.csv": "9\n"}, false, []string{"test.csv:1"}},
		{"truncated gzip", map[string]string{"raw/edge.csv": "<absent>", "raw/edge.csv.gz": "0,1\n1,0\n2,3\n3,2\n"}, true, []string{"edge.csv.gz"}},
		{"ragged features", map[string]string{"raw/node-feat.csv": "0.5,1\n1\n-1,2\n3,4\n"}, false, []string{"node-feat.csv:2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeOGB(t, c.override, c.truncate)
			out := filepath.Join(t.TempDir(), "out.h5")
			code, _, stderr := runCLI("convert", "--data", dir, "--out", out)
			if code != job.ExitBadInput {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, job.ExitBadInput, stderr)
			}
			t.Log(strings.TrimSpace(stderr))
			if n := strings.Count(stderr, "\n"); n != 1 {
				t.Errorf("want a one-line error, got %d lines: %q", n, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not name %q", stderr, w)
				}
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				t.Errorf("output directory not empty after a failed convert: %v", entries)
			}
		})
	}
}

// TestBadH5 checks the same contract for .h5 datasets handed to train: a
// text file, a missing dataset, a wrong shape and a label out of range, each
// made from a valid converted file with h5py.
func TestBadH5(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import h5py").Run(); err != nil {
		t.Skip("/usr/bin/python3 with h5py is needed to corrupt HDF5 files (scripts/deps.sh installs python3-h5py)")
	}
	good := filepath.Join(t.TempDir(), "good.h5")
	if code, _, stderr := runCLI("convert", "--data", writeOGB(t, nil, false), "--out", good); code != 0 {
		t.Fatalf("convert failed: %s", stderr)
	}
	cases := []struct {
		name, python string // python edits the file f (an h5py.File opened r+); "" = replace by text
		want         []string
	}{
		{"not hdf5", "", []string{"bad.h5"}},
		{"missing dataset", "del f['/node/labels']", []string{"bad.h5", "/node/labels"}},
		{"wrong shape", "del f['/graph/indices']; f['/graph/indices'] = np.zeros(3, dtype=np.int32)", []string{"bad.h5", "/graph/indices"}},
		{"label >= classes", "f['/node/labels'][0] = 7", []string{"bad.h5", "/node/labels"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bad := filepath.Join(dir, "bad.h5")
			if c.python == "" {
				os.WriteFile(bad, []byte("0,1\n1,0\n"), 0o644)
			} else {
				b, _ := os.ReadFile(good)
				os.WriteFile(bad, b, 0o644)
				script := "import h5py, numpy as np, sys\nf = h5py.File(sys.argv[1], 'r+')\n" + c.python + "\nf.close()\n"
				if out, err := exec.Command(py, "-c", script, bad).CombinedOutput(); err != nil {
					t.Fatalf("h5py: %v: %s", err, out)
				}
			}
			metrics := filepath.Join(dir, "metrics.jsonl")
			code, _, stderr := runCLI("train", "--data", bad, "--epochs", "1", "--metrics", metrics)
			t.Log(strings.TrimSpace(stderr))
			if code != job.ExitBadInput {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, job.ExitBadInput, stderr)
			}
			if n := strings.Count(stderr, "\n"); n != 1 {
				t.Errorf("want a one-line error, got %d lines: %q", n, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not name %q", stderr, w)
				}
			}
			if _, err := os.Stat(metrics); err == nil {
				t.Errorf("metrics file written although the input was bad")
			}
		})
	}
}

// TestTrainMetrics trains a few epochs on a generated graph and checks the
// JSON Lines contract that later tools read.
func TestTrainMetrics(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "2000", "--classes", "4", "--features", "16", "--seed", "3"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	metrics := filepath.Join(dir, "m.jsonl")
	code, stdout, stderr := runCLI("train", "--data", g, "--epochs", "3", "--hidden", "8", "--metrics", metrics)
	if code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	if strings.Count(stdout, "\nepoch ") != 3 {
		t.Errorf("want 3 epoch lines on stdout, got:\n%s", stdout)
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 3 epoch objects and a summary, got %d lines", len(lines))
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		keys := []string{"epoch", "loss", "train_acc", "val_acc", "test_acc", "epoch_seconds"}
		if i == 3 {
			keys = []string{"summary", "best_val_acc", "test_at_best_val", "final_test_acc", "epochs", "seconds"}
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i+1, k, l)
			}
		}
		for _, k := range []string{"train_acc", "val_acc", "test_acc", "best_val_acc"} {
			if v, ok := m[k].(float64); ok && (v < 0 || v > 1) {
				t.Errorf("line %d: %s = %v outside [0, 1]", i+1, k, v)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"train"},
		{"train", "--data", "x.h5", "--bogus"},
		{"train", "--data", "x.h5", "--epochs", "abc"},
		{"train", "--data", "x.h5", "--comm-timeout", "-1s"},
		{"train", "--data", "x.h5", "--comm-timeout", "5"},
		{"train", "--data", "x.h5", "--progress", "dots"},
		{"train", "--data", "x.h5", "--model", "gat", "--heads", "0"},
		{"train", "--data", "x.h5", "--model", "gat", "--out-heads", "0"},
		{"train", "--data", "x.h5", "--threads", "-1"},
		{"train", "--data", "x.h5", "--cache-input", "--dropout", "0.5"},
		{"train", "--data", "x.h5", "--cache-input", "--model", "gat"},
		{"train", "--data", "x.h5", "--codec", "quant", "--eval", "best"},
		{"train", "--data", "x.h5", "--codec", "quant"},
		{"train", "--data", "x.h5", "--compress", "best"},
		{"train", "--data", "x.h5", "--compress", "authors", "--ratio", "8"},
		{"gen", "--out", "x.h5", "--homophily", "1.5"},
	} {
		code, _, stderr := runCLI(args...)
		if code != job.ExitBadInput || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
	if code, _, stderr := runCLI("train", "--help"); code != 0 || !strings.Contains(stderr, "--weight-decay") {
		t.Errorf("train --help: exit %d, output %q", code, stderr)
	}
}

// TestTrainHelp: train --help lists the essentials in their sections on one
// screen, --help-all every flag, and every flag has a section.
func TestTrainHelp(t *testing.T) {
	if missing := newTrainFlags(io.Discard).fs.Unsectioned(); len(missing) > 0 {
		t.Errorf("flags in no section of --help: %v", missing)
	}
	_, _, short := runCLI("train", "--help")
	code, _, all := runCLI("train", "--help-all")
	if lines := strings.Count(short, "\n"); code != 0 || lines > 40 {
		t.Errorf("train --help: %d lines, --help-all exit %d:\n%s", lines, code, short)
	}
	for _, f := range []string{"--data", "--model", "--epochs", "--ranks", "--compress", "--metrics", "--checkpoint"} {
		if !strings.Contains(short, f+" ") {
			t.Errorf("train --help lacks %s", f)
		}
	}
	newTrainFlags(io.Discard).fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "help-all" && !strings.Contains(all, "--"+f.Name+" ") {
			t.Errorf("train --help-all lacks --%s", f.Name)
		}
	})
}

// TestNoComm: the no-communication baseline trains on the parts' own edges
// and sends no halo bytes, while full communication on the same parts does.
func TestNoComm(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "3000", "--classes", "4", "--features", "8", "--seed", "2"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	bytesSent := func(extra ...string) float64 {
		m := filepath.Join(t.TempDir(), "m.jsonl")
		args := append([]string{"train", "--data", g, "--ranks", "3", "--epochs", "2", "--hidden", "8", "--metrics", m}, extra...)
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
		b, _ := os.ReadFile(m)
		var last map[string]any
		json.Unmarshal([]byte(strings.Split(strings.TrimSpace(string(b)), "\n")[0]), &last)
		return last["bytes_fwd"].(float64) + last["bytes_bwd"].(float64)
	}
	if full := bytesSent(); full == 0 {
		t.Errorf("full communication on 3 ranks sent no halo bytes")
	}
	if none := bytesSent("--no-comm"); none != 0 {
		t.Errorf("--no-comm sent %v halo bytes", none)
	}
}

// TestCompressFlags: a preset with the expert flags given each replacing
// one field, whatever their order; --codec sets both directions unless
// --codec-bwd is given; a schedule's knob given for another schedule is
// refused; --codec quant alone is the recommended preset; and through the
// command the recommended preset trains 2-bit on every layer.
func TestCompressFlags(t *testing.T) {
	plan := func(args ...string) (compress.Plan, error) {
		fs := flag.NewFlagSet("train", flag.ContinueOnError)
		var cf compressFlags
		cf.register(fs)
		if err := fs.Parse(args); err != nil {
			return compress.Plan{}, err
		}
		return cf.plan()
	}
	rec := compress.MustPreset(compress.PresetRecommended)
	for _, tc := range []struct {
		args []string
		edit func(p *compress.Plan)
	}{
		{[]string{"--compress", "recommended"}, func(p *compress.Plan) {}},
		{[]string{"--residual-skip", "0.02", "--compress", "recommended"}, func(p *compress.Plan) { p.ResidualSkip = 0.02 }},
		{[]string{"--compress", "recommended", "--codec-bwd", "trunc", "--bits-bwd", "0"}, func(p *compress.Plan) { p.Bwd, p.BitsBwd = codec.KindTrunc, 0 }},
		{[]string{"--compress", "recommended", "--schedule", "varco", "--ratio-min", "4"}, func(p *compress.Plan) { p.Schedule, p.RatioMin = compress.ScheduleVarco, 4 }},
		{[]string{"--codec", "trunc", "--ratio", "8"}, func(p *compress.Plan) {
			*p = compress.MustPreset(compress.PresetNone)
			p.Fwd, p.Bwd, p.Ratio = codec.KindTrunc, codec.KindTrunc, 8
		}},
		// --codec quant alone is the recommended preset.
		{[]string{"--codec", "quant"}, func(p *compress.Plan) {}},
		// The presets spelled out in expert flags, as docs/VARCO.md gives them.
		{strings.Fields("--codec quant --schedule adaptive --ratio-max 16 --residual on --residual-skip 0.005 --residual-refresh 8 --group-width 64"), func(p *compress.Plan) {}},
		{strings.Fields("--codec trunc --schedule varco --raw-last-layer --eval compressed"), func(p *compress.Plan) { *p = compress.MustPreset(compress.PresetAuthors) }},
	} {
		want := rec
		tc.edit(&want)
		got, err := plan(tc.args...)
		if err != nil || got != want {
			t.Errorf("%v: %+v, %v; want %+v", tc.args, got, err, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--compress", "authors", "--ratio", "8"}, "train: --ratio applies to --schedule fixed; the schedule is varco (--compress authors)"},
		{[]string{"--codec", "quant", "--kappa", "1"}, "train: --kappa applies to --schedule adaptive; the schedule is fixed (--compress none)"},
		{[]string{"--compress", "recommended", "--schedule", "adaptive", "--ratio-min", "2"}, "train: --ratio-min applies to --schedule varco; the schedule is adaptive (--schedule)"},
		{[]string{"--codec", "trunc"}, "train: --codec trunc at rate 1 sends every row raw"},
		{[]string{"--compress", "none", "--codec", "quant"}, "train: --codec quant at rate 1 sends every row raw"},
		{[]string{"--compress", "fast"}, `train: --compress: got "fast", expected none, recommended, authors`},
	} {
		if _, err := plan(tc.args...); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	dir := t.TempDir()
	g := filepath.Join(dir, "g.h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "300", "--features", "8", "--seed", "2"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	code, stdout, stderr := runCLI("train", "--data", g, "--ranks", "2", "--epochs", "2", "--hidden", "8", "--compress", "recommended")
	if code != 0 || !strings.Contains(stdout, "schedule adaptive(quant,kappa=2,rmax=16)") || !strings.Contains(stdout, "rate 16/16/16") {
		t.Errorf("--compress recommended: exit %d\n%s%s", code, stdout, stderr)
	}
}
