package gnn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// ModelConfig fixes the architecture.
type ModelConfig struct {
	Model   string  // "sage", "gcn" or "gat"
	Layers  int     // number of message-passing layers, >= 1
	Hidden  int     // width of every hidden layer (GAT: of every head)
	InDim   int     // input feature width
	Classes int     // output width
	Dropout float32 // probability, applied to every layer's input while training
	Seed    uint64  // initialisation and dropout streams
	// GAT: the heads of the hidden layers (concatenated) and of the output
	// layer (averaged), and the dropout on the attention coefficients. 0
	// heads count as 1.
	Heads, OutHeads int
	AttnDropout     float32
	// Recompute: GAT computes the attention coefficients again in the
	// backward pass instead of keeping every layer's (memory, not results:
	// the bits are the same).
	Recompute bool
}

// Dims returns the input width of every layer followed by the output width.
func (c ModelConfig) Dims() []int {
	d := make([]int, c.Layers+1)
	d[0] = c.InDim
	for l := 1; l < c.Layers; l++ {
		d[l] = c.Hidden
		if c.Model == "gat" {
			d[l] *= max(1, c.Heads)
		}
	}
	d[c.Layers] = c.Classes
	return d
}

// Validate checks the architecture, naming the offending setting.
func (c ModelConfig) Validate() error {
	switch {
	case c.Model != "sage" && c.Model != "gcn" && c.Model != "gat":
		return fmt.Errorf("model: got %q, expected sage, gcn or gat", c.Model)
	case c.Layers < 1:
		return fmt.Errorf("layers: got %d, expected at least 1", c.Layers)
	case c.Layers > 1 && c.Hidden < 1:
		return fmt.Errorf("hidden: got %d, expected at least 1", c.Hidden)
	case c.InDim < 1 || c.Classes < 1:
		return fmt.Errorf("model dims: input %d, classes %d, expected both >= 1", c.InDim, c.Classes)
	case c.Dropout < 0 || c.Dropout >= 1 || math.IsNaN(float64(c.Dropout)):
		return fmt.Errorf("dropout: got %v, expected a probability in [0, 1)", c.Dropout)
	case c.Heads < 0 || c.OutHeads < 0:
		return fmt.Errorf("heads: got %d and %d output heads, expected at least 1", c.Heads, c.OutHeads)
	case c.AttnDropout < 0 || c.AttnDropout >= 1 || math.IsNaN(float64(c.AttnDropout)):
		return fmt.Errorf("attn-dropout: got %v, expected a probability in [0, 1)", c.AttnDropout)
	case c.Model != "gat" && (c.Heads > 1 || c.OutHeads > 1 || c.AttnDropout != 0):
		return fmt.Errorf("heads, out-heads and attn-dropout apply to model gat, not %s", c.Model)
	}
	return nil
}

// Param is one trainable tensor with its gradient and Adam moments. W, M
// and V are the host copies that checkpoints read and write; training works
// on the device's matrices, which on the CPU are the same memory
// (Model.SyncToHost and SyncToDevice move them otherwise).
type Param struct {
	Name       string
	Rows, Cols int
	W, G, M, V []float32
	Decay      bool // weight decay applies (weights yes, biases no)
	w, g, m, v *kernels.Mat
}

// paramNames names layer l's parameters: the self weight (SAGE only, ""
// for GCN), the neighbour weight and the bias.
func paramNames(model string, l int) (self, neigh, bias string) {
	bias = fmt.Sprintf("layer%d.bias", l)
	if model == "sage" {
		return fmt.Sprintf("layer%d.self_weight", l), fmt.Sprintf("layer%d.neigh_weight", l), bias
	}
	return "", fmt.Sprintf("layer%d.weight", l), bias
}

// ParamShape names a parameter and gives its shape.
type ParamShape struct {
	Name       string
	Rows, Cols int
}

