package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gnn-spmd/gnn-spmd/gnn/results"
)

// runCompare prints, for metrics files of finished runs, the accuracy each
// reached and the halo bytes it sent, the first series being the reference
// (the quickstart compares VARCO against full communication this way).
func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", "compare SERIES...   (SERIES: NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl; the first is the reference)", stderr)
	margin := fs.Float64("margin", 0.5, "time to accuracy: the target is the reference's mean test accuracy at best validation minus this many points")
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if !(*margin >= 0 && *margin <= 100) {
		return usagef("compare: --margin: got %v, expected points in [0, 100]", *margin)
	}
	if fs.NArg() == 0 {
		return usagef("compare: expected at least one SERIES (NAME=RUN.jsonl[,RUN.jsonl...] or RUN.jsonl)")
	}
	ss, err := readSeries(fs.Args())
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Time to accuracy: training seconds until the test accuracy at the
	// best validation epoch so far reaches the reference's final mean
	// minus the margin.
	var refAcc []float64
	for _, r := range ss[0].Runs {
		refAcc = append(refAcc, r.TestAtBestVal())
	}
	target, _ := results.MeanStd(refAcc)
	target -= *margin / 100
	fmt.Fprintf(tw, "run\truns\ttest acc at best val\thalo bytes sent\tof %s\tseconds\tseconds to %.2f%%\t\n", ss[0].Name, 100*target)
	var ref float64
	for i, s := range ss {
		var acc, bytes, secs, reach []float64
		for _, r := range s.Runs {
			acc = append(acc, r.TestAtBestVal())
			bytes = append(bytes, float64(r.TotalBytes()))
			secs = append(secs, r.Seconds)
			if t, ok := r.TimeTo(target); ok {
				reach = append(reach, t)
			}
		}
		a, sd := results.MeanStd(acc)
		b, _ := results.MeanStd(bytes)
		t, _ := results.MeanStd(secs)
		if i == 0 {
			ref = b
		}
		reachText := "not reached"
		if len(reach) == len(s.Runs) {
			m, _ := results.MeanStd(reach)
			reachText = fmt.Sprintf("%.1f", m)
		} else if len(reach) > 0 {
			m, _ := results.MeanStd(reach)
			reachText = fmt.Sprintf("%.1f (%d of %d runs)", m, len(reach), len(s.Runs))
		}
		share := "-"
		if ref > 0 {
			share = fmt.Sprintf("%.1f%%", 100*b/ref)
		}
		accText := fmt.Sprintf("%.2f%%", 100*a)
		if len(acc) > 1 {
			accText += fmt.Sprintf(" ± %.2f", 100*sd)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.1f\t%s\t\n", s.Name, len(s.Runs), accText, results.DecimalBytes(b), share, t, reachText)
	}
	return tw.Flush()
}
