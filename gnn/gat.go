package gnn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// GAT (Veličković et al., ICLR 2018): layer l projects its input,
// P = X W (Heads*Width wide, head after head), scores every edge j -> i of
// A + I per head as LeakyReLU_0.2(<a_dst, P_i> + <a_src, P_j>), normalises
// the scores of each node's incoming edges with a softmax, and sums the
// sources' P with those coefficients: heads concatenated in hidden layers
// (followed by ELU), averaged in the output layer. Dropout hits every
// layer's input and the coefficients.
//
// Distributed, a rank owns the destinations. What a destination needs of a
// source is [P_j | <a_src, P_j>], so that is the matrix the halo exchange
// carries forward (Heads*Width + Heads wide), and its gradient goes back.

// gatSlope is LeakyReLU's slope on the scores, the paper's.
const gatSlope = 0.2

// gatHeads returns the heads and per-head width of layer l.
func (c ModelConfig) gatHeads(l int) (heads, width int) {
	if l == c.Layers-1 {
		return max(1, c.OutHeads), c.Classes
	}
	return max(1, c.Heads), c.Hidden
}

// gatLayer is one attention layer and its activations on one rank.
type gatLayer struct {
	at                             kernels.Attention
	weight, attnSrc, attnDst, bias *Param
	in                             int
	last                           bool
	x, mask                        *kernels.Mat // input after dropout (owned rows); dropout factors
	p                              *kernels.Mat // x W, owned rows
	q                              *kernels.Mat // [P | source terms], owned then halo rows
	t                              *kernels.Mat // destination terms, owned rows
	stats                          *kernels.Mat // the softmax's statistics, owned rows
	alpha                          *kernels.Mat // coefficients, one row per edge (nil with recomputation)
	y                              *kernels.Mat // output (after ELU unless last), owned rows
	dq, dt, dp                     *kernels.Mat // backward
}

// gatModel is the GAT state of a Model.
type gatModel struct {
	dev    kernels.AttentionDevice
	layers []*gatLayer
	edges  *kernels.EdgesBySource
	dx     *kernels.Mat // d(input) scratch, widest hidden input
	// rec is the backward's records of the destinations, shared by the
	// layers.
	rec *kernels.Mat
}

// gatParamShapes lists layer l's parameters.
func (c ModelConfig) gatParamShapes(l int) []ParamShape {
	dims := c.Dims()
	h, w := c.gatHeads(l)
	return []ParamShape{
		{fmt.Sprintf("layer%d.weight", l), dims[l], h * w},
		{fmt.Sprintf("layer%d.attn_src", l), h, w},
		{fmt.Sprintf("layer%d.attn_dst", l), h, w},
		{fmt.Sprintf("layer%d.bias", l), 1, dims[l+1]},
	}
}

