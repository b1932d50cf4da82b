package ogb

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// Options controls Load.
type Options struct {
	Build  data.BuildOptions // how the edge list becomes the CSR
	Splits []string          // split names to load; nil = every directory under split/
}

// Load reads a node-property-prediction dataset in the OGB raw layout:
//
//	raw/num-node-list.csv  N (exactly one graph)
//	raw/num-edge-list.csv  E
//	raw/edge.csv           E lines "src,dst": edge src->dst
//	raw/node-feat.csv      optional; N lines of F comma-separated float32
//	raw/node-label.csv     N lines: class id, or -1 = unlabelled
//	split/<name>/{train,valid,test}.csv  one node id per line
//
// Every file may be gzip'd as .csv.gz, which is preferred when both exist.
// Every problem with the input is reported as an *data.InputError naming the file
// and line. The edges are as in the file; opt.Build adds inverse edges or
// self loops.
func Load(dir string, opt Options) (*data.Dataset, error) {
	h, err := loadHeader(dir)
	if err != nil {
		return nil, err
	}
	n, e, nRel, eRel, labels, numClasses, labelPath := h.n, h.e, h.nRel, h.eRel, h.labels, h.classes, h.labelPath

	// The three big reads are independent; running them together overlaps
	// the serial gzip decompression of each file. Errors are reported in a
	// fixed order so the result does not depend on scheduling.
	var (
		src, dst []int32
		features []float32
		f        int
		splits   map[string]*data.Split
		errs     [3]error
		wg       sync.WaitGroup
	)
	wg.Go(func() { src, dst, errs[0] = loadEdges(dir, n, e, nRel, eRel) })
	wg.Go(func() { features, f, errs[1] = loadFeatures(dir, n, nRel) })
	wg.Go(func() { splits, errs[2] = loadSplits(dir, opt.Splits, labels, relPath(dir, labelPath)) })
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}

	g, err := data.BuildGraph(n, src, dst, opt.Build)
	if err != nil {
		return nil, err
	}
	ds := &data.Dataset{
		Name:        filepath.Base(filepath.Clean(dir)),
		Graph:       g,
		NumFeatures: f,
		Features:    features,
		Labels:      labels,
		NumClasses:  numClasses,
		Splits:      splits,
	}
	// Everything was checked line by line above; this is a cheap net for
	// invariants the trainer relies on.
	if err := ds.Validate(dir); err != nil {
		return nil, err
	}
	return ds, nil
}

// header is what a reader takes first: the counts (and the files that
// give them, relative to dir, for messages) and the labels, which confirm
// N with a real file before the big allocations (the splits need them).
type header struct {
	n, e       int
	nRel, eRel string
	labels     []int32
	classes    int
	labelPath  string
}

func loadHeader(dir string) (*header, error) {
	n, nPath, err := loadCount(dir, "raw/num-node-list", "node", 1)
	if err != nil {
		return nil, err
	}
	e, ePath, err := loadCount(dir, "raw/num-edge-list", "edge", 0)
	if err != nil {
		return nil, err
	}
	h := &header{n: n, e: e, nRel: relPath(dir, nPath), eRel: relPath(dir, ePath)}
	if h.labels, h.classes, h.labelPath, err = loadLabels(dir, n, h.nRel); err != nil {
		return nil, err
	}
	return h, nil
}

