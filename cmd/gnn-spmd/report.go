package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "report --dir RESULTS --out FILE.md [--figures DIR] [--notes FILE.md]", stderr)
	dir := fs.String("dir", "", "results directory, laid out as "+resultsLayout+", with an optional config.txt")
	out := fs.String("out", "", "Markdown file to write, e.g. docs/RESULTS.md")
	figDir := fs.String("figures", "", "directory for the figures (default: figures beside --out)")
	notesPath := fs.String("notes", "", "hand-written Markdown (the reading of the tables) put after the title")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return usagef("report: --dir and --out are required")
	}
	if *figDir == "" {
		*figDir = filepath.Join(filepath.Dir(*out), "figures")
	}
	res, err := readResults(*dir)
	if err != nil {
		return err
	}
	config, err := readConfig(*dir)
	if err != nil {
		return err
	}
	var notes []byte
	if *notesPath != "" {
		if notes, err = os.ReadFile(*notesPath); err != nil {
			return fmt.Errorf("--notes: %w", err)
		}
	}
	figs, err := writeFigures(res, *figDir)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := renderReport(&md, res, *dir, config, string(notes), figs, filepath.Dir(*out)); err != nil {
		return err
	}
	if err := writeAtomic(*out, func(w io.Writer) error { _, err := w.Write(md.Bytes()); return err }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d groups, %d figures in %s, %d runs listed as missing\n",
		*out, len(res.groups), len(figs), *figDir, len(res.missing))
	return nil
}

