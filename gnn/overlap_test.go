package gnn

import (
	"math"
	"slices"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// TestOverlapBitIdentical: aggregating the interior rows while the forward
// halo exchange is in flight, and the owned gradient rows while the backward
// one is, gives exactly the run without overlap, with full communication and
// with quantized halo rows, for GraphSAGE (aggregate-first layers) and GCN
// (project-first where narrower), with dropout (separate layer inputs) and
// without (outputs written into the next layer's input).
func TestOverlapBitIdentical(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	for _, dropout := range []float32{0, 0.2} {
		mc.Dropout = dropout
		for _, model := range []string{"sage", "gcn"} {
			mc.Model = model
			for _, comp := range []func() *Compression{nil, func() *Compression {
				return &Compression{Fwd: "quant", Bwd: "quant", Schedule: Fixed{R: 8}, Seed: 3}
			}} {
				plain := runRanksWith(t, ds, split, parts, 4, mc, 6, comp, false)
				over := runRanksWith(t, ds, split, parts, 4, mc, 6, comp, true)
				for e := range plain {
					if math.Float64bits(over[e].Loss) != math.Float64bits(plain[e].Loss) || over[e].TestAcc != plain[e].TestAcc {
						t.Fatalf("%s dropout %g compressed=%v epoch %d: loss %v with overlap, %v without",
							model, dropout, comp != nil, e, over[e].Loss, plain[e].Loss)
					}
				}
			}
		}
	}
}

// TestBackwardScratch: Backward keeps its gradients in dead activations. A
// 3-layer GraphSAGE that widens then narrows (6 -> 8 -> 8 -> 4) needs one
// scratch buffer of owned rows x hidden, for the last layer's d(input),
// which cannot go into the logits.
func TestBackwardScratch(t *testing.T) {
	ds := randomDataset(t, 40, 6, 4, 3)
	loc, err := SingleProcess(ds, "s", "sage")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(ModelConfig{Model: "sage", Layers: 3, Hidden: 8, InDim: 6, Classes: 4, Seed: 1}, loc, kernels.NewCPU(1))
	if err != nil {
		t.Fatal(err)
	}
	lossAt(t, m, true)
	if m.scratch[0] == nil || m.scratch[0].Len() != loc.NumOwned*8 || m.scratch[1] != nil {
		t.Errorf("scratch %v, expected one buffer of %d x 8 and no second", m.scratch, loc.NumOwned)
	}
}

// TestFirstInputAliasesFeatures: features with room for the halo rows after
// them (as data.ReadShard reads them) are the first layer's input, not a
// copy; without room they are copied.
func TestFirstInputAliasesFeatures(t *testing.T) {
	ds := randomDataset(t, 40, 6, 4, 3)
	parts, err := data.Partition(ds, "s", 2, data.MethodRandom, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, room := range []bool{false, true} {
		sh, err := data.BuildShard(ds, "s", parts, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(sh.Halo) == 0 {
			t.Fatal("part 0 has no halo rows")
		}
		if room {
			sh.Features = append(make([]float32, 0, sh.NumCols()*sh.NumFeatures), sh.Features...)
		}
		loc, err := FromShard(sh, "sage")
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewModel(ModelConfig{Model: "sage", Layers: 2, Hidden: 8, InDim: 6, Classes: 4, Seed: 1}, loc, kernels.NewCPU(1))
		if err != nil {
			t.Fatal(err)
		}
		x := m.layers[0].x.Data
		if shared := &x[0] == &sh.Features[0]; shared != room {
			t.Errorf("room %v: first input shares the features' memory: %v", room, shared)
		}
		if !slices.Equal(x[:len(sh.Features)], sh.Features) {
			t.Errorf("room %v: first input's owned rows differ from the features", room)
		}
	}
}
