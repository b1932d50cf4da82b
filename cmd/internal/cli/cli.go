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
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
	}
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return 1
}

// FlagSet is a flag set that stays silent while parsing: parse errors come
// back as one line through Report, and only --help prints the flag list.
type FlagSet struct {
	*flag.FlagSet
	program string
	help    func()
}

// NewFlags is the flag set of subcommand name of program.
func NewFlags(program, name, synopsis string, stderr io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, program: program, help: func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: %s %s\n", program, synopsis)
		fs.PrintDefaults()
	}}
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
			fs.help()
			return err
		}
		return Usagef("%s: %v (see %s %s --help)", fs.Name(), err, fs.program, fs.Name())
	}
	return nil
}
