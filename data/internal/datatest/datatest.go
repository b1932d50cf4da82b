// Package datatest holds what the tests of the data packages share: small
// random datasets, their comparison, and the way to the real datasets
// beside the repository.
package datatest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// RandomDataset builds a small valid dataset with random edges (duplicates
// and self-loops included), features, labels (some -1) and the named splits.
func RandomDataset(t testing.TB, seed uint64, n, e, f, c int, splits ...string) *data.Dataset {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	src, dst := make([]int32, e), make([]int32, e)
	for k := range src {
		src[k], dst[k] = int32(r.IntN(n)), int32(r.IntN(n))
	}
	g, err := data.BuildGraph(n, src, dst, data.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := &data.Dataset{Name: fmt.Sprintf("random-%d", seed), Graph: g, NumFeatures: f, NumClasses: c,
		Labels: make([]int32, n), Splits: map[string]*data.Split{}}
	if f > 0 {
		ds.Features = make([]float32, n*f)
		for i := range ds.Features {
			ds.Features[i] = float32(r.NormFloat64())
		}
		ds.Features[0] = float32(math.Copysign(0, -1)) // bit-exactness includes -0
	}
	for i := range ds.Labels {
		ds.Labels[i] = int32(r.IntN(c+1)) - 1
	}
	for _, name := range splits {
		perm := r.Perm(n)
		part := func(ids []int) []int32 {
			out := make([]int32, len(ids))
			for k, id := range ids {
				out[k] = int32(id)
			}
			slices.Sort(out)
			return out
		}
		a, b := n/2, n/2+n/4
		ds.Splits[name] = &data.Split{Train: part(perm[:a]), Valid: part(perm[a:b]), Test: part(perm[b:])}
	}
	if err := ds.Validate("RandomDataset"); err != nil {
		t.Fatal(err)
	}
	return ds
}

// SameDataset reports the first difference between two datasets, comparing
// floats by their bits.
func SameDataset(a, b *data.Dataset) error {
	switch {
	case a.Name != b.Name:
		return fmt.Errorf("name %q != %q", a.Name, b.Name)
	case a.Graph.N != b.Graph.N:
		return fmt.Errorf("N %d != %d", a.Graph.N, b.Graph.N)
	case !slices.Equal(a.Graph.Indptr, b.Graph.Indptr):
		return fmt.Errorf("indptr differs")
	case !slices.Equal(a.Graph.Indices, b.Graph.Indices):
		return fmt.Errorf("indices differ")
	case a.NumFeatures != b.NumFeatures || len(a.Features) != len(b.Features):
		return fmt.Errorf("features shape differs: %d/%d vs %d/%d", a.NumFeatures, len(a.Features), b.NumFeatures, len(b.Features))
	case (a.Features == nil) != (b.Features == nil):
		return fmt.Errorf("features nil-ness differs")
	case !slices.Equal(a.Labels, b.Labels):
		return fmt.Errorf("labels differ")
	case a.NumClasses != b.NumClasses:
		return fmt.Errorf("classes %d != %d", a.NumClasses, b.NumClasses)
	case !slices.Equal(a.SplitNames(), b.SplitNames()):
		return fmt.Errorf("split names %v != %v", a.SplitNames(), b.SplitNames())
	}
	for i := range a.Features {
		if math.Float32bits(a.Features[i]) != math.Float32bits(b.Features[i]) {
			return fmt.Errorf("feature %d: %v != %v", i, a.Features[i], b.Features[i])
		}
	}
	for _, name := range a.SplitNames() {
		sa, sb := a.Splits[name], b.Splits[name]
		if !slices.Equal(sa.Train, sb.Train) || !slices.Equal(sa.Valid, sb.Valid) || !slices.Equal(sa.Test, sb.Test) {
			return fmt.Errorf("split %s differs", name)
		}
	}
	return nil
}

// DirNames lists the entries of dir (to spot leftover temporary files).
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// SharedData returns the directory of the real datasets (../shared/data
// beside the repository), skipping the test when it is absent.
func SharedData(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.mod above the test's directory, so no ../shared/data beside the repository")
		}
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared", "data")
	if _, err := os.Stat(shared); err != nil {
		t.Skip("../shared/data not found beside the repository: ", err)
	}
	return shared
}
