package results

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// methodStats summarises a method's seed runs in one group.
type methodStats struct {
	n           int
	acc, accStd float64 // test-at-best-val, percent
	aucN        int     // runs that recorded AUC
	auc, aucStd float64 // test AUC at best val AUC, percent
	bytes       float64 // mean training halo bytes per run
	seconds     float64 // mean wall time per run
}

func summarize(runs []*Run) methodStats {
	var accs, aucs, bytes, secs []float64
	for _, r := range runs {
		accs = append(accs, 100*r.TestAtBestVal())
		if a, ok := r.TestAUCAtBestValAUC(); ok {
			aucs = append(aucs, 100*a)
		}
		bytes = append(bytes, float64(r.TotalBytes()))
		secs = append(secs, r.Seconds)
	}
	s := methodStats{n: len(runs), aucN: len(aucs)}
	s.acc, s.accStd = MeanStd(accs)
	s.auc, s.aucStd = MeanStd(aucs)
	s.bytes, _ = MeanStd(bytes)
	s.seconds, _ = MeanStd(secs)
	return s
}

// The claims' thresholds, in accuracy points and shares of bytes.
const (
	minMargin         = 0.5  // the least accuracy tolerance of claims 1 and 2
	claim1MaxShare    = 0.25 // varco may send at most this share of full's bytes
	adaptiveTolerance = 0.5  // adaptive "reaches" full within this many points
	// The recommended setting may send at most this share (the compression
	// issue's target).
	recommendedMaxShare = 0.05
)

// CoreGrid reports whether grid is a core grid: the first one (core) or a
// rerun of its methods after compression work (core2, core6). The claims
// and the figures cover them all.
func CoreGrid(grid string) bool { return grid == "core" || grid == "core2" || grid == "core6" }

// recommendedResult compares the recommended setting with full.
type recommendedResult struct {
	diff, margin, share float64 // rec − full and the tolerance (points), bytes / full's
	accurate, pass      bool
}

