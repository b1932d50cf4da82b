package job

import (
	"io"
	"log/slog"

	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// Env is where a run reports, besides its files: the reporting rank's
// observer, the log, and the stream for the one line that ends a failed
// MPI job.
type Env struct {
	// Observer sees the run's progress on rank 0; nil sees nothing.
	Observer Observer
	// Log receives the records of every rank, each with rank=N; nil logs
	// nothing.
	Log *slog.Logger
	// Stderr takes the one-line error an MPI rank prints before the job
	// ends (mpirun ends the job at the first non-zero exit, so the rank
	// that reports prints before anyone leaves).
	Stderr io.Writer
}

// Observer is the reporting rank's view of a run, called on that rank's
// goroutine: after setup, once per epoch, and at the end of a finished run.
// An error from Epoch stops the run.
type Observer interface {
	Start(info *Info)
	// Resumed says that the run continues a checkpoint after epoch of
	// total epochs.
	Resumed(from string, epoch, total int)
	Epoch(e *metrics.Epoch) error
	Done(s *metrics.Summary)
	// Predicted says that the predictions file was written.
	Predicted(p *PredictInfo)
}

// Info describes a run after its setup, for the header people read.
type Info struct {
	Dataset            string
	Nodes, Edges       int64
	Features, Classes  int
	Split              string
	Train, Valid, Test int
	Ranks              int
	Partition          string // how the graph was split, e.g. "metis (from file)"
	HaloRows           int    // received per layer, summed over ranks
	Reordered          int    // ranks whose rows --reorder moved
	Communication      string // "full communication", or the codecs and schedule
	Device             string // e.g. "cpu (threads per rank: 2), gemm openblas"
	LoadSeconds        float64
	Spec               *Spec
}
