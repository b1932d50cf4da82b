package job

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// checkpointer carries --checkpoint and --resume: the state restored into
// every rank, and rank 0's history, saved every --checkpoint-every epochs,
// after the last and after the one a signal stopped.
type checkpointer struct {
	path        string // --checkpoint; "" = none
	every, keep int
	cfg         ckpt.Config
	dataset     string
	from        string           // --resume
	resumed     *ckpt.Checkpoint // nil for a fresh run
	history     []metrics.Epoch  // the finished epochs, restored ones first
	log         *slog.Logger     // rank 0's
}

// newCheckpointer reads --resume (from the file at local, rank 0's copy
// of it on an MPI rank, or --resume itself when local is "") and refuses
// it unless it comes from this run's data, partition and settings.
func newCheckpointer(s *Spec, local string, cfg ckpt.Config, dataset string, log *slog.Logger) (*checkpointer, error) {
	c := &checkpointer{path: s.Checkpoint, every: s.CheckpointEvery, keep: s.Keep, cfg: cfg, dataset: dataset,
		from: s.Resume, log: log}
	if s.Resume == "" {
		return c, nil
	}
	if local == "" {
		local = s.Resume
	}
	ck, err := ckpt.Read(local)
	if err != nil {
		return nil, err
	}
	if err := ck.Config.Check(s.Resume, &c.cfg); err != nil {
		return nil, err
	}
	if err := ck.Verify(s.Resume); err != nil {
		return nil, err
	}
	c.resumed, c.history = ck, ck.History
	return c, nil
}

// resumeChunk bounds one broadcast of a checkpoint (MPI counts are ints).
const resumeChunk = 1 << 30

var opResume = comm.Op{Name: "checkpoint broadcast (--resume)"}

// shareResume gives every MPI rank rank 0's copy of the --resume file, so
// that only rank 0's host needs it: rank 0 broadcasts the file's bytes and
// every other rank writes them to a private temporary file, whose path it
// returns with the function that removes it. Rank 0 reads the file itself
// (""). When rank 0 cannot read it, the others read their own path and
// rank 0 reports why (setup errors are agreed on).
func shareResume(c comm.Comm, path string) (string, func(), error) {
	none := func() {}
	if path == "" {
		return "", none, nil
	}
	var data []byte
	size := make([]byte, 8)
	if c.Rank() == 0 {
		n := uint64(math.MaxUint64)
		if b, err := os.ReadFile(path); err == nil {
			data, n = b, uint64(len(b))
		}
		binary.LittleEndian.PutUint64(size, n)
	}
	comm.Label(c, &opResume)
	if err := c.Bcast(size, 0); err != nil {
		return "", none, err
	}
	n := binary.LittleEndian.Uint64(size)
	if n == math.MaxUint64 {
		return "", none, nil
	}
	if c.Rank() != 0 {
		data = make([]byte, n)
	}
	for off := uint64(0); off < n; off += resumeChunk {
		comm.Label(c, &opResume)
		if err := c.Bcast(data[off:min(off+resumeChunk, n)], 0); err != nil {
			return "", none, err
		}
	}
	if c.Rank() == 0 {
		return "", none, nil
	}
	f, err := os.CreateTemp("", "gnn-spmd-resume-*.h5")
	if err != nil {
		return "", none, fmt.Errorf("--resume: a copy of rank 0's %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	remove := func() { os.Remove(f.Name()) }
	if err != nil {
		remove()
		return "", none, fmt.Errorf("--resume: a copy of rank 0's %s: %w", path, err)
	}
	return f.Name(), remove, nil
}

// restore loads the resumed state, if any, into a rank's trainer.
func (c *checkpointer) restore(t *gnn.Trainer) error {
	if c.resumed == nil {
		return nil
	}
	return c.resumed.Restore(t)
}

// due reports whether a checkpoint follows the finished epoch st: the
// same answer on every rank. The last epoch's comes after the run's final
// evaluation (final).
func (c *checkpointer) due(st *metrics.Epoch) bool {
	n := st.Epoch + 1 // finished epochs, restored ones included
	return c.path != "" && n < c.cfg.Run.Epochs && (n%c.every == 0 || st.Stop)
}

// gather brings every rank's residual state to rank 0 when a checkpoint
// is due and the run codes residuals; every rank calls it after each epoch.
func (c *checkpointer) gather(cm comm.Comm, x halo.Exchanger, st *metrics.Epoch) ([]halo.ResidualTable, error) {
	if !c.due(st) {
		return nil, nil
	}
	return c.residual(cm, x)
}

// residual is every rank's residual state, at rank 0, where the run codes
// residuals (a collective).
func (c *checkpointer) residual(cm comm.Comm, x halo.Exchanger) ([]halo.ResidualTable, error) {
	if x == nil || !c.cfg.Run.Compress.CodesResiduals() {
		return nil, nil
	}
	return halo.GatherResidual(cm, x.ResidualBlocks(), c.cfg.Run.Layers)
}

// final writes the checkpoint of a finished run, with the full-precision
// accuracies its final evaluation measured (s): every rank calls it, rank
// 0 (write set) writes. A run resumed from its own last checkpoint writes
// it again, so that a new --checkpoint gets it too.
func (c *checkpointer) final(cm comm.Comm, t *gnn.Trainer, s *metrics.Summary, write bool) error {
	if c.path == "" {
		return nil
	}
	residual, err := c.residual(cm, t.Halo)
	if err != nil || !write {
		return err
	}
	var exact *ckpt.Accuracies
	if t.ExactSummary() {
		exact = &ckpt.Accuracies{BestVal: s.BestValAcc, BestTest: s.TestAtBestVal, FinalVal: s.FinalValAcc, FinalTest: s.FinalTestAcc}
	}
	return c.write(t, exact, residual)
}

// after records a finished epoch and writes a checkpoint when one is due,
// with the residual state gathered for it. A state that is no longer
// finite is not written: the run ends with an error, and the checkpoint
// before stays.
func (c *checkpointer) after(t *gnn.Trainer, st *metrics.Epoch, residual []halo.ResidualTable) error {
	if c.path == "" {
		return nil
	}
	c.history = append(c.history, *st)
	if !c.due(st) {
		return nil
	}
	return c.write(t, nil, residual)
}

// write writes the checkpoint of the epochs in the history.
func (c *checkpointer) write(t *gnn.Trainer, exact *ckpt.Accuracies, residual []halo.ResidualTable) error {
	start := time.Now()
	snap := ckpt.Capture(c.cfg, c.dataset, t, c.history, residual) // brings the state to the host
	snap.Exact = exact
	if err := finiteState(t); err != nil {
		return fmt.Errorf("epoch %d: %v: training diverged (lower --lr); %s was not overwritten", len(c.history)-1, err, c.path)
	}
	if err := ckpt.Write(c.path, c.keep, snap); err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	c.log.Info("checkpoint written", "file", c.path, "epoch", len(c.history), "seconds", time.Since(start).Seconds())
	return nil
}

// finiteState checks that the parameters and Adam's moments are finite, as
// a checkpoint must be (ckpt.Verify).
func finiteState(t *gnn.Trainer) error {
	for _, p := range t.Model.Params {
		for _, a := range []struct {
			what string
			v    []float32
		}{{"parameter", p.W}, {"Adam first moment of", p.M}, {"Adam second moment of", p.V}} {
			for k, x := range a.v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return fmt.Errorf("%s %s entry %d is %v", a.what, p.Name, k, x)
				}
			}
		}
	}
	return nil
}
