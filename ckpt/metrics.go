package ckpt

import (
	"math"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// The metrics history is a table under /metrics, one dataset per column
// named as in the --metrics JSON Lines: [epochs] for per-epoch values,
// [epochs, layers] for per-layer ones.

// scalarCols are the per-epoch float64 columns.
var scalarCols = []struct {
	name string
	at   func(*gnn.EpochStats) *float64
	auc  bool // NaN in the file for a task without AUC
}{
	{"loss", func(s *gnn.EpochStats) *float64 { return &s.Loss }, false},
	{"train_acc", func(s *gnn.EpochStats) *float64 { return &s.TrainAcc }, false},
	{"val_acc", func(s *gnn.EpochStats) *float64 { return &s.ValAcc }, false},
	{"test_acc", func(s *gnn.EpochStats) *float64 { return &s.TestAcc }, false},
	{"val_auc", func(s *gnn.EpochStats) *float64 { return &s.ValAUC }, true},
	{"test_auc", func(s *gnn.EpochStats) *float64 { return &s.TestAUC }, true},
	{"grad_norm", func(s *gnn.EpochStats) *float64 { return &s.GradNorm }, false},
	{"epoch_seconds", func(s *gnn.EpochStats) *float64 { return &s.Seconds }, false},
	{"comm_seconds", func(s *gnn.EpochStats) *float64 { return &s.CommSeconds }, false},
	{"halo_seconds", func(s *gnn.EpochStats) *float64 { return &s.HaloSeconds }, false},
	{"compress_seconds", func(s *gnn.EpochStats) *float64 { return &s.CodecSeconds }, false},
}

// rateCols are the per-layer float64 columns.
var rateCols = []struct {
	name string
	at   func(*gnn.EpochStats) *[]float64
}{
	{"ratio", func(s *gnn.EpochStats) *[]float64 { return &s.Rates }},
	{"comp_error", func(s *gnn.EpochStats) *[]float64 { return &s.CompError }},
}

// byteCols are the per-layer int64 columns.
var byteCols = []struct {
	name string
	at   func(*gnn.EpochStats) *[]int64
}{
	{"bytes_fwd_layer", func(s *gnn.EpochStats) *[]int64 { return &s.BytesFwd }},
	{"bytes_bwd_layer", func(s *gnn.EpochStats) *[]int64 { return &s.BytesBwd }},
	{"bytes_eval_layer", func(s *gnn.EpochStats) *[]int64 { return &s.BytesEval }},
}

// historyArrays is the /metrics table of h. It adds the per-epoch byte
// totals (bytes_fwd, bytes_bwd, bytes_cum) for readers; Read derives them.
func historyArrays(h []gnn.EpochStats, layers int) []data.H5Array {
	n := len(h)
	col, grid := []uint{uint(n)}, []uint{uint(n), uint(layers)}
	epoch, fwd, bwd, cum := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	bits := make([]int32, 0, n*layers)
	for i, s := range h {
		epoch[i] = int64(s.Epoch)
		fwd[i], bwd[i] = s.TotalBytes()
		cum[i] = fwd[i] + bwd[i]
		if i > 0 {
			cum[i] += cum[i-1]
		}
		for _, b := range s.Bits {
			bits = append(bits, int32(b))
		}
	}
	a := []data.H5Array{{Path: "/metrics/epoch", Data: epoch, Dims: col},
		{Path: "/metrics/bytes_fwd", Data: fwd, Dims: col}, {Path: "/metrics/bytes_bwd", Data: bwd, Dims: col},
		{Path: "/metrics/bytes_cum", Data: cum, Dims: col}, {Path: "/metrics/bits", Data: bits, Dims: grid}}
	for _, c := range scalarCols {
		v := make([]float64, n)
		for i := range h {
			v[i] = *c.at(&h[i])
			if c.auc && !h[i].HasAUC {
				v[i] = math.NaN()
			}
		}
		a = append(a, data.H5Array{Path: "/metrics/" + c.name, Data: v, Dims: col})
	}
	for _, c := range rateCols {
		a = append(a, data.H5Array{Path: "/metrics/" + c.name, Data: flatten(h, c.at), Dims: grid})
	}
	for _, c := range byteCols {
		a = append(a, data.H5Array{Path: "/metrics/" + c.name, Data: flatten(h, c.at), Dims: grid})
	}
	return a
}

func flatten[T any](h []gnn.EpochStats, at func(*gnn.EpochStats) *[]T) []T {
	var v []T
	for i := range h {
		v = append(v, *at(&h[i])...)
	}
	return v
}

// readHistory reads the /metrics table of n epochs. The epoch column comes
// first: its size is checked against the file's before the rows are made.
func readHistory(f *data.H5File, n, layers int, hasAUC bool) []gnn.EpochStats {
	col, grid := []int64{int64(n)}, []int64{int64(n), int64(layers)}
	epoch := data.ReadH5Array[int64](f, "/metrics/epoch", "[epoch]", col...)
	if f.Err() != nil {
		return nil
	}
	h := make([]gnn.EpochStats, n)
	for i := range h {
		h[i].Epoch, h[i].HasAUC = int(epoch[i]), hasAUC
	}
	for _, c := range scalarCols {
		for i, x := range data.ReadH5Array[float64](f, "/metrics/"+c.name, "[epoch]", col...) {
			if c.auc && !hasAUC {
				x = 0 // as a live run's EpochStats has it
			}
			*c.at(&h[i]) = x
		}
	}
	for _, c := range rateCols {
		unflatten(h, data.ReadH5Array[float64](f, "/metrics/"+c.name, "[epoch, layers]", grid...), layers, c.at)
	}
	for _, c := range byteCols {
		unflatten(h, data.ReadH5Array[int64](f, "/metrics/"+c.name, "[epoch, layers]", grid...), layers, c.at)
	}
	bits := data.ReadH5Array[int32](f, "/metrics/bits", "[epoch, layers]", grid...)
	for i := 0; bits != nil && i < n; i++ {
		h[i].Bits = make([]int, layers)
		for l := range layers {
			h[i].Bits[l] = int(bits[i*layers+l])
		}
	}
	return h
}

// unflatten cuts v, [len(h), layers] row-major, into the rows of h; a nil v
// (after a read error) is left alone.
func unflatten[T any](h []gnn.EpochStats, v []T, layers int, at func(*gnn.EpochStats) *[]T) {
	if v == nil {
		return
	}
	for i := range h {
		*at(&h[i]) = v[i*layers : (i+1)*layers : (i+1)*layers]
	}
}
