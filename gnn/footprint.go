package gnn

// Footprint estimates the host memory, in bytes, that one rank's model and
// halo exchange will allocate for cfg (InDim and Classes set) over a view
// of owned rows, halo rows and rows sent per layer: every matrix NewModel makes, the backward pass's scratch and the
// exchange's payload buffers. It is computed in float64 before anything is
// allocated, so that an absurd size (--hidden 1000000000) is refused with a
// figure instead of failing, or overflowing, in the allocator. On a GPU
// device the activations live in device memory; the host still holds the
// parameters and Adam moments, and the estimate stays an upper bound.
// With residual, it adds residual coding's state (both ends' copies of
// every layer's rows, both directions) and its scratch.
// TestFootprint holds it to what NewModel allocates.
func Footprint(cfg ModelConfig, owned, halo, send int, host, residual bool) float64 {
	const f32 = 4
	dims := cfg.Dims()
	own, rows := float64(owned), float64(owned+halo)
	var floats, scratch, width, exchanged float64
	for l := 0; l < cfg.Layers; l++ {
		in, out := float64(dims[l]), float64(dims[l+1])
		last, projectFirst := l == cfg.Layers-1, dims[l+1] < dims[l]
		weights := 1.0
		if cfg.Model == "sage" {
			weights = 2
		}
		floats += 4 * (weights*in*out + out) // W, G, M and V
		xRows := rows
		if projectFirst {
			xRows = own
		}
		switch {
		case l == 0 && cfg.Dropout == 0 && (projectFirst || host):
			// The first layer reads the features in place.
		default:
			floats += xRows * in
		}
		if cfg.Dropout > 0 {
			floats += own * in
		}
		if projectFirst {
			floats += rows * out
			width = max(width, out)
			exchanged += out
		} else {
			floats += own * in
			width = max(width, in)
			exchanged += in
		}
		if cfg.Dropout > 0 || last {
			floats += own * out
		}
		if l > 0 && (last || out < in) {
			// Model.inputGrad: two scratch matrices at most, each as
			// large as the largest input gradient without room in y.
			scratch = max(scratch, own*in)
		}
	}
	floats += own * float64(cfg.Classes) // dlogits
	floats += 2 * scratch
	// Send and receive payloads and the backward pass's received gradients
	// (or the gathered rows of one encode), at the widest layer.
	sent, recv := float64(send), float64(halo)
	floats += width * (sent + recv + max(sent, recv))
	if residual {
		floats += 2*exchanged*(sent+recv) + width*max(sent, recv)
	}
	return f32 * floats
}
