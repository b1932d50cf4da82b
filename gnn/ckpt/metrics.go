package ckpt

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// The metrics history is a table under /metrics, one dataset per column of
// the metrics record (metrics.Columns), named as in the --metrics JSON
// Lines: [epochs] for per-epoch values, [epochs, layers] for per-layer ones.
// The derived columns (per-epoch byte totals, compute_seconds) are written
// for readers and recomputed on reading.

// historyArrays is the /metrics table of h.
func historyArrays(h []metrics.Epoch, layers int) []h5.Array {
	n := len(h)
	col, grid := []uint{uint(n)}, []uint{uint(n), uint(layers)}
	var a []h5.Array
	for _, c := range metrics.Columns() {
		var v any
		dims := col
		switch c.Kind {
		case metrics.Float, metrics.OptFloat:
			f := make([]float64, n)
			for i := range h {
				f[i] = c.Float(&h[i])
			}
			v = f
		case metrics.Int:
			f := make([]int64, n)
			for i := range h {
				f[i] = c.Int(&h[i])
			}
			v = f
		case metrics.FloatLayers:
			v, dims = flatten(h, c.Floats), grid
		case metrics.IntLayers:
			v, dims = flatten(h, c.Ints), grid
		case metrics.SmallLayers:
			f := make([]int32, 0, n*layers)
			for i := range h {
				for _, b := range *c.Smalls(&h[i]) {
					f = append(f, int32(b))
				}
			}
			v, dims = f, grid
		}
		a = append(a, h5.Array{Path: "/metrics/" + c.Name, Data: v, Dims: dims})
	}
	return a
}

func flatten[T any](h []metrics.Epoch, at func(*metrics.Epoch) *[]T) []T {
	var v []T
	for i := range h {
		v = append(v, *at(&h[i])...)
	}
	return v
}

// readHistory reads the /metrics table of n epochs. The epoch column comes
// first: its size is checked against the file's before the rows are made.
func readHistory(f *h5.File, n, layers int) []metrics.Epoch {
	col, grid := []int64{int64(n)}, []int64{int64(n), int64(layers)}
	epochs := h5.ReadArray[int64](f, "/metrics/epoch", "[epoch]", col...)
	if f.Err() != nil {
		return nil
	}
	h := make([]metrics.Epoch, n)
	for i, e := range epochs {
		h[i].Epoch = int(e)
	}
	for _, c := range metrics.Columns() {
		if f.Err() != nil {
			return nil
		}
		if c.Derived || c.Name == "epoch" {
			continue
		}
		path := "/metrics/" + c.Name
		switch c.Kind {
		case metrics.Float, metrics.OptFloat:
			for i, x := range h5.ReadArray[float64](f, path, "[epoch]", col...) {
				c.SetFloat(&h[i], x)
			}
		case metrics.Int:
			for i, x := range h5.ReadArray[int64](f, path, "[epoch]", col...) {
				c.SetInt(&h[i], x)
			}
		case metrics.FloatLayers:
			unflatten(h, h5.ReadArray[float64](f, path, "[epoch, layers]", grid...), layers, c.Floats)
		case metrics.IntLayers:
			unflatten(h, h5.ReadArray[int64](f, path, "[epoch, layers]", grid...), layers, c.Ints)
		case metrics.SmallLayers:
			v := h5.ReadArray[int32](f, path, "[epoch, layers]", grid...)
			for i := 0; v != nil && i < n; i++ {
				s := make([]int, layers)
				for l := range layers {
					s[l] = int(v[i*layers+l])
				}
				*c.Smalls(&h[i]) = s
			}
		}
	}
	if f.Err() != nil {
		return nil
	}
	var cum int64
	for i := range h {
		h[i].Derive(cum)
		cum = h[i].BytesCum
		if col, l, v, want := h[i].Check(); col != "" {
			at := fmt.Sprintf("row %d", i)
			if l >= 0 {
				at = fmt.Sprintf("row %d layer %d", i, l)
			}
			f.Errorf("/metrics/"+col, "%s is %v, expected %s: the file is corrupt", at, v, want)
			return nil
		}
	}
	return h
}

// unflatten cuts v, [len(h), layers] row-major, into the rows of h; a nil v
// (after a read error) is left alone.
func unflatten[T any](h []metrics.Epoch, v []T, layers int, at func(*metrics.Epoch) *[]T) {
	if v == nil {
		return
	}
	for i := range h {
		*at(&h[i]) = v[i*layers : (i+1)*layers : (i+1)*layers]
	}
}
