package main

// This file reads the metrics files that `train --metrics` writes, defines
// the accuracy-at-a-byte-budget measure that `plot` and `report` compare
// methods with, and groups the runs of a RESULTS directory.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// epochRecord holds the fields of one per-epoch metrics line that plot and
// report use; the reader ignores all others. Epoch e is epochs[e] of its
// run: the reader checks that epochs run 0, 1, 2, ...
type epochRecord struct {
	valAcc, testAcc float64
	valAUC, testAUC float64
	hasAUC          bool // val_auc and test_auc are present (binary-class datasets)
	bytesCum        int64
	secondsCum      float64   // wall time of the epochs so far (training time, no setup)
	rates           []float64 // compression rate per layer (1 = raw); empty if not recorded
}

// runLog is one metrics file: the epochs in order and, once the run has
// finished, its summary.
type runLog struct {
	path     string
	epochs   []epochRecord
	complete bool    // the summary line is present
	seconds  float64 // the summary's wall time of the run
	// bestVal[i] is the index of the highest val_acc among epochs[0..i],
	// the earliest on ties, so that acc(B) is a binary search, not a scan.
	bestVal []int
}

// metricsLine is the JSON of one line, per-epoch or summary. Required
// per-epoch fields are pointers so that a missing one is an error rather
// than a silent zero.
type metricsLine struct {
	Summary   bool       `json:"summary"`
	Seconds   float64    `json:"seconds"`
	EpochSecs float64    `json:"epoch_seconds"`
	Epoch     *int       `json:"epoch"`
	ValAcc    *float64   `json:"val_acc"`
	TestAcc   *float64   `json:"test_acc"`
	ValAUC    *float64   `json:"val_auc"`
	TestAUC   *float64   `json:"test_auc"`
	BytesCum  *int64     `json:"bytes_cum"`
	Ratio     layerRates `json:"ratio"`
	Bits      []int      `json:"bits"`
	CompError []float64  `json:"comp_error"`
}

// layerRates decodes "ratio": an array with one rate per layer or, in older
// files, one number that holds for every layer.
type layerRates struct {
	values []float64
	scalar bool
}

func (r *layerRates) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &r.values)
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.values, r.scalar = []float64{v}, true
	return nil
}

// readRun reads a metrics file. A run without a summary line comes back
// with complete unset: it is still running or was killed.
func readRun(path string) (*runLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &data.InputError{File: path, Msg: "cannot open (" + pathErrReason(err) + "): expected a metrics file written by train --metrics"}
	}
	defer f.Close()
	r := &runLog{path: path}
	br := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			// Reading a directory fails here, not at the open.
			return nil, &data.InputError{File: path, Line: line, Msg: "cannot read (" + pathErrReason(err) + "): expected a metrics file written by train --metrics"}
		}
		// The trainer flushes whole lines, so a last line without its
		// newline that is not valid JSON is a write cut short by a kill:
		// the run is incomplete, not malformed.
		partial := err == io.EOF && !json.Valid(b)
		if len(bytes.TrimSpace(b)) > 0 && !partial {
			if err := r.addLine(b, line); err != nil {
				return nil, err
			}
		}
		if err == io.EOF {
			return r, nil
		}
	}
}

// pathErrReason is the reason of a file error without the path, which the
// InputError names already.
func pathErrReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// needEpochs rejects a file without per-epoch lines: it has nothing to plot
// or compare.
func (r *runLog) needEpochs() error {
	if len(r.epochs) == 0 {
		return &data.InputError{File: r.path, Msg: "no per-epoch lines: expected the JSON Lines that train --metrics writes"}
	}
	return nil
}

