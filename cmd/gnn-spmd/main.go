// Command gnn-spmd trains graph neural networks on full graphs, in one
// process or as one rank of an SPMD job, and prepares and inspects their
// data and checkpoints. The analysis of finished runs is gnn-results.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/gnn-spmd/gnn-spmd/cmd/internal/cli"
)

var commands = []cli.Command{
	{Name: "train", Summary: "train a GNN on a dataset (OGB directory or .h5)", Run: runTrain},
	{Name: "gen", Summary: "generate a synthetic graph dataset (contextual SBM) as .h5", Run: runGen},
	{Name: "partition", Summary: "partition a dataset into per-rank part files (METIS, random, or PT-Scotch by slices under mpirun)", Run: runPartition},
	{Name: "inspect", Summary: "summarise a partition directory, a .h5 dataset or a checkpoint", Run: runInspect},
	{Name: "export", Summary: "export a checkpoint's parameters for other tools (NumPy .npz)", Run: runExport},
	{Name: "convert", Summary: "convert an OGB-layout directory into one .h5 dataset file", Run: runConvert},
	{Name: "devices", Summary: "the GPUs and the CUDA libraries (cuBLAS, NCCL) this binary finds, and where", Run: runDevices},
	{Name: "plot", Summary: "(gnn-results plot) plot accuracy against bytes and epochs, and rates", Run: results("plot")},
	{Name: "compare", Summary: "(gnn-results compare) accuracy, halo bytes and time to accuracy of runs", Run: results("compare")},
	{Name: "report", Summary: "(gnn-results report) the Markdown results report of a results directory", Run: results("report")},
}

func main() { cli.Run("gnn-spmd", commands) }

// run is main for the tests, which also run this test binary as the CLI.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main("gnn-spmd", commands, args, stdout, stderr)
}

func newFlags(name, synopsis string, stderr io.Writer) *cli.FlagSet {
	return cli.NewFlags("gnn-spmd", name, synopsis, stderr)
}

// results hands an analysis command to gnn-results, the binary beside this
// one (or on PATH), so that the training binary links no plotting code.
func results(command string) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		bin := "gnn-results"
		if self, err := os.Executable(); err == nil {
			if beside := filepath.Join(filepath.Dir(self), bin); isFile(beside) {
				bin = beside
			}
		}
		path, err := exec.LookPath(bin)
		if err != nil {
			return fmt.Errorf("%s: moved to gnn-results %s, which is not beside this binary nor on PATH (make build writes bin/gnn-results)", command, command)
		}
		if stdout == os.Stdout && stderr == os.Stderr {
			return syscall.Exec(path, append([]string{path, command}, args...), os.Environ())
		}
		c := exec.Command(path, append([]string{command}, args...)...)
		c.Stdout, c.Stderr = stdout, stderr
		if err := c.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return &exitAfterOutput{ee.ExitCode()}
			}
			return err
		}
		return nil
	}
}

// exitAfterOutput ends with the exit code of a command whose own output
// said why.
type exitAfterOutput struct{ code int }

func (e *exitAfterOutput) Error() string  { return fmt.Sprintf("exit %d", e.code) }
func (e *exitAfterOutput) ExitCode() int  { return e.code }
func (e *exitAfterOutput) Reported() bool { return true }

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
