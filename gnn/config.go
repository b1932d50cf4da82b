package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
)

// Config is everything that fixes the numbers of a training run on given
// data: the architecture, the optimiser and the halo compression, as a
// user sets them (decimal values in float64; the kernels' float32
// parameters derive from them), plus the two widths the data decide. A
// checkpoint stores it (gnn/ckpt) and resumes only a run with an equal one.
type Config struct {
	Model          string // sage (GraphSAGE, mean aggregator), gcn or gat
	Layers, Hidden int
	// GAT's heads in hidden layers and in the output layer, and its
	// coefficient dropout.
	Heads, OutHeads int
	AttnDropout     float64
	InDim, Classes  int // from the data
	Dropout         float64
	Seed            uint64 // initialisation, dropout and codec draws
	Epochs          int
	LR              float64
	WeightDecay     float64
	// Compress is the halo compression (a preset, possibly edited).
	Compress compress.Plan
}

// DefaultConfig follows the VARCO authors: 3-layer GraphSAGE-256, Adam
// with lr 0.01, 300 epochs, no dropout, no compression.
func DefaultConfig() Config {
	return Config{Model: "sage", Layers: 3, Hidden: 256, Heads: 1, OutHeads: 1, Epochs: 300, LR: 0.01,
		Compress: compress.MustPreset(compress.PresetNone)}
}

// ModelConfig is the architecture c describes.
func (c *Config) ModelConfig() ModelConfig {
	return ModelConfig{Model: c.Model, Layers: c.Layers, Hidden: c.Hidden, InDim: c.InDim, Classes: c.Classes,
		Dropout: float32(c.Dropout), Seed: c.Seed, Heads: c.Heads, OutHeads: c.OutHeads, AttnDropout: float32(c.AttnDropout)}
}

// TrainConfig is the optimiser c describes (Adam's betas and epsilon at
// their defaults).
func (c *Config) TrainConfig() TrainConfig {
	t := DefaultTrainConfig()
	t.Epochs, t.LR, t.WeightDecay = c.Epochs, float32(c.LR), float32(c.WeightDecay)
	return t
}

// Validate checks the settings a user chooses (the widths from the data
// are checked when the model is built), naming the offending one.
func (c *Config) Validate() error {
	m := c.ModelConfig()
	m.InDim, m.Classes = 1, 1
	if err := m.Validate(); err != nil {
		return err
	}
	// The model reads 0 heads as 1 (a ModelConfig's zero value); a user
	// who asks for 0 has made a mistake.
	if c.Model == "gat" && (c.Heads < 1 || c.OutHeads < 1) {
		return fmt.Errorf("heads: got %d and %d output heads, expected at least 1", c.Heads, c.OutHeads)
	}
	// The input's cache would silently do nothing: say so instead.
	switch {
	case c.Compress.CacheInput && c.Dropout > 0:
		return fmt.Errorf("cache-input: with --dropout %v the first layer's input changes every epoch; expected --dropout 0", c.Dropout)
	case c.Compress.CacheInput && c.Model == "gat":
		return fmt.Errorf("cache-input: gat's first layer exchanges projected rows, not its input; expected --model sage or gcn")
	}
	if err := c.TrainConfig().Validate(); err != nil {
		return err
	}
	return c.Compress.Validate(c.Epochs)
}
