//go:build !cpu

package gpu

// Training on the GPU against training on the CPU: four ranks sharing one
// GPU (device copies between goroutine ranks) against four CPU ranks, with
// full communication and with 2-bit quantized halo rows. The codecs and
// every kernel but the dense products are bit-identical to the CPU's, so
// the losses differ only by cuBLAS's summation order. Without a GPU the
// cudaprobe import makes this binary print SKIP and exit 0.

import (
	"math"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

const (
	ranks  = 4
	epochs = 20
	layers = 3
)

// train runs ranks goroutine ranks on the given device kind and returns
// rank 0's per-epoch losses and the forward bytes of epoch 0.
func train(t *testing.T, ds *data.Dataset, onGPU bool, codec string) ([]float64, int64) {
	t.Helper()
	parts, err := data.Partition(ds, "random", ranks, "metis", 0)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := data.BuildShards(ds, "random", parts, ranks)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var losses []float64
	var bytes int64
	err = comm.RunLocal(ranks, func(c *comm.Local) error {
		sh := shards[c.Rank()]
		local, err := gnn.FromShard(sh, "sage")
		if err != nil {
			return err
		}
		var dev kernels.Device
		var halo gnn.Halo
		var reduce gnn.Reducer = c
		if onGPU {
			g, err := cuda.New(0)
			if err != nil {
				return err
			}
			defer g.Close()
			tr := NewLocal(c, g)
			if halo, err = NewExchange(tr, g, len(sh.Owned), sh.Send, sh.RecvStart, layers); err != nil {
				return err
			}
			dev, reduce = g, reducer{c, tr}
		} else {
			p := kernels.NewCPU(1)
			defer p.Close()
			if halo, err = comm.NewExchange(c, len(sh.Owned), sh.Send, sh.RecvStart, layers); err != nil {
				return err
			}
			dev = p
		}
		mc := gnn.ModelConfig{Model: "sage", Layers: layers, Hidden: 32, InDim: local.Features.Cols,
			Classes: local.NumClasses, Seed: 3}
		m, err := gnn.NewModel(mc, local, dev)
		if err != nil {
			return err
		}
		cfg := gnn.DefaultTrainConfig()
		cfg.Epochs = epochs
		tr, err := gnn.NewTrainer(m, cfg, halo, reduce)
		if err != nil {
			return err
		}
		if codec != "none" {
			tr.Compress = &gnn.Compression{Fwd: codec, Bwd: codec, Schedule: gnn.Fixed{R: 16}, Seed: 5}
		}
		_, err = tr.Run(func(st gnn.EpochStats) error {
			if c.Rank() == 0 {
				mu.Lock()
				defer mu.Unlock()
				losses = append(losses, st.Loss)
				if st.Epoch == 0 {
					for _, b := range st.BytesFwd {
						bytes += b
					}
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return losses, bytes
}

type reducer struct {
	comm.Comm
	t Transport
}

func (r reducer) AllReduceMat(x *kernels.Mat) error { return r.t.AllReduceMat(x) }

func TestGPUTrainingMatchesCPU(t *testing.T) {
	ds, err := data.Generate(data.GenOptions{Nodes: 3000, Classes: 5, AvgDegree: 8, Homophily: 0.8,
		Features: 37, SNR: 0.5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []string{"none", "quant"} {
		cpuLoss, cpuBytes := train(t, ds, false, codec)
		gpuLoss, gpuBytes := train(t, ds, true, codec)
		if cpuBytes != gpuBytes {
			t.Errorf("%s: epoch 0 sent %d forward bytes on the GPU, %d on the CPU", codec, gpuBytes, cpuBytes)
		}
		// A quantized row can round the other way where the products
		// differ in the last bit, hence the looser bound.
		tol := map[string]float64{"none": 1e-4, "quant": 1e-3}[codec]
		for e := range cpuLoss {
			if d := math.Abs(gpuLoss[e]-cpuLoss[e]) / cpuLoss[e]; d > tol {
				t.Fatalf("%s: epoch %d loss %.7f on the GPU, %.7f on the CPU (rel. diff %.2g)", codec, e, gpuLoss[e], cpuLoss[e], d)
			}
		}
		t.Logf("%s: final loss GPU %.7f CPU %.7f; epoch-0 forward bytes %d", codec, gpuLoss[epochs-1], cpuLoss[epochs-1], gpuBytes)
	}
}
