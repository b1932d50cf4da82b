package gnn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// randomDataset builds a small random graph with isolated nodes, repeated
// edges and labelled train nodes, so that every code path is exercised.
func randomDataset(t testing.TB, n, f, c int, seed uint64) *data.Dataset {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var src, dst []int32
	for k := 0; k < 4*n; k++ {
		s, d := int32(rng.IntN(n-2)), int32(rng.IntN(n-2)) // the last two nodes stay isolated
		src, dst = append(src, s), append(dst, d)
	}
	g, err := data.BuildGraph(n, src, dst, data.BuildOptions{AddInverse: true})
	if err != nil {
		t.Fatal(err)
	}
	ds := &data.Dataset{Name: "random", Graph: g, NumFeatures: f, NumClasses: c,
		Features: make([]float32, n*f), Labels: make([]int32, n)}
	for i := range ds.Features {
		ds.Features[i] = float32(rng.NormFloat64())
	}
	for i := range ds.Labels {
		ds.Labels[i] = int32(rng.IntN(c))
	}
	perm := rng.Perm(n)
	ids := func(p []int) []int32 {
		out := make([]int32, len(p))
		for i, v := range p {
			out[i] = int32(v)
		}
		return out
	}
	ds.Splits = map[string]*data.Split{"s": {Train: ids(perm[:n/2]), Valid: ids(perm[n/2 : 3*n/4]), Test: ids(perm[3*n/4:])}}
	if err := ds.Validate("random"); err != nil {
		t.Fatal(err)
	}
	return ds
}

// lossAt runs a training forward pass (fixed epoch, so a fixed dropout mask)
// and returns the normalised loss; with grad set it also backpropagates.
func lossAt(t *testing.T, m *Model, grad bool) float64 {
	t.Helper()
	logits, err := m.Forward(nil, Pass{Train: true, Epoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	loc := m.view
	scale := 1 / float64(loc.GlobalTrain)
	sum := m.dev.SoftmaxCrossEntropy(logits, loc.Labels, loc.Train, float32(scale), m.dlogits)
	if grad {
		if err := m.Backward(nil, m.dlogits); err != nil {
			t.Fatal(err)
		}
	}
	return sum * scale
}

// checkGradients compares every parameter's analytic gradient with central
// finite differences, coordinate by coordinate on a sample and along a random
// direction over the whole tensor.
// Hidden widths 5 and 8 around the input width 6 cover both layer orders
// (project-first when narrowing, aggregate-first when widening).
func checkGradients(t *testing.T, model string, layers int, dropout float32) {
	for _, hidden := range []int{5, 8} {
		checkGradientsOf(t, ModelConfig{Model: model, Layers: layers, Hidden: hidden, Dropout: dropout})
	}
}

// checkGradientsOf checks the gradients of the model mc describes on a
// random 40-node graph with 6 features and 4 classes.
func checkGradientsOf(t *testing.T, mc ModelConfig) {
	model, layers, hidden := mc.Model, mc.Layers, mc.Hidden
	ds := randomDataset(t, 40, 6, 4, uint64(layers))
	local, err := SingleProcess(ds, "s", model)
	if err != nil {
		t.Fatal(err)
	}
	dev := kernels.NewCPU(2)
	defer dev.Close()
	mc.InDim, mc.Classes, mc.Seed = 6, 4, 3
	m, err := NewModel(mc, local, dev)
	if err != nil {
		t.Fatal(err)
	}
	// Non-zero biases so that ReLUs see both signs away from their kink.
	rng := rand.New(rand.NewPCG(9, 9))
	for _, p := range m.Params {
		if !p.Decay {
			for i := range p.W {
				p.W[i] = float32(0.1 * rng.NormFloat64())
			}
		}
	}
	lossAt(t, m, true)
	for _, p := range m.Params {
		g := append([]float32(nil), p.G...)
		// Coordinates.
		for _, i := range rng.Perm(len(p.W))[:min(len(p.W), 8)] {
			w := p.W[i]
			fd, ok := finiteDifference(func(s float32) float64 {
				p.W[i] = w + s
				return lossAt(t, m, false)
			}, float64(g[i]))
			p.W[i] = w
			if !ok {
				t.Errorf("%s %d layers hidden %d: d loss / d %s[%d]: analytic %.6g, finite difference %.6g", model, layers, hidden, p.Name, i, g[i], fd)
			}
		}
		// A random unit direction over the whole tensor.
		dir := make([]float32, len(p.W))
		norm := 0.0
		for i := range dir {
			dir[i] = float32(rng.NormFloat64())
			norm += float64(dir[i]) * float64(dir[i])
		}
		want := 0.0
		for i := range dir {
			dir[i] /= float32(math.Sqrt(norm))
			want += float64(dir[i]) * float64(g[i])
		}
		w0 := append([]float32(nil), p.W...)
		fd, ok := finiteDifference(func(s float32) float64 {
			for i := range p.W {
				p.W[i] = w0[i] + s*dir[i]
			}
			return lossAt(t, m, false)
		}, want)
		copy(p.W, w0)
		if !ok {
			t.Errorf("%s %d layers hidden %d: directional derivative along a random direction of %s: analytic %.6g, finite difference %.6g", model, layers, hidden, p.Name, want, fd)
		}
	}
}

// finiteDifference compares the central difference of loss at 0 with want,
// for step sizes from 1e-3 down to 3e-5. A ReLU whose input lies within a
// step of zero bends the difference quotient at the larger steps only, while
// a wrong gradient disagrees at every step; so one agreeing step suffices.
func finiteDifference(loss func(step float32) float64, want float64) (float64, bool) {
	var fd float64
	for _, eps := range []float32{1e-3, 3e-4, 1e-4, 3e-5} {
		fd = (loss(eps) - loss(-eps)) / (2 * float64(eps))
		if math.Abs(fd-want) <= 2e-3+2e-2*math.Abs(fd) {
			return fd, true
		}
	}
	return fd, false
}

func TestGradientsSAGELayer(t *testing.T)          { checkGradients(t, "sage", 1, 0) }
func TestGradientsGCNLayer(t *testing.T)           { checkGradients(t, "gcn", 1, 0) }
func TestGradientsSAGE3Layers(t *testing.T)        { checkGradients(t, "sage", 3, 0) }
func TestGradientsGCN3Layers(t *testing.T)         { checkGradients(t, "gcn", 3, 0) }
func TestGradientsSAGE3LayersDropout(t *testing.T) { checkGradients(t, "sage", 3, 0.3) }
func TestGradientsGCN2LayersDropout(t *testing.T)  { checkGradients(t, "gcn", 2, 0.5) }

// GAT: the output layer alone (heads averaged) and a hidden layer before it
// (heads concatenated, ELU), one head and several, with and without input
// and coefficient dropout.
func TestGradientsGATLayer(t *testing.T) {
	for _, heads := range []int{1, 3} {
		checkGradientsOf(t, ModelConfig{Model: "gat", Layers: 1, OutHeads: heads})
	}
}

func TestGradientsGAT2Layers(t *testing.T) {
	for _, c := range []struct{ heads, outHeads int }{{1, 1}, {3, 2}} {
		checkGradientsOf(t, ModelConfig{Model: "gat", Layers: 2, Hidden: 4, Heads: c.heads, OutHeads: c.outHeads})
	}
}

func TestGradientsGAT2LayersDropout(t *testing.T) {
	checkGradientsOf(t, ModelConfig{Model: "gat", Layers: 2, Hidden: 4, Heads: 2, OutHeads: 1, Dropout: 0.3, AttnDropout: 0.4})
}