// ParamShapes lists the parameters of a model with this config, in the
// order of Model.Params, without building the model.
func (c ModelConfig) ParamShapes() []ParamShape {
	dims := c.Dims()
	var s []ParamShape
	for l := 0; l < c.Layers; l++ {
		if c.Model == "gat" {
			s = append(s, c.gatParamShapes(l)...)
			continue
		}
		self, neigh, bias := paramNames(c.Model, l)
		if self != "" {
			s = append(s, ParamShape{self, dims[l], dims[l+1]})
		}
		s = append(s, ParamShape{neigh, dims[l], dims[l+1]}, ParamShape{bias, 1, dims[l+1]})
	}
	return s
}

func newParam(name string, rows, cols int, decay bool) *Param {
	n := rows * cols
	return &Param{Name: name, Rows: rows, Cols: cols, Decay: decay,
		W: make([]float32, n), G: make([]float32, n), M: make([]float32, n), V: make([]float32, n)}
}

// place gives p its device matrices: the host slices themselves on a host
// device, else copies.
func (p *Param) place(dev kernels.Device) {
	host := []*[]float32{&p.W, &p.G, &p.M, &p.V}
	dst := []**kernels.Mat{&p.w, &p.g, &p.m, &p.v}
	for i, h := range host {
		if dev.Host() {
			*dst[i] = &kernels.Mat{Rows: p.Rows, Cols: p.Cols, Data: *h}
		} else {
			*dst[i] = dev.NewMat(p.Rows, p.Cols)
			dev.Upload(*dst[i], *h)
		}
	}
}

// SyncToHost copies the parameters and Adam moments from the device into
// the Params' host slices (a no-op on the CPU), for a checkpoint.
func (m *Model) SyncToHost() {
	for _, p := range m.Params {
		m.dev.Download(p.W, p.w)
		m.dev.Download(p.M, p.m)
		m.dev.Download(p.V, p.v)
	}
}

// SyncToDevice copies the host slices of the parameters and Adam moments
// to the device (a no-op on the CPU), after a restore.
func (m *Model) SyncToDevice() {
	m.first.forgetPassState() // new weights
	for _, p := range m.Params {
		m.dev.Upload(p.w, p.W)
		m.dev.Upload(p.m, p.M)
		m.dev.Upload(p.v, p.V)
	}
}

// layer is one message-passing layer. SAGE: y = X Ws + A X Wn + b; GCN:
// y = A X W + b. The product with Wn and the aggregation by A commute, so a
// layer aggregates whichever side is narrower (as DGL's GraphConv does):
// aggregate-first computes (A X) Wn and exchanges halo rows of X;
// project-first computes A (X Wn) and exchanges halo rows of X Wn. The
// halo exchange always carries the matrix that A multiplies.
type layer struct {
	self, neigh, bias *Param // self is SAGE only; neigh is GCN's W
	in, out           int
	last, isSAGE      bool
	projectFirst      bool // out < in: aggregate X Wn rather than X
	// inPlace: the previous layer writes its output straight into x.
	inPlace bool
	x       *kernels.Mat // input after dropout; owned+halo rows when aggregating it, else owned
	mask    *kernels.Mat // dropout factors of the owned input rows
	z       *kernels.Mat // aggregate-first: A x, owned rows
	p       *kernels.Mat // project-first: x Wn, owned+halo rows
	y       *kernels.Mat // output (post-ReLU unless last), owned rows
	ws, wn  *kernels.Mat // weights as matrices
	gs, gn  *kernels.Mat // their gradients
}

