package kernels

import (
	"math"
	"testing"
)

// The CPU kernels are the GPU kernels' reference, bit for bit, and the GPU
// kernels are built with -fmad=false: every product is rounded before it is
// added. Go may fuse a*b + c into one FMA on targets that have it (arm64,
// GOAMD64=v3) unless a conversion rounds the product. These tests compute
// the separately rounded result in float64 (the product of two float32 is
// exact there, and rounding a float64 sum of two float32 to float32 is
// correctly rounded), so a fused kernel fails them; CI runs them under
// GOAMD64=v3 too.

// mul32 and add32 are float32 multiplication and addition, each rounded
// once.
func mul32(a, b float32) float32 { return float32(float64(a) * float64(b)) }
func add32(a, b float32) float32 { return float32(float64(a) + float64(b)) }

func TestAxpySeparatelyRounded(t *testing.T) {
	rng := newRNG(21)
	x, y := randMat(rng, 1, 1001).Data, randMat(rng, 1, 1001).Data
	a := float32(0.7310585)
	want := make([]float32, len(y))
	for i := range y {
		want[i] = add32(y[i], mul32(a, x[i]))
	}
	axpy(a, x, y)
	bitsEqual(t, "axpy", y, want)
}

func TestAdamSeparatelyRounded(t *testing.T) {
	rng := newRNG(22)
	const n = 5000
	p, g, m := randMat(rng, 1, n), randMat(rng, 1, n), randMat(rng, 1, n)
	v := randMat(rng, 1, n)
	for i := range v.Data {
		v.Data[i] = float32(math.Abs(float64(v.Data[i])))
	}
	var lr, b1, b2, eps, wd float32 = 0.01, 0.9, 0.999, 1e-8, 0.05
	step := 3
	stepSize, bc2 := AdamCorrections(step, lr, b1, b2)
	wp, wm, wv := copyMat(p).Data, copyMat(m).Data, copyMat(v).Data
	for i := range wp {
		gi := add32(g.Data[i], mul32(wd, wp[i]))
		mi := add32(mul32(b1, wm[i]), mul32(1-b1, gi))
		vi := add32(mul32(b2, wv[i]), mul32(mul32(1-b2, gi), gi))
		wm[i], wv[i] = mi, vi
		denom := add32(float32(math.Sqrt(float64(vi)))/bc2, eps)
		wp[i] = float32(float64(wp[i]) - float64(mul32(stepSize, mi)/denom))
	}
	cpu := NewCPU(2)
	defer cpu.Close()
	cpu.Adam(p, g, m, v, step, lr, b1, b2, eps, wd)
	bitsEqual(t, "Adam m", m.Data, wm)
	bitsEqual(t, "Adam v", v.Data, wv)
	bitsEqual(t, "Adam p", p.Data, wp)
}
