// Package cli is what the project's commands share: subcommand dispatch,
// a flag set that stays silent while parsing, usage errors, and the one
// line and exit code a failure ends with.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/internal/oneline"
)

// UsageError marks an error in the command line itself.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitCode is 2, the code of bad input and usage.
func (e *UsageError) ExitCode() int { return 2 }

// Usagef builds a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Command is one subcommand.
type Command struct {
	Name, Summary string
	Run           func(args []string, stdout, stderr io.Writer) error
}

// Run runs the subcommand named by the process's arguments and exits with
// its exit code.
func Run(program string, commands []Command) {
	os.Exit(Main(program, commands, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the subcommand args[0] of program and returns the exit code.
func Main(program string, commands []Command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "usage: %s <command> [flags]   (%s <command> --help for its flags)\ncommands:\n", program, program)
		for _, c := range commands {
			fmt.Fprintf(stderr, "  %-8s %s\n", c.Name, c.Summary)
		}
		if len(args) == 0 {
			return (&UsageError{}).ExitCode()
		}
		return 0
	}
	for _, c := range commands {
		if c.Name == args[0] {
			return Report(program, c.Run(args[1:], stdout, stderr), stderr)
		}
	}
	return Report(program, Usagef("unknown command %q (run %s --help)", args[0], program), stderr)
}

// Report prints err as one line, unless it says it was reported already,
// and returns its exit code: the error's own (an ExitCode method, as bad
// input and usage errors have: 2), else 1.
func Report(program string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var r interface{ Reported() bool }
	if !errors.As(err, &r) || !r.Reported() {
		fmt.Fprintf(stderr, "%s: %s\n", program, oneline.String(err.Error()))
	}
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return 1
}

// FlagSet is a flag set that stays silent while parsing: parse errors come
// back as one line through Report, and only --help prints the flag list,
// in sections where the command has them (Section).
type FlagSet struct {
	*flag.FlagSet
	program, synopsis string
	stderr            io.Writer
	sections          []section
	helpAll           bool
}

// section is a heading of --help and the flags under it.
type section struct {
	title  string
	expert bool // listed by --help-all only
	names  []string
}

// NewFlags is the flag set of subcommand name of program.
func NewFlags(program, name, synopsis string, stderr io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, program: program, synopsis: synopsis, stderr: stderr}
}

// Section lists the named flags, in that order, under title in --help; an
// expert section's flags are listed by --help-all only, which the first
// call adds.
func (fs *FlagSet) Section(title string, expert bool, names ...string) {
	if fs.sections == nil {
		fs.BoolVar(&fs.helpAll, "help-all", false, "list every flag, the expert ones too")
	}
	fs.sections = append(fs.sections, section{title: title, expert: expert, names: names})
}

// Unsectioned lists the flags that no section names (--help-all aside),
// for a test that keeps --help complete.
func (fs *FlagSet) Unsectioned() []string {
	named := map[string]bool{"help-all": true}
	for _, sec := range fs.sections {
		for _, n := range sec.names {
			named[n] = true
		}
	}
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if !named[f.Name] {
			out = append(out, f.Name)
		}
	})
	return out
}

// help prints the synopsis and the flags: every flag in name order for a
// command without sections, else the sections (the expert ones with all).
func (fs *FlagSet) help(all bool) {
	w := fs.stderr
	fmt.Fprintf(w, "usage: %s %s\n", fs.program, fs.synopsis)
	if fs.sections == nil {
		fs.SetOutput(w)
		fs.PrintDefaults()
		return
	}
	hidden := 0
	for _, sec := range fs.sections {
		if sec.expert && !all {
			hidden += len(sec.names)
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		for _, n := range sec.names {
			f := fs.Lookup(n)
			name, usage := flag.UnquoteUsage(f)
			if name != "" {
				name = " " + name
			}
			if d := f.DefValue; d != "" && d != "0" && d != "false" && !strings.Contains(usage, "(default") {
				usage += fmt.Sprintf(" (default %s)", d)
			}
			fmt.Fprintf(w, "  %-24s %s\n", "--"+f.Name+name, usage)
		}
	}
	if hidden > 0 {
		fmt.Fprintf(w, "\n%s %s --help-all lists %d more flags.\n", fs.program, fs.Name(), hidden)
	}
}

// Parse parses args and rejects stray positional arguments.
func (fs *FlagSet) Parse(args []string) error {
	if err := fs.ParseFlagsOnly(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// ParseFlagsOnly parses args, leaving positional arguments in fs.Args().
func (fs *FlagSet) ParseFlagsOnly(args []string) error {
	if err := fs.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.help(false)
			return err
		}
		return Usagef("%s: %v (see %s %s --help)", fs.Name(), err, fs.program, fs.Name())
	}
	if fs.helpAll {
		fs.help(true)
		return flag.ErrHelp
	}
	return nil
}