// Model holds the parameters and the per-layer activations of one rank.
type Model struct {
	Config ModelConfig
	Params []*Param
	layers []*layer
	view   *View
	dev    kernels.Device
	// Gradient scratch for d(layer input) where no dead activation can hold
	// it (see inputGrad): grown on first use, two so that one can hold
	// dOut while the other receives d(input).
	scratch [2]*kernels.Mat
	dlogits *kernels.Mat
	// features is the owned rows of the input on the device (the view's
	// own on the CPU).
	features *kernels.Mat
	// atOwn and atHalo are A^T's owned and halo rows: the backward pass
	// computes the halo rows first, to send them (see overlap.go).
	atOwn, atHalo *kernels.Adj
	// grads holds every parameter's gradient back to back on a host
	// device (placeParams), nil elsewhere.
	grads *kernels.Mat
	// Overlap aggregates while the halo exchanges are in flight: forward on
	// devices with SpMMRows, backward on host devices (see overlap.go).
	Overlap bool
	rows    rowSpMM // dev, when it can aggregate a subset of rows
	split   *split
	gat     *gatModel // GAT's layers (nil for the other models)
	// first is what the first layer reuses across passes (firstlayer.go).
	first firstLayer
}

// NewModel allocates a model for the given rank view, initialised with
// Glorot-uniform weights and zero biases drawn from cfg.Seed (identical on
// every rank).
func NewModel(cfg ModelConfig, view *View, dev kernels.Device) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if view.Input.Cols != cfg.InDim {
		return nil, fmt.Errorf("model input width %d but features have %d columns", cfg.InDim, view.Input.Cols)
	}
	dims := cfg.Dims()
	m := &Model{Config: cfg, view: view, dev: dev, features: view.Features()}
	m.rows, _ = dev.(rowSpMM)
	if !dev.Host() {
		m.features = dev.NewMat(view.NumOwned, view.Input.Cols)
		dev.Upload(m.features, view.Features().Data)
	}
	rows := view.NumOwned + view.NumHalo
	own := view.NumOwned
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	if cfg.Model == "gat" {
		if err := m.newGAT(rng, cfg.Recompute); err != nil {
			return nil, err
		}
		m.placeParams()
		m.dlogits = dev.NewMat(own, cfg.Classes)
		return m, nil
	}
	for l := 0; l < cfg.Layers; l++ {
		in, out := dims[l], dims[l+1]
		ly := &layer{in: in, out: out, last: l == cfg.Layers-1, isSAGE: cfg.Model == "sage", projectFirst: out < in}
		self, neigh, bias := paramNames(cfg.Model, l)
		if ly.isSAGE {
			ly.self = newParam(self, in, out, true)
		}
		ly.neigh = newParam(neigh, in, out, true)
		ly.bias = newParam(bias, 1, out, false)
		for _, p := range []*Param{ly.self, ly.neigh} {
			if p != nil {
				glorot(rng, p)
				m.Params = append(m.Params, p)
			}
		}
		m.Params = append(m.Params, ly.bias)
		xRows := rows
		if ly.projectFirst {
			xRows = own
		}
		switch {
		case l == 0 && cfg.Dropout == 0 && ly.projectFirst:
			ly.x = m.features // read only: nothing writes a project-first input
		case l == 0 && cfg.Dropout == 0 && dev.Host():
			// The view's input is the features with room for the halo
			// rows: the first layer reads it in place.
			ly.x = view.Input
		case l == 0 && cfg.Dropout == 0:
			// The input never changes: copy the features in once.
			ly.x = dev.NewMat(xRows, in)
			dev.Copy(ly.x.View(0, own), m.features)
		default:
			ly.x = dev.NewMat(xRows, in)
		}
		if cfg.Dropout > 0 {
			ly.mask = dev.NewMat(own, in)
		}
		if ly.projectFirst {
			ly.p = dev.NewMat(rows, out)
		} else {
			ly.z = dev.NewMat(own, in)
		}
		m.layers = append(m.layers, ly)
	}
	for l, ly := range m.layers {
		if cfg.Dropout == 0 && !ly.last {
			// Without dropout a layer's output is the next layer's input:
			// write it there directly instead of copying it every epoch.
			ly.y = m.layers[l+1].x.View(0, own)
			m.layers[l+1].inPlace = true
		} else {
			ly.y = dev.NewMat(own, ly.out)
		}
	}
	m.placeParams()
	for _, ly := range m.layers {
		ly.wn, ly.gn = ly.neigh.w, ly.neigh.g
		if ly.isSAGE {
			ly.ws, ly.gs = ly.self.w, ly.self.g
		}
	}
	m.atOwn, m.atHalo = view.Adj.T.RowRange(0, own), view.Adj.T.RowRange(own, rows)
	m.dlogits = dev.NewMat(own, cfg.Classes)
	return m, nil
}