// addLine parses line number line of the file and appends its epoch.
func (r *runLog) addLine(b []byte, line int) error {
	bad := func(field, format string, args ...any) error {
		return &data.InputError{File: r.path, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if r.complete {
		return bad("", "line after the summary line: expected the summary to be last")
	}
	var m metricsLine
	if err := json.Unmarshal(b, &m); err != nil {
		return bad("", "malformed metrics line: %v", err)
	}
	if m.Summary {
		r.complete, r.seconds = true, m.Seconds
		return nil
	}
	e, err := m.record(len(r.epochs), bad)
	if err != nil {
		return err
	}
	if n := len(r.epochs); n > 0 && e.bytesCum < r.epochs[n-1].bytesCum {
		return bad("bytes_cum", "%d is less than the previous epoch's %d: expected a cumulative count", e.bytesCum, r.epochs[n-1].bytesCum)
	}
	e.secondsCum = m.EpochSecs
	if n := len(r.epochs); n > 0 {
		e.secondsCum += r.epochs[n-1].secondsCum
	}
	best := len(r.epochs)
	if best > 0 {
		if prev := r.bestVal[best-1]; r.epochs[prev].valAcc >= e.valAcc {
			best = prev
		}
	}
	r.epochs, r.bestVal = append(r.epochs, e), append(r.bestVal, best)
	return nil
}

// record checks one per-epoch line (want is the expected epoch number) and
// converts it; bad builds the error naming the file, line and field.
func (m *metricsLine) record(want int, bad func(field, format string, args ...any) error) (epochRecord, error) {
	switch {
	case m.Epoch == nil:
		return epochRecord{}, bad("epoch", "missing")
	case *m.Epoch != want:
		return epochRecord{}, bad("epoch", "%d where %d was expected: epochs must run 0, 1, 2, ...", *m.Epoch, want)
	case m.BytesCum == nil || *m.BytesCum < 0:
		return epochRecord{}, bad("bytes_cum", "missing or negative: expected the cumulative halo byte count")
	}
	e := epochRecord{bytesCum: *m.BytesCum, rates: m.Ratio.values}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"val_acc", m.ValAcc, &e.valAcc}, {"test_acc", m.TestAcc, &e.testAcc}} {
		if f.v == nil || !(*f.v >= 0 && *f.v <= 1) {
			return epochRecord{}, bad(f.name, "missing or outside [0, 1]: expected a fraction")
		}
		*f.dst = *f.v
	}
	if m.ValAUC != nil && m.TestAUC != nil {
		e.valAUC, e.testAUC, e.hasAUC = *m.ValAUC, *m.TestAUC, true
	}
	for _, v := range e.rates {
		if !(v > 0) || math.IsInf(v, 0) {
			return epochRecord{}, bad("ratio", "%v: expected positive finite rates (1 = raw)", v)
		}
	}
	if m.Ratio.scalar {
		// One number for every layer: spread it over as many layers as the
		// line's other per-layer fields describe.
		e.rates = slices.Repeat(e.rates, max(len(m.Bits), len(m.CompError), 1))
	}
	return e, nil
}

// timeTo is the training time at the end of the first epoch whose
// test-at-best-val-so-far reaches target (ok false if none does).
func (r *runLog) timeTo(target float64) (secs float64, ok bool) {
	for i, e := range r.epochs {
		if r.epochs[r.bestVal[i]].testAcc >= target {
			return e.secondsCum, true
		}
	}
	return 0, false
}

// accAt is acc(B) for this run and byte budget b: test_acc at the epoch of
// highest val_acc (earliest on ties) among the epochs with bytes_cum <= b.
// It is undefined (ok false) when no epoch fits: within b the run has no
// model yet. Beyond the last bytes_cum it is the whole run's
// test-at-best-val.
func (r *runLog) accAt(b int64) (acc float64, ok bool) {
	n := sort.Search(len(r.epochs), func(i int) bool { return r.epochs[i].bytesCum > b })
	if n == 0 {
		return 0, false
	}
	return r.epochs[r.bestVal[n-1]].testAcc, true
}

// testAtBestVal is test_acc at the epoch of highest val_acc (earliest on ties).
func (r *runLog) testAtBestVal() float64 { return r.epochs[r.bestVal[len(r.epochs)-1]].testAcc }

// totalBytes is the run's training halo traffic: the last bytes_cum.
func (r *runLog) totalBytes() int64 { return r.epochs[len(r.epochs)-1].bytesCum }

// firstBudget is the smallest budget at which acc(B) is defined.
func (r *runLog) firstBudget() int64 { return r.epochs[0].bytesCum }

