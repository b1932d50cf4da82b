package codec

import (
	"fmt"
	"math"
)

// Skip is residual coding's rule for leaving a row out of an exchange. A
// row whose residual's largest magnitude is at most Tau times the largest
// of the row itself may stay out, its residual carried into the next
// exchange; a residual that is not finite always goes. With Every > 0 row
// k goes whenever (k + Phase) % Every == 0 whatever its residual: a caller
// that steps Phase every exchange sends every row at least once every
// Every exchanges, so that no row's error outlives Every exchanges (a row
// that stops changing converges to its exact value). Tau 0 sends every
// row. Floor (>= 0) also leaves out a row whose residual's largest
// magnitude is at most Floor, a bound set by the caller from the whole
// message (the returned gradients' rows, most of them tiny against the
// largest).
type Skip struct {
	Tau          float32
	Floor        float32
	Every, Phase int
}

// Skipping reports whether the rule may leave rows out (the payloads then
// lead with a bitmap of the rows sent).
func (r Skip) Skipping() bool { return r.Tau > 0 }

// Keeps reports whether row k goes, given its residual's and its own
// largest magnitudes.
func (r Skip) Keeps(k int, residualMax, rowMax float32) bool {
	if r.Every > 0 && (k+r.Phase)%r.Every == 0 {
		return true
	}
	d := float64(residualMax)
	return math.IsNaN(d) || math.IsInf(d, 0) || residualMax > r.Tau*rowMax && residualMax > r.Floor
}

// DeltaEncode is one pass of residual coding's sender for the quant(b)
// codecs below 16 bits and tern: for every row k it takes d = m row
// idx[k] minus ref row k; with a bitmap it sends the row only where skip
// keeps it (bit k set; the bitmap is cleared first); it writes the kept
// rows' payload into dst, in order, their draw rows numbered 0, 1, ... as
// in Encode (tern's key first, where a row is kept: a payload of no rows
// is empty); it adds their decoded values into ref; and it returns the
// kept rows and SqDiff of m's rows against the new ref (what the receiver
// misses). Those are the bytes and values of Encode, Decode and SqDiff
// run on the gathered differences. buf is scratch of at least
// DeltaScratch(cols) values. ok is false, and nothing is written, where
// no fused kernel runs (another codec, no AVX2, or cols = 0): the caller
// composes those steps itself.
func (s Spec) DeltaEncode(dst []byte, m []float32, idx []int32, cols int, ref []float32, skip Skip, bitmap []byte, seed uint64, buf []float32) (kept int, errSq, normSq float64, ok bool) {
	if !s.DeltaFused() || cols == 0 {
		return 0, 0, 0, false
	}
	n := len(idx)
	if n == 0 {
		return 0, 0, 0, true
	}
	switch {
	case len(ref) != n*cols || len(dst) < s.WireSize(n, cols) || len(buf) < DeltaScratch(cols):
		panic(fmt.Sprintf("codec: DeltaEncode: %d reference values, %d payload bytes, %d scratch for %d rows of %d", len(ref), len(dst), len(buf), n, cols))
	case bitmap != nil && len(bitmap) < (n+7)/8:
		panic(fmt.Sprintf("codec: DeltaEncode: a bitmap of %d bytes for %d rows", len(bitmap), n))
	case skip.Every < 0 || skip.Phase < 0 || skip.Every > 0 && skip.Phase >= skip.Every:
		panic(fmt.Sprintf("codec: DeltaEncode: skip phase %d of every %d", skip.Phase, skip.Every))
	case !(skip.Floor >= 0):
		panic(fmt.Sprintf("codec: DeltaEncode: skip floor %v", skip.Floor))
	}
	for _, r := range idx {
		if r < 0 || (int(r)+1)*cols > len(m) {
			panic(fmt.Sprintf("codec: DeltaEncode: row %d of %d", r, len(m)/cols))
		}
	}
	clear(bitmap)
	if s.kind == KindTern {
		kept, errSq, normSq = ternDeltaEncodeFast(dst, m, idx, cols, ref, skip, bitmap, seed, buf)
	} else {
		kept, errSq, normSq = deltaEncodeFast(dst, m, idx, cols, int(s.bits), ref, skip, bitmap, seed, buf)
	}
	return kept, errSq, normSq, true
}

// DeltaScratch is the scratch values DeltaEncode needs for rows of cols:
// the difference row, then its codes, a byte each (tern: the difference
// row, overwritten with its decoded values).
func DeltaScratch(cols int) int { return cols + (cols+3)/4 }

// DecodeAdd is a decode fused with a scatter-add, for the codecs
// DeltaEncode fuses: ref row rows[k] += the decoded row k of payload src,
// the values Decode and then an add give. With out (nil for none, else as
// long as ref) it also writes each updated row into the same row of out,
// while the row is in cache: residual coding's receiver keeps its
// reference and fills the halo rows in one pass. It reports whether it
// ran, as DeltaEncode's ok.
func (s Spec) DecodeAdd(ref []float32, rows []int32, src []byte, cols int, out []float32) bool {
	if !s.DeltaFused() || cols == 0 {
		return false
	}
	if len(rows) == 0 {
		return true
	}
	switch {
	case len(src) < s.WireSize(len(rows), cols):
		panic(fmt.Sprintf("codec: DecodeAdd: %d payload bytes for %d rows of %d", len(src), len(rows), cols))
	case out != nil && len(out) != len(ref):
		panic(fmt.Sprintf("codec: DecodeAdd: %d output values for %d reference values", len(out), len(ref)))
	}
	for _, r := range rows {
		if r < 0 || (int(r)+1)*cols > len(ref) {
			panic(fmt.Sprintf("codec: DecodeAdd: row %d of %d", r, len(ref)/cols))
		}
	}
	if s.kind == KindTern {
		ternDecodeAddFast(ref, rows, src, cols, out)
	} else {
		decodeAddFast(ref, rows, src, cols, int(s.bits), out)
	}
	return true
}

// DeltaFused reports whether DeltaEncode and DecodeAdd run fused for s:
// quant below 16 bits and tern, on the AVX2 path. Grouped codecs are not:
// their rows share headers.
func (s Spec) DeltaFused() bool {
	return fast && s.group <= 1 && (s.kind == KindQuant && s.bits < 16 || s.kind == KindTern)
}
