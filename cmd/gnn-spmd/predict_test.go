package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/predfile"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
)

// fileAccuracy is the test accuracy of a predictions file's /pred on the
// dataset at data's split, computed from the file and the labels alone.
func fileAccuracy(t *testing.T, out, data, split string) float64 {
	t.Helper()
	p, err := predfile.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datafile.Load(data, ogb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Nodes != int64(ds.Graph.N) || p.Classes != ds.NumClasses {
		t.Fatalf("%s: %d nodes and %d classes, the dataset %d and %d", out, p.Nodes, p.Classes, ds.Graph.N, ds.NumClasses)
	}
	test := ds.Splits[split].Test
	right := 0
	for _, i := range test {
		if p.Pred[i] == ds.Labels[i] {
			right++
		}
	}
	acc := float64(right) / float64(len(test))
	if acc != p.TestAcc {
		t.Errorf("%s: /pred's test accuracy is %v, the file's test_acc %v", out, acc, p.TestAcc)
	}
	return acc
}

// TestPredictCora: on Cora in one process, the test accuracy of the
// predictions written with the best and the final parameters, computed
// from the file, is the checkpoint's recorded one; train --predict writes
// the same file as predict; h5py reads the file in three lines; inspect
// summarises it.
func TestPredictCora(t *testing.T) {
	cora := sharedData(t, "cora")
	dir := t.TempDir()
	ck, during := filepath.Join(dir, "ck.h5"), filepath.Join(dir, "during.h5")
	if code, _, stderr := runCLI("train", "--data", cora, "--split", "public", "--model", "gcn", "--layers", "2", "--hidden", "16",
		"--dropout", "0.5", "--weight-decay", "5e-4", "--epochs", "60", "--normalize-features", "--quiet",
		"--checkpoint", ck, "--predict", during, "--predict-params", "best", "--embeddings", "0"); code != 0 {
		t.Fatalf("train: %s", stderr)
	}
	c := readCheckpoint(t, ck)
	if c.Exact == nil {
		t.Fatal("the finished run's checkpoint records no accuracies")
	}
	for _, params := range []string{"best", "final"} {
		out := filepath.Join(dir, params+".h5")
		code, stdout, stderr := runCLI("predict", "--checkpoint", ck, "--data", cora, "--split", "public", "--params", params, "--out", out, "--embeddings", "0")
		if code != 0 {
			t.Fatalf("predict --params %s: %s", params, stderr)
		}
		want := map[string]float64{"best": c.Exact.BestTest, "final": c.Exact.FinalTest}[params]
		if got := fileAccuracy(t, out, cora, "public"); got != want {
			t.Errorf("--params %s: the predictions' test accuracy is %v, the checkpoint recorded %v", params, got, want)
		}
		if !strings.Contains(stdout, "as recorded for these parameters") {
			t.Errorf("--params %s: %q does not say the accuracies are the recorded ones", params, stdout)
		}
	}
	a, _ := os.ReadFile(during)
	b, _ := os.ReadFile(filepath.Join(dir, "best.h5"))
	pa, _ := predfile.Read(during)
	pb, _ := predfile.Read(filepath.Join(dir, "best.h5"))
	if pa == nil || pb == nil || len(a) == 0 || !equalFloats(pa.Scores, pb.Scores) || !equalFloats(pa.Embeddings, pb.Embeddings) {
		t.Errorf("train --predict and predict wrote other scores or embeddings for the same parameters (%d and %d bytes)", len(a), len(b))
	}
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import h5py, numpy").Run() == nil {
		// The README's recipe, then the checks.
		script := `import h5py, sys
f = h5py.File(sys.argv[1], "r")
pred, scores, emb = f["pred"][:], f["scores"][:], f["embeddings"][:]
assert pred.shape == (2708,) and scores.shape == (2708, 7) and emb.shape == (2708, 16), (pred.shape, scores.shape, emb.shape)
assert (scores.argmax(axis=1) == pred).all() and f.attrs["format"] == "gnn-spmd-predictions"
print(f.attrs["test_acc"])
`
		if out, err := exec.Command(py, "-c", script, filepath.Join(dir, "final.h5")).CombinedOutput(); err != nil {
			t.Errorf("h5py: %v\n%s", err, out)
		}
	}
	if code, stdout, stderr := runCLI("inspect", filepath.Join(dir, "final.h5")); code != 0 || !strings.Contains(stdout, "predictions ") || !strings.Contains(stdout, "final parameters") {
		t.Errorf("inspect: exit %d, %q %q", code, stdout, stderr)
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPredictMPI: actor trained by 4 MPI ranks on METIS parts; predicted
// by 4 MPI ranks, 2 MPI ranks and 2 goroutine ranks, the predictions' test
// accuracy is the checkpoint's, and their scores agree up to float order.
func TestPredictMPI(t *testing.T) {
	actor := sharedData(t, "actor")
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.h5")
	common := []string{"--data", actor, "--split", "split_0", "--partition", "metis"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// predict takes --normalize-features from the checkpoint.
	if b, err := mpirunCmd(ctx, t, 4, append([]string{"train", "--epochs", "20", "--hidden", "32", "--quiet", "--normalize-features", "--checkpoint", ck}, common...)...).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, b)
	}
	c := readCheckpoint(t, ck)
	var ref *predfile.File
	for _, run := range []struct {
		name string
		mpi  int
		args []string
	}{{"mpirun-np-4", 4, nil}, {"mpirun-np-2", 2, nil}, {"ranks-2", 0, []string{"--ranks", "2"}}} {
		out := filepath.Join(dir, run.name+".h5")
		args := append(append([]string{"predict", "--checkpoint", ck, "--params", "best", "--out", out}, common...), run.args...)
		if run.mpi > 0 {
			if b, err := mpirunCmd(ctx, t, run.mpi, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", run.name, err, b)
			}
		} else if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%s: %s", run.name, stderr)
		}
		if got := fileAccuracy(t, out, actor, "split_0"); got != c.Exact.BestTest {
			t.Errorf("%s: the predictions' test accuracy is %v, the checkpoint recorded %v", run.name, got, c.Exact.BestTest)
		}
		p, err := predfile.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = p
			continue
		}
		for i, v := range p.Scores {
			if d := v - ref.Scores[i]; d > 1e-4 || d < -1e-4 {
				t.Fatalf("%s: score %d is %v, %v with 4 ranks", run.name, i, v, ref.Scores[i])
			}
		}
	}
}