// placeParams gives the parameters their device matrices. On a host
// device the gradients are views of one slab, m.grads, so that one
// all-reduce sums them all: a collective per epoch instead of one per
// parameter, whose latencies add up on small graphs and slow links.
func (m *Model) placeParams() {
	if m.dev.Host() {
		n := 0
		for _, p := range m.Params {
			n += len(p.G)
		}
		slab := make([]float32, n)
		off := 0
		for _, p := range m.Params {
			k := len(p.G)
			p.G = slab[off : off+k : off+k]
			off += k
		}
		m.grads = &kernels.Mat{Rows: n, Cols: 1, Data: slab}
	}
	for _, p := range m.Params {
		p.place(m.dev)
	}
}

// glorot fills p.W uniformly in +-sqrt(6/(fan_in+fan_out)).
func glorot(rng *rand.Rand, p *Param) {
	a := math.Sqrt(6 / float64(p.Rows+p.Cols))
	for i := range p.W {
		p.W[i] = float32((2*rng.Float64() - 1) * a)
	}
}

// dropoutSeed derives the seed of the mask of one layer input in one epoch.
func dropoutSeed(seed uint64, epoch, layer int) uint64 {
	return rng.Mix64(seed ^ rng.Mix64(uint64(epoch)<<20|uint64(layer)))
}

// Pass says what a forward pass is for.
type Pass struct {
	// Train: a training pass, with dropout, which the backward pass follows.
	Train bool
	// Epoch keys the dropout masks.
	Epoch int
	// Exact: the exchanges are raw, so the first layer may read the exact
	// input's kept aggregation (firstlayer.go).
	Exact bool
	// ShareSelf: an evaluation pass and the training pass after it, at the
	// same weights and without dropout, share the first layer's self term.
	ShareSelf bool
}

// Forward runs all layers and returns the logits (owned rows x classes).
// x exchanges the halo rows (nil for a run of one rank).
func (m *Model) Forward(x halo.Exchanger, p Pass) (*kernels.Mat, error) {
	if m.gat != nil {
		return m.gatForward(x, p.Train, p.Epoch)
	}
	for l := range m.layers {
		var err error
		if l == 0 {
			err = m.forwardFirst(x, p)
		} else {
			err = m.forwardLayer(x, l, p)
		}
		if err != nil {
			return nil, err
		}
	}
	return m.layers[len(m.layers)-1].y, nil
}

// forwardLayer is layer l's plain forward pass: its input's owned rows, the
// self term, the halo exchange and aggregation, the dense part, bias and
// ReLU.
func (m *Model) forwardLayer(x halo.Exchanger, l int, p Pass) error {
	ly, d := m.layers[l], m.dev
	xOwn := m.layerInput(l, p)
	var self func()
	if ly.isSAGE {
		self = func() { d.Gemm(false, false, 1, xOwn, ly.ws, 0, ly.y) }
	}
	return m.transformLayer(x, l, xOwn, self)
}

