//go:build !cpu

package gpu

// The halo exchange over NCCL between two ranks with a GPU each, against
// the host exchange of the same ranks: the halo rows forward and the
// gradients returned, raw and compressed, must be the same bits (the
// codecs are byte-identical and the scatter-adds go in the same order).
// It needs two GPUs and skips with fewer.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe"
	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

func TestNCCLExchange(t *testing.T) {
	if n := cudaprobe.Count(); n < 2 {
		t.Skipf("%d GPU visible: the NCCL exchange needs 2", n)
	}
	const f = 48
	owned := []int{3000, 2500}
	rng := rand.New(rand.NewPCG(17, 18))
	pick := func(n, k int) []int32 {
		var out []int32
		for _, i := range rng.Perm(n)[:k] {
			out = append(out, int32(i))
		}
		return out
	}
	// send[r][p]: the owned rows of r that p holds, in p's order.
	send := [][][]int32{{nil, pick(owned[0], 1200)}, {pick(owned[1], 900), nil}}
	ls := comm.NewLocal(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recv := []int{0, len(send[0][r]), len(send[0][r]) + len(send[1][r])}
			errs[r] = ncclRank(ls[r], owned[r], send[r], recv, f)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("a rank is still exchanging after 3 minutes")
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// ncclRank is one rank: its GPU (ordinal = rank), the NCCL exchange and
// the host one over the same plan, compared codec by codec.
func ncclRank(host *comm.Local, owned int, send [][]int32, recvStart []int, f int) error {
	r := host.Rank()
	d, err := cuda.New(r)
	if err != nil {
		return err
	}
	defer d.Close()
	tr, err := comm.NewNCCL(host, d, time.Minute)
	if err != nil {
		return err
	}
	defer tr.Close()
	plan, err := halo.NewPlan(r, owned, send, recvStart)
	if err != nil {
		return err
	}
	gx, err := NewExchange(plan, d, tr, 1)
	if err != nil {
		return err
	}
	hx, err := halo.NewHost(plan, host, 1)
	if err != nil {
		return err
	}
	halos := plan.HaloRows()
	fill := func(m *kernels.Mat, salt int) {
		for i := range m.Data {
			m.Data[i] = float32(math.Sin(float64(i*7+salt+r*1000))) * 3
		}
	}
	for _, c := range []codec.Spec{codec.None(), codec.Quant(4), codec.Quant(16), codec.Trunc(2)} {
		gx.SetCodecs(0, c, c)
		hx.SetCodecs(0, c, c)
		gx.SetEpoch(5, 1)
		hx.SetEpoch(5, 1)

		h := kernels.NewMat(owned+halos, f)
		fill(h, 1)
		for i := owned * f; i < len(h.Data); i++ {
			h.Data[i] = 0
		}
		gh := d.NewMat(h.Rows, f)
		d.Upload(gh, h.Data)
		if err := forwardBoth(d, gx, hx, gh, h, c.Name()+" forward"); err != nil {
			return err
		}

		dh, own := kernels.NewMat(halos, f), kernels.NewMat(owned, f)
		fill(dh, 2)
		fill(own, 3)
		gdh, gown := d.NewMat(halos, f), d.NewMat(owned, f)
		if err := backwardBoth(d, gx, hx, gdh, gown, dh, own, c.Name()+" backward"); err != nil {
			return err
		}
	}
	return nil
}

// forwardBoth runs layer 0's forward exchange on the GPU rows gh and on
// the host rows h, and compares them.
func forwardBoth(d *cuda.Device, gx, hx halo.Exchanger, gh, h *kernels.Mat, what string) error {
	if err := gx.Forward(0, gh); err != nil {
		return err
	}
	if err := hx.Forward(0, h); err != nil {
		return err
	}
	return sameMat(d, gh, h, what)
}

// backwardBoth uploads the host's halo gradients dh and owned rows own to
// gdh and gown, runs layer 0's backward exchange on both, and compares the
// owned rows.
func backwardBoth(d *cuda.Device, gx, hx halo.Exchanger, gdh, gown, dh, own *kernels.Mat, what string) error {
	d.Upload(gdh, dh.Data)
	d.Upload(gown, own.Data)
	if err := gx.BackwardSend(0, gdh); err != nil {
		return err
	}
	if err := gx.BackwardAdd(0, gown); err != nil {
		return err
	}
	if err := hx.BackwardSend(0, dh); err != nil {
		return err
	}
	if err := hx.BackwardAdd(0, own); err != nil {
		return err
	}
	return sameMat(d, gown, own, what)
}

func sameMat(d *cuda.Device, g, h *kernels.Mat, what string) error {
	got := make([]float32, g.Len())
	d.Download(got, g)
	for i, v := range got {
		if w := h.Data[i]; math.Float32bits(v) != math.Float32bits(w) {
			return fmt.Errorf("%s: element %d (row %d) is %v on the GPU, %v on the host", what, i, i/h.Cols, v, w)
		}
	}
	return nil
}
