package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

type trainFlags struct {
	data, split, model, metrics string
	layers, hidden, epochs      int
	threads                     int
	lr, weightDecay, dropout    float64
	seed                        uint64
	quiet, normalize            bool
	cpuProfile                  string
	build                       *data.BuildOptions
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("train", "train --data PATH [--split NAME] [--model sage|gcn] [--layers N] [--hidden N] [--epochs N] [--lr F] [--weight-decay F] [--dropout F] [--seed N] [--metrics FILE] [--quiet]", stderr)
	var f trainFlags
	def := gnn.DefaultTrainConfig()
	fs.StringVar(&f.data, "data", "", "dataset: an OGB-layout directory or a .h5 file")
	fs.StringVar(&f.split, "split", "", "split name (default: the only split, or the first in sorted order)")
	fs.StringVar(&f.model, "model", "sage", "model: sage (GraphSAGE, mean aggregator) or gcn")
	fs.IntVar(&f.layers, "layers", 3, "number of GNN layers")
	fs.IntVar(&f.hidden, "hidden", 256, "hidden width")
	fs.IntVar(&f.epochs, "epochs", def.Epochs, "full-batch training epochs")
	fs.Float64Var(&f.lr, "lr", 0.01, "Adam learning rate")
	fs.Float64Var(&f.weightDecay, "weight-decay", 0, "L2 weight decay on weights (not biases)")
	fs.Float64Var(&f.dropout, "dropout", 0, "dropout probability on every layer's input")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for initialisation and dropout")
	fs.StringVar(&f.metrics, "metrics", "", "write per-epoch metrics as JSON Lines to this file")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the summary")
	fs.BoolVar(&f.normalize, "normalize-features", false, "scale every feature row to unit L1 norm (Kipf & Welling's preprocessing)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads for kernels (0 = all)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file")
	f.build = buildFlags(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	if f.data == "" {
		return usagef("train: --data is required")
	}
	if f.threads < 0 {
		return usagef("train: --threads: got %d, expected >= 0", f.threads)
	}

	loadStart := time.Now()
	ds, err := data.Load(f.data, data.OGBOptions{Build: *f.build})
	if err != nil {
		return err
	}
	if f.normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := pickSplit(ds, f.split)
	if err != nil {
		return err
	}
	local, err := gnn.SingleProcess(ds, split, f.model)
	if err != nil {
		return usagef("train: %v", err)
	}
	dev := kernels.NewCPU(f.threads)
	defer dev.Close()
	mcfg := gnn.ModelConfig{Model: f.model, Layers: f.layers, Hidden: f.hidden, InDim: ds.NumFeatures,
		Classes: ds.NumClasses, Dropout: float32(f.dropout), Seed: f.seed}
	model, err := gnn.NewModel(mcfg, local, dev)
	if err != nil {
		return usagef("train: %v", err)
	}
	tcfg := def
	tcfg.Epochs, tcfg.LR, tcfg.WeightDecay = f.epochs, float32(f.lr), float32(f.weightDecay)
	trainer, err := gnn.NewTrainer(model, tcfg, gnn.Alone{}, gnn.Alone{})
	if err != nil {
		return usagef("train: %v", err)
	}
	fmt.Fprintf(stdout, "dataset %s: %d nodes, %d edges, %d features, %d classes; split %s %d/%d/%d (loaded in %.2fs)\n",
		ds.Name, ds.Graph.N, ds.Graph.NumEdges(), ds.NumFeatures, ds.NumClasses, split,
		local.GlobalTrain, local.GlobalValid, local.GlobalTest, time.Since(loadStart).Seconds())
	fmt.Fprintf(stdout, "model %s: %d layers, dims %v, dropout %g; adam lr %g, weight decay %g, %d epochs; gemm %s\n",
		f.model, f.layers, mcfg.Dims(), f.dropout, f.lr, f.weightDecay, f.epochs, kernels.GemmBackend)

	var metrics *metricsWriter
	if f.metrics != "" {
		if metrics, err = createMetrics(f.metrics); err != nil {
			return err
		}
		defer metrics.close()
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	sum, err := trainer.Run(func(s gnn.EpochStats) error {
		if !f.quiet {
			fmt.Fprintf(stdout, "epoch %4d  loss %.4f  train %.4f  val %.4f  test %.4f  %.3fs\n",
				s.Epoch, s.Loss, s.TrainAcc, s.ValAcc, s.TestAcc, s.Seconds)
		}
		return metrics.epoch(s)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "done: best val %.4f at epoch %d, test at best val %.4f, final test %.4f, %d epochs in %.2fs, peak memory %d MiB\n",
		sum.BestValAcc, sum.BestEpoch, sum.TestAtBestVal, sum.FinalTestAcc, sum.Epochs, sum.Seconds, maxRSSMiB())
	return metrics.summary(sum)
}

// pickSplit returns the named split, or the dataset's only/first split.
func pickSplit(ds *data.Dataset, name string) (string, error) {
	names := ds.SplitNames()
	if name == "" {
		if len(names) == 0 {
			return "", usagef("train: dataset %s has no splits", ds.Name)
		}
		return names[0], nil
	}
	if _, ok := ds.Splits[name]; !ok {
		return "", usagef("train: --split %q: dataset %s has splits %v", name, ds.Name, names)
	}
	return name, nil
}

// metricsWriter writes one JSON object per line; a nil writer does nothing.
type metricsWriter struct {
	f *os.File
	w *bufio.Writer
}

func createMetrics(path string) (*metricsWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	return &metricsWriter{f: f, w: bufio.NewWriter(f)}, nil
}

func (m *metricsWriter) write(v any) error {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m.w.Write(append(b, '\n'))
	// Flush every line so that a user tailing the file sees each epoch.
	if err := m.w.Flush(); err != nil {
		return fmt.Errorf("writing metrics to %s: %w", m.f.Name(), err)
	}
	return nil
}

func (m *metricsWriter) epoch(s gnn.EpochStats) error {
	return m.write(struct {
		Epoch        int     `json:"epoch"`
		Loss         float64 `json:"loss"`
		TrainAcc     float64 `json:"train_acc"`
		ValAcc       float64 `json:"val_acc"`
		TestAcc      float64 `json:"test_acc"`
		EpochSeconds float64 `json:"epoch_seconds"`
	}{s.Epoch, s.Loss, s.TrainAcc, s.ValAcc, s.TestAcc, s.Seconds})
}

func (m *metricsWriter) summary(s gnn.Summary) error {
	return m.write(struct {
		Summary       bool    `json:"summary"`
		BestValAcc    float64 `json:"best_val_acc"`
		BestEpoch     int     `json:"best_epoch"`
		TestAtBestVal float64 `json:"test_at_best_val"`
		FinalTestAcc  float64 `json:"final_test_acc"`
		Epochs        int     `json:"epochs"`
		Seconds       float64 `json:"seconds"`
		MaxRSSMiB     int64   `json:"max_rss_mb"`
	}{true, s.BestValAcc, s.BestEpoch, s.TestAtBestVal, s.FinalTestAcc, s.Epochs, s.Seconds, maxRSSMiB()})
}

func (m *metricsWriter) close() {
	if m != nil {
		m.f.Close()
	}
}

// maxRSSMiB is this process's peak resident memory.
func maxRSSMiB() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Maxrss) / 1024 // kilobytes on Linux
}
