//go:build !cpu

package gpu

// Residual coding and gradient row skipping on the GPU against the host
// exchange of the same ranks: goroutine ranks sharing GPU 0 (the
// in-process device transport), epoch after epoch, the halo rows, the
// returned gradients, the bytes sent and the residual state must be the
// same bits. The payloads are the host's by construction (the skip
// decisions are made on the host from the kernels' per-row maxima and
// norms, which kernels/cuda/hosttwin checks bit for bit).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// Every device transport receives the short payloads of skipped rows.
var (
	_ halo.ShortTransport[kernels.Bytes] = (*comm.SharedGPU)(nil)
	_ halo.ShortTransport[kernels.Bytes] = (*comm.NCCL)(nil)
	_ halo.ShortTransport[kernels.Bytes] = (*comm.HostStaged)(nil)
	_ halo.ResidualMemory[kernels.Bytes] = (*CUDA)(nil)
)

func TestResidualExchangeMatchesHost(t *testing.T) {
	device(t) // SKIP without a GPU
	for _, c := range []struct {
		name     string
		fwd, bwd codec.Spec
		res      halo.Residual
	}{
		{"ternary rung", codec.Tern(), codec.Tern(), halo.Residual{Forward: true, Backward: true, Skip: 0.005, Refresh: 8}},
		{"recommended", codec.Quant(2), codec.Quant(2), halo.Residual{Forward: true, Backward: true, Skip: 0.005, Refresh: 8}},
		{"ternary shared headers", codec.Tern().Grouped(3), codec.Tern().Grouped(2), halo.Residual{Forward: true, Backward: true, Skip: 0.02, Refresh: 4}},
		{"gradient floor", codec.Tern(), codec.Tern(), halo.Residual{Forward: true, Backward: true, Skip: 0.005, Refresh: 8, SkipGrad: 0.1}},
		{"skip 5% refresh 3", codec.Quant(3), codec.Quant(2), halo.Residual{Forward: true, Backward: true, Skip: 0.05, Refresh: 3}},
		{"shared headers", codec.Quant(2).Grouped(3), codec.Quant(4).Grouped(2), halo.Residual{Forward: true, Backward: true, Skip: 0.02}},
		{"no skip", codec.Quant(4), codec.Quant(2), halo.Residual{Forward: true, Backward: true}},
		{"gradient rows skipped", codec.Quant(2), codec.Quant(2), halo.Residual{Forward: true, SkipGrad: 0.1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := comm.RunLocal(3, func(host *comm.Local) error {
				return residualRank(host, c.fwd, c.bwd, c.res)
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// residualRank is one goroutine rank: its device handle on GPU 0, the GPU
// exchange over the shared-GPU transport and the host exchange over the
// same plan, run side by side for a few epochs.
func residualRank(host *comm.Local, fwd, bwd codec.Spec, res halo.Residual) error {
	const f, epochs = 67, 12
	r, q := host.Rank(), host.Size()
	d, err := cuda.New(0)
	if err != nil {
		return err
	}
	defer d.Close()
	owned := []int{700, 520, 610}
	layout := rand.New(rand.NewPCG(31, 32)) // the same draws on every rank
	send := make([][][]int32, q)            // send[s][p]: rows of s that p holds
	for s := range q {
		send[s] = make([][]int32, q)
		for p := range q {
			if p != s {
				for _, i := range layout.Perm(owned[s])[:layout.IntN(owned[s])] {
					send[s][p] = append(send[s][p], int32(i))
				}
			}
		}
	}
	recvStart := make([]int, q+1)
	for s := range q {
		recvStart[s+1] = recvStart[s] + len(send[s][r])
	}
	plan, err := halo.NewPlan(r, owned[r], send[r], recvStart)
	if err != nil {
		return err
	}
	gx, err := NewExchange(plan, d, comm.NewSharedGPU(host, d), 1)
	if err != nil {
		return err
	}
	hx, err := halo.NewHost(plan, host, 1)
	if err != nil {
		return err
	}
	for _, x := range []halo.Exchanger{gx, hx} {
		x.SetCodecs(0, fwd, bwd)
		if err := x.SetResidual(res); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(uint64(r), 33))
	h := kernels.NewMat(owned[r]+plan.HaloRows(), f)
	for i := range h.Data {
		h.Data[i] = float32(rng.NormFloat64())
	}
	gh, gdh, gown := d.NewMat(h.Rows, f), d.NewMat(plan.HaloRows(), f), d.NewMat(owned[r], f)
	for e := range epochs {
		// Rows that move less every epoch, some not at all: skipped rows.
		for i := range owned[r] * f {
			if i/f%4 != 0 {
				h.Data[i] += float32(rng.NormFloat64()) / float32(2*(e+1))
			}
		}
		d.Upload(gh, h.Data)
		for _, x := range []halo.Exchanger{gx, hx} {
			x.SetEpoch(7, e)
			x.Meter().Reset()
		}
		if err := forwardBoth(d, gx, hx, gh, h, fmt.Sprintf("rank %d epoch %d forward", r, e)); err != nil {
			return err
		}
		dh, own := h.View(owned[r], h.Rows), h.View(0, owned[r])
		for i := range dh.Data {
			dh.Data[i] = float32(rng.NormFloat64()) * float32(1+i%5)
		}
		if err := backwardBoth(d, gx, hx, gdh, gown, dh, own, fmt.Sprintf("rank %d epoch %d backward", r, e)); err != nil {
			return err
		}
		if g, w := gx.Meter(), hx.Meter(); fmt.Sprint(g.Fwd, g.Bwd) != fmt.Sprint(w.Fwd, w.Bwd) {
			return fmt.Errorf("rank %d epoch %d: bytes sent %v %v on the GPU, %v %v on the host", r, e, g.Fwd, g.Bwd, w.Fwd, w.Bwd)
		}
	}
	gb, hb := gx.ResidualBlocks(), hx.ResidualBlocks()
	if len(gb) != len(hb) {
		return fmt.Errorf("rank %d: %d residual blocks on the GPU, %d on the host", r, len(gb), len(hb))
	}
	for i := range gb {
		for k, v := range gb[i].Data {
			if math.Float32bits(v) != math.Float32bits(hb[i].Data[k]) {
				return fmt.Errorf("rank %d: residual block %d value %d is %v on the GPU, %v on the host", r, i, k, v, hb[i].Data[k])
			}
		}
	}
	return nil
}
