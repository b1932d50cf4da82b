// Package results is the offline analysis of finished runs: their metrics
// files as runs, the accuracy-at-a-byte-budget measure that methods are
// compared by, the runs of a results directory grouped by dataset,
// partition and method, and the Markdown report that tests the VARCO
// paper's claims on them (docs/results/RESULTS.md).
package results

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// Point is what the analyses read of one epoch of a run. Epoch e is
// Points[e] of its run (metrics.ReadFile checks that epochs run 0, 1, 2, ...);
// the accuracies of an epoch that was not evaluated are NaN.
type Point struct {
	ValAcc, TestAcc float64
	ValAUC, TestAUC float64
	HasAUC          bool // val_auc and test_auc are present (binary-class datasets)
	BytesCum        int64
	SecondsCum      float64   // wall time of the epochs so far (training time, no setup)
	Rates           []float64 // compression rate per layer (1 = raw); empty if not recorded
}

// Run is one metrics file: the epochs in order and, once the run has
// finished, its wall time.
type Run struct {
	Path     string
	Points   []Point
	Complete bool    // the summary line is present
	Seconds  float64 // the summary's wall time of the run
	// confirmed is the summary of a run whose epochs' accuracies were read
	// under compression and whose best epochs were evaluated at full
	// precision at its end (compress.EvalConfirm); nil otherwise.
	confirmed *metrics.Summary
	// bestVal[i] is the index of the highest val_acc among the evaluated
	// Points[0..i], the earliest on ties (-1 before the first evaluated
	// one), so that AccAt is a binary search, not a scan.
	bestVal []int
}

// ReadRun reads a metrics file. A run without a summary line comes back
// with Complete unset: it is still running or was killed.
func ReadRun(path string) (*Run, error) {
	log, err := metrics.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Run{Path: path, Complete: log.Complete, Seconds: log.Summary.Seconds}
	if log.Complete && log.Summary.Confirmed {
		r.confirmed = &log.Summary
	}
	for _, e := range log.Epochs {
		p := Point{ValAcc: e.ValAcc, TestAcc: e.TestAcc, BytesCum: e.BytesCum, SecondsCum: e.Seconds, Rates: e.Rates}
		if e.ValAUC != nil && e.TestAUC != nil {
			p.ValAUC, p.TestAUC, p.HasAUC = *e.ValAUC, *e.TestAUC, true
		}
		best := len(r.Points)
		if !e.Evaluated() {
			best = -1
		}
		if n := len(r.Points); n > 0 {
			p.SecondsCum += r.Points[n-1].SecondsCum
			if prev := r.bestVal[n-1]; prev >= 0 && (best < 0 || r.Points[prev].ValAcc >= p.ValAcc) {
				best = prev
			}
		}
		r.Points, r.bestVal = append(r.Points, p), append(r.bestVal, best)
	}
	return r, nil
}

// NeedEpochs rejects a file without per-epoch lines: it has nothing to plot
// or compare.
func (r *Run) NeedEpochs() error {
	if len(r.Points) == 0 {
		return &data.InputError{File: r.Path, Msg: "no per-epoch lines: expected the JSON Lines that train --metrics writes"}
	}
	return nil
}

// TimeTo is the training time at the end of the first epoch whose
// test-at-best-val-so-far reaches target (ok false if none does).
func (r *Run) TimeTo(target float64) (secs float64, ok bool) {
	for i, e := range r.Points {
		if b := r.bestVal[i]; b >= 0 && r.Points[b].TestAcc >= target {
			return e.SecondsCum, true
		}
	}
	return 0, false
}

// AccAt is acc(B) for this run and byte budget b: test_acc at the epoch of
// highest val_acc (earliest on ties) among the evaluated epochs with
// bytes_cum <= b. It is undefined (ok false) when no such epoch fits:
// within b the run has no model yet. Beyond the last bytes_cum it is the
// whole run's test-at-best-val.
func (r *Run) AccAt(b int64) (acc float64, ok bool) {
	n := sort.Search(len(r.Points), func(i int) bool { return r.Points[i].BytesCum > b })
	if n == 0 || r.bestVal[n-1] < 0 {
		return 0, false
	}
	return r.Points[r.bestVal[n-1]].TestAcc, true
}

