package ogb

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// streamed reads dir through OpenStream, its features gathered.
func streamed(t *testing.T, dir string, opt Options) (*data.Dataset, error) {
	t.Helper()
	st, err := OpenStream(dir, opt)
	if err != nil {
		return nil, err
	}
	ds := st.Dataset
	err = st.Features(func(rows []float32) error {
		ds.Features = append(ds.Features, rows...)
		return nil
	})
	return ds, err
}

// TestStreamMatchesLoad: the streamed graph (two passes over the edges),
// labels, splits and feature rows (handed on in order) are Load's, with
// every build option, with blocks of a few bytes (many blocks in flight,
// finishing out of order), and on the shared datasets.
func TestStreamMatchesLoad(t *testing.T) {
	check := func(t *testing.T, dir string, chunk int) {
		for _, b := range []data.BuildOptions{{}, {AddInverse: true}, {AddSelfLoops: true}, {AddInverse: true, AddSelfLoops: true}} {
			t.Run(fmt.Sprintf("chunk%d/%+v", chunk, b), func(t *testing.T) {
				setOGBChunking(t, chunk, preallocCap)
				want, err := Load(dir, Options{Build: b})
				if err != nil {
					t.Fatal(err)
				}
				got, err := streamed(t, dir, Options{Build: b})
				if err != nil {
					t.Fatal(err)
				}
				if err := datatest.SameDataset(got, want); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	t.Run("tiny", func(t *testing.T) {
		dir := writeOGB(t, ogbTinyFiles(), true)
		check(t, dir, 7)
		check(t, dir, 1<<20)
	})
	for _, name := range []string{"cora", "tolokers", "amazon_photo"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(datatest.SharedData(t), name)
			if name == "cora" {
				check(t, dir, 4096)
			}
			check(t, dir, 1<<20)
		})
	}
}

// TestStreamErrors: the streamed reading refuses bad files with Load's
// messages.
func TestStreamErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		line                int
	}{
		{"edge out of range", "raw/edge", "0,1\n0,9\n1,2\n3,2\n4,3\n", 2},
		{"too few edges", "raw/edge", "0,1\n0,2\n", 3},
		{"bad feature", "raw/node-feat", "0,1.5\n1,-2\n0.25,x\n1e-3,3\n0,0\n", 3},
		{"short feature row", "raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3\n0,0\n", 4},
		{"too few feature rows", "raw/node-feat", "0,1.5\n1,-2\n", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := ogbTinyFiles()
			files[c.file] = c.content
			dir := writeOGB(t, files, false)
			_, want := Load(dir, Options{})
			_, got := streamed(t, dir, Options{})
			if want == nil || got == nil || got.Error() != want.Error() {
				t.Fatalf("streamed: %v\nLoad:     %v", got, want)
			}
			if l := ogbErrLine(got); l != c.line {
				t.Errorf("line %d, want %d", l, c.line)
			}
		})
	}
}
