//go:build !amd64.v3

package hosttwin

import (
	"math"
	"math/rand/v2"
	"testing"
)

// goexpm1 against math.Expm1 bit for bit in double, positive arguments
// and branches ELU never takes included. Only where Go does not fuse
// Expm1's products (a GOAMD64=v3 build does, moving some last bits; ELU's
// float32 results stay the same, which TestELU checks in every build).
func TestExpm1(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	var x []float64
	for range 1 << 20 {
		x = append(x, math.Float64frombits(r.Uint64()))
		x = append(x, (r.Float64()*2-1)*80) // every branch of the reduction
		x = append(x, (r.Float64()*2-1)*1.1)
	}
	for _, v := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 0x1p-54, -0x1p-54,
		0x1p-60, 709.78, 709.79, -38.8, -38.9, 1e-300, 5e-324} {
		x = append(x, v)
	}
	y := make([]float64, len(x))
	Expm1(x, y)
	for i, v := range x {
		want := math.Expm1(v)
		if math.Float64bits(y[i]) != math.Float64bits(want) && !(y[i] != y[i] && want != want) {
			t.Fatalf("Expm1(%v) = %v (%#x), Go %v (%#x)", v, y[i], math.Float64bits(y[i]), want, math.Float64bits(want))
		}
	}
}
