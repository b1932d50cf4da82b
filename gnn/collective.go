package gnn

import "github.com/gnn-spmd/gnn-spmd/kernels"

// Halo moves boundary rows between ranks for one layer.
type Halo interface {
	// Forward fills the halo rows [NumOwned, NumOwned+NumHalo) of the
	// layer-l input h with the owners' current rows.
	Forward(layer int, h *kernels.Mat) error
	// BackwardSend returns the gradient's halo rows dh (NumHalo rows) to
	// their owners and receives what peers return for this rank's rows;
	// BackwardAdd adds that into the gradient's owned rows own (NumOwned
	// rows). BackwardSend leaves the owned rows alone, so the caller can
	// compute them while it runs (overlap).
	BackwardSend(layer int, dh *kernels.Mat) error
	BackwardAdd(layer int, own *kernels.Mat) error
}

// Metered is a Halo that counts what it sends (comm.Exchange is one).
type Metered interface {
	Halo
	// LayerBytes adds this rank's bytes sent since Reset, per layer, into
	// fwd and bwd, and returns the seconds spent in the transport.
	LayerBytes(fwd, bwd []int64) float64
	Reset()
}

// Reducer sums values over all ranks, leaving the same result on each.
type Reducer interface {
	AllReduceFloat32(x []float32) error
	AllReduceFloat64(x []float64) error
}

// DeviceReducer is a Reducer that sums matrices in a device's memory in
// place (NCCL's all-reduce); without one, device gradients travel through
// the host.
type DeviceReducer interface {
	Reducer
	AllReduceMat(x *kernels.Mat) error
}

// allReduceGrad sums p's gradient over the ranks.
func allReduceGrad(r Reducer, dev kernels.Device, p *Param) error {
	if _, alone := r.(Alone); alone {
		return nil
	}
	switch dr, ok := r.(DeviceReducer); {
	case dev.Host():
		return r.AllReduceFloat32(p.g.Data[:p.g.Len()])
	case ok:
		return dr.AllReduceMat(p.g)
	}
	dev.Download(p.G, p.g)
	if err := r.AllReduceFloat32(p.G); err != nil {
		return err
	}
	dev.Upload(p.g, p.G)
	return nil
}

// Alone is the Halo and Reducer of a single rank: nothing to exchange.
type Alone struct{}

func (Alone) Forward(int, *kernels.Mat) error      { return nil }
func (Alone) BackwardSend(int, *kernels.Mat) error { return nil }
func (Alone) BackwardAdd(int, *kernels.Mat) error  { return nil }
func (Alone) AllReduceFloat32([]float32) error     { return nil }
func (Alone) AllReduceFloat64([]float64) error     { return nil }
