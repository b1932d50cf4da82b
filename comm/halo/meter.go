package halo

import "math"

// Meter is what an exchange measured since its last Reset: the bytes it
// handed to the transport, the time spent in the transport and in the
// codecs, and the error the codecs added to the forward payloads.
type Meter struct {
	// Fwd[l][p] and Bwd[l][p] are the bytes sent to peer p in layer l's
	// forward and backward exchanges.
	Fwd, Bwd [][]int64
	// Seconds is the time inside the transport (raw rows included: gathering
	// them is part of sending them), CodecSeconds the time encoding and
	// decoding.
	Seconds, CodecSeconds float64
	// ErrSq[l] and NormSq[l] sum ||x - decode(encode(x))||^2 and ||x||^2
	// over the rows sent in layer l's forward exchanges.
	ErrSq, NormSq []float64
}

func newMeter(layers, q int) Meter {
	m := Meter{Fwd: make([][]int64, layers), Bwd: make([][]int64, layers),
		ErrSq: make([]float64, layers), NormSq: make([]float64, layers)}
	for l := range layers {
		m.Fwd[l], m.Bwd[l] = make([]int64, q), make([]int64, q)
	}
	return m
}

// Reset zeroes every counter.
func (m *Meter) Reset() {
	for l := range m.Fwd {
		clear(m.Fwd[l])
		clear(m.Bwd[l])
	}
	clear(m.ErrSq)
	clear(m.NormSq)
	m.Seconds, m.CodecSeconds = 0, 0
}

// AddBytes adds the bytes per layer, summed over peers, into fwd and bwd.
func (m *Meter) AddBytes(fwd, bwd []int64) {
	for l := range m.Fwd {
		for p := range m.Fwd[l] {
			fwd[l] += m.Fwd[l][p]
			bwd[l] += m.Bwd[l][p]
		}
	}
}

// AddErrors adds ErrSq and NormSq, per layer, into errSq and normSq.
func (m *Meter) AddErrors(errSq, normSq []float64) {
	for l := range m.ErrSq {
		errSq[l] += m.ErrSq[l]
		normSq[l] += m.NormSq[l]
	}
}

// CompError is sqrt(errSq/normSq), the relative error of compressed
// payloads (0 when nothing was sent).
func CompError(errSq, normSq float64) float64 {
	if normSq == 0 {
		return 0
	}
	return math.Sqrt(errSq / normSq)
}