// testAUCAtBestValAUC is test_auc at the epoch of highest val_auc (earliest
// on ties); ok is false unless every epoch recorded both AUCs.
func (r *runLog) testAUCAtBestValAUC() (auc float64, ok bool) {
	best := -1
	for i, e := range r.epochs {
		if !e.hasAUC {
			return 0, false
		}
		if best < 0 || e.valAUC > r.epochs[best].valAUC {
			best = i
		}
	}
	return r.epochs[best].testAUC, true
}

// meanAccAt is the mean over seed runs of acc(B). It is defined only when
// every run is: a mean over the seeds that happen to have a model would
// compare different populations at different budgets.
func meanAccAt(runs []*runLog, b int64) (mean float64, ok bool) {
	sum := 0.0
	for _, r := range runs {
		a, ok := r.accAt(b)
		if !ok {
			return 0, false
		}
		sum += a
	}
	return sum / float64(len(runs)), len(runs) > 0
}

// meanFirstBudget is the smallest budget at which meanAccAt is defined.
func meanFirstBudget(runs []*runLog) int64 {
	var b int64
	for _, r := range runs {
		b = max(b, r.firstBudget())
	}
	return b
}

// budgetGrid is the sorted union of every bytes_cum value of the runs
// compared. Each run's acc(B) changes only at its own bytes_cum values, so
// every mean curve is constant between consecutive grid points: evaluating
// at the grid is exact, where a log-spaced sample could miss the worst
// budget.
func budgetGrid(sets ...[]*runLog) []int64 {
	var grid []int64
	for _, runs := range sets {
		for _, r := range runs {
			for _, e := range r.epochs {
				grid = append(grid, e.bytesCum)
			}
		}
	}
	slices.Sort(grid)
	return slices.Compact(grid)
}

// meanStd is the mean and sample standard deviation (n-1; 0 for one value).
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) == 1 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// groupKey names one comparison: RESULTS/<grid>/<dataset>/<partition>-q<Q>.
type groupKey struct {
	grid, dataset, partition string
	q                        int
}

func (k groupKey) String() string {
	return fmt.Sprintf("%s / %s / %s / Q=%d", k.grid, k.dataset, k.partition, k.q)
}

// fileStem is the group's name in figure file names.
func (k groupKey) fileStem() string {
	return fmt.Sprintf("%s-%s-%s-q%d", k.grid, k.dataset, k.partition, k.q)
}

// runGroup holds the finished runs of one group, by method, one per seed.
type runGroup struct {
	groupKey
	methods map[string][]*runLog
}

// sortedMethods lists the group's methods in table order.
func (g *runGroup) sortedMethods() []string {
	ms := make([]string, 0, len(g.methods))
	for m := range g.methods {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, compareMethods)
	return ms
}

// results is a RESULTS directory: its groups in report order, and the runs
// without a finished metrics file, which the report lists as missing.
type results struct {
	groups  []*runGroup
	missing []missingRun
	byKey   map[groupKey]*runGroup
}

// missingRun is a run's metrics path relative to the results directory, and
// why it does not count.
type missingRun struct{ path, why string }

const resultsLayout = "<grid>/<dataset>/<partition>-q<Q>/<method>-s<seed>.jsonl"

// readResults reads every run under dir. scripts/experiments.sh writes a
// run's metrics to <run>.jsonl.tmp and its output to <run>.log, renames the
// .tmp to <run>.jsonl when the run succeeds and deletes it when the run
// fails; so besides .jsonl files without a summary line, a .jsonl.tmp
// (running or killed) and a .log alone (failed) are missing runs. Other
// files are ignored.
func readResults(dir string) (*results, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, &data.InputError{File: dir, Msg: "not a directory: expected a results directory laid out as " + resultsLayout}
	}
	res := &results{byKey: map[groupKey]*runGroup{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch run, ext := splitRunExt(rel); ext {
		case ".jsonl":
			return res.add(path, rel)
		case ".jsonl.tmp":
			res.missingRun(run, "still running or killed (metrics not yet renamed from .jsonl.tmp)")
		case ".log":
			if !exists(strings.TrimSuffix(path, ".log")+".jsonl") && !exists(strings.TrimSuffix(path, ".log")+".jsonl.tmp") {
				res.missingRun(run, "failed: no metrics file (see the .log)")
			}
		}
		return nil
	})
	slices.SortFunc(res.groups, func(a, b *runGroup) int { return compareGroups(a.groupKey, b.groupKey) })
	return res, err
}