// TestAtBestVal is test_acc at the evaluated epoch of highest val_acc
// (earliest on ties); NaN if no epoch was evaluated. For a confirmed run it
// is that epoch's test accuracy at full precision (the summary's).
func (r *Run) TestAtBestVal() float64 {
	if r.confirmed != nil {
		return r.confirmed.TestAtBestVal
	}
	if b := r.bestVal[len(r.Points)-1]; b >= 0 {
		return r.Points[b].TestAcc
	}
	return math.NaN()
}

// MedianEpoch is the median wall time of the run's epochs after the first,
// which also pays for what a run does once (allocation, the exact input's
// exchange); a run of one epoch gives that epoch's.
func (r *Run) MedianEpoch() float64 {
	n := len(r.Points)
	if n == 0 {
		return 0
	}
	if n == 1 {
		return r.Points[0].SecondsCum
	}
	secs := make([]float64, n-1)
	for i := 1; i < n; i++ {
		secs[i-1] = r.Points[i].SecondsCum - r.Points[i-1].SecondsCum
	}
	return Median(secs)
}

// Median is the middle value of xs (the mean of the two middle ones for an
// even count; 0 for none). xs is sorted in place.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// TotalBytes is the run's training halo traffic: the last bytes_cum.
func (r *Run) TotalBytes() int64 { return r.Points[len(r.Points)-1].BytesCum }

// FirstBudget is the smallest budget at which acc(B) is defined: the bytes
// of the first evaluated epoch (the last epoch's if none was).
func (r *Run) FirstBudget() int64 {
	for i, b := range r.bestVal {
		if b >= 0 {
			return r.Points[i].BytesCum
		}
	}
	return r.Points[len(r.Points)-1].BytesCum
}

// TestAUCAtBestValAUC is test_auc at the epoch of highest val_auc (earliest
// on ties); ok is false unless every evaluated epoch recorded both AUCs. For
// a confirmed run it is the summary's, at full precision.
func (r *Run) TestAUCAtBestValAUC() (auc float64, ok bool) {
	if c := r.confirmed; c != nil && c.TestAtBestValAUC != nil {
		return *c.TestAtBestValAUC, true
	}
	best := -1
	for i, e := range r.Points {
		if math.IsNaN(e.ValAcc) {
			continue // not evaluated
		}
		if !e.HasAUC {
			return 0, false
		}
		if best < 0 || e.ValAUC > r.Points[best].ValAUC {
			best = i
		}
	}
	return r.Points[best].TestAUC, true
}

// MeanAccAt is the mean over seed runs of acc(B). It is defined only when
// every run is: a mean over the seeds that happen to have a model would
// compare different populations at different budgets.
func MeanAccAt(runs []*Run, b int64) (mean float64, ok bool) {
	sum := 0.0
	for _, r := range runs {
		a, ok := r.AccAt(b)
		if !ok {
			return 0, false
		}
		sum += a
	}
	return sum / float64(len(runs)), len(runs) > 0
}

// MeanFirstBudget is the smallest budget at which MeanAccAt is defined.
func MeanFirstBudget(runs []*Run) int64 {
	var b int64
	for _, r := range runs {
		b = max(b, r.FirstBudget())
	}
	return b
}

// BudgetGrid is the sorted union of every bytes_cum value of the runs
// compared. Each run's acc(B) changes only at its own bytes_cum values, so
// every mean curve is constant between consecutive grid points: evaluating
// at the grid is exact, where a log-spaced sample could miss the worst
// budget.
func BudgetGrid(sets ...[]*Run) []int64 {
	var grid []int64
	for _, runs := range sets {
		for _, r := range runs {
			for _, e := range r.Points {
				grid = append(grid, e.BytesCum)
			}
		}
	}
	slices.Sort(grid)
	return slices.Compact(grid)
}

