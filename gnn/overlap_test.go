package gnn

import (
	"math"
	"testing"
)

// TestOverlapBitIdentical: aggregating the interior rows while the halo
// exchange is in flight gives exactly the run without overlap, with full
// communication and with quantized halo rows, for GraphSAGE with dropout
// (aggregate-first layers) and GCN (project-first where narrower).
func TestOverlapBitIdentical(t *testing.T) {
	ds, split, parts, mc := compressedSetup(t)
	mc.Dropout = 0.2
	for _, model := range []string{"sage", "gcn"} {
		mc.Model = model
		for _, comp := range []func() *Compression{nil, func() *Compression {
			return &Compression{Fwd: "quant", Bwd: "quant", Schedule: Fixed{R: 8}, Seed: 3}
		}} {
			plain := runRanksWith(t, ds, split, parts, 4, mc, 8, comp, false)
			over := runRanksWith(t, ds, split, parts, 4, mc, 8, comp, true)
			for e := range plain {
				if math.Float64bits(over[e].Loss) != math.Float64bits(plain[e].Loss) || over[e].TestAcc != plain[e].TestAcc {
					t.Fatalf("%s compressed=%v epoch %d: loss %v with overlap, %v without", model, comp != nil, e, over[e].Loss, plain[e].Loss)
				}
			}
		}
	}
}