// layerInput writes the owned rows of layer l's input (after dropout in a
// training pass) where they are not there already, and returns them.
func (m *Model) layerInput(l int, p Pass) *kernels.Mat {
	ly, d, v := m.layers[l], m.dev, m.view
	src := m.features
	if l > 0 {
		src = m.layers[l-1].y
	}
	xOwn := ly.x.View(0, v.NumOwned)
	switch {
	case p.Train && m.Config.Dropout > 0:
		d.Dropout(src, xOwn, ly.mask, m.Config.Dropout, dropoutSeed(m.Config.Seed, p.Epoch, l), v.GlobalIDs)
	case !ly.inPlace && (l > 0 || m.Config.Dropout > 0):
		d.Copy(xOwn, src)
	}
	return xOwn
}

// transformLayer fills layer l's halo rows from their owners, aggregates
// and applies the dense part, bias and ReLU. The self term, if set, needs
// no halo row, so it runs first: while the exchange is in flight.
func (m *Model) transformLayer(x halo.Exchanger, l int, xOwn *kernels.Mat, self func()) error {
	ly, d := m.layers[l], m.dev
	if ly.projectFirst {
		d.Gemm(false, false, 1, xOwn, ly.wn, 0, ly.p.View(0, m.view.NumOwned))
		if err := m.aggregate(x, l, ly.p, ly.y, self); err != nil {
			return err
		}
	} else {
		if err := m.aggregate(x, l, ly.x, ly.z, self); err != nil {
			return err
		}
		d.Gemm(false, false, 1, ly.z, ly.wn, b2f(ly.isSAGE), ly.y)
	}
	m.finishLayer(l)
	return nil
}

// finishLayer adds layer l's bias and, but for the last layer, its ReLU.
func (m *Model) finishLayer(l int) {
	ly := m.layers[l]
	m.dev.AddBias(ly.y, ly.bias.w)
	if !ly.last {
		m.dev.ReLU(ly.y, ly.y)
	}
}

// aggregate fills x's halo rows and computes A x, into y when the layer
// projects first (adding to the self term there), else into z (y is the
// layer output). self, if set, writes the self term into the layer output
// first; with overlap it and the interior rows run while the exchange is in
// flight.
func (m *Model) aggregate(ex halo.Exchanger, l int, x, y *kernels.Mat, self func()) error {
	v := m.view
	acc := self != nil && m.layers[l].projectFirst
	if m.Overlap && ex != nil && v.NumHalo > 0 && m.rows != nil {
		if m.split == nil {
			m.split = splitAdj(v.Adj, v.NumOwned)
		}
		if err := m.overlapped(ex, l, x, y, acc, self); err != nil {
			return fmt.Errorf("layer %d forward halo exchange: %w", l, err)
		}
		return nil
	}
	if self != nil {
		self()
	}
	if ex != nil {
		if err := ex.Forward(l, x); err != nil {
			return fmt.Errorf("layer %d forward halo exchange: %w", l, err)
		}
	}
	m.dev.SpMM(v.Adj, x, y, acc)
	return nil
}

