package gnn

// Footprint estimates the host memory, in bytes, that one rank's model and
// halo exchange will allocate for cfg (InDim and Classes set) over a view
// of owned rows, halo rows, rows sent per layer and edges (the entries of
// its adjacency, self loops included: GAT keeps floats per edge): every
// matrix NewModel makes, the backward pass's scratch and the
// exchange's payload buffers. It is computed in float64 before anything is
// allocated, so that an absurd size (--hidden 1000000000) is refused with a
// figure instead of failing, or overflowing, in the allocator. On a GPU
// device the activations live in device memory; the host still holds the
// parameters and Adam moments, and the estimate stays an upper bound.
// With residual, it adds residual coding's state (both ends' copies of
// every layer's rows, both directions) and its scratch; with exactEval
// (evaluation passes at full precision in a distributed run) or
// cachedInput (the training passes read the input cached too,
// Model.CacheTrainingInput), the first layer's cached exact input
// (Model.exchangeExactInput) where it is not the layer's z, the matrix its one
// exchange fills and, for SAGE evaluated apart from an uncached training
// pass, the first layer's shared self term. It counts the kept parameters
// of the best epochs and the final ones' copy, which every run holds.
// TestFootprint holds it to what NewModel and training allocate.
func Footprint(cfg ModelConfig, owned, halo, send, edges int, host, residual, exactEval, cachedInput bool) float64 {
	const f32 = 4
	dims := cfg.Dims()
	own, rows := float64(owned), float64(owned+halo)
	var floats, scratch, width, exchanged, cacheWidth float64
	copies := 6.0 // W, G, M and V, the kept best epoch's and the final copy
	if cfg.Classes == 2 {
		copies++ // the best AUC epoch's
	}
	if cfg.Model == "gat" {
		floats, width, exchanged = gatFootprint(cfg, own, rows, float64(edges), copies)
	}
	for l := 0; l < cfg.Layers && cfg.Model != "gat"; l++ {
		in, out := float64(dims[l]), float64(dims[l+1])
		last, projectFirst := l == cfg.Layers-1, dims[l+1] < dims[l]
		weights := 1.0
		if cfg.Model == "sage" {
			weights = 2
		}
		floats += copies * (weights*in*out + out)
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
	projectFirst := cfg.Model != "gat" && dims[1] < dims[0]
	trainCache := cachedInput && cfg.Dropout == 0 && halo > 0 && cfg.Model != "gat" && (!projectFirst || host)
	if (exactEval || trainCache) && halo > 0 && cfg.Model != "gat" {
		in := float64(dims[0])
		if projectFirst && !host {
			in = 0 // not cached on a GPU
		}
		if projectFirst || !trainCache {
			floats += own * in // else it is the layer's z
		}
		if projectFirst {
			floats += rows * in
			// The one exchange's send buffer, as wide as the features: the
			// later exchanges reuse it (received rows land in the matrix).
			cacheWidth = in
		}
	}
	if exactEval && cfg.Model == "sage" && !trainCache {
		floats += own * float64(dims[1]) // the shared self term (firstLayer.self)
	}
	floats += own * float64(cfg.Classes) // dlogits
	floats += 2 * scratch
	// Send and receive payloads and the backward pass's received gradients
	// (or the gathered rows of one encode), at the widest layer.
	sent, recv := float64(send), float64(halo)
	floats += width*(sent+recv+max(sent, recv)) + max(cacheWidth-width, 0)*sent
	if residual {
		floats += 2*exchanged*(sent+recv) + width*max(sent, recv)
	}
	return f32 * floats
}

// gatFootprint is Footprint's part for GAT's layers (newGAT), with copies
// of every parameter: floats
// allocated, and the widest and summed exchanged widths.
func gatFootprint(cfg ModelConfig, own, rows, edges, copies float64) (floats, width, exchanged float64) {
	dims := cfg.Dims()
	widest, recCols := 1.0, 1.0
	for l := 0; l < cfg.Layers; l++ {
		h, w := cfg.gatHeads(l)
		in, hw, hd := float64(dims[l]), float64(h*w), float64(h)
		sc := hw + hd
		floats += copies * (in*hw + 2*hw + float64(dims[l+1])) // weight, attention vectors, bias
		if cfg.Dropout > 0 {
			floats += 2 * own * in
		}
		floats += own*hw + rows*sc + own*hd + own*float64(dims[l+1]) + 2*own*hd // p, q, t, y, stats
		floats += rows*sc + own*hd + own*hw                                     // dq, dt, dp
		if !cfg.Recompute {
			floats += edges * hd
		}
		if l > 0 {
			widest = max(widest, in)
		}
		recCols = max(recCols, 4*hd+float64(dims[l+1]))
		width = max(width, sc)
		exchanged += sc
	}
	floats += own*widest + own*recCols // dx, the backward's records
	floats += 2 * edges                // the edges by source: destinations and ranks (and pointers, below)
	floats += 2 * rows
	return floats, width, exchanged
}
