package ogb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// ogbFiles maps a file's path without extension ("raw/edge") to its content.
type ogbFiles map[string]string

// ogbTinyFiles is a 5-node dataset: edges 0->1 0->2 1->2 3->2 4->3.
func ogbTinyFiles() ogbFiles {
	return ogbFiles{
		"raw/num-node-list": "5\n",
		"raw/num-edge-list": "5\n",
		"raw/edge":          "0,1\n0,2\n1,2\n3,2\n4,3\n",
		"raw/node-feat":     "0,1.5\n1,-2\n0.25,0\n1e-3,3\n0,0\n",
		"raw/node-label":    "0\n1\n2\n1\n0\n",
		"split/a/train":     "3\n0\n",
		"split/a/valid":     "1\n",
		"split/a/test":      "2\n4\n",
	}
}

func ogbGzip(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeOGB writes files under a new temporary directory named "tiny", as .csv.gz
// when gz and plain .csv otherwise, and returns the directory.
func writeOGB(t testing.TB, files ogbFiles, gz bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name)) + ".csv"
		data := []byte(content)
		if gz {
			p += ".gz"
			data = ogbGzip(t, content)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func ogbRow(g *data.Graph, i int) []int32 { return g.Indices[g.Indptr[i]:g.Indptr[i+1]] }

func TestOGBLoadTiny(t *testing.T) {
	for _, gz := range []bool{false, true} {
		ds, err := Load(writeOGB(t, ogbTinyFiles(), gz), Options{})
		if err != nil {
			t.Fatalf("gz=%v: %v", gz, err)
		}
		if ds.Name != "tiny" || ds.Graph.N != 5 || ds.Graph.NumEdges() != 5 || ds.NumFeatures != 2 || ds.NumClasses != 3 {
			t.Fatalf("gz=%v: got name %q N %d E %d F %d C %d", gz, ds.Name, ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, ds.NumClasses)
		}
		// Row i lists the sources of the edges into i.
		wantRows := [][]int32{{}, {0}, {0, 1, 3}, {4}, {}}
		for i, w := range wantRows {
			if got := ogbRow(ds.Graph, i); !slices.Equal(got, w) {
				t.Errorf("gz=%v: row %d = %v, want %v", gz, i, got, w)
			}
		}
		wantF := []float32{0, 1.5, 1, -2, 0.25, 0, 1e-3, 3, 0, 0}
		if !slices.Equal(ds.Features, wantF) {
			t.Errorf("gz=%v: features %v, want %v", gz, ds.Features, wantF)
		}
		if !slices.Equal(ds.Labels, []int32{0, 1, 2, 1, 0}) {
			t.Errorf("gz=%v: labels %v", gz, ds.Labels)
		}
		s := ds.Splits["a"]
		if len(ds.Splits) != 1 || s == nil || !slices.Equal(s.Train, []int32{0, 3}) ||
			!slices.Equal(s.Valid, []int32{1}) || !slices.Equal(s.Test, []int32{2, 4}) {
			t.Errorf("gz=%v: splits %+v", gz, s)
		}
	}
}

func TestOGBBuildOptions(t *testing.T) {
	for _, c := range []struct {
		opt   data.BuildOptions
		extra string // appended edge line
		e     int64
		rows  [][]int32
	}{
		{data.BuildOptions{}, "", 5, [][]int32{{}, {0}, {0, 1, 3}, {4}, {}}},
		{data.BuildOptions{AddSelfLoops: true}, "", 10, [][]int32{{0}, {1, 0}, {2, 0, 1, 3}, {3, 4}, {4}}},
		{data.BuildOptions{AddSelfLoops: true}, "2,2\n", 10, [][]int32{{0}, {1, 0}, {0, 1, 3, 2}, {3, 4}, {4}}},
		{data.BuildOptions{AddInverse: true}, "", 10, [][]int32{{1, 2}, {0, 2}, {0, 1, 3}, {4, 2}, {3}}},
		{data.BuildOptions{AddInverse: true, AddSelfLoops: true}, "", 15, [][]int32{{0, 1, 2}, {1, 0, 2}, {2, 0, 1, 3}, {3, 4, 2}, {4, 3}}},
	} {
		files := ogbTinyFiles()
		if c.extra != "" {
			files["raw/edge"] += c.extra
			files["raw/num-edge-list"] = "6\n"
		}
		ds, err := Load(writeOGB(t, files, true), Options{Build: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Graph.NumEdges(); got != c.e {
			t.Errorf("%+v %q: %d edges, want %d", c.opt, c.extra, got, c.e)
		}
		for i, w := range c.rows {
			if got := ogbRow(ds.Graph, i); !slices.Equal(got, w) {
				t.Errorf("%+v %q: row %d = %v, want %v", c.opt, c.extra, i, got, w)
			}
		}
	}
}

// TestOGBFormVariants covers inputs that must be accepted: no final newline,
// CRLF endings, float-looking labels, no feature file, .gz preferred over
// .csv, and selecting splits.
func TestOGBFormVariants(t *testing.T) {
	files := ogbTinyFiles()
	files["raw/edge"] = strings.ReplaceAll(strings.TrimSuffix(files["raw/edge"], "\n"), "\n", "\r\n")
	files["raw/node-label"] = "0.0\n1\n2.000000000000000000e+00\n1.\n0\n"
	files["raw/node-feat"] = strings.TrimSuffix(files["raw/node-feat"], "\n")
	for _, gz := range []bool{false, true} {
		ds, err := Load(writeOGB(t, files, gz), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ogbRow(ds.Graph, 2), []int32{0, 1, 3}) || !slices.Equal(ds.Labels, []int32{0, 1, 2, 1, 0}) || len(ds.Features) != 10 {
			t.Errorf("gz=%v: row 2 %v labels %v features %v", gz, ogbRow(ds.Graph, 2), ds.Labels, ds.Features)
		}
	}

	files = ogbTinyFiles()
	delete(files, "raw/node-feat")
	files["split/b/train"], files["split/b/valid"], files["split/b/test"] = "1\n", "2\n", "3\n"
	dir := writeOGB(t, files, true)
	ds, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.NumFeatures != 0 || ds.Features != nil || len(ds.Splits) != 2 {
		t.Errorf("F %d features %v splits %v", ds.NumFeatures, ds.Features, slices.Collect(maps.Keys(ds.Splits)))
	}
	ds, err = Load(dir, Options{Splits: []string{"b"}})
	if err != nil || len(ds.Splits) != 1 || ds.Splits["b"] == nil {
		t.Fatalf("Splits: [b]: %v %v", err, ds)
	}
	_, err = Load(dir, Options{Splits: []string{"c"}})
	checkOGBError(t, "unknown split", err, "split/c", 0, "available: a, b")

	// A broken plain file next to a good .gz is ignored.
	if err := os.WriteFile(filepath.Join(dir, "raw", "edge.csv"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Options{}); err != nil {
		t.Errorf("with a stray edge.csv: %v", err)
	}
}

// checkOGBError asserts err is an *data.InputError about file (a path suffix
// without extension) at line, whose message contains msg.
func checkOGBError(t *testing.T, name string, err error, file string, line int, msg string) {
	t.Helper()
	var ie *data.InputError
	if !errors.As(err, &ie) {
		t.Errorf("%s: got %T %v, want *data.InputError", name, err, err)
		return
	}
	text := ie.Error()
	if !strings.Contains(filepath.ToSlash(ie.File), file) || !strings.Contains(text, filepath.Base(file)) {
		t.Errorf("%s: %q: file %q, want %q", name, text, ie.File, file)
	}
	if ie.Line != line || (line > 0 && !strings.Contains(text, fmt.Sprintf(":%d:", line))) {
		t.Errorf("%s: %q: line %d, want %d", name, text, ie.Line, line)
	}
	if !strings.Contains(text, msg) {
		t.Errorf("%s: %q does not contain %q", name, text, msg)
	}
}

func TestOGBErrors(t *testing.T) {
	set := func(path, content string) func(ogbFiles) {
		return func(f ogbFiles) { f[path] = content }
	}
	del := func(path string) func(ogbFiles) { return func(f ogbFiles) { delete(f, path) } }
	for _, c := range []struct {
		name   string
		mutate func(ogbFiles)
		file   string
		line   int
		msg    string
	}{
		{"missing edge file", del("raw/edge"), "raw/edge.csv", 0, "missing: expected raw/edge.csv.gz or raw/edge.csv"},
		{"missing label file", del("raw/node-label"), "raw/node-label.csv", 0, "missing"},
		{"missing num-node-list", del("raw/num-node-list"), "raw/num-node-list.csv", 0, "missing"},
		{"missing split part", del("split/a/valid"), "split/a/valid.csv", 0, "missing"},
		{"edge with 3 columns", set("raw/edge", "0,1\n0,2\n1,2,3\n3,2\n4,3\n"), "raw/edge.csv", 3, "has 3 comma-separated fields, expected 2 (src,dst)"},
		{"edge with 1 column", set("raw/edge", "0,1\n0\n1,2\n3,2\n4,3\n"), "raw/edge.csv", 2, "has 1 comma-separated fields"},
		{"non-numeric dst", set("raw/edge", "0,1\n0,x\n1,2\n3,2\n4,3\n"), "raw/edge.csv", 2, `dst: is "x", expected a node id in [0, 5)`},
		{"float node id", set("raw/edge", "0,1\n0,2\n1.0,2\n3,2\n4,3\n"), "raw/edge.csv", 3, `src: is "1.0"`},
		{"node id >= N", set("raw/edge", "0,1\n0,2\n1,2\n3,5\n4,3\n"), "raw/edge.csv", 4, "dst: is 5, expected a node id in [0, 5) (raw/num-node-list.csv"},
		{"negative node id", set("raw/edge", "-1,1\n0,2\n1,2\n3,2\n4,3\n"), "raw/edge.csv", 1, "src: is -1, expected a node id"},
		{"huge node id", set("raw/edge", "0,1\n0,2\n1,2\n3,2\n4,99999999999999999999999\n"), "raw/edge.csv", 5, "is 99999999999999999999999"},
		{"empty edge line", set("raw/edge", "0,1\n\n1,2\n3,2\n4,3\n"), "raw/edge.csv", 2, "empty line"},
		{"edge file shorter than num-edge-list", set("raw/num-edge-list", "6\n"), "raw/edge.csv", 6, "file ends after 5 lines, expected 6 edges (raw/num-edge-list.csv"},
		{"edge file longer than num-edge-list", set("raw/num-edge-list", "4\n"), "raw/edge.csv", 5, "more than 4 lines"},
		{"empty line at end of edges", set("raw/edge", "0,1\n0,2\n1,2\n3,2\n4,3\n\n"), "raw/edge.csv", 6, "more than 5 lines"},
		{"NaN feature", set("raw/node-feat", "0,1.5\n1,-2\nnan,0\n1e-3,3\n0,0\n"), "raw/node-feat.csv", 3, `column 1: is "nan", expected a finite number`},
		{"Inf feature", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,-Inf\n0,0\n"), "raw/node-feat.csv", 4, "column 2: is \"-Inf\", expected a finite number"},
		{"feature overflow", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,3\n1e39,0\n"), "raw/node-feat.csv", 5, "outside the float32 range"},
		{"non-numeric feature", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,3\n0,abc\n"), "raw/node-feat.csv", 5, `column 2: is "abc", expected a decimal number`},
		{"feature row too long", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,3,4\n0,0\n"), "raw/node-feat.csv", 4, "has 3 columns, expected 2 like line 1"},
		{"feature row too short", set("raw/node-feat", "0,1.5\n1\n0.25,0\n1e-3,3\n0,0\n"), "raw/node-feat.csv", 2, "has 1 columns, expected 2"},
		{"empty feature line", set("raw/node-feat", "0,1.5\n1,-2\n\n1e-3,3\n0,0\n"), "raw/node-feat.csv", 3, "empty line"},
		{"empty first feature line", set("raw/node-feat", "\n1,-2\n0.25,0\n1e-3,3\n0,0\n"), "raw/node-feat.csv", 1, "empty line"},
		{"fewer feature rows than nodes", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,3\n"), "raw/node-feat.csv", 5, "file ends after 4 lines, expected one feature row per node (raw/num-node-list.csv"},
		{"more feature rows than nodes", set("raw/node-feat", "0,1.5\n1,-2\n0.25,0\n1e-3,3\n0,0\n1,1\n"), "raw/node-feat.csv", 6, "more than 5 lines"},
		{"label below -1", set("raw/node-label", "0\n-2\n2\n1\n0\n"), "raw/node-label.csv", 2, "label: is -2, expected -1 (unlabelled) or a class id"},
		{"fractional label", set("raw/node-label", "0\n1\n2.5\n1\n0\n"), "raw/node-label.csv", 3, `is "2.5"`},
		{"label too large", set("raw/node-label", "0\n1\n2\n16777216\n0\n"), "raw/node-label.csv", 4, "is 16777216"},
		{"empty label line", set("raw/node-label", "0\n1\n\n1\n0\n"), "raw/node-label.csv", 3, "empty line"},
		{"all unlabelled", set("raw/node-label", "-1\n-1\n-1\n-1\n-1\n"), "raw/node-label.csv", 0, "no node has a label"},
		{"num-node-list above label count", set("raw/num-node-list", "6\n"), "raw/node-label.csv", 6, "file ends after 5 lines, expected one label per node (raw/num-node-list.csv"},
		{"num-node-list below label count", set("raw/num-node-list", "4\n"), "raw/node-label.csv", 5, "more than 4 lines"},
		{"multi-graph num-node-list", set("raw/num-node-list", "5\n7\n"), "raw/num-node-list.csv", 2, "lists 2 graphs"},
		{"zero nodes", set("raw/num-node-list", "0\n"), "raw/num-node-list.csv", 1, "is 0, expected a node count in [1, 2147483647]"},
		{"too many nodes", set("raw/num-node-list", "2147483648\n"), "raw/num-node-list.csv", 1, "is 2147483648"},
		{"non-numeric edge count", set("raw/num-edge-list", "five\n"), "raw/num-edge-list.csv", 1, `is "five"`},
		{"empty edge count", set("raw/num-edge-list", ""), "raw/num-edge-list.csv", 1, "empty file"},
		{"empty split file", set("split/a/test", ""), "split/a/test.csv", 1, "empty file, expected at least one node id"},
		{"train and test overlap", set("split/a/test", "2\n0\n"), "split/a/test.csv", 2, "node 0 is also in split/a/train.csv"},
		{"train and test overlap line", set("split/a/test", "2\n0\n"), "split/a/test.csv", 2, "(line 2), expected disjoint"},
		{"repeated split id", set("split/a/test", "2\n4\n2\n"), "split/a/test.csv", 3, "node 2 is already listed on line 1"},
		{"split id out of range", set("split/a/train", "3\n5\n"), "split/a/train.csv", 2, "is 5, expected a node id in [0, 5)"},
		{"negative split id", set("split/a/valid", "-1\n"), "split/a/valid.csv", 1, "is -1"},
		{"unlabelled node in split", set("raw/node-label", "0\n1\n-1\n1\n0\n"), "split/a/test.csv", 1, "node 2 has no label"},
		{"empty split line", set("split/a/train", "3\n\n0\n"), "split/a/train.csv", 2, "empty line"},
	} {
		for _, gz := range []bool{false, true} {
			files := ogbTinyFiles()
			c.mutate(files)
			_, err := Load(writeOGB(t, files, gz), Options{})
			checkOGBError(t, fmt.Sprintf("%s (gz=%v)", c.name, gz), err, c.file, c.line, c.msg)
		}
	}
}

// TestOGBHugeDeclaredCounts checks that a count file cannot make the loader
// allocate memory the data files could never fill.
func TestOGBHugeDeclaredCounts(t *testing.T) {
	for _, c := range []struct {
		file, count, errFile, msg string
	}{
		{"raw/num-node-list", "2147483647\n", "raw/node-label.csv", "file ends after 5 lines, expected one label per node"},
		{"raw/num-edge-list", "2147483647\n", "raw/edge.csv", "file ends after 5 lines, expected 2147483647 edges"},
	} {
		for _, gz := range []bool{false, true} {
			files := ogbTinyFiles()
			files[c.file] = c.count
			dir := writeOGB(t, files, gz)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Load(dir, Options{})
			runtime.ReadMemStats(&after)
			checkOGBError(t, c.file, err, c.errFile, 6, c.msg)
			if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
				t.Errorf("%s gz=%v: allocated %d MB", c.file, gz, d>>20)
			}
		}
	}
}

func TestOGBNoSplits(t *testing.T) {
	files := ogbTinyFiles()
	for k := range files {
		if strings.HasPrefix(k, "split/") {
			delete(files, k)
		}
	}
	_, err := Load(writeOGB(t, files, true), Options{})
	checkOGBError(t, "no split dir", err, "tiny/split", 0, "no split directories")
}

func TestOGBBadGzip(t *testing.T) {
	dir := writeOGB(t, ogbTinyFiles(), true)
	p := filepath.Join(dir, "raw", "edge.csv.gz")
	if err := os.WriteFile(p, []byte("0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, Options{})
	checkOGBError(t, "plain text in .gz", err, "raw/edge.csv.gz", 0, "gzip")

	// Corrupt the CRC in the trailer: the data decodes but must be refused.
	z := ogbGzip(t, ogbTinyFiles()["raw/edge"])
	z[len(z)-8] ^= 0xff
	if err := os.WriteFile(p, z, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, Options{})
	checkOGBError(t, "bad checksum", err, "raw/edge.csv.gz", 6, "checksum")
}

// TestOGBTruncatedGzip cuts the end off a gzip'd edge file: the loader must
// report the truncation on that file, at the line where the data stops.
func TestOGBTruncatedGzip(t *testing.T) {
	const e = 20000
	var sb strings.Builder
	for i := range e {
		fmt.Fprintf(&sb, "%d,%d\n", i%5, (i*3)%5)
	}
	files := ogbTinyFiles()
	files["raw/edge"] = sb.String()
	files["raw/num-edge-list"] = strconv.Itoa(e) + "\n"
	dir := writeOGB(t, files, true)
	p := filepath.Join(dir, "raw", "edge.csv.gz")
	full, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, 4, 8, 9, 50, len(full) / 2} {
		if err := os.WriteFile(p, full[:len(full)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir, Options{})
		var ie *data.InputError
		if !errors.As(err, &ie) || !strings.HasSuffix(ie.File, "edge.csv.gz") || !strings.Contains(ie.Msg, "truncated") ||
			ie.Line < 1 || ie.Line > e+1 {
			t.Errorf("cut %d bytes: %v", cut, err)
		}
	}

	// The same with a real file, when available.
	root := filepath.Join("..", "..", "shared", "data", "cora")
	if _, err := os.Stat(root); err != nil {
		t.Skip("../shared/data not found: ", err)
	}
	dir = copyOGBDataset(t, root)
	p = filepath.Join(dir, "raw", "edge.csv.gz")
	full, err = os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{3, 1000} {
		if err := os.WriteFile(p, full[:len(full)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir, Options{})
		checkOGBError(t, fmt.Sprintf("cora cut %d", cut), err, "raw/edge.csv.gz", ogbErrLine(err), "unexpected end of file (truncated gzip stream)")
		if l := ogbErrLine(err); l < 1 || l > 10557 {
			t.Errorf("cora cut %d: line %d", cut, l)
		}
	}
}

func ogbErrLine(err error) int {
	var ie *data.InputError
	if errors.As(err, &ie) {
		return ie.Line
	}
	return -1
}

// copyOGBDataset copies the raw/ and split/ files of a real dataset into a
// writable temporary directory.
func copyOGBDataset(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	for _, sub := range []string{"raw", "split"} {
		err := filepath.WalkDir(filepath.Join(src, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out := filepath.Join(dst, rel)
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			return os.WriteFile(out, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// ogbRealDataset holds the counts of ../shared/data/README.md.
type ogbRealDataset struct {
	name               string
	n                  int
	e                  int64
	f, c               int
	isolated, unlab    int
	splits             int
	train, valid, test int // 0 when sizes vary per split
}

var ogbRealDatasets = []ogbRealDataset{
	{"cora", 2708, 10556, 1433, 7, 0, 0, 1, 140, 500, 1000},
	{"citeseer", 3327, 9104, 3703, 6, 48, 15, 1, 120, 500, 1000},
	{"pubmed", 19717, 88648, 0, 3, 0, 0, 1, 60, 500, 1000},
	{"amazon_photo", 7650, 238162, 745, 8, 115, 0, 15, 0, 0, 0},
	{"tolokers", 11758, 1038000, 10, 2, 0, 0, 10, 5879, 2939, 2940},
	{"actor", 7600, 53318, 932, 5, 0, 0, 10, 3648, 2432, 1520},
	{"chameleon_filtered", 890, 17708, 2325, 5, 0, 0, 10, 0, 0, 0},
	{"squirrel_filtered", 2223, 93996, 2089, 5, 0, 0, 10, 0, 0, 0},
	{"cornell", 183, 554, 1703, 5, 0, 0, 10, 87, 59, 37},
	{"texas", 183, 558, 1703, 5, 0, 0, 10, 87, 59, 37},
	{"wisconsin", 251, 900, 1703, 5, 0, 0, 10, 120, 80, 51},
	{"acm", 3025, 26256, 1870, 3, 561, 0, 3, 0, 500, 1000},
	{"uai", 3067, 56616, 4973, 19, 6, 0, 3, 0, 500, 1000},
	{"flickr", 7575, 479476, 12047, 9, 0, 0, 3, 0, 500, 1000},
	{"blogcatalog", 5196, 343486, 8189, 6, 0, 0, 3, 0, 500, 1000},
}

// TestOGBRealDatasets loads every real dataset and checks it against the
// README's table.
func TestOGBRealDatasets(t *testing.T) {
	root := datatest.SharedData(t)
	for _, want := range ogbRealDatasets {
		t.Run(want.name, func(t *testing.T) {
			if testing.Short() && want.f*want.n > 20_000_000 {
				t.Skip("large feature file in -short mode")
			}
			ds, err := Load(filepath.Join(root, want.name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			g := ds.Graph
			if ds.Name != want.name || g.N != want.n || g.NumEdges() != want.e || ds.NumFeatures != want.f ||
				ds.NumClasses != want.c || len(ds.Splits) != want.splits {
				t.Fatalf("got name %s N %d E %d F %d C %d splits %d", ds.Name, g.N, g.NumEdges(), ds.NumFeatures, ds.NumClasses, len(ds.Splits))
			}
			if want.f == 0 && ds.Features != nil {
				t.Errorf("features %d values, want nil", len(ds.Features))
			}
			isolated, unlab := 0, 0
			for i := range g.N {
				if g.InDegree(i) == 0 { // the edge files are symmetric
					isolated++
				}
				if ds.Labels[i] < 0 {
					unlab++
				}
			}
			if isolated != want.isolated || unlab != want.unlab {
				t.Errorf("isolated %d unlabelled %d, want %d %d", isolated, unlab, want.isolated, want.unlab)
			}
			for name, s := range ds.Splits {
				if (want.train > 0 && len(s.Train) != want.train) || (want.valid > 0 && len(s.Valid) != want.valid) ||
					(want.test > 0 && len(s.Test) != want.test) || !slices.IsSorted(s.Train) || !slices.IsSorted(s.Test) {
					t.Errorf("split %s: %d/%d/%d", name, len(s.Train), len(s.Valid), len(s.Test))
				}
			}
		})
	}
}

// TestOGBCoraExact compares cora and tolokers with a plain line-by-line
// reading using strconv, and checks cora's public split exactly.
func TestOGBCoraExact(t *testing.T) {
	root := datatest.SharedData(t)
	for _, name := range []string{"cora", "tolokers"} {
		dir := filepath.Join(root, name)
		ds, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var feats []float32
		for _, line := range ogbReadLines(t, filepath.Join(dir, "raw", "node-feat.csv.gz")) {
			for _, s := range strings.Split(line, ",") {
				v, err := strconv.ParseFloat(s, 32)
				if err != nil {
					t.Fatal(err)
				}
				feats = append(feats, float32(v))
			}
		}
		if !ogbEqualBits(ds.Features, feats) {
			t.Errorf("%s: features differ from strconv", name)
		}
		// Rebuild the in-neighbour lists from the text and compare.
		in := make([][]int32, ds.Graph.N)
		for _, line := range ogbReadLines(t, filepath.Join(dir, "raw", "edge.csv.gz")) {
			s, d, _ := strings.Cut(line, ",")
			si, _ := strconv.Atoi(s)
			di, _ := strconv.Atoi(d)
			in[di] = append(in[di], int32(si))
		}
		for i := range in {
			if !slices.Equal(ogbRow(ds.Graph, i), in[i]) {
				t.Fatalf("%s: row %d = %v, want %v", name, i, ogbRow(ds.Graph, i), in[i])
			}
		}
		for i, line := range ogbReadLines(t, filepath.Join(dir, "raw", "node-label.csv.gz")) {
			if strconv.Itoa(int(ds.Labels[i])) != line {
				t.Fatalf("%s: label %d = %d, file says %s", name, i, ds.Labels[i], line)
			}
		}
		if name == "cora" {
			s := ds.Splits["public"]
			span := func(lo, hi int32) []int32 {
				var r []int32
				for i := lo; i < hi; i++ {
					r = append(r, i)
				}
				return r
			}
			if !slices.Equal(s.Train, span(0, 140)) || !slices.Equal(s.Valid, span(140, 640)) || !slices.Equal(s.Test, span(1708, 2708)) {
				t.Errorf("cora public split differs")
			}
		}
	}
}

func ogbReadLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestOGBGrowth loads real data with tiny blocks and preallocation, so the
// block and growth paths run on real files.
func TestOGBGrowth(t *testing.T) {
	root := datatest.SharedData(t)
	want, err := Load(filepath.Join(root, "cora"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	setOGBChunking(t, 4096, 10)
	got, err := Load(filepath.Join(root, "cora"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Graph.Indices, want.Graph.Indices) || !slices.Equal(got.Graph.Indptr, want.Graph.Indptr) ||
		!slices.Equal(got.Features, want.Features) || !slices.Equal(got.Labels, want.Labels) ||
		!slices.Equal(got.Splits["public"].Test, want.Splits["public"].Test) {
		t.Error("small blocks and growth change the result")
	}
}

// ogbTextBytes is the decompressed size of the dataset's raw/ and split/ files.
func ogbTextBytes(b *testing.B, dir string) int64 {
	var total int64
	for _, sub := range []string{"raw", "split"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				return err
			}
			n, err := io.Copy(io.Discard, zr)
			total += n
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return total
}

// BenchmarkLoadOGB measures the whole loader; MB/s is decompressed text.
func BenchmarkLoadOGB(b *testing.B) {
	root := datatest.SharedData(b)
	for _, name := range []string{"amazon_photo", "flickr"} {
		b.Run(name, func(b *testing.B) {
			dir := filepath.Join(root, name)
			b.SetBytes(ogbTextBytes(b, dir))
			for b.Loop() {
				if _, err := Load(dir, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
