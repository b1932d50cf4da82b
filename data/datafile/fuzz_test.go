package datafile

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5/h5test"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// FuzzReadH5 reads edited copies of a small dataset file: ReadH5 returns an
// *data.InputError or a dataset that passes Validate.
func FuzzReadH5(f *testing.F) {
	ds := datatest.RandomDataset(f, 5, 12, 30, 3, 3, "s")
	files := h5test.Base(f, []string{"d.h5"},
		func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return Write(filepath.Join(dir, "d.h5"), ds)
		},
		func(dir string) error { _, err := Read(filepath.Join(dir, "d.h5")); return err })
	im := h5test.NewImage(files["d.h5"])

	s := &h5test.Seeds{F: f, Im: im}
	g, sp := ds.Graph, ds.Splits["s"]
	s.Structure(0)
	s.Attr(0, "num_nodes", int64(g.N), math.MaxInt32)
	s.Attr(0, "num_nodes", int64(g.N), -1)
	s.Attr(0, "num_nodes", int64(g.N), int64(g.N-1))
	s.Attr(0, "num_edges", g.NumEdges(), 1<<40)
	s.Attr(0, "num_edges", g.NumEdges(), g.NumEdges()+1)
	s.Attr(0, "num_features", int64(ds.NumFeatures), math.MaxInt32)
	s.Attr(0, "num_features", int64(ds.NumFeatures), 0)
	s.Attr(0, "num_classes", int64(ds.NumClasses), 1)
	s.Attr(0, "version", 1, 2)
	s.Array(0, []byte(Format), []byte("gnn-spmd-datasex"))
	s.Array(0, h5test.LE(g.Indptr[1:3]), h5test.LE([]int64{g.Indptr[2] + 1, g.Indptr[2]}))
	s.Array(0, h5test.LE(g.Indices[:4]), h5test.LE([]int32{g.Indices[0], g.Indices[1], int32(g.N), -5}))
	s.Array(0, h5test.LE(ds.Features[:4]), h5test.LE([]float32{ds.Features[0], float32(math.NaN()), float32(math.Inf(-1)), ds.Features[3]}))
	s.Array(0, h5test.LE(ds.Labels), h5test.LE(append([]int32{int32(ds.NumClasses)}, ds.Labels[1:]...)))
	s.Array(0, h5test.LE(sp.Valid), h5test.LE(slices.Repeat([]int32{sp.Train[0]}, len(sp.Valid))))
	s.Array(0, h5test.LE(sp.Test), h5test.LE(slices.Repeat([]int32{sp.Test[0]}, len(sp.Test))))
	f.Add([]byte(nil), uint16(0))
	for _, e := range s.Edits {
		f.Add(e, uint16(0))
	}
	f.Add([]byte(nil), uint16(len(im.Data)/2))
	f.Add([]byte(nil), uint16(1))

	path := filepath.Join(f.TempDir(), "d.h5") // rewritten for each input
	f.Fuzz(func(t *testing.T, edits []byte, cut uint16) {
		b := im.Apply(edits, cut)[0]
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var got *data.Dataset
		err := h5test.Call(t, h5test.FileLimits(len(b)), func() (err error) {
			got, err = Read(path)
			return err
		})
		if err != nil {
			h5test.RequireInputError(t, err, path)
			return
		}
		if err := got.Validate(path); err != nil {
			t.Fatalf("ReadH5 returned a dataset that fails Validate: %v", err)
		}
	})
}
