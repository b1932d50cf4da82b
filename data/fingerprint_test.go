package data_test

import (
	"math"
	"runtime"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

func TestFingerprint(t *testing.T) {
	// Over 1 MiB of features, so that several blocks are hashed in parallel.
	ds := datatest.RandomDataset(t, 21, 3000, 20000, 100, 5, "s")
	fp := ds.Fingerprint()
	old := runtime.GOMAXPROCS(1)
	one := ds.Fingerprint()
	runtime.GOMAXPROCS(old)
	if fp != one {
		t.Fatalf("fingerprint depends on GOMAXPROCS: %016x vs %016x", fp, one)
	}
	ds.Name = "renamed"
	ds.Splits = nil
	if ds.Fingerprint() != fp {
		t.Error("name or splits changed the fingerprint")
	}
	edits := []struct {
		name string
		edit func(d *data.Dataset) func()
	}{
		{"feature bit", func(d *data.Dataset) func() {
			v := d.Features[290_000]
			d.Features[290_000] = math.Nextafter32(v, 10)
			return func() { d.Features[290_000] = v }
		}},
		{"label", func(d *data.Dataset) func() {
			v := d.Labels[7]
			d.Labels[7] = (v+2)%5 - 1
			return func() { d.Labels[7] = v }
		}},
		{"edge", func(d *data.Dataset) func() {
			v := d.Graph.Indices[100]
			d.Graph.Indices[100] = (v + 1) % 3000
			return func() { d.Graph.Indices[100] = v }
		}},
		{"classes", func(d *data.Dataset) func() { d.NumClasses++; return func() { d.NumClasses-- } }},
	}
	for _, e := range edits {
		undo := e.edit(ds)
		if ds.Fingerprint() == fp {
			t.Errorf("%s: fingerprint unchanged", e.name)
		}
		undo()
	}
	if ds.Fingerprint() != fp {
		t.Fatal("undo failed")
	}
}