// readConfig returns RESULTS/config.txt ("" when there is none), which the
// experiment script writes with its exact commands.
func readConfig(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// methodStats summarises a method's seed runs in one group.
type methodStats struct {
	n           int
	acc, accStd float64 // test-at-best-val, percent
	aucN        int     // runs that recorded AUC
	auc, aucStd float64 // test AUC at best val AUC, percent
	bytes       float64 // mean training halo bytes per run
	seconds     float64 // mean wall time per run
}

func summarize(runs []*runLog) methodStats {
	var accs, aucs, bytes, secs []float64
	for _, r := range runs {
		accs = append(accs, 100*r.testAtBestVal())
		if a, ok := r.testAUCAtBestValAUC(); ok {
			aucs = append(aucs, 100*a)
		}
		bytes = append(bytes, float64(r.totalBytes()))
		secs = append(secs, r.seconds)
	}
	s := methodStats{n: len(runs), aucN: len(aucs)}
	s.acc, s.accStd = meanStd(accs)
	s.auc, s.aucStd = meanStd(aucs)
	s.bytes, _ = meanStd(bytes)
	s.seconds, _ = meanStd(secs)
	return s
}

// The claims' thresholds, in accuracy points and shares of bytes.
const (
	minMargin         = 0.5  // the least accuracy tolerance of claims 1 and 2
	claim1MaxShare    = 0.25 // varco may send at most this share of full's bytes
	adaptiveTolerance = 0.5  // adaptive "reaches" full within this many points
)

// claimMargin is the accuracy tolerance of claims 1 and 2 in points: full's
// seed-to-seed sample std, so that seed noise alone cannot fail a claim,
// but at least minMargin (and minMargin with fewer than two full seeds).
func claimMargin(full methodStats) float64 { return math.Max(minMargin, full.accStd) }

// claim1Result compares varco with full in one group.
type claim1Result struct {
	diff, margin float64 // varco − full, and the tolerance, in points
	pass         bool
}

// claim1 passes iff acc_varco >= acc_full − margin and varco's bytes are at
// most 25% of full's.
func claim1(full, varco methodStats) claim1Result {
	m := claimMargin(full)
	return claim1Result{diff: varco.acc - full.acc, margin: m,
		pass: varco.acc >= full.acc-m && varco.bytes <= claim1MaxShare*full.bytes}
}

// claim2Result compares varco with one fixed rate over all byte budgets.
type claim2Result struct {
	worst float64 // min over B of mean acc_varco(B) − mean acc_fixed(B) + margin, points
	at    int64   // the smallest budget where worst is reached
	// For B in [gapFrom, gapTo) fixed has a model and varco has none yet:
	// each such budget is a failure. Empty when gapFrom >= gapTo.
	gapFrom, gapTo int64
	pass           bool
}

// claim2 evaluates both mean curves on the union of their runs' bytes_cum
// values, which is exact (see budgetGrid); both means are defined from the
// largest first budget of their seeds on, so the budgets where only fixed
// is defined form one interval.
func claim2(varco, fixed []*runLog, margin float64) claim2Result {
	res := claim2Result{worst: math.Inf(1), gapFrom: meanFirstBudget(fixed), gapTo: meanFirstBudget(varco)}
	for _, b := range budgetGrid(varco, fixed) {
		v, okV := meanAccAt(varco, b)
		f, okF := meanAccAt(fixed, b)
		if d := 100*(v-f) + margin; okV && okF && d < res.worst {
			res.worst, res.at = d, b
		}
	}
	res.pass = res.worst >= 0 && res.gapFrom >= res.gapTo
	return res
}

// adaptiveResult compares adaptive with full (accuracy) and varco (bytes).
type adaptiveResult struct {
	diff           float64 // adaptive − full, points
	reaches, fewer bool
}

func adaptiveClaim(full, varco, adaptive methodStats) adaptiveResult {
	return adaptiveResult{diff: adaptive.acc - full.acc,
		reaches: adaptive.acc >= full.acc-adaptiveTolerance, fewer: adaptive.bytes < varco.bytes}
}

// figure is one figure of the report: png is empty when it was not drawn,
// and note says why.
type figure struct {
	group        groupKey
	caption, png string
	note         string
}

// codecs are the halo codecs whose methods the claims and figures compare.
var codecs = []string{"quant", "trunc"}

// writeFigures draws, for each core group and codec, accuracy against bytes
// of full, nocomm, every fixed rate, varco and adaptive of the codec (those
// present), and the quant methods' rates per epoch.
func writeFigures(res *results, dir string) ([]figure, error) {
	var figs []figure
	for _, g := range res.groups {
		if g.grid != "core" {
			continue
		}
		for _, codec := range codecs {
			ss := figureSeries(g, codec)
			if ss == nil {
				continue
			}
			base := filepath.Join(dir, g.fileStem()+"-"+codec)
			heading := fmt.Sprintf("%s, %s: ", g.groupKey, codec)
			f := figure{group: g.groupKey, caption: heading + "test accuracy at best validation within a byte budget", png: base + "-acc-bytes.png"}
			if err := writeAccBytes(base, heading, ss); errors.Is(err, errNoHaloBytes) {
				f.png, f.note = "", err.Error()
			} else if err != nil {
				return nil, err
			}
			figs = append(figs, f)
			if codec == "quant" {
				if err := writeRateEpoch(base, heading, ss); err != nil {
					return nil, err
				}
				figs = append(figs, figure{group: g.groupKey, caption: heading + "compression rate per epoch", png: base + "-rate-epoch.png"})
			}
		}
	}
	return figs, nil
}

// figureSeries lists full, nocomm and the methods of codec in table order;
// nil when the group has no method of the codec.
func figureSeries(g *runGroup, codec string) []plotSeries {
	var ss []plotSeries
	withCodec := false
	for _, m := range g.sortedMethods() {
		_, _, c := methodParts(m)
		if m == "full" || m == "nocomm" || c == codec {
			ss = append(ss, plotSeries{name: m, runs: g.methods[m]})
			withCodec = withCodec || c == codec
		}
	}
	if !withCodec {
		return nil
	}
	return ss
}

// renderReport writes the whole Markdown report.
func renderReport(w io.Writer, res *results, dir, config, notes string, figs []figure, reportDir string) error {
	fmt.Fprintf(w, "# Experiment results\n\n")
	if notes != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(notes))
	}
	fmt.Fprintf(w, "_The rest of this file is generated by `gnn-spmd report` from `%s`: do not edit it by hand; rerun the command instead._\n\n", dir)
	writeSetup(w, dir, config)
	fmt.Fprint(w, definitions)
	writeGroupTables(w, res)
	writeClaim1(w, res)
	writeClaim2(w, res)
	writeAdaptive(w, res)
	if err := writeFigureLinks(w, figs, reportDir); err != nil {
		return err
	}
	writeMissing(w, res, dir)
	return nil
}

