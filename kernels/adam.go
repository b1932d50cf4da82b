package kernels

import (
	"fmt"
	"math"
)

type adamTask struct {
	p, g, m, v            []float32
	beta1, beta2, eps, wd float32
	stepSize, bc2Sqrt     float32
	nc                    int
}

// Adam performs one step of torch.optim.Adam (non-amsgrad):
//
//	g' = g + wd*p
//	m  = b1*m + (1-b1)*g'
//	v  = b2*v + (1-b2)*g'^2
//	p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// The bias corrections are computed once per call in float64.
func (p *CPU) Adam(pm, gm, mm, vm *Mat, step int, lr, beta1, beta2, eps, weightDecay float32) {
	param, g, m, v := pm.Data[:pm.Len()], gm.Data[:gm.Len()], mm.Data[:mm.Len()], vm.Data[:vm.Len()]
	n := len(param)
	if len(g) != n || len(m) != n || len(v) != n {
		panic(fmt.Sprintf("kernels: Adam: lengths %d, %d, %d, %d", n, len(g), len(m), len(v)))
	}
	if step < 1 {
		panic(fmt.Sprintf("kernels: Adam: step %d < 1", step))
	}
	t := &p.adam
	t.p, t.g, t.m, t.v = param, g, m, v
	t.beta1, t.beta2, t.eps, t.wd = beta1, beta2, eps, weightDecay
	t.stepSize, t.bc2Sqrt = AdamCorrections(step, lr, beta1, beta2)
	t.nc = p.chunks(4 * n)
	p.run(t, t.nc)
	t.p, t.g, t.m, t.v = nil, nil, nil, nil
}

func (t *adamTask) do(c int) {
	lo, hi := span(len(t.p), t.nc, c)
	p, g, m, v := t.p[lo:hi], t.g[lo:hi], t.m[lo:hi], t.v[lo:hi]
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	b1, b2, wd := t.beta1, t.beta2, t.wd
	for i := range p {
		// The float32 conversions round every product before its sum, so
		// that no Go target fuses them into FMAs: the GPU kernel (built
		// with -fmad=false) computes the same bits.
		gi := g[i]
		if wd > 0 {
			gi += float32(wd * p[i])
		}
		mi := float32(b1*m[i]) + float32((1-b1)*gi)
		vi := float32(b2*v[i]) + float32(float32((1-b2)*gi)*gi)
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/t.bc2Sqrt + t.eps
		p[i] -= t.stepSize * mi / denom
	}
}

// AdamCorrections returns the step size lr/(1-b1^t) and sqrt(1-b2^t) of
// step t, computed in float64 once per call (every device uses these).
func AdamCorrections(step int, lr, beta1, beta2 float32) (stepSize, bc2Sqrt float32) {
	bc1 := 1 - math.Pow(float64(beta1), float64(step))
	bc2 := 1 - math.Pow(float64(beta2), float64(step))
	return float32(float64(lr) / bc1), float32(math.Sqrt(bc2))
}