// MeanStd is the mean and sample standard deviation (n-1; 0 for one value).
func MeanStd(xs []float64) (mean, std float64) {
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

// GroupKey names one comparison: RESULTS/<grid>/<dataset>/<partition>-q<Q>.
type GroupKey struct {
	Grid, Dataset, Partition string
	Q                        int
}

func (k GroupKey) String() string {
	return fmt.Sprintf("%s / %s / %s / Q=%d", k.Grid, k.Dataset, k.Partition, k.Q)
}

// FileStem is the group's name in figure file names.
func (k GroupKey) FileStem() string {
	return fmt.Sprintf("%s-%s-%s-q%d", k.Grid, k.Dataset, k.Partition, k.Q)
}

// Group holds the finished runs of one group, by method, one per seed.
type Group struct {
	GroupKey
	Methods map[string][]*Run
}

// SortedMethods lists the group's methods in table order.
func (g *Group) SortedMethods() []string {
	ms := make([]string, 0, len(g.Methods))
	for m := range g.Methods {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, CompareMethods)
	return ms
}

// Results is a results directory: its groups in report order, and the
// runs without a finished metrics file, which the report lists as missing.
type Results struct {
	Groups  []*Group
	Missing []MissingRun
	byKey   map[GroupKey]*Group
}

// MissingRun is a run's metrics path relative to the results directory, and
// why it does not count.
type MissingRun struct{ Path, Why string }

// Layout is where a run's metrics file lies in a results directory.
const Layout = "<grid>/<dataset>/<partition>-q<Q>/<method>-s<seed>.jsonl"

// ReadDir reads every run under dir. scripts/experiments.sh writes a
// run's metrics to <run>.jsonl.tmp and its output to <run>.log, renames the
// .tmp to <run>.jsonl when the run succeeds and deletes it when the run
// fails; so besides .jsonl files without a summary line, a .jsonl.tmp
// (running or killed) and a .log alone (failed) are missing runs. Other
// files are ignored.
func ReadDir(dir string) (*Results, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, &data.InputError{File: dir, Msg: "not a directory: expected a results directory laid out as " + Layout}
	}
	res := &Results{byKey: map[GroupKey]*Group{}}
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
			res.addMissing(run, "still running or killed (metrics not yet renamed from .jsonl.tmp)")
		case ".log":
			if !exists(strings.TrimSuffix(path, ".log")+".jsonl") && !exists(strings.TrimSuffix(path, ".log")+".jsonl.tmp") {
				res.addMissing(run, "failed: no metrics file (see the .log)")
			}
		}
		return nil
	})
	slices.SortFunc(res.Groups, func(a, b *Group) int { return compareGroups(a.GroupKey, b.GroupKey) })
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
func (res *Results) add(path, rel string) error {
	key, method, ok := parseRunPath(rel)
	if !ok {
		return &data.InputError{File: path, Msg: "not where a run belongs: expected " + Layout}
	}
	r, err := ReadRun(path)
	if err != nil {
		return err
	}
	if !r.Complete {
		res.Missing = append(res.Missing, MissingRun{rel, "no summary line (still running or killed)"})
		return nil
	}
	if err := r.NeedEpochs(); err != nil {
		return err
	}
	g := res.byKey[key]
	if g == nil {
		g = &Group{GroupKey: key, Methods: map[string][]*Run{}}
		res.byKey[key] = g
		res.Groups = append(res.Groups, g)
	}
	g.Methods[method] = append(g.Methods[method], r)
	return nil
}

// addMissing lists a run (its path without extension) as missing, if the
// path is one of a run: other .log or .tmp files are not runs.
func (res *Results) addMissing(run, why string) {
	if _, _, ok := parseRunPath(run + ".jsonl"); ok {
		res.Missing = append(res.Missing, MissingRun{run + ".jsonl", why})
	}
}

// parseRunPath splits a path relative to the results directory.
func parseRunPath(rel string) (key GroupKey, method string, ok bool) {
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
	key = GroupKey{Grid: parts[0], Dataset: parts[1], Partition: parts[2][:i], Q: q}
	return key, parts[3][:j], errQ == nil && q > 0 && errS == nil
}

// gridRank orders the grids as the experiment script runs them.
func gridRank(grid string) int {
	if i := slices.Index([]string{"core", "core2", "core3", "scaling", "more"}, grid); i >= 0 {
		return i
	}
	return 4
}

func compareGroups(a, b GroupKey) int {
	return cmp.Or(cmp.Compare(gridRank(a.Grid), gridRank(b.Grid)), strings.Compare(a.Grid, b.Grid),
		strings.Compare(a.Dataset, b.Dataset), strings.Compare(a.Partition, b.Partition), cmp.Compare(a.Q, b.Q))
}

// MethodParts splits a method name for ordering: its family (full, nocomm,
// fixed, varco, adaptive, other), the rate of a fixed method, and the codec.
func MethodParts(m string) (family int, rate float64, codec string) {
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

func CompareMethods(a, b string) int {
	fa, ra, ca := MethodParts(a)
	fb, rb, cb := MethodParts(b)
	return cmp.Or(cmp.Compare(fa, fb), strings.Compare(ca, cb), cmp.Compare(ra, rb), strings.Compare(a, b))
}

// Series is one method's runs, one per seed, averaged where drawn or
// compared.
type Series struct {
	Name string
	Runs []*Run
}
