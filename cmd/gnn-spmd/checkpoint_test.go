package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// genGraph writes a generated 2000-node, 4-class graph into dir.
func genGraph(t *testing.T, dir, seed string) string {
	t.Helper()
	g := filepath.Join(dir, "g"+seed+".h5")
	if code, _, stderr := runCLI("gen", "--out", g, "--nodes", "2000", "--classes", "4", "--features", "16", "--seed", seed); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	return g
}

// untimedMetrics reads a metrics file with the timing fields (and the
// memory high-water mark) removed, each line re-encoded with sorted keys
// and the numbers exactly as written.
func untimedMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			// What a resumed run sent to cache its input again is its own:
			// resumeInputBytes checks it.
			if strings.HasSuffix(k, "seconds") || strings.HasSuffix(k, "rss_mb") || k == "resume_input_bytes" {
				delete(m, k)
			}
		}
		e, _ := json.Marshal(m)
		out = append(out, string(e))
	}
	return out
}

// resumeInputBytes checks that a resumed run's summary reports the bytes of
// its input's one exchange as the uninterrupted run's (plain) epoch 0 counted
// them for the first layer, where that run cached its input (its later
// epochs send nothing for the layer), and nothing otherwise.
func resumeInputBytes(t *testing.T, resumed, plain string) {
	t.Helper()
	lines := func(path string) []map[string]json.RawMessage {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]json.RawMessage
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	layer0 := func(m map[string]json.RawMessage) int64 {
		var b []int64
		if err := json.Unmarshal(m["bytes_fwd_layer"], &b); err != nil {
			t.Fatal(err)
		}
		return b[0]
	}
	p := lines(plain)
	want := int64(0)
	if layer0(p[1]) == 0 {
		want = layer0(p[0])
	}
	r := lines(resumed)
	var got int64
	if v, ok := r[len(r)-1]["resume_input_bytes"]; ok {
		if err := json.Unmarshal(v, &got); err != nil {
			t.Fatal(err)
		}
	}
	if got != want {
		t.Errorf("%s: resume_input_bytes %d, want %d", filepath.Base(resumed), got, want)
	}
}