// recommended holds the accuracy iff acc_rec >= acc_full − margin (as claim
// 1), and passes iff it also sends at most 5% of full's bytes.
func recommended(full, rec methodStats) recommendedResult {
	m := claimMargin(full)
	r := recommendedResult{diff: rec.acc - full.acc, margin: m, share: rec.bytes / full.bytes, accurate: rec.acc >= full.acc-m}
	r.pass = r.accurate && rec.bytes <= recommendedMaxShare*full.bytes
	return r
}

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
// values, which is exact (see BudgetGrid); both means are defined from the
// largest first budget of their seeds on, so the budgets where only fixed
// is defined form one interval.
func claim2(varco, fixed []*Run, margin float64) claim2Result {
	res := claim2Result{worst: math.Inf(1), gapFrom: MeanFirstBudget(fixed), gapTo: MeanFirstBudget(varco)}
	for _, b := range BudgetGrid(varco, fixed) {
		v, okV := MeanAccAt(varco, b)
		f, okF := MeanAccAt(fixed, b)
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

// Figure is one figure of the report: PNG is empty when it was not drawn,
// and Note says why.
type Figure struct {
	Group        GroupKey
	Caption, PNG string
	Note         string
}

// Codecs are the halo Codecs whose methods the claims and figures compare.
var Codecs = []string{"quant", "trunc"}

// FigureSeries lists full, nocomm and the methods of codec in table order;
// nil when the group has no method of the codec.
func FigureSeries(g *Group, codec string) []Series {
	var ss []Series
	withCodec := false
	for _, m := range g.SortedMethods() {
		_, _, c := MethodParts(m)
		if m == "full" || m == "nocomm" || c == codec {
			ss = append(ss, Series{Name: m, Runs: g.Methods[m]})
			withCodec = withCodec || c == codec
		}
	}
	if !withCodec {
		return nil
	}
	return ss
}

// Render writes the whole Markdown report.
func Render(w io.Writer, res *Results, dir, config string, figs []Figure, reportDir string) error {
	fmt.Fprintf(w, "# Experiment results\n\n")
	fmt.Fprintf(w, "_Generated by `gnn-results report` from `%s`: do not edit it by hand; rerun the command instead._\n\n", dir)
	writeSetup(w, dir, config)
	fmt.Fprint(w, definitions)
	writeGroupTables(w, res)
	writeClaim1(w, res)
	writeClaim2(w, res)
	writeRecommended(w, res)
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
func writeGroupTables(w io.Writer, res *Results) {
	fmt.Fprintf(w, "## Runs per group\n\n")
	fmt.Fprintf(w, "One table per grid / dataset / partition / Q; one row per method: test-at-best-val accuracy, test AUC at best val AUC (binary-class datasets), training bytes (mean, and as %% of full's mean) and wall seconds per run.\n\n")
	for _, g := range res.Groups {
		fmt.Fprintf(w, "### %s\n\n", g.GroupKey)
		full := summarize(g.Methods["full"])
		rows := [][]string{{"method", "seeds", "test acc at best val (%)", "test AUC at best val AUC (%)", "training bytes", "bytes (% of full)", "seconds per run"}}
		for _, m := range g.SortedMethods() {
			s := summarize(g.Methods[m])
			auc := "—"
			if s.aucN > 0 {
				auc = fmt.Sprintf("%.2f ± %.2f", s.auc, s.aucStd)
			}
			if s.aucN > 0 && s.aucN < s.n {
				auc += fmt.Sprintf(" (%d of %d runs)", s.aucN, s.n)
			}
			rows = append(rows, []string{m, fmt.Sprint(s.n), fmt.Sprintf("%.2f ± %.2f", s.acc, s.accStd), auc,
				DecimalBytes(s.bytes), share(s.bytes, full), fmt.Sprintf("%.1f", s.seconds)})
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

// writeClaim1 writes claim 1 for the core grids and scaling.
func writeClaim1(w io.Writer, res *Results) {
	fmt.Fprintf(w, "## Claim 1: varco matches full's accuracy with at most 25%% of its bytes (grids core, core2, core6 and scaling)\n\n")
	fmt.Fprintf(w, "Per group: varco − full in test-at-best-val (points), the margin, and varco's bytes as %% of full's. PASS iff acc_varco >= acc_full − margin and bytes_varco <= 25%% of bytes_full. varco-quant is the claim; varco-trunc is informative.\n\n")
	rows := [][]string{{"group", "method", "varco − full (points)", "margin (points)", "bytes (% of full)", "verdict"}}
	pass, total, skipped := map[string]int{}, map[string]int{}, map[string]int{}
	for _, g := range res.Groups {
		if !CoreGrid(g.Grid) && g.Grid != "scaling" {
			continue
		}
		full := summarize(g.Methods["full"])
		for _, codec := range Codecs {
			m := "varco-" + codec
			if g.Methods[m] == nil {
				continue
			}
			if full.n == 0 {
				skipped[m]++
				rows = append(rows, []string{g.GroupKey.String(), m, "—", "—", "—", "not evaluated: no full runs"})
				continue
			}
			s := summarize(g.Methods[m])
			c := claim1(full, s)
			total[m]++
			if c.pass {
				pass[m]++
			}
			rows = append(rows, []string{g.GroupKey.String(), m, fmt.Sprintf("%+.2f", c.diff), fmt.Sprintf("%.2f", c.margin),
				share(s.bytes, full), verdict(c.pass)})
		}
	}
	for _, codec := range Codecs {
		m := "varco-" + codec
		fmt.Fprintf(w, "- %s: %d / %d PASS%s\n", m, pass[m], total[m], notEvaluated(skipped[m]))
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeClaim2 writes claim 2 for the core grids.
func writeClaim2(w io.Writer, res *Results) {
	fmt.Fprintf(w, "## Claim 2: at every byte budget varco is within the margin of each fixed rate (grids core, core2 and core6)\n\n")
	fmt.Fprintf(w, "Per group, codec and fixed rate r: the minimum over budgets B of mean acc_varco(B) − mean acc_fixed(B) + margin (points), over the budgets where both means are defined, and the smallest B where it occurs. Budgets where fixed has a model and varco has none yet count as failures and are listed. PASS iff the minimum >= 0 and there are no such budgets.\n\n")
	rows := [][]string{{"group", "codec", "fixed", "margin (points)", "worst varco − fixed + margin (points)", "at budget", "budgets where only fixed has a model", "verdict"}}
	pass, total := map[string]int{}, map[string]int{}
	for _, g := range res.Groups {
		if !CoreGrid(g.Grid) {
			continue
		}
		margin := claimMargin(summarize(g.Methods["full"]))
		for _, m := range g.SortedMethods() {
			family, _, codec := MethodParts(m)
			varco := g.Methods["varco-"+codec]
			if family != 2 || varco == nil {
				continue
			}
			c := claim2(varco, g.Methods[m], margin)
			total[codec]++
			if c.pass {
				pass[codec]++
			}
			gap := "none"
			if c.gapFrom < c.gapTo {
				gap = fmt.Sprintf("[%s, %s): varco has no model yet (failure)", DecimalBytes(float64(c.gapFrom)), DecimalBytes(float64(c.gapTo)))
			}
			rows = append(rows, []string{g.GroupKey.String(), codec, m, fmt.Sprintf("%.2f", margin), fmt.Sprintf("%+.2f", c.worst),
				DecimalBytes(float64(c.at)), gap, verdict(c.pass)})
		}
	}
	for _, codec := range Codecs {
		fmt.Fprintf(w, "- %s: %d / %d PASS\n", codec, pass[codec], total[codec])
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeRecommended checks the recommended setting (--codec quant alone)
// against the compression issue's targets in every group that ran it.
func writeRecommended(w io.Writer, res *Results) {
	rows := [][]string{{"group", "recommended − full (points)", "margin (points)", "bytes (% of full)", "accuracy", "verdict"}}
	pass, accurate, total := 0, 0, 0
	for _, g := range res.Groups {
		runs := g.Methods["recommended-quant"]
		full := summarize(g.Methods["full"])
		if runs == nil || full.n == 0 || full.bytes == 0 {
			continue
		}
		r := recommended(full, summarize(runs))
		total++
		if r.accurate {
			accurate++
		}
		if r.pass {
			pass++
		}
		rows = append(rows, []string{g.GroupKey.String(), fmt.Sprintf("%+.2f", r.diff), fmt.Sprintf("%.2f", r.margin),
			fmt.Sprintf("%.1f%%", 100*r.share), map[bool]string{true: "holds", false: "below"}[r.accurate], verdict(r.pass)})
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "## The recommended setting: full's accuracy with at most 5%% of its bytes (every grid that ran it)\n\n")
	fmt.Fprintf(w, "Per group: recommended-quant − full in test-at-best-val (points), the margin (as in claim 1), and its bytes as %% of full's. Accuracy holds iff acc_rec >= acc_full − margin; PASS iff it holds and the bytes are at most 5%% of full's. recommended-quant is the recommended setting of the day its grid ran (Setup says which).\n\n")
	fmt.Fprintf(w, "- accuracy holds in %d / %d groups; %d / %d PASS\n\n", accurate, total, pass, total)
	mdTable(w, rows)
}

// writeAdaptive writes the adaptive claim for every grid.
func writeAdaptive(w io.Writer, res *Results) {
	fmt.Fprintf(w, "## Adaptive: reaches full's accuracy with fewer bytes than varco (all grids)\n\n")
	fmt.Fprintf(w, "Per group and codec: adaptive − full in test-at-best-val (points; \"reaches\" means >= −%.1f), adaptive's mean bytes against varco's of the same codec, and the verdict: yes iff it reaches full and sends fewer bytes than varco.\n\n", adaptiveTolerance)
	rows := [][]string{{"group", "codec", "adaptive − full (points)", "adaptive bytes", "varco bytes", "verdict"}}
	yes, total, skipped := map[string]int{}, map[string]int{}, map[string]int{}
	for _, g := range res.Groups {
		full := summarize(g.Methods["full"])
		for _, codec := range Codecs {
			if g.Methods["adaptive-"+codec] == nil {
				continue
			}
			a, v := summarize(g.Methods["adaptive-"+codec]), summarize(g.Methods["varco-"+codec])
			if full.n == 0 || v.n == 0 {
				skipped[codec]++
				rows = append(rows, []string{g.GroupKey.String(), codec, "—", DecimalBytes(a.bytes), "—", "not evaluated: needs full and varco-" + codec + " runs"})
				continue
			}
			c := adaptiveClaim(full, v, a)
			total[codec]++
			ok := c.reaches && c.fewer
			if ok {
				yes[codec]++
			}
			rows = append(rows, []string{g.GroupKey.String(), codec, fmt.Sprintf("%+.2f", c.diff), DecimalBytes(a.bytes), DecimalBytes(v.bytes), yesNo(ok)})
		}
	}
	for _, codec := range Codecs {
		fmt.Fprintf(w, "- %s: %d / %d yes%s\n", codec, yes[codec], total[codec], notEvaluated(skipped[codec]))
	}
	fmt.Fprintln(w)
	mdTable(w, rows)
}

// writeFigureLinks links the figures' PNGs relative to the report (the SVGs
// lie beside them).
func writeFigureLinks(w io.Writer, figs []Figure, reportDir string) error {
	fmt.Fprintf(w, "## Figures (grid core)\n\n")
	fmt.Fprintf(w, "Per group and codec: mean acc(B) against the byte budget B (log scale) for full, nocomm, each fixed rate, varco and adaptive; per group: the quant methods' compression rate per layer and epoch (layers whose rate is ever != 1). Each PNG has an SVG beside it.\n\n")
	if len(figs) == 0 {
		fmt.Fprintf(w, "No core group has runs of a compressing method.\n\n")
	}
	var last GroupKey
	for _, f := range figs {
		if f.Group != last {
			fmt.Fprintf(w, "### %s\n\n", f.Group)
			last = f.Group
		}
		if f.PNG == "" {
			fmt.Fprintf(w, "%s: not drawn: %s.\n\n", f.Caption, f.Note)
			continue
		}
		link, err := relLink(reportDir, f.PNG)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "![%s](%s)\n\n", f.Caption, link)
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

func writeMissing(w io.Writer, res *Results, dir string) {
	fmt.Fprintf(w, "## Missing runs\n\n")
	if len(res.Missing) == 0 {
		fmt.Fprintf(w, "None: every run under `%s` has finished with its summary line.\n", dir)
		return
	}
	fmt.Fprintf(w, "Runs under `%s` without a finished metrics file, left out of every table and figure:\n\n", dir)
	for _, m := range res.Missing {
		fmt.Fprintf(w, "- `%s`: %s\n", m.Path, m.Why)
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

// DecimalBytes formats a byte count in decimal units (1 MB = 10^6 B), as
// the report's tables do.
func DecimalBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	i := 0
	// 999.5 rounds up to the next unit in three digits.
	for ; n >= 999.5 && i < len(units)-1; i++ {
		n /= 1000
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.3g %s", n, units[i])
}