// TestPredictRefused: a checkpoint of other data, an output that is an
// input, and a partition with a part missing are refused with one line
// and exit 2, and nothing is written.
func TestPredictRefused(t *testing.T) {
	dir := t.TempDir()
	g3, g4 := genGraph(t, dir, "3"), genGraph(t, dir, "4")
	ck := filepath.Join(dir, "c.h5")
	smallRun(t, g3, ck)
	parts := filepath.Join(dir, "parts")
	if code, _, stderr := runCLI("partition", "--data", g3, "--parts", "2", "--method", "random", "--out", parts); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	os.Remove(filepath.Join(parts, "part-1.h5"))
	out := filepath.Join(dir, "p.h5")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", g4, "--out", out}, "dataset_fingerprint: checkpoint has"},
		{[]string{"--data", g3, "--out", ck}, "--out"},
		{[]string{"--data", g3, "--out", g3}, "--out"},
		{[]string{"--parts", parts, "--ranks", "2", "--out", out}, "part-1.h5"},
		{[]string{"--data", g3, "--out", out, "--embeddings", "5"}, "--embeddings: got 5"},
		{[]string{"--data", g3}, "--out is required"},
	} {
		code, _, stderr := runCLI(append([]string{"predict", "--checkpoint", ck}, c.args...)...)
		wantBadInput(t, code, stderr, c.want)
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: a refused prediction wrote %s", c.args, out)
		}
	}
	if _, err := ckpt.Read(ck); err != nil {
		t.Errorf("the checkpoint did not survive: %v", err)
	}
}