func relPath(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

// loadCount reads a one-line count file (num-node-list or num-edge-list) and
// returns the count and the file's path.
func loadCount(dir, base, what string, lo int64) (int, string, error) {
	tf, err := openText(dir, base, false)
	if err != nil {
		return 0, "", err
	}
	defer tf.Close()
	t := newIntTable(tf.path, "num_"+what+"s")
	t.lo, t.hi = lo, math.MaxInt32+1
	t.expect = fmt.Sprintf("a %s count in [%d, %d]", what, lo, math.MaxInt32)
	t.max = math.MaxInt32
	t.tooMany = "too many lines"
	lines, err := t.run(tf)
	if err != nil {
		return 0, "", err
	}
	switch {
	case lines == 0:
		return 0, "", data.InputErrorf(tf.path, 1, "", "empty file, expected one line with the number of %ss", what)
	case lines > 1:
		return 0, "", data.InputErrorf(tf.path, 2, "", "lists %d graphs (one per line), expected exactly one graph: multi-graph datasets are not supported", lines)
	}
	return int(t.cols[0][0]), tf.path, nil
}

// loadLabels reads node-label.csv: exactly n labels in [-1, data.MaxClasses(n)).
func loadLabels(dir string, n int, nRel string) (labels []int32, numClasses int, path string, err error) {
	tf, err := openText(dir, "raw/node-label", false)
	if err != nil {
		return nil, 0, "", err
	}
	defer tf.Close()
	t := newIntTable(tf.path, "label")
	t.lo, t.hi = -1, int64(data.MaxClasses(n))
	t.expect = fmt.Sprintf("-1 (unlabelled) or a class id in [0, %d) (at most one class per node, or 1024; %s declares %d nodes)", data.MaxClasses(n), nRel, n)
	t.integralFloats = true
	t.max = n
	t.tooMany = fmt.Sprintf("more than %d lines, expected one label per node (%s declares %d nodes)", n, nRel, n)
	lines, err := t.run(tf)
	if err != nil {
		return nil, 0, "", err
	}
	if lines < n {
		return nil, 0, "", data.InputErrorf(tf.path, lines+1, "", "file ends after %d lines, expected one label per node (%s declares %d nodes)", lines, nRel, n)
	}
	labels = t.cols[0]
	top := int32(-1)
	for _, y := range labels {
		top = max(top, y)
	}
	if top < 0 {
		return nil, 0, "", data.InputErrorf(tf.path, 0, "", "no node has a label (all are -1), expected at least one class id")
	}
	return labels, int(top) + 1, tf.path, nil
}

// loadEdges reads edge.csv: exactly e lines "src,dst" with ids in [0, n).
func loadEdges(dir string, n, e int, nRel, eRel string) (src, dst []int32, err error) {
	tf, err := openText(dir, "raw/edge", false)
	if err != nil {
		return nil, nil, err
	}
	defer tf.Close()
	t := newIntTable(tf.path, "src", "dst")
	t.lo, t.hi = 0, int64(n)
	t.expect = fmt.Sprintf("a node id in [0, %d) (%s declares %d nodes)", n, nRel, n)
	t.max = e
	t.tooMany = fmt.Sprintf("more than %d lines, expected one edge per line (%s declares %d edges)", e, eRel, e)
	lines, err := t.run(tf)
	if err != nil {
		return nil, nil, err
	}
	if lines < e {
		return nil, nil, data.InputErrorf(tf.path, lines+1, "", "file ends after %d lines, expected %d edges (%s declares %d)", lines, e, eRel, e)
	}
	return t.cols[0], t.cols[1], nil
}

// loadFeatures reads the optional node-feat.csv: n rows of F finite floats.
// Without the file it returns (nil, 0, nil).
func loadFeatures(dir string, n int, nRel string) ([]float32, int, error) {
	tf, err := openText(dir, "raw/node-feat", true)
	if err != nil || tf == nil {
		return nil, 0, err
	}
	defer tf.Close()
	t := &floatTable{path: tf.path, max: n}
	t.tooMany = fmt.Sprintf("more than %d lines, expected one feature row per node (%s declares %d nodes)", n, nRel, n)
	lines, err := t.run(tf)
	if err != nil {
		return nil, 0, err
	}
	if lines < n {
		return nil, 0, data.InputErrorf(tf.path, lines+1, "", "file ends after %d lines, expected one feature row per node (%s declares %d nodes)", lines, nRel, n)
	}
	return t.data, t.f, nil
}

// loadSplits reads the named splits (all under split/ when names is nil).
func loadSplits(dir string, names []string, labels []int32, labelRel string) (map[string]*data.Split, error) {
	root := filepath.Join(dir, "split")
	var avail []string
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, data.InputErrorf(root, 0, "", "cannot list splits: %v", unwrapPathError(err))
	}
	for _, ent := range ents {
		if ent.IsDir() {
			avail = append(avail, ent.Name())
		}
	}
	if names == nil {
		if len(avail) == 0 {
			return nil, data.InputErrorf(root, 0, "", "no split directories, expected split/<name>/{train,valid,test}.csv[.gz]")
		}
		names = avail
	}
	owner := make([]uint8, len(labels)) // reused: which part holds each node
	splits := make(map[string]*data.Split, len(names))
	for _, name := range names {
		if !slices.Contains(avail, name) {
			return nil, data.InputErrorf(filepath.Join(root, name), 0, "", "no such split directory; available: %s", strings.Join(avail, ", "))
		}
		s, err := loadSplit(dir, name, labels, labelRel, owner)
		if err != nil {
			return nil, err
		}
		splits[name] = s
	}
	return splits, nil
}

// loadSplit reads split/<name>/{train,valid,test} and checks, naming the
// offending line, that each part is non-empty, holds labelled nodes only, and
// that the parts are disjoint and free of repeats. The ids come back sorted.
func loadSplit(dir, name string, labels []int32, labelRel string, owner []uint8) (*data.Split, error) {
	n := len(labels)
	clear(owner)
	parts := [3]string{"train", "valid", "test"}
	var ids [3][]int32
	var paths [3]string
	for p, part := range parts {
		tf, err := openText(dir, "split/"+name+"/"+part, false)
		if err != nil {
			return nil, err
		}
		t := newIntTable(tf.path, "node")
		t.lo, t.hi = 0, int64(n)
		t.expect = fmt.Sprintf("a node id in [0, %d)", n)
		t.max = n
		t.tooMany = fmt.Sprintf("more than %d lines, expected each of the %d nodes at most once", n, n)
		lines, err := t.run(tf)
		tf.Close()
		if err != nil {
			return nil, err
		}
		if lines == 0 {
			return nil, data.InputErrorf(tf.path, 1, "", "empty file, expected at least one node id")
		}
		ids[p], paths[p] = t.cols[0], tf.path
		for k, id := range ids[p] {
			if labels[id] < 0 {
				return nil, data.InputErrorf(tf.path, k+1, "node", "node %d has no label (-1 in %s), expected labelled nodes only", id, labelRel)
			}
			if o := int(owner[id]); o != 0 {
				prev := slices.Index(ids[o-1], id) + 1
				if o == p+1 {
					return nil, data.InputErrorf(tf.path, k+1, "node", "node %d is already listed on line %d", id, prev)
				}
				return nil, data.InputErrorf(tf.path, k+1, "node", "node %d is also in %s (line %d), expected disjoint train/valid/test",
					id, relPath(dir, paths[o-1]), prev)
			}
			owner[id] = uint8(p + 1)
		}
	}
	for p := range ids {
		slices.Sort(ids[p])
	}
	return &data.Split{Train: ids[0], Valid: ids[1], Test: ids[2]}, nil
}
