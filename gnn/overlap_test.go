package gnn

import (
	"math"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
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
			for _, comp := range []func() compress.Plan{nil, func() compress.Plan {
				return fixedRate("quant", 8)
			}} {
				plain := runRanksWith(t, ds, split, parts, 4, mc, 6, comp, rankOptions{order: OrderNone})
				over := runRanksWith(t, ds, split, parts, 4, mc, 6, comp, rankOptions{overlap: true, order: OrderNone})
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

// TestFirstInputAliasesFeatures: the shard's features, which hold a row for
// every halo node after the owned ones, are the first layer's input itself
// (no copy), unless dropout writes that input.
func TestFirstInputAliasesFeatures(t *testing.T) {
	ds := randomDataset(t, 40, 6, 4, 3)
	parts, err := partition.Partition(ds, "s", 2, partition.MethodRandom, 1)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := partition.BuildShard(ds, "s", parts, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.Halo) == 0 {
		t.Fatal("part 0 has no halo rows")
	}
	view, err := FromShard(sh, "sage")
	if err != nil {
		t.Fatal(err)
	}
	for _, dropout := range []float32{0, 0.5} {
		m, err := NewModel(ModelConfig{Model: "sage", Layers: 2, Hidden: 8, InDim: 6, Classes: 4, Dropout: dropout, Seed: 1}, view, kernels.NewCPU(1))
		if err != nil {
			t.Fatal(err)
		}
		x := m.layers[0].x
		if shared := &x.Data[0] == &sh.Features[0]; shared != (dropout == 0) {
			t.Errorf("dropout %v: first input shares the features' memory: %v", dropout, shared)
		}
		if x.Rows != len(sh.Owned)+len(sh.Halo) {
			t.Errorf("dropout %v: first input has %d rows, want %d owned + %d halo", dropout, x.Rows, len(sh.Owned), len(sh.Halo))
		}
	}
}