// newGAT builds m's attention layers. The weights are Glorot-uniform, the
// attention vectors Glorot over (width, 1) as the paper's 1x1 convolutions
// are, the biases zero.
//
// With recompute no matrix has a row per edge: the backward pass computes
// the coefficients again from the softmax's statistics (the same bits),
// which trades an exponential per edge and head for E x heads floats per
// layer.
func (m *Model) newGAT(rng *rand.Rand, recompute bool) error {
	ad, ok := m.dev.(kernels.AttentionDevice)
	if !ok {
		return fmt.Errorf("model gat: device %T has no attention kernels", m.dev)
	}
	cfg, v, dev := m.Config, m.view, m.dev
	own, rows := v.NumOwned, v.NumOwned+v.NumHalo
	nnz := int(v.Adj.Ptr[own])
	g := &gatModel{dev: ad, edges: kernels.NewEdgesBySource(v.Adj)}
	dims := cfg.Dims()
	widest, recCols := 0, 1
	for l := 0; l < cfg.Layers; l++ {
		h, w := cfg.gatHeads(l)
		shapes := cfg.gatParamShapes(l)
		ly := &gatLayer{in: dims[l], last: l == cfg.Layers-1,
			at: kernels.Attention{Heads: h, Width: w, Mean: l == cfg.Layers-1, Slope: gatSlope, Dropout: cfg.AttnDropout, RowIDs: v.GlobalIDs}}
		ly.weight = newParam(shapes[0].Name, shapes[0].Rows, shapes[0].Cols, true)
		ly.attnSrc = newParam(shapes[1].Name, h, w, true)
		ly.attnDst = newParam(shapes[2].Name, h, w, true)
		ly.bias = newParam(shapes[3].Name, 1, shapes[3].Cols, false)
		glorot(rng, ly.weight)
		for _, a := range []*Param{ly.attnSrc, ly.attnDst} {
			bound := math.Sqrt(6 / float64(w+1))
			for i := range a.W {
				a.W[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
		m.Params = append(m.Params, ly.weight, ly.attnSrc, ly.attnDst, ly.bias)
		if cfg.Dropout > 0 {
			ly.x, ly.mask = dev.NewMat(own, ly.in), dev.NewMat(own, ly.in)
		}
		sc := ly.at.SourceCols()
		ly.p, ly.q, ly.t = dev.NewMat(own, h*w), dev.NewMat(rows, sc), dev.NewMat(own, h)
		ly.stats = dev.NewMat(own, ly.at.StatsCols())
		if !recompute {
			ly.alpha = dev.NewMat(nnz, h)
		}
		ly.y = dev.NewMat(own, ly.at.OutCols())
		ly.dq, ly.dt, ly.dp = dev.NewMat(rows, sc), dev.NewMat(own, h), dev.NewMat(own, h*w)
		if l > 0 {
			widest = max(widest, ly.in)
		}
		recCols = max(recCols, ly.at.RecordCols())
		g.layers = append(g.layers, ly)
	}
	g.dx = dev.NewMat(own, max(widest, 1))
	g.rec = dev.NewMat(own, recCols)
	m.gat = g
	return nil
}

// gatForward is Forward for GAT.
func (m *Model) gatForward(ex halo.Exchanger, train bool, epoch int) (*kernels.Mat, error) {
	d, g, v := m.dev, m.gat, m.view
	own := v.NumOwned
	for l, ly := range g.layers {
		x := m.features
		if l > 0 {
			x = g.layers[l-1].y
		}
		if train && m.Config.Dropout > 0 {
			d.Dropout(x, ly.x, ly.mask, m.Config.Dropout, dropoutSeed(m.Config.Seed, epoch, l), v.GlobalIDs)
			x = ly.x
		}
		ly.at.Seed = attnDropoutSeed(m.Config.Seed, epoch, l)
		d.Gemm(false, false, 1, x, ly.weight.w, 0, ly.p)
		g.dev.AttentionTerms(&ly.at, ly.p, ly.attnSrc.w, ly.attnDst.w, ly.q.View(0, own), ly.t)
		if ex != nil {
			if err := ex.Forward(l, ly.q); err != nil {
				return nil, fmt.Errorf("layer %d forward halo exchange: %w", l, err)
			}
		}
		g.dev.AttentionForward(&ly.at, v.Adj, ly.q, ly.t, ly.stats, ly.alpha, ly.y, train)
		d.AddBias(ly.y, ly.bias.w)
		if !ly.last {
			g.dev.ELU(ly.y, ly.y)
		}
	}
	return g.layers[len(g.layers)-1].y, nil
}

// attnDropoutSeed derives the seed of one layer's coefficient dropout in
// one epoch, apart from the input dropout's.
func attnDropoutSeed(seed uint64, epoch, layer int) uint64 {
	return dropoutSeed(seed^0xa77e, epoch, layer)
}

// gatBackward is Backward for GAT, after a Forward with train set.
func (m *Model) gatBackward(ex halo.Exchanger, dlogits *kernels.Mat) error {
	d, g, v := m.dev, m.gat, m.view
	own, rows := v.NumOwned, v.NumOwned+v.NumHalo
	dOut := dlogits
	for l := len(g.layers) - 1; l >= 0; l-- {
		ly := g.layers[l]
		if !ly.last {
			g.dev.ELUBackward(ly.y, dOut, dOut)
		}
		d.BiasGrad(dOut, ly.bias.g, false)
		g.dev.AttentionBackward(&ly.at, v.Adj, g.edges, ly.q, ly.t, ly.stats, ly.alpha, dOut, g.rec.Reshape(own, ly.at.RecordCols()), ly.dq, ly.dt, true)
		if ex != nil {
			err := ex.BackwardSend(l, ly.dq.View(own, rows))
			if err == nil {
				err = ex.BackwardAdd(l, ly.dq.View(0, own))
			}
			if err != nil {
				return fmt.Errorf("layer %d backward halo exchange: %w", l, err)
			}
		}
		g.dev.AttentionTermsBackward(&ly.at, ly.p, ly.attnSrc.w, ly.attnDst.w, ly.dq.View(0, own), ly.dt, ly.dp, ly.attnSrc.g, ly.attnDst.g)
		x := m.features
		if l > 0 {
			x = g.layers[l-1].y
		}
		if ly.mask != nil {
			x = ly.x
		}
		d.Gemm(true, false, 1, x, ly.dp, 0, ly.weight.g)
		if l == 0 {
			break
		}
		dx := g.dx.Reshape(own, ly.in)
		d.Gemm(false, true, 1, ly.dp, ly.weight.w, 0, dx)
		if ly.mask != nil {
			d.Mul(dx, ly.mask, dx)
		}
		dOut = dx
	}
	return nil
}
