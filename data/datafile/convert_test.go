package datafile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
)

// fileDigests is a dataset file's digest attributes.
func fileDigests(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := h5.Read(path, Format, Version, "", func(f *h5.File) error {
		for _, p := range []string{"/graph/indptr", "/graph/indices", "/node/features", "/node/labels"} {
			if d, ok := f.Digest(p); ok {
				out[p] = d
			}
		}
		out["paths"] = data.Digest([]byte(f.String(h5.DigestPathsAttr)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConvertMatchesWrite: the streamed conversion writes the file that
// Write writes from Load's dataset: the same arrays and digests.
func TestConvertMatchesWrite(t *testing.T) {
	root := datatest.SharedData(t)
	for _, name := range []string{"cora", "pubmed", "tolokers"} {
		for _, b := range []data.BuildOptions{{}, {AddInverse: true, AddSelfLoops: true}} {
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(root, name)
				tmp := t.TempDir()
				ds, err := ogb.Load(dir, ogb.Options{Build: b})
				if err != nil {
					t.Fatal(err)
				}
				whole := filepath.Join(tmp, "whole.h5")
				if err := Write(whole, ds); err != nil {
					t.Fatal(err)
				}
				streamed := filepath.Join(tmp, "streamed.h5")
				if _, err := Convert(dir, streamed, ogb.Options{Build: b}); err != nil {
					t.Fatal(err)
				}
				got, err := Read(streamed)
				if err != nil {
					t.Fatal(err)
				}
				if err := datatest.SameDataset(got, ds); err != nil {
					t.Fatal(err)
				}
				dw, ds2 := fileDigests(t, whole), fileDigests(t, streamed)
				for k, v := range dw {
					if ds2[k] != v {
						t.Errorf("%s: digest %x, Write's %x", k, ds2[k], v)
					}
				}
			})
		}
	}
}

// TestConvertBadRow: a bad feature row is refused with Load's one line, and
// nothing is written.
func TestConvertBadRow(t *testing.T) {
	dir := filepath.Join(datatest.SharedData(t), "cora")
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "cora")
	if err := os.CopyFS(bad, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(bad, "raw", "node-feat.csv.gz"))
	if err := os.WriteFile(filepath.Join(bad, "raw", "node-feat.csv"), []byte("1,2\n3,nan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out.h5")
	_, err := Convert(bad, out, ogb.Options{})
	_, want := ogb.Load(bad, ogb.Options{})
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("Convert: %v\nLoad:    %v", err, want)
	}
	if names := datatest.DirNames(t, tmp); len(names) != 1 {
		t.Errorf("a refused conversion left %v", names)
	}
}