// b2f is 1 for true: a Gemm's beta when it adds to its output.
func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// Backward computes all parameter gradients (overwriting G) from the
// gradient of the loss w.r.t. the logits of the last Forward(train=true).
//
// It keeps its gradients in activations the pass no longer needs, which at
// scale saves gigabytes: d(A x) goes into z once z's weight gradient is
// done, d(x Wn) into p, the halo rows of d(input) into the input's halo
// rows, and the owned rows of d(input), where they fit, into the layer's
// output once its ReLU mask has been applied. So Backward clobbers the
// activations; the next Forward writes them all again.
func (m *Model) Backward(x halo.Exchanger, dlogits *kernels.Mat) error {
	if m.gat != nil {
		return m.gatBackward(x, dlogits)
	}
	d, v := m.dev, m.view
	own, rows := v.NumOwned, v.NumOwned+v.NumHalo
	overlap := m.Overlap && x != nil && d.Host()
	dOut, inScratch := dlogits, -1
	for l := len(m.layers) - 1; l >= 0; l-- {
		ly := m.layers[l]
		if !ly.last {
			d.ReLUBackward(ly.y, dOut, dOut)
		}
		d.BiasGrad(dOut, ly.bias.g, false)
		xOwn := ly.x.View(0, own)
		// The self weight's gradient reads no halo row: with overlap it is
		// computed while the gradient's halo rows travel.
		var selfGrad func()
		if ly.isSAGE {
			g := dOut
			selfGrad = func() { d.Gemm(true, false, 1, xOwn, g, 0, ly.gs) }
		}
		if l == 0 && m.first.trains {
			d.Gemm(true, false, 1, m.first.exact, dOut, 0, ly.gn)
			if selfGrad != nil {
				selfGrad()
			}
			break // no exchange: nothing returns to the input's owners
		}
		if ly.projectFirst {
			// d(x Wn) = A^T dOut, into p.
			dPOwn := ly.p.View(0, own)
			if err := m.backAggregate(x, l, overlap, dOut, dPOwn, ly.p.View(own, rows), selfGrad, nil); err != nil {
				return err
			}
			d.Gemm(true, false, 1, xOwn, dPOwn, 0, ly.gn)
			if l == 0 {
				break // no gradient w.r.t. the input features
			}
			var dX *kernels.Mat
			dX, inScratch = m.inputGrad(ly, own, inScratch)
			d.Gemm(false, true, 1, dPOwn, ly.wn, 0, dX)
			if ly.isSAGE {
				d.Gemm(false, true, 1, dOut, ly.ws, 1, dX)
			}
			dOut = dX
		} else {
			d.Gemm(true, false, 1, ly.z, dOut, 0, ly.gn)
			if l == 0 {
				if selfGrad != nil {
					selfGrad()
				}
				break
			}
			// d(A x) = dOut Wn^T, into z.
			dZ := ly.z
			d.Gemm(false, true, 1, dOut, ly.wn, 0, dZ)
			var dX *kernels.Mat
			dX, inScratch = m.inputGrad(ly, own, inScratch)
			var selfTerm func()
			if ly.isSAGE {
				g := dOut
				selfTerm = func() { d.Gemm(false, true, 1, g, ly.ws, 0, dX) }
			}
			// The input's halo rows were read by the forward aggregation
			// only: they take d(input)'s halo rows.
			if err := m.backAggregate(x, l, overlap, dZ, dX, ly.x.View(own, rows), selfGrad, selfTerm); err != nil {
				return err
			}
			dOut = dX
		}
		if ly.mask != nil {
			d.Mul(dOut, ly.mask, dOut)
		}
	}
	return nil
}

// inputGrad returns the matrix for the owned rows of d(ly's input), given
// that dOut is in scratch[inScratch] (-1: elsewhere), and the scratch index
// it used (-1: none). ly's output is dead once its ReLU mask has been
// applied, unless it is the logits (the trainer reads them); where it is
// too small, one of the two scratch buffers takes the gradient.
func (m *Model) inputGrad(ly *layer, own, inScratch int) (*kernels.Mat, int) {
	if !ly.last && ly.y.Len() >= own*ly.in {
		return ly.y.Reshape(own, ly.in), -1
	}
	i := 0
	if inScratch == 0 {
		i = 1
	}
	if m.scratch[i] == nil || m.scratch[i].Len() < own*ly.in {
		m.scratch[i] = m.dev.NewMat(max(own*ly.in, 1), 1)
	}
	return m.scratch[i].Reshape(own, ly.in), i
}

// ExchangeWidths returns, per layer, the width of the rows its halo exchange
// carries: the input width when it aggregates first, the output width when it
// projects first.
func (m *Model) ExchangeWidths() []int {
	if m.gat != nil {
		w := make([]int, len(m.gat.layers))
		for l, ly := range m.gat.layers {
			w[l] = ly.at.SourceCols()
		}
		return w
	}
	w := make([]int, len(m.layers))
	for l, ly := range m.layers {
		w[l] = ly.in
		if ly.projectFirst {
			w[l] = ly.out
		}
	}
	return w
}