// splitRunExt splits a file name into the run's path and one of the
// extensions a run leaves; ext is "" for any other file.
func splitRunExt(rel string) (run, ext string) {
	for _, ext := range []string{".jsonl.tmp", ".jsonl", ".log"} {
		if run, ok := strings.CutSuffix(rel, ext); ok {
			return run, ext
		}
	}
	return rel, ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// add reads the metrics file of one run: a finished run joins its group, an
// unfinished one is missing.
func (res *results) add(path, rel string) error {
	key, method, ok := parseRunPath(rel)
	if !ok {
		return &data.InputError{File: path, Msg: "not where a run belongs: expected " + resultsLayout}
	}
	r, err := readRun(path)
	if err != nil {
		return err
	}
	if !r.complete {
		res.missing = append(res.missing, missingRun{rel, "no summary line (still running or killed)"})
		return nil
	}
	if err := r.needEpochs(); err != nil {
		return err
	}
	g := res.byKey[key]
	if g == nil {
		g = &runGroup{groupKey: key, methods: map[string][]*runLog{}}
		res.byKey[key] = g
		res.groups = append(res.groups, g)
	}
	g.methods[method] = append(g.methods[method], r)
	return nil
}

// missingRun lists a run (its path without extension) as missing, if the
// path is one of a run: other .log or .tmp files are not runs.
func (res *results) missingRun(run, why string) {
	if _, _, ok := parseRunPath(run + ".jsonl"); ok {
		res.missing = append(res.missing, missingRun{run + ".jsonl", why})
	}
}

// parseRunPath splits a path relative to the results directory.
func parseRunPath(rel string) (key groupKey, method string, ok bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 4 {
		return key, "", false
	}
	i := strings.LastIndex(parts[2], "-q")
	j := strings.LastIndex(parts[3], "-s")
	if i <= 0 || j <= 0 {
		return key, "", false
	}
	q, errQ := strconv.Atoi(parts[2][i+2:])
	_, errS := strconv.ParseUint(strings.TrimSuffix(parts[3][j+2:], ".jsonl"), 10, 32)
	key = groupKey{grid: parts[0], dataset: parts[1], partition: parts[2][:i], q: q}
	return key, parts[3][:j], errQ == nil && q > 0 && errS == nil
}

// gridRank orders the grids as the experiment script runs them.
func gridRank(grid string) int {
	if i := slices.Index([]string{"core", "scaling", "more"}, grid); i >= 0 {
		return i
	}
	return 3
}

func compareGroups(a, b groupKey) int {
	return cmp.Or(cmp.Compare(gridRank(a.grid), gridRank(b.grid)), strings.Compare(a.grid, b.grid),
		strings.Compare(a.dataset, b.dataset), strings.Compare(a.partition, b.partition), cmp.Compare(a.q, b.q))
}

// methodParts splits a method name for ordering: its family (full, nocomm,
// fixed, varco, adaptive, other), the rate of a fixed method, and the codec.
func methodParts(m string) (family int, rate float64, codec string) {
	switch {
	case m == "full":
		return 0, 0, ""
	case m == "nocomm":
		return 1, 0, ""
	case strings.HasPrefix(m, "fixed"):
		r, c, _ := strings.Cut(strings.TrimPrefix(m, "fixed"), "-")
		rate, _ = strconv.ParseFloat(r, 64)
		return 2, rate, c
	case strings.HasPrefix(m, "varco-"):
		return 3, 0, strings.TrimPrefix(m, "varco-")
	case strings.HasPrefix(m, "adaptive-"):
		return 4, 0, strings.TrimPrefix(m, "adaptive-")
	}
	return 5, 0, ""
}

func compareMethods(a, b string) int {
	fa, ra, ca := methodParts(a)
	fb, rb, cb := methodParts(b)
	return cmp.Or(cmp.Compare(fa, fb), strings.Compare(ca, cb), cmp.Compare(ra, rb), strings.Compare(a, b))
}
