package gnn

import (
	"fmt"

	"github.com/gnn-spmd/gnn-spmd/comm"
)

// Compression is a run's halo compression policy: a codec kind per
// direction and the rate schedule (VARCO). The last layer always sends raw
// rows, as in the VARCO authors' code.
type Compression struct {
	Fwd, Bwd string // codec kinds: none, trunc or quant
	Schedule Schedule
	// EvalCompressed evaluates under the current rate, as the VARCO
	// authors did; by default evaluation passes exchange raw rows.
	EvalCompressed bool
	Seed           uint64
}

// Compressible is a Halo whose exchanges can be encoded (comm.Exchange is
// one).
type Compressible interface {
	Metered
	SetCodecs(layer int, fwd, bwd comm.Codec)
	SetEpoch(seed uint64, epoch int)
	// CompErrors adds, per layer, the squared error of the sent forward
	// payloads and their squared norm into errSq and normSq.
	CompErrors(errSq, normSq []float64)
	// CodecSeconds is the time spent encoding and decoding since Reset.
	CodecSeconds() float64
}

// Validate checks the kinds and the schedule.
func (c *Compression) Validate() error {
	for _, k := range []string{c.Fwd, c.Bwd} {
		if err := comm.ParseCodec(k); err != nil {
			return fmt.Errorf("codec: %w", err)
		}
	}
	return ValidateSchedule(c.Schedule)
}

// codecs returns the forward and backward codec of every layer at its rate
// (nil = raw), and the per-layer figure the metrics report: the bits per
// value for quant, the columns kept for trunc, 32 bits when raw. It sets
// the last layer's rate to 1: that layer always sends raw rows.
func (c *Compression) codecs(rates []float64, widths []int) (fwd, bwd []comm.Codec, bits []int, err error) {
	n := len(widths)
	fwd, bwd, bits = make([]comm.Codec, n), make([]comm.Codec, n), make([]int, n)
	rates[n-1] = 1
	for l, r := range rates {
		bits[l] = 32
		if r == 1 {
			continue
		}
		if fwd[l], err = codecFor(c.Fwd, r); err != nil {
			return nil, nil, nil, err
		}
		if bwd[l], err = codecFor(c.Bwd, r); err != nil {
			return nil, nil, nil, err
		}
		switch c.Fwd {
		case "quant":
			bits[l] = comm.QuantBitsForRate(r)
		case "trunc":
			bits[l] = max(1, min(widths[l], int(float64(widths[l])/r))) // columns kept
		}
	}
	return fwd, bwd, bits, nil
}

func codecFor(kind string, r float64) (comm.Codec, error) {
	if kind == "none" {
		return nil, nil
	}
	return comm.CodecForRate(kind, r)
}

// schedule is c's schedule, nil when c is.
func (c *Compression) schedule() Schedule {
	if c == nil {
		return nil
	}
	return c.Schedule
}