func readCheckpoint(t *testing.T, path string) *ckpt.Checkpoint {
	t.Helper()
	c, err := ckpt.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheckpointResume: runs resumed from the checkpoints after epochs 5 and
// 10 of a 12-epoch, 2-rank run write the same metrics, bit for bit but for
// the timings, as the uninterrupted run, for full communication (with
// dropout), for quant under the varco and adaptive schedules and with
// residual coding (whose state the checkpoint carries), and with the input
// cached; so does the run that wrote the checkpoints.
func TestCheckpointResume(t *testing.T) {
	g := genGraph(t, t.TempDir(), "3")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"full", []string{"--dropout", "0.3"}},
		{"quant-varco", []string{"--codec", "quant", "--schedule", "varco"}},
		{"quant-adaptive", []string{"--codec", "quant", "--schedule", "adaptive"}},
		// The recommended setting: residual coding, rows skipped.
		{"quant-residual", []string{"--compress", "recommended"}},
		{"quant-varco-residual", []string{"--codec", "quant", "--schedule", "varco", "--residual", "on", "--residual-skip", "0"}},
		// The input crosses once, and again in a resumed run.
		{"quant-residual-cache-input", []string{"--compress", "recommended", "--cache-input"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			run := func(metrics string, extra ...string) string {
				m := filepath.Join(dir, metrics)
				args := append([]string{"train", "--data", g, "--ranks", "2", "--epochs", "12", "--hidden", "8", "--quiet", "--metrics", m}, c.args...)
				if code, _, stderr := runCLI(append(args, extra...)...); code != 0 {
					t.Fatalf("%v: %s", extra, stderr)
				}
				return m
			}
			ck := filepath.Join(dir, "c.h5")
			plain := run("plain.jsonl")
			want := untimedMetrics(t, plain)
			saved := run("saved.jsonl", "--checkpoint", ck, "--checkpoint-every", "5", "--keep", "3")
			for file, epoch := range map[string]int{ck: 12, ck + ".1": 10, ck + ".2": 5} {
				if got := readCheckpoint(t, file).Epoch; got != epoch {
					t.Errorf("%s holds epoch %d, want %d", file, got, epoch)
				}
			}
			if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(ck), ".*.tmp")); len(tmp) > 0 {
				t.Errorf("temporary files left: %v", tmp)
			}
			for i, m := range []string{saved, run("from10.jsonl", "--resume", ck+".1"), run("from5.jsonl", "--resume", ck+".2")} {
				if i > 0 {
					resumeInputBytes(t, m, plain)
				}
				got := untimedMetrics(t, m)
				if len(got) != len(want) {
					t.Fatalf("%s: %d lines, want %d", m, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("%s line %d:\n got %s\nwant %s", filepath.Base(m), i+1, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestMPIResume: under mpirun, where rank 0 reads the checkpoint and sends
// it to the others, the
// resumed adaptive run with residual coding (its state gathered from every
// rank into the checkpoint) writes the uninterrupted run's metrics.
func TestMPIResume(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck := filepath.Join(dir, "c.h5")
	run := func(metrics string, extra ...string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		m := filepath.Join(dir, metrics)
		// From 2 bits up (r <= 16): 1-bit exchanges carry no residual state.
		args := []string{"train", "--data", g, "--epochs", "8", "--hidden", "8", "--quiet", "--codec", "quant", "--schedule", "adaptive",
			"--ratio-max", "16", "--residual", "on", "--metrics", m}
		if b, err := mpirunCmd(ctx, t, 2, append(args, extra...)...).CombinedOutput(); err != nil {
			t.Fatalf("mpirun %v: %v\n%s", extra, err, b)
		}
		return untimedMetrics(t, m)
	}
	want := run("saved.jsonl", "--checkpoint", ck, "--checkpoint-every", "5", "--keep", "2")
	if n := len(readCheckpoint(t, ck+".1").Residual); n == 0 {
		t.Fatalf("the checkpoint holds no residual state")
	}
	got := run("resumed.jsonl", "--resume", ck+".1")
	resumeInputBytes(t, filepath.Join(dir, "resumed.jsonl"), filepath.Join(dir, "saved.jsonl"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("resumed metrics\n%s\nuninterrupted\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// wantBadInput checks exit code 2 and a one-line error holding every want.
func wantBadInput(t *testing.T, code int, stderr string, want ...string) {
	t.Helper()
	t.Log(strings.TrimSpace(stderr))
	if code != job.ExitBadInput {
		t.Fatalf("exit code %d, want %d; stderr: %s", code, job.ExitBadInput, stderr)
	}
	if n := strings.Count(stderr, "\n"); n != 1 {
		t.Errorf("want a one-line error, got %d lines: %q", n, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("error %q does not name %q", stderr, w)
		}
	}
}

// smallRun trains 4 epochs on 2 ranks with a checkpoint every 2 epochs; the
// returned arguments (without --checkpoint) resume it.
func smallRun(t *testing.T, g, ck string) []string {
	t.Helper()
	args := []string{"train", "--data", g, "--ranks", "2", "--epochs", "4", "--hidden", "8", "--quiet"}
	if code, _, stderr := runCLI(append(args, "--checkpoint", ck, "--checkpoint-every", "2")...); code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	return args
}

// TestResumeRefused: a checkpoint of another configuration, dataset, world
// size or partition is refused with one line naming the field, before
// anything is written.
func TestResumeRefused(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck := filepath.Join(dir, "c.h5")
	args := smallRun(t, g, ck)
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--hidden", "16"}, "c.h5: hidden: checkpoint has 8, this run 16"},
		{[]string{"--data", genGraph(t, dir, "4")}, "c.h5: dataset_fingerprint: checkpoint has"},
		{[]string{"--ranks", "3"}, "c.h5: ranks: checkpoint has 2, this run 3"},
		{[]string{"--epochs", "6"}, "c.h5: epochs: checkpoint has 4, this run 6"},
		{[]string{"--partition-seed", "1"}, "c.h5: partition_seed: checkpoint has 0, this run 1"},
		{[]string{"--compress", "recommended"}, "c.h5: codec: checkpoint has none, this run quant"},
	} {
		metrics := filepath.Join(t.TempDir(), "m.jsonl")
		code, _, stderr := runCLI(append(append(args, "--resume", ck, "--metrics", metrics), c.extra...)...)
		wantBadInput(t, code, stderr, c.want)
		if _, err := os.Stat(metrics); err == nil {
			t.Errorf("%v: metrics file written by a refused resume", c.extra)
		}
	}
}

// TestCheckpointAtomic: a failed checkpoint write leaves the previous
// checkpoint as it was, and temporary files of other writers are ignored.
func TestCheckpointAtomic(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	ck := filepath.Join(dir, "c.h5")
	smallRun(t, g, ck)
	before, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	// A temporary file of a writer that is gone, and one of a live
	// process (pid 1) that is not this run's to remove.
	stale, live := outfile.TempName(ck, deadPid(t)), outfile.TempName(ck, 1)
	os.WriteFile(stale, []byte("half a checkpoint"), 0o644)
	os.WriteFile(live, []byte("half a checkpoint"), 0o644)
	// A directory where this process's temporary file would go makes the
	// next write fail.
	blocker := outfile.TempName(ck, os.Getpid())
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("train", "--data", g, "--epochs", "4", "--hidden", "8", "--quiet", "--checkpoint", ck, "--checkpoint-every", "2")
	if code != job.ExitFailure || !strings.Contains(stderr, "c.h5") {
		t.Fatalf("write into a blocked path: exit %d, %q; want exit 1 naming c.h5", code, stderr)
	}
	if after, _ := os.ReadFile(ck); !bytes.Equal(before, after) {
		t.Errorf("the checkpoint changed although the write failed")
	}
	if code, stdout, stderr := runCLI("inspect", "--verify", ck); code != 0 || stdout != "ok\n" {
		t.Errorf("inspect --verify after a failed write: exit %d, %q %q", code, stdout, stderr)
	}
	os.RemoveAll(blocker)
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "4", "--hidden", "8", "--quiet", "--checkpoint", ck, "--keep", "2"); code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	if exists(stale) {
		t.Errorf("the temporary file of a dead writer was left")
	}
	if b, _ := os.ReadFile(live); string(b) != "half a checkpoint" {
		t.Errorf("the temporary file of a live process was touched")
	}
	if c := readCheckpoint(t, ck+".1"); c.Config.Data.Ranks != 2 {
		t.Errorf("%s.1 is not the previous checkpoint: %d ranks", ck, c.Config.Data.Ranks)
	}
}

// TestCheckpointH5dump: h5dump reads every attribute and dataset.
func TestCheckpointH5dump(t *testing.T) {
	if _, err := exec.LookPath("h5dump"); err != nil {
		t.Skip("h5dump not installed (Debian: hdf5-tools)")
	}
	dir := t.TempDir()
	ck := filepath.Join(dir, "c.h5")
	smallRun(t, genGraph(t, dir, "3"), ck)
	out, err := exec.Command("h5dump", ck).CombinedOutput()
	if err != nil {
		t.Fatalf("h5dump: %v\n%s", err, out)
	}
	for _, w := range []string{`DATASET "layer0.self_weight"`, `DATASET "bytes_cum"`, `ATTRIBUTE "adam_step"`} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("h5dump output lacks %s", w)
		}
	}
}

// TestCheckpointPython: h5py reads the checkpoint and NumPy the exported
// .npz, and the weights agree.
func TestCheckpointPython(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import h5py, numpy").Run(); err != nil {
		t.Skip("/usr/bin/python3 with h5py and numpy is needed (Debian: python3-h5py)")
	}
	dir := t.TempDir()
	ck, npz := filepath.Join(dir, "c.h5"), filepath.Join(dir, "w.npz")
	smallRun(t, genGraph(t, dir, "3"), ck)
	if code, _, stderr := runCLI("export", "--checkpoint", ck, "--format", "npz", "--out", npz); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	script := `import h5py, numpy as np, sys
f, z = h5py.File(sys.argv[1], "r"), np.load(sys.argv[2])
assert f.attrs["format"] == "gnn-spmd-checkpoint", f.attrs["format"]
names = sorted(f["params"])
assert sorted(z.files) == names, (z.files, names)
for n in names:
    a, b = f["params"][n][...], z[n]
    assert a.dtype == b.dtype == np.float32 and b.flags["C_CONTIGUOUS"] and np.array_equal(a, b), n
    assert f["adam/m"][n].shape == f["adam/v"][n].shape == a.shape, n
e, l = int(f.attrs["epoch"]), int(f.attrs["layers"])
assert f["metrics/loss"].shape == (e,) and f["metrics/ratio"].shape == (e, l)
print(len(names))
`
	out, err := exec.Command(py, "-c", script, ck, npz).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if strings.TrimSpace(string(out)) != "9" {
		t.Errorf("python compared %s parameters, want 9", out)
	}
}

func TestInspectCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "c.h5")
	smallRun(t, genGraph(t, dir, "3"), ck)
	code, stdout, stderr := runCLI("inspect", ck)
	if code != 0 || !strings.Contains(stdout, "epoch 4 of 4") || !strings.Contains(stdout, "param layer2.neigh_weight") ||
		!strings.Contains(stdout, "last epoch 3:") {
		t.Errorf("inspect: exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("inspect", "--json", ck)
	var s struct {
		Epoch  int
		Params []struct{ Shape []int }
		Config map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &s); code != 0 || err != nil || s.Epoch != 4 || len(s.Params) != 9 || s.Config["hidden"] != 8.0 {
		t.Errorf("inspect --json: exit %d, %v, %+v", code, err, s)
	}
	b, _ := os.ReadFile(ck)
	truncated := filepath.Join(dir, "t.h5")
	os.WriteFile(truncated, b[:len(b)/2], 0o644)
	code, _, stderr = runCLI("inspect", "--verify", truncated)
	wantBadInput(t, code, stderr, "t.h5", "truncated")
}

// TestBadCheckpoint: every kind of broken checkpoint handed to --resume,
// inspect --verify or export gives exit code 2 and one line naming the file
// and the field; the h5py-made kinds need python3-h5py.
func TestBadCheckpoint(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	good := filepath.Join(dir, "good.h5")
	args := smallRun(t, g, good)
	b, _ := os.ReadFile(good)
	cases := []struct {
		name   string
		write  func(bad string) // "" python: the file starts as a copy of good
		python string           // edits the h5py.File f opened r+
		want   []string
	}{
		{name: "not hdf5", write: func(p string) { os.WriteFile(p, []byte("epoch,loss\n"), 0o644) }, want: []string{"not an HDF5 file"}},
		{name: "truncated", write: func(p string) { os.WriteFile(p, b[:len(b)*2/3], 0o644) }, want: []string{"truncated"}},
		{name: "dataset file", write: func(p string) { d, _ := os.ReadFile(g); os.WriteFile(p, d, 0o644) }, want: []string{`attribute format: is "gnn-spmd-dataset"`}},
		{name: "missing dataset", python: `del f["adam/v/layer0.bias"]`, want: []string{"/adam/v/layer0.bias: missing dataset"}},
		{name: "wrong shape", python: `del f["params/layer1.bias"]; f["params/layer1.bias"] = np.zeros((2, 8), np.float32)`,
			want: []string{"/params/layer1.bias: has shape [2 8]"}},
		{name: "wrong dtype", python: `w = f["params/layer0.self_weight"][...]; del f["params/layer0.self_weight"]; f["params/layer0.self_weight"] = w.astype(np.float64)`,
			want: []string{"/params/layer0.self_weight: has element type float of 8 bytes, expected float32"}},
		{name: "absurd epoch", python: `f.attrs["epoch"] = np.int64(10**12)`, want: []string{"attribute epoch: is 1000000000000, expected a value in [1, 4]"}},
		{name: "absurd layers", python: `f.attrs["layers"] = np.int64(10**9)`, want: []string{"attribute layers: is 1000000000"}},
		{name: "missing attribute", python: `del f.attrs["adam_step"]`, want: []string{"attribute adam_step: missing"}},
		{name: "short history", python: `del f["metrics/loss"]; f["metrics/loss"] = np.zeros(3)`, want: []string{"/metrics/loss: has shape [3]"}},
		// A value changed in place, as a flipped bit would: its digest tells.
		{name: "changed weight", python: `f["params/layer2.bias"][0, 1] += 1`,
			want: []string{"/params/layer2.bias: holds values whose digest is", "not the", "the file is corrupt"}},
		// The same by a writer that keeps no digest: the values' own checks.
		{name: "NaN weight", python: `f["params/layer2.bias"][0, 1] = np.nan; del f.attrs["digests"]; del f.attrs["digest_paths"]`,
			want: []string{"/params/layer2.bias: entry 1 is NaN"}},
		// found by the full corrupt-byte sweep: inspect --json failed on it (exit 1)
		{name: "NaN setting", python: `f.attrs["lr"] = np.float64("nan")`, want: []string{"attribute lr: is NaN, expected a finite number"}},
		{name: "infinite setting", python: `f.attrs["ratio"] = np.float64("-inf")`, want: []string{"attribute ratio: is -Inf, expected a finite number"}},
		// found by the sampled sweep: HDF5 converts by the declared layout, h5py by the size
		{name: "non-IEEE float", python: "t = h5py.h5t.IEEE_F64LE.copy(); t.set_ebias(1000); del f.attrs['weight_decay']\n" +
			"h5py.h5a.create(f.id, b'weight_decay', t, h5py.h5s.create(h5py.h5s.SCALAR)).write(np.array(0.0))",
			want: []string{"attribute weight_decay: has a float type of 8 bytes with a non-standard byte order or bit layout, expected little-endian floating-point"}},
	}
	hasPython := exec.Command("/usr/bin/python3", "-c", "import h5py, numpy").Run() == nil
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.h5")
			if c.write != nil {
				c.write(bad)
			} else {
				if !hasPython {
					t.Skip("/usr/bin/python3 with h5py is needed to corrupt HDF5 files")
				}
				os.WriteFile(bad, b, 0o644)
				script := "import h5py, numpy as np, sys\nf = h5py.File(sys.argv[1], 'r+')\n" + c.python + "\nf.close()\n"
				if out, err := exec.Command("/usr/bin/python3", "-c", script, bad).CombinedOutput(); err != nil {
					t.Fatalf("h5py: %v: %s", err, out)
				}
			}
			code, _, stderr := runCLI(append(args, "--resume", bad)...)
			wantBadInput(t, code, stderr, append([]string{"bad.h5: "}, c.want...)...)
			code, _, stderr = runCLI("inspect", "--verify", bad)
			wantBadInput(t, code, stderr, append([]string{"bad.h5: "}, c.want...)...)
			if strings.HasSuffix(c.name, "setting") { // inspect --json read it, and failed to encode it
				code, _, stderr = runCLI("inspect", "--json", bad)
				wantBadInput(t, code, stderr, append([]string{"bad.h5: "}, c.want...)...)
			}
			out := filepath.Join(t.TempDir(), "w.npz")
			code, _, stderr = runCLI("export", "--checkpoint", bad, "--out", out)
			wantBadInput(t, code, stderr, "bad.h5: ")
			if _, err := os.Stat(out); err == nil {
				t.Errorf("export wrote %s from a bad checkpoint", out)
			}
		})
	}
}

// deadPid is the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestExportBest: export --params best writes the parameters a run kept
// for its best validation epoch, as the checkpoint holds them (a compressed
// run and full communication alike); a checkpoint written before any epoch
// was evaluated keeps none and is refused with one line, and nothing is
// written.
func TestExportBest(t *testing.T) {
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	for _, compress := range []string{"recommended", "none"} {
		ck, npz := filepath.Join(dir, compress+".h5"), filepath.Join(dir, compress+".npz")
		if code, _, stderr := runCLI("train", "--data", g, "--ranks", "2", "--epochs", "6", "--hidden", "8", "--quiet", "--compress", compress, "--checkpoint", ck); code != 0 {
			t.Fatalf("train: %s", stderr)
		}
		if code, _, stderr := runCLI("export", "--checkpoint", ck, "--params", "best", "--out", npz); code != 0 {
			t.Fatalf("export: %s", stderr)
		}
		c := readCheckpoint(t, ck)
		want, epoch, err := c.BestParams(ck)
		if err != nil || epoch != c.Kept[0].Epoch {
			t.Fatalf("%s: kept parameters: %v (epoch %d)", compress, err, epoch)
		}
		ref := filepath.Join(dir, "ref.npz")
		if err := ckpt.WriteNPZ(ref, want); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(npz)
		if b, _ := os.ReadFile(ref); !bytes.Equal(got, b) || len(got) == 0 {
			t.Errorf("%s: exported best parameters (%d bytes) differ from the checkpoint's /best/acc (%d bytes)", compress, len(got), len(b))
		}
	}
	// Epochs 0 and 1 are not evaluated (dropout: an evaluation pass every
	// 4 epochs), so the checkpoint after epoch 2 keeps no best epoch.
	early := filepath.Join(dir, "early.h5")
	if code, _, stderr := runCLI("train", "--data", g, "--epochs", "4", "--hidden", "8", "--quiet", "--dropout", "0.2", "--eval-every", "4",
		"--checkpoint", early, "--checkpoint-every", "2", "--keep", "2"); code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	out := filepath.Join(dir, "refused.npz")
	code, _, stderr := runCLI("export", "--checkpoint", early+".1", "--params", "best", "--out", out)
	if code != job.ExitBadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "/best/acc") {
		t.Errorf("a checkpoint before any evaluated epoch: exit %d, %q; want exit 2 and one line naming /best/acc", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused export wrote its output")
	}
}
