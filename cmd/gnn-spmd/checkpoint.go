package main

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/gnn-spmd/gnn-spmd/ckpt"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// checkpointer carries --checkpoint and --resume: the state restored into
// every rank, and rank 0's history, saved every --checkpoint-every epochs.
type checkpointer struct {
	path        string // --checkpoint; "" = none
	every, keep int
	cfg         ckpt.Config
	dataset     string
	from        string           // --resume
	resumed     *ckpt.Checkpoint // nil for a fresh run
	history     []gnn.EpochStats // the finished epochs, restored ones first
	log         *slog.Logger     // rank 0's
}

// checkpointing reports whether the run needs its identity (fingerprints).
func (f *trainFlags) checkpointing() bool { return f.checkpoint != "" || f.resume != "" }

// newCheckpointer reads --resume and refuses it unless it comes from this
// run's data, partition and settings.
func (f *trainFlags) newCheckpointer(info *jobInfo) (*checkpointer, error) {
	c := &checkpointer{path: f.checkpoint, every: f.checkpointEvery, keep: f.keep, cfg: f.runConfig(info),
		dataset: info.name, from: f.resume, log: rankLogger(f.log, 0)}
	if f.resume == "" {
		return c, nil
	}
	ck, err := ckpt.Read(f.resume)
	if err != nil {
		return nil, err
	}
	if err := ck.Config.Check(f.resume, &c.cfg); err != nil {
		return nil, err
	}
	if err := ck.Verify(f.resume); err != nil {
		return nil, err
	}
	c.resumed, c.history = ck, ck.History
	return c, nil
}

// runConfig is this run's identity for checkpoints.
func (f *trainFlags) runConfig(info *jobInfo) ckpt.Config {
	t := gnn.DefaultTrainConfig()
	return ckpt.Config{Model: f.model, Layers: f.layers, Hidden: f.hidden, InDim: info.features, Classes: info.classes,
		LR: f.lr, WeightDecay: f.weightDecay, Dropout: f.dropout,
		AdamBeta1: decimal(t.Beta1), AdamBeta2: decimal(t.Beta2), AdamEps: decimal(t.Eps),
		Seed: f.seed, Epochs: f.epochs, Codec: f.codec, CodecBwd: f.codecBwd, Schedule: f.schedule,
		Ratio: f.ratio, RatioMax: f.ratioMax, RatioMin: f.ratioMin, Slope: f.slope, Kappa: f.kappa,
		EvalCompressed: f.evalCompressed, NormalizeFeatures: f.normalize, NoComm: f.noComm, Split: info.split,
		Ranks: info.ranks, PartitionMethod: info.partMethod, PartitionSeed: info.partSeed,
		DatasetFingerprint: info.fingerprint, PartitionID: info.partitionID}
}

// decimal is the shortest decimal that rounds to x (0.9 for float32 0.9),
// which reads better in a file than x's exact float64 value.
func decimal(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// restore loads the resumed state, if any, into a rank's trainer.
func (c *checkpointer) restore(t *gnn.Trainer) error {
	if c.resumed == nil {
		return nil
	}
	return c.resumed.Restore(t)
}

// report is rank 0's callback: the reporter's line, then the checkpoint
// when one is due.
func (c *checkpointer) report(rep *reporter, t *gnn.Trainer) func(gnn.EpochStats) error {
	return func(st gnn.EpochStats) error {
		if err := rep.epoch(st); err != nil {
			return err
		}
		return c.after(t, st)
	}
}

// after records a finished epoch and writes a checkpoint after every
// N-th epoch, after the last, and after the one a signal stopped. A state
// that is no longer finite is not written: the run ends with an error, and
// the checkpoint before stays.
func (c *checkpointer) after(t *gnn.Trainer, st gnn.EpochStats) error {
	if c.path == "" {
		return nil
	}
	c.history = append(c.history, st)
	n := len(c.history)
	if n%c.every != 0 && n != c.cfg.Epochs && !st.Stop {
		return nil
	}
	start := time.Now()
	snap := ckpt.Capture(c.cfg, c.dataset, t, c.history) // brings the state to the host
	if err := finiteState(t); err != nil {
		return fmt.Errorf("epoch %d: %v: training diverged (lower --lr); %s was not overwritten", st.Epoch, err, c.path)
	}
	if err := ckpt.Write(c.path, c.keep, snap); err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	c.log.Info("checkpoint written", "file", c.path, "epoch", n, "seconds", time.Since(start).Seconds())
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

// replay says where a resumed run continues and writes the metrics lines
// of the restored epochs, so that the file reads as an uninterrupted run's.
func (r *reporter) replay(c *checkpointer) error {
	if c.resumed == nil {
		return nil
	}
	fmt.Fprintf(r.out, "resumed from %s after epoch %d of %d\n", c.from, c.resumed.Epoch, c.cfg.Epochs)
	for _, s := range c.resumed.History {
		if err := r.record(s); err != nil {
			return err
		}
	}
	return nil
}

// identify sets the fingerprint of the data trained on and the id of its
// partition (parts; nil for one rank, which needs no partition).
func (i *jobInfo) identify(f *trainFlags, ds *data.Dataset, split string, parts []int32) {
	i.partMethod, i.partSeed = f.partition, f.partitionSeed
	if i.ranks == 1 {
		i.partMethod, i.partSeed, parts = "none", 0, nil
	}
	i.fingerprint = ds.Fingerprint()
	i.partitionID = data.PartitionID(ds, i.fingerprint, split, parts, i.ranks)
}
