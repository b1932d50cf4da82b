// Command gnn-results analyses finished training runs: it plots their
// metrics files, compares them, and writes the results report of an
// experiment grid. It is the only binary that links the plotting library.
package main

import (
	"io"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

const program = "gnn-results"

var commands = []cli.Command{
	{Name: "plot", Summary: "plot accuracy against bytes and epochs, and rates, from metrics files", Run: removingTemps(runPlot)},
	{Name: "compare", Summary: "print accuracy and halo bytes of finished runs against the first", Run: runCompare},
	{Name: "growth", Summary: "plot epoch time and peak memory against graph size, width and ranks from a sweep file", Run: removingTemps(runGrowth)},
	{Name: "report", Summary: "write the Markdown results report (tables, claims, figures) of a results directory", Run: removingTemps(runReport)},
}

// removingTemps runs a command so that SIGINT, SIGTERM and SIGHUP remove
// the temporary files of its writes in progress before the process ends.
func removingTemps(run func(args []string, stdout, stderr io.Writer) error) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		defer outfile.RemoveTempsOnSignal()()
		return run(args, stdout, stderr)
	}
}

func main() { cli.Run(program, commands) }

func newFlags(name, synopsis string, stderr io.Writer) *cli.FlagSet {
	return cli.NewFlags(program, name, synopsis, stderr)
}
