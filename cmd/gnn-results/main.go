// Command gnn-results analyses finished training runs: it plots their
// metrics files, compares them, and writes the results report of an
// experiment grid. It is the only binary that links the plotting library.
package main

import (
	"io"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
)

const program = "gnn-results"

var commands = []cli.Command{
	{Name: "plot", Summary: "plot accuracy against bytes and epochs, and rates, from metrics files", Run: runPlot},
	{Name: "compare", Summary: "print accuracy and halo bytes of finished runs against the first", Run: runCompare},
	{Name: "growth", Summary: "plot epoch time and peak memory against graph size, width and ranks from a sweep file", Run: runGrowth},
	{Name: "report", Summary: "write the Markdown results report (tables, claims, figures) of a results directory", Run: runReport},
}

func main() { cli.Run(program, commands) }

func newFlags(name, synopsis string, stderr io.Writer) *cli.FlagSet {
	return cli.NewFlags(program, name, synopsis, stderr)
}
