package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm/halo"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// What the first layer reuses across passes.
//
// The first layer's input is the features, which never change without
// dropout, so what it computes from the input alone can be kept instead of
// computed (and exchanged) again:
//
//   - On one rank the layer's aggregation A x is computed once (ownAggregate):
//     there are no halo rows to refresh.
//   - On several ranks the input's halo rows cross once, raw, and the
//     aggregation over that exact input is kept (exact). Every pass whose
//     exchanges are raw reads it; with --cache-input (CacheTrainingInput) the
//     training passes read it too, and the layer exchanges nothing more in
//     either direction.
//   - An evaluation pass and the training pass after it run at the same
//     weights: without dropout they share GraphSAGE's self term X Ws (self),
//     and where both read the exact aggregation, the layer's whole output
//     (outputKept).
//
// Invariant: every kept value is, bit for bit, what the plain pass would
// compute at that point. Model.Forward and Backward enter here at the first
// layer only (forwardFirst, the backward's cached branch); the other layers
// never see it.
type firstLayer struct {
	// ownAggregate: the layer's z holds A x for good (one rank, no dropout).
	ownAggregate bool
	// exact is A x over the exact input, halo rows included; nil until its
	// one exchange (exchangeExactInput).
	exact *kernels.Mat
	// trains: the training passes read exact too, and the layer exchanges
	// nothing (CacheTrainingInput).
	trains bool
	// outputKept: the layer's output holds what the next training pass
	// would compute, written by an evaluation pass over exact.
	outputKept bool
	// self is X Ws over the owned rows, computed by an evaluation pass for
	// the training pass after it (Pass.ShareSelf); selfValid: it holds the
	// current weights' term.
	self      *kernels.Mat
	selfValid bool
}

// exactInputApplies reports whether the exact input can be kept: not for
// GAT, whose first layer attends over projected rows, and where the first
// layer projects first only on the host (the one-time exchange needs a
// matrix as wide as the features, which a GPU would keep).
func (m *Model) exactInputApplies() bool {
	return m.gat == nil && (!m.layers[0].projectFirst || m.dev.Host())
}

// exchangeExactInput exchanges the first layer's input features raw and
// keeps their aggregation, once; x must be set to raw codecs for layer 0.
// A first layer that projects first would otherwise send rows of its
// output width per pass (sends passes over the run): the features, wider,
// go only where they would send less. It returns whether it exchanged
// anything. With training set, the aggregation goes into the layer's z,
// which the training passes then read.
func (m *Model) exchangeExactInput(x halo.Exchanger, sends int, training bool) (bool, error) {
	if m.first.exact != nil || x == nil || !m.exactInputApplies() {
		return false, nil
	}
	ly := m.layers[0]
	if ly.projectFirst && ly.in >= ly.out*sends {
		return false, nil
	}
	d, v := m.dev, m.view
	own := v.NumOwned
	in := ly.x
	if ly.projectFirst {
		in = d.NewMat(own+v.NumHalo, ly.in)
	}
	if ly.projectFirst || m.Config.Dropout > 0 {
		// Else the owned rows are the features already (NewModel).
		d.Copy(in.View(0, own), m.features)
	}
	if err := x.Forward(0, in); err != nil {
		return false, fmt.Errorf("layer 0 forward halo exchange of the input features: %w", err)
	}
	z := ly.z
	if z == nil || !training {
		z = d.NewMat(own, ly.in)
	}
	d.SpMM(v.Adj, in, z, false)
	m.first.exact = z
	return true, nil
}

// CacheTrainingInput has the training passes, like the exact passes, read
// the aggregation of the exact input, exchanged once (exchangeExactInput)
// where that applies, so that a distributed run need not send the input,
// raw or compressed, every epoch, and where the layer projects first its
// gradient rows need not return either. sends is the layer's exchanges over
// the run if it were not cached; x must be set to raw codecs for layer 0.
// It returns whether it exchanged anything.
func (m *Model) CacheTrainingInput(x halo.Exchanger, sends int) (bool, error) {
	if m.first.trains || m.Config.Dropout > 0 {
		return false, nil
	}
	did, err := m.exchangeExactInput(x, sends, true)
	if err != nil || m.first.exact == nil {
		return did, err
	}
	m.first.trains = true
	if ly := m.layers[0]; ly.projectFirst {
		ly.p = nil // the projection's rows, halo included, are not needed
	}
	return did, nil
}

// forwardFirst is the first layer's forward pass: the plain one
// (forwardLayer), with what it may take from the kept values instead.
func (m *Model) forwardFirst(x halo.Exchanger, p Pass) error {
	f, ly, d := &m.first, m.layers[0], m.dev
	if p.Train && f.outputKept {
		f.outputKept = false
		return nil // the evaluation pass before left the output
	}
	xOwn := m.layerInput(0, p)
	var self func()
	switch {
	case ly.isSAGE && p.ShareSelf && (f.selfValid || !p.Train):
		self = m.sharedSelf(xOwn, ly, !f.selfValid)
		f.selfValid = !p.Train // a training pass ends in a step that changes the weights
	case ly.isSAGE:
		self = func() { d.Gemm(false, false, 1, xOwn, ly.ws, 0, ly.y) }
	}
	switch {
	case f.exact != nil && (f.trains || !p.Train && p.Exact):
		if self != nil {
			self()
		}
		d.Gemm(false, false, 1, f.exact, ly.wn, b2f(ly.isSAGE), ly.y)
		f.outputKept = !p.Train && f.trains
		m.finishLayer(0)
		return nil
	case f.ownAggregate:
		if self != nil {
			self()
		}
		d.Gemm(false, false, 1, ly.z, ly.wn, b2f(ly.isSAGE), ly.y)
		m.finishLayer(0)
		return nil
	}
	err := m.transformLayer(x, 0, xOwn, self)
	// One rank without dropout: what was just aggregated stays the layer's.
	f.ownAggregate = !ly.projectFirst && m.Config.Dropout == 0 && x == nil
	return err
}

// sharedSelf is the first layer's self term as an evaluation pass and the
// training pass after it share it: it computes X Ws into the kept term
// where compute is set, then copies it into the layer's output.
func (m *Model) sharedSelf(xOwn *kernels.Mat, ly *layer, compute bool) func() {
	d := m.dev
	if m.first.self == nil {
		m.first.self = d.NewMat(xOwn.Rows, ly.out)
	}
	return func() {
		if compute {
			d.Gemm(false, false, 1, xOwn, ly.ws, 0, m.first.self)
		}
		d.Copy(ly.y, m.first.self)
	}
}

// forgetPassState drops what an evaluation pass kept for the training pass
// after it, where the next pass is not that one (new weights, or another
// kind of pass).
func (f *firstLayer) forgetPassState() { f.selfValid, f.outputKept = false, false }
