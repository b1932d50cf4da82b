// Command gnn-spmd trains graph neural networks on full graphs, in one
// process or as one rank of an SPMD job.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes: 1 for a failure while running (including a diverged loss and
// a communication timeout), 2 for bad input or usage, 130 and 143 for a
// training run stopped by SIGINT or SIGTERM (exitSIGINT, exitSIGTERM).
const (
	exitFailure  = 1
	exitBadInput = 2
)

// usageError marks an error in the command line itself.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"train", "train a GNN on a dataset (OGB directory or .h5)", runTrain},
	{"gen", "generate a synthetic graph dataset (contextual SBM) as .h5", runGen},
	{"partition", "partition a dataset into per-rank part files (METIS or random)", runPartition},
	{"inspect", "summarise a partition directory, a .h5 dataset or a checkpoint", runInspect},
	{"export", "export a checkpoint's parameters for other tools (NumPy .npz)", runExport},
	{"convert", "convert an OGB-layout directory into one .h5 dataset file", runConvert},
	{"plot", "plot accuracy against bytes and epochs, and rates, from metrics files", runPlot},
	{"compare", "print accuracy and halo bytes of finished runs against the first", runCompare},
	{"report", "write the Markdown results report (tables, claims, figures) of a results directory", runReport},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		topUsage(stderr)
		if len(args) == 0 {
			return exitBadInput
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return report(c.run(args[1:], stdout, stderr), stderr)
		}
	}
	fmt.Fprintf(stderr, "gnn-spmd: unknown command %q (run gnn-spmd --help)\n", args[0])
	return exitBadInput
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: gnn-spmd <command> [flags]   (gnn-spmd <command> --help for its flags)")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// report prints err as one line and maps it to an exit code.
func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var se *silentExit
	if errors.As(err, &se) {
		return se.code
	}
	var ie *interruptedError
	if errors.As(err, &ie) {
		fmt.Fprintf(stderr, "gnn-spmd: %v\n", err)
		return ie.code()
	}
	fmt.Fprintf(stderr, "gnn-spmd: %v\n", err)
	if isBadInput(err) {
		return exitBadInput
	}
	return exitFailure
}

// flagSet is a flag set that stays silent while parsing: parse errors come
// back as one line through report, and only --help prints the flag list.
type flagSet struct {
	*flag.FlagSet
	help func()
}

func newFlags(name, synopsis string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, help: func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: gnn-spmd %s\n", synopsis)
		fs.PrintDefaults()
	}}
}

// parse parses args and rejects stray positional arguments.
func (fs *flagSet) parse(args []string) error {
	if err := fs.parseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// parseFlagsOnly parses args, leaving positional arguments in fs.Args().
func (fs *flagSet) parseFlagsOnly(args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.help()
			return err
		}
		return usagef("%s: %v (see gnn-spmd %s --help)", fs.Name(), err, fs.Name())
	}
	return nil
}