func writeSetup(w io.Writer, dir, config string) {
	fmt.Fprintf(w, "## Setup\n\n")
	if config == "" {
		fmt.Fprintf(w, "`%s` has no config.txt.\n\n", dir)
		return
	}
	fence := "```"
	for strings.Contains(config, fence) {
		fence += "`"
	}
	fmt.Fprintf(w, "Copied verbatim from `%s`:\n\n%s\n%s\n%s\n\n", filepath.Join(dir, "config.txt"), fence, strings.TrimRight(config, "\n"), fence)
}

const definitions = `## Definitions

- **test-at-best-val** of a run: test_acc at the epoch with the highest val_acc (the earliest on ties). For AUC: test_auc at the epoch with the highest val_auc.
- **acc(B)** of a run at a byte budget B: test_acc at the best-val epoch among the epochs with bytes_cum <= B (bytes_cum: cumulative training halo bytes up to and including that epoch). It is undefined when no epoch fits (within B the run has no model yet); beyond the run's last bytes_cum it equals the whole run's test-at-best-val.
- **mean acc(B)** of a method: the mean of acc(B) over its seed runs, defined at B only when every seed run is. Curves and claim 2 evaluate it on the union of all bytes_cum values of the runs compared; every acc(B) is constant between consecutive values, so this grid is exact, not a sample.
- **margin**: max(0.5, sample std of full's test-at-best-val over seeds), in points.
- Accuracies and AUCs are in percent, mean ± sample std (n−1; 0 for one seed) over seeds; differences are in points. Bytes are a run's training halo bytes (its last bytes_cum), averaged over seeds; 1 MB = 10^6 B. Only runs with a summary line count; the others are listed under Missing runs.

`

// writeGroupTables writes one table per group, one row per method.
func writeGroupTables(w io.Writer, res *results) {
	fmt.Fprintf(w, "## Runs per group\n\n")
	fmt.Fprintf(w, "One table per grid / dataset / partition / Q; one row per method: test-at-best-val accuracy, test AUC at best val AUC (binary-class datasets), training bytes (mean, and as %% of full's mean) and wall seconds per run.\n\n")
	for _, g := range res.groups {
		fmt.Fprintf(w, "### %s\n\n", g.groupKey)
		full := summarize(g.methods["full"])
		rows := [][]string{{"method", "seeds", "test acc at best val (%)", "test AUC at best val AUC (%)", "training bytes", "bytes (% of full)", "seconds per run"}}
		for _, m := range g.sortedMethods() {
			s := summarize(g.methods[m])
			auc := "—"
			if s.aucN > 0 {
				auc = fmt.Sprintf("%.2f ± %.2f", s.auc, s.aucStd)
			}
			if s.aucN > 0 && s.aucN < s.n {
				auc += fmt.Sprintf(" (%d of %d runs)", s.aucN, s.n)
			}
			rows = append(rows, []string{m, fmt.Sprint(s.n), fmt.Sprintf("%.2f ± %.2f", s.acc, s.accStd), auc,
				decimalBytes(s.bytes), share(s.bytes, full), fmt.Sprintf("%.1f", s.seconds)})
		}
		mdTable(w, rows)
	}
}

// share formats bytes as a percentage of full's mean bytes.
func share(bytes float64, full methodStats) string {
	if full.n == 0 || full.bytes == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*bytes/full.bytes)
}

// writeClaim1 writes claim 1 for grids core and scaling.
func writeClaim1(w io.Writer, res *results) {
	fmt.Fprintf(w, "## Claim 1: varco matches full's accuracy with at most 25%% of its bytes (grids core and scaling)\n\n")
	fmt.Fprintf(w, "Per group: varco − full in test-at-best-val (points), the margin, and varco's bytes as %% of full's. PASS iff acc_varco >= acc_full − margin and bytes_varco <= 25%% of bytes_full. varco-quant is the claim; varco-trunc is informative.\n\n")
	rows := [][]string{{"group", "method", "varco − full (points)", "margin (points)", "bytes (% of full)", "verdict"}}
	pass, total, skipped := map[string]int{}, map[string]int{}, map[string]int{}
	for _, g := range res.groups {
		if g.grid != "core" && g.grid != "scaling" {
			continue
		}
		full := summarize(g.methods["full"])
		for _, codec := range codecs {
			m := "varco-" + codec
			if g.methods[m] == nil {
				continue
			}
			if full.n == 0 {
				skipped[m]++
				rows = append(rows, []string{g.groupKey.String(), m, "—", "—", "—", "not evaluated: no full runs"})
				continue
			}
			s := summarize(g.methods[m])
			c := claim1(full, s)
			total[m]++
			if c.pass {
				pass[m]++
			}
			rows = append(rows, []string{g.groupKey.String(), m, fmt.Sprintf("%+.2f", c.diff), fmt.Sprintf("%.2f", c.margin),
				share(s.bytes, full), verdict(c.pass)})
		}
	}
	for _, codec := range codecs {
		m := "varco-" + codec
		fmt.Fprintf(w, "- %s: %d / %d PASS%s\n", m, pass[m], total[m], notEvaluated(skipped[m]))
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeClaim2 writes claim 2 for grid core.
func writeClaim2(w io.Writer, res *results) {
	fmt.Fprintf(w, "## Claim 2: at every byte budget varco is within the margin of each fixed rate (grid core)\n\n")
	fmt.Fprintf(w, "Per group, codec and fixed rate r: the minimum over budgets B of mean acc_varco(B) − mean acc_fixed(B) + margin (points), over the budgets where both means are defined, and the smallest B where it occurs. Budgets where fixed has a model and varco has none yet count as failures and are listed. PASS iff the minimum >= 0 and there are no such budgets.\n\n")
	rows := [][]string{{"group", "codec", "fixed", "margin (points)", "worst varco − fixed + margin (points)", "at budget", "budgets where only fixed has a model", "verdict"}}
	pass, total := map[string]int{}, map[string]int{}
	for _, g := range res.groups {
		if g.grid != "core" {
			continue
		}
		margin := claimMargin(summarize(g.methods["full"]))
		for _, m := range g.sortedMethods() {
			family, _, codec := methodParts(m)
			varco := g.methods["varco-"+codec]
			if family != 2 || varco == nil {
				continue
			}
			c := claim2(varco, g.methods[m], margin)
			total[codec]++
			if c.pass {
				pass[codec]++
			}
			gap := "none"
			if c.gapFrom < c.gapTo {
				gap = fmt.Sprintf("[%s, %s): varco has no model yet (failure)", decimalBytes(float64(c.gapFrom)), decimalBytes(float64(c.gapTo)))
			}
			rows = append(rows, []string{g.groupKey.String(), codec, m, fmt.Sprintf("%.2f", margin), fmt.Sprintf("%+.2f", c.worst),
				decimalBytes(float64(c.at)), gap, verdict(c.pass)})
		}
	}
	for _, codec := range codecs {
		fmt.Fprintf(w, "- %s: %d / %d PASS\n", codec, pass[codec], total[codec])
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeAdaptive writes the adaptive claim for every grid.
func writeAdaptive(w io.Writer, res *results) {
	fmt.Fprintf(w, "## Adaptive: reaches full's accuracy with fewer bytes than varco (all grids)\n\n")
	fmt.Fprintf(w, "Per group and codec: adaptive − full in test-at-best-val (points; \"reaches\" means >= −%.1f), adaptive's mean bytes against varco's of the same codec, and the verdict: yes iff it reaches full and sends fewer bytes than varco.\n\n", adaptiveTolerance)
	rows := [][]string{{"group", "codec", "adaptive − full (points)", "adaptive bytes", "varco bytes", "verdict"}}
	yes, total, skipped := map[string]int{}, map[string]int{}, map[string]int{}
	for _, g := range res.groups {
		full := summarize(g.methods["full"])
		for _, codec := range codecs {
			if g.methods["adaptive-"+codec] == nil {
				continue
			}
			a, v := summarize(g.methods["adaptive-"+codec]), summarize(g.methods["varco-"+codec])
			if full.n == 0 || v.n == 0 {
				skipped[codec]++
				rows = append(rows, []string{g.groupKey.String(), codec, "—", decimalBytes(a.bytes), "—", "not evaluated: needs full and varco-" + codec + " runs"})
				continue
			}
			c := adaptiveClaim(full, v, a)
			total[codec]++
			ok := c.reaches && c.fewer
			if ok {
				yes[codec]++
			}
			rows = append(rows, []string{g.groupKey.String(), codec, fmt.Sprintf("%+.2f", c.diff), decimalBytes(a.bytes), decimalBytes(v.bytes), yesNo(ok)})
		}
	}
	for _, codec := range codecs {
		fmt.Fprintf(w, "- %s: %d / %d yes%s\n", codec, yes[codec], total[codec], notEvaluated(skipped[codec]))
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeFigureLinks links the figures' PNGs relative to the report (the SVGs
// lie beside them).
func writeFigureLinks(w io.Writer, figs []figure, reportDir string) error {
	fmt.Fprintf(w, "## Figures (grid core)\n\n")
	fmt.Fprintf(w, "Per group and codec: mean acc(B) against the byte budget B (log scale) for full, nocomm, each fixed rate, varco and adaptive; per group: the quant methods' compression rate per layer and epoch (layers whose rate is ever != 1). Each PNG has an SVG beside it.\n\n")
	if len(figs) == 0 {
		fmt.Fprintf(w, "No core group has runs of a compressing method.\n\n")
	}
	var last groupKey
	for _, f := range figs {
		if f.group != last {
			fmt.Fprintf(w, "### %s\n\n", f.group)
			last = f.group
		}
		if f.png == "" {
			fmt.Fprintf(w, "%s: not drawn: %s.\n\n", f.caption, f.note)
			continue
		}
		link, err := relLink(reportDir, f.png)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "![%s](%s)\n\n", f.caption, link)
	}
	return nil
}

// relLink is target's path relative to dir, with forward slashes.
func relLink(dir, target string) (string, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	absTarget, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absTarget)
	return filepath.ToSlash(rel), err
}

func writeMissing(w io.Writer, res *results, dir string) {
	fmt.Fprintf(w, "## Missing runs\n\n")
	if len(res.missing) == 0 {
		fmt.Fprintf(w, "None: every run under `%s` has finished with its summary line.\n", dir)
		return
	}
	fmt.Fprintf(w, "Runs under `%s` without a finished metrics file, left out of every table and figure:\n\n", dir)
	for _, m := range res.missing {
		fmt.Fprintf(w, "- `%s`: %s\n", m.path, m.why)
	}
}

// mdTable writes a Markdown table whose first row is the header.
func mdTable(w io.Writer, rows [][]string) {
	for i, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(r)))
		}
	}
	fmt.Fprintln(w)
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func notEvaluated(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d more not evaluated: missing baseline runs)", n)
}
