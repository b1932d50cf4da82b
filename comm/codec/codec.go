// Package codec holds the halo-row codecs of VARCO compression: their wire
// formats (documented here and in docs/FORMATS.md), the CPU reference
// encoders and decoders, and the seed of every message. A codec turns rows x cols float32
// values (row-major) into a byte payload and back. All formats are little
// endian and depend only on the inputs and the seed, never on the machine or
// the thread count, so a GPU implementation can reproduce them bit for bit.
//
// Wire formats (k, b, n, stride as defined per codec):
//
//	none            rows*cols float32, 4*rows*cols bytes.
//	trunc(r)        per row the first k = max(1, floor(cols/r)) values as
//	                float32 (k = 0 when cols = 0, k <= cols always);
//	                4*rows*k bytes. Decode zero-fills columns k..cols-1.
//	quant(b), b<=8  per row: scale bf16 (the high half of a float32 whose
//	                low half is 0), the grid origin's multiple k int8 (3
//	                bytes; origin = k*n*scale/32), then the cols b-bit codes
//	                packed LSB first: code j occupies bits j*b .. j*b+b-1 of
//	                the row's bit stream, bit i of the stream being bit i%8
//	                of byte i/8; unused high bits of the last byte are 0
//	                (ignored on decode). stride = 3 + ceil(cols*b/8) bytes,
//	                rows*stride bytes in all.
//	quant(b, g)     b <= 8, g >= 2 rows per header: rows are coded in
//	                groups of g consecutive ones (in the call's order),
//	                each group as one quant(b) row of g*cols values (its
//	                rows' values in order), so that narrow rows share a
//	                header. A last group of the remaining rows%g rows is a
//	                payload of its own, one row of (rows%g)*cols values
//	                drawn with the seed's complement (^seed): WireSize is
//	                floor(rows/g) strides of g*cols values plus, when
//	                rows%g > 0, one of (rows%g)*cols.
//	quant(16)       bf16 (the high half of the float32 bits) per value,
//	                stochastically rounded; 2*rows*cols bytes.
//	quant(32)       raw float32, identical to none.
//
// Random draws (since wire version 4): one 32-bit hash (rng.Hash32) serves 4
// columns, 8 bits each. With h = Mix64(seed), k0 = uint32(h) and
// k1 = uint32(h>>32), row i (0-based, within the call) and column j take
//
//	key(i) = Hash32(uint32(i) ^ k0)
//	w(i,m) = Hash32(key(i) ^ (uint32(m)*0x9E3779B9 + k1))     m = j/4
//	r(i,j) = w(i, j/4) >> (8*(j%4)) & 0xff
//
// A row's words are distinct (both hashes are bijections), and a vector
// unit makes 32 columns' draws with one hash of 8 lanes; implementations
// group 4 words (16 columns) into a block, one per GPU thread at a time.
// quant rounds up with probability (fraction in 1/256 steps)/256, adding
// r to the fraction; bf16 adds 256*r + 128 (the draw's midpoint) to the
// discarded low half. (Version 1 drew 24 or 16 bits per value from Mix64,
// one hash per 2 or 4 columns; versions 2 and 3 drew from Philox4x32-10,
// one block per 16 columns, which vectorises but took 28% of a quant
// encoder's time, and compared r with the fraction.)
package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels/rng"
)

// WireVersion is the version of the wire formats above. Ranks of one job
// refuse to train unless their builds share it; change it with any format.
const WireVersion = 5

// Spec is one codec: its kind and, for quant, the bits per value, for
// trunc the rate that fixes the columns kept. It is all a device needs to
// produce the wire format, so the GPU implements the same formats from the
// same Spec (comm/halo dispatches on Kind). The zero Spec is None. A Spec is
// a comparable value, safe for concurrent use.
type Spec struct {
	kind  Kind
	bits  uint8   // quant: 1..8 or 16; none: 32
	group uint16  // quant below 16 bits and tern: rows per header, 0 and 1 meaning one
	rate  float64 // trunc: the rate r >= 1
}

// Kind is a codec family, as named on the command line.
type Kind uint8

const (
	// KindNone sends raw float32 rows.
	KindNone Kind = iota
	// KindTrunc sends the leading columns (the VARCO authors' compressor).
	KindTrunc
	// KindQuant sends stochastically rounded b-bit codes.
	KindQuant
	// KindTern sends ternary codes of residuals (tern.go): not a codec of
	// its own on the command line, but quant's rung at TernRate where the
	// exchange codes residuals.
	KindTern
)

var kindNames = [...]string{"none", "trunc", "quant", "tern"}

func (k Kind) String() string { return kindNames[k] }

// ParseKind reads a codec kind given on the command line: none, trunc or
// quant.
func ParseKind(name string) (Kind, error) {
	for k, n := range kindNames[:KindTern] {
		if name == n {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown codec %q (want one of none, trunc, quant)", name)
}

// MarshalText and UnmarshalText store a kind by its name (a checkpoint's
// attribute).
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

func (k *Kind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKind(string(b))
	return err
}

// Kind is s's family; quant(32) is KindNone (its bytes are raw float32).
func (s Spec) Kind() Kind { return s.kind }

// Raw reports whether s sends raw float32 rows (none, quant(32)), which an
// exchange moves in place without encoding.
func (s Spec) Raw() bool { return s.kind == KindNone }

// Bits is the bits per value: 1..8 or 16 for quant, 32 when raw, 0 for
// trunc, TernBits for tern.
func (s Spec) Bits() int {
	switch s.kind {
	case KindNone:
		return 32
	case KindTern:
		return TernBits
	}
	return int(s.bits)
}

// Name identifies the codec: "none", "trunc(r=4)", "quant(b=4)",
// "quant(b=16,bf16)".
func (s Spec) Name() string {
	switch {
	case s.kind == KindTrunc:
		return "trunc(r=" + strconv.FormatFloat(s.rate, 'g', -1, 64) + ")"
	case s.kind == KindQuant && s.bits == 16:
		return "quant(b=16,bf16)"
	case s.kind == KindQuant && s.group > 1:
		return "quant(b=" + strconv.Itoa(int(s.bits)) + ",g=" + strconv.Itoa(int(s.group)) + ")"
	case s.kind == KindQuant:
		return "quant(b=" + strconv.Itoa(int(s.bits)) + ")"
	case s.kind == KindTern && s.group > 1:
		return "tern(g=" + strconv.Itoa(int(s.group)) + ")"
	case s.kind == KindTern:
		return "tern"
	}
	return "none"
}

// MaxGroup is the most rows a quant header may serve.
const MaxGroup = 1 << 12

// Grouped returns s coding g consecutive rows under one header (the
// quant(b, g) and tern(g) formats), for quant below 16 bits and tern; the
// other codecs have no row header and are returned as they are, as is s
// for g <= 1. g above MaxGroup panics.
func (s Spec) Grouped(g int) Spec {
	if g > MaxGroup {
		panic(fmt.Sprintf("codec: Grouped: %d rows per header, at most %d", g, MaxGroup))
	}
	if !(s.kind == KindQuant && s.bits < 16 || s.kind == KindTern) || g <= 1 {
		return s
	}
	s.group = uint16(g)
	return s
}

// Group is the rows per header: 1 unless s is a grouped quant or tern codec.
func (s Spec) Group() int { return max(int(s.group), 1) }

// Ungrouped is s with one header per row.
func (s Spec) Ungrouped() Spec {
	s.group = 0
	return s
}

// Groups lays out rows x cols values under s as the quant(b, g) and
// tern(g) formats code them: whole groups of Group() rows, each one row of
// width values, then the rest's rows as one row whose payload starts at
// byte restAt (quant: drawn from ^seed; tern: after the key and the whole
// groups, draw row whole). Devices that code the formats call it too.
func (s Spec) Groups(rows, cols int) (whole, rest, width, restAt int) {
	g := s.Group()
	whole, rest, width = rows/g, rows%g, g*cols
	if s.kind == KindTern {
		return whole, rest, width, ternKey + whole*ternStride(width)
	}
	return whole, rest, width, s.Ungrouped().WireSize(whole, width)
}

// WireSize is the exact payload size in bytes for rows x cols values.
func (s Spec) WireSize(rows, cols int) int {
	switch {
	case s.kind == KindTrunc:
		return 4 * rows * s.Keep(cols)
	case s.kind == KindQuant && s.bits == 16:
		return 2 * rows * cols
	case s.kind == KindQuant && s.group > 1:
		whole, rest, width, _ := s.Groups(rows, cols)
		n := whole * quantStride(width, uint(s.bits))
		if rest > 0 {
			n += quantStride(rest*cols, uint(s.bits))
		}
		return n
	case s.kind == KindQuant:
		return rows * quantStride(cols, uint(s.bits))
	case s.kind == KindTern:
		whole, rest, width, _ := s.Groups(rows, cols)
		return ternWireSize(whole, width, rest, rest*cols)
	}
	return 4 * rows * cols
}

// Encode writes the payload of src (rows x cols, row-major) into dst
// (len == WireSize). Stochastic codecs draw from a counter-based hash of
// (seed, row, col), so the same call gives the same bytes on any machine and
// any thread count.
func (s Spec) Encode(dst []byte, src []float32, rows, cols int, seed uint64) {
	checkShape(s, "Encode", len(src), len(dst), rows, cols)
	switch {
	case s.kind == KindTrunc:
		truncEncode(dst, src, rows, cols, s.Keep(cols))
	case s.kind == KindQuant && s.bits == 16:
		bf16Encode(dst, src, rows, cols, seed)
	case s.kind == KindQuant && s.group > 1:
		whole, rest, w, at := s.Groups(rows, cols)
		n := whole * w
		quantEncode(dst[:at], src[:n], whole, w, uint(s.bits), seed)
		if rest > 0 {
			quantEncode(dst[at:], src[n:], 1, rest*cols, uint(s.bits), ^seed)
		}
	case s.kind == KindQuant:
		quantEncode(dst, src, rows, cols, uint(s.bits), seed)
	case s.kind == KindTern:
		s.ternEncodeAll(dst, src, rows, cols, seed)
	default:
		putF32s(dst, src)
	}
}

// EncodeGather is Encode of the rows idx of src (row-major, cols wide):
// on the AVX2 path quant and tern rows with a header each are coded where
// they lie; otherwise the rows are read gathered into scratch, which it
// returns, grown if it had to.
func (s Spec) EncodeGather(dst []byte, src []float32, idx []int32, cols int, seed uint64, scratch []float32) []float32 {
	n := len(idx)
	checkShape(s, "EncodeGather", n*cols, len(dst), n, cols)
	if s.kind == KindQuant && s.bits < 16 && s.group <= 1 && encodeGatherFast(dst, src, idx, cols, int(s.bits), seed) {
		return scratch
	}
	if s.kind == KindTern && s.group <= 1 && ternEncodeGather(dst, src, idx, cols, seed) {
		return scratch
	}
	if cap(scratch) < n*cols {
		scratch = make([]float32, n*cols)
	}
	rows := scratch[:n*cols]
	for k, r := range idx {
		copy(rows[k*cols:(k+1)*cols], src[int(r)*cols:(int(r)+1)*cols])
	}
	s.Encode(dst, rows, n, cols, seed)
	return scratch
}

// Decode writes rows x cols values into dst from a payload of WireSize
// bytes.
func (s Spec) Decode(dst []float32, src []byte, rows, cols int) {
	checkShape(s, "Decode", len(dst), len(src), rows, cols)
	switch {
	case s.kind == KindTrunc:
		truncDecode(dst, src, rows, cols, s.Keep(cols))
	case s.kind == KindQuant && s.bits == 16:
		bf16Decode(dst, src)
	case s.kind == KindQuant && s.group > 1:
		whole, rest, w, at := s.Groups(rows, cols)
		n := whole * w
		quantDecode(dst[:n], src[:at], whole, w, uint(s.bits))
		if rest > 0 {
			quantDecode(dst[n:], src[at:], 1, rest*cols, uint(s.bits))
		}
	case s.kind == KindQuant:
		quantDecode(dst, src, rows, cols, uint(s.bits))
	case s.kind == KindTern:
		s.ternDecodeAll(dst, src, rows, cols)
	default:
		getF32s(dst, src)
	}
}

// Encode and Decode panic when the buffer lengths do not match the shape
// exactly (len(src) == rows*cols, len(dst) == WireSize, and the reverse for
// Decode): a mismatch is a layout bug in the caller, and exact lengths are
// what guarantee a decoder never reads or writes outside its payload.

// SeedFor derives the seed of one exchange (epoch, layer, direction dir: 0
// forward, 1 backward, sender and receiver ranks) from the run's seed, so
// that every message draws independent noise and both ends agree on it:
//
//	z = seed; for v in (epoch, layer, dir, sender, receiver): z = Mix64(z ^ uint64(int64(v)))
func SeedFor(seed uint64, epoch, layer, dir, sender, receiver int) uint64 {
	z := seed
	for _, v := range [...]int{epoch, layer, dir, sender, receiver} {
		z = rng.Mix64(z ^ uint64(int64(v)))
	}
	return z
}

// littleEndian reports whether float32 memory is already in wire order, in
// which case raw payloads are plain copies.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// f32Bytes views f as bytes (host order).
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func putF32s(dst []byte, src []float32) {
	if littleEndian {
		copy(dst, f32Bytes(src))
		return
	}
	for j, v := range src {
		binary.LittleEndian.PutUint32(dst[4*j:], math.Float32bits(v))
	}
}

func getF32s(dst []float32, src []byte) {
	if littleEndian {
		copy(f32Bytes(dst), src)
		return
	}
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
	}
}

// checkShape panics unless the buffers match rows x cols and the payload
// size exactly.
func checkShape(s Spec, op string, nvals, nbytes, rows, cols int) {
	if rows >= 0 && cols >= 0 && nvals == rows*cols && nbytes == s.WireSize(rows, cols) {
		return
	}
	panic(fmt.Sprintf("codec: %s %s: %d values and %d bytes for %d x %d rows (want %d values, %d bytes)",
		s.Name(), op, nvals, nbytes, rows, cols, rows*cols, s.WireSize(rows, cols)))
}

// None sends raw little-endian float32: 4*rows*cols bytes.
func None() Spec { return Spec{} }

// Trunc keeps the first k = floor(cols/r) columns of every row, as the VARCO
// authors do, but at least one (a row never vanishes, so even a huge r still
// sends something per halo row), and zero-pads the rest on decode. Payload:
// 4*rows*k bytes. r must be >= 1 (+Inf allowed: k = 1); r < 1 or NaN panics.
func Trunc(r float64) Spec {
	if !(r >= 1) {
		panic(fmt.Sprintf("codec: Trunc: rate %v < 1", r))
	}
	return Spec{kind: KindTrunc, rate: r}
}

// Keep is the number of leading columns of rows of width cols that trunc
// sends (all of them for the other kinds).
func (s Spec) Keep(cols int) int {
	if s.kind != KindTrunc {
		return cols
	}
	if cols <= 0 {
		return 0
	}
	k := math.Floor(float64(cols) / s.rate)
	if k < 1 {
		return 1
	}
	return min(int(k), cols)
}

func truncEncode(dst []byte, src []float32, rows, cols, k int) {
	for i := range rows {
		putF32s(dst[4*i*k:4*(i+1)*k], src[i*cols:i*cols+k])
	}
}

func truncDecode(dst []float32, src []byte, rows, cols, k int) {
	for i := range rows {
		row := dst[i*cols : (i+1)*cols]
		getF32s(row[:k], src[4*i*k:4*(i+1)*k])
		clear(row[k:])
	}
}

// Quant returns stochastic quantization to bits per value: 1..8 (per-row
// affine integer codes), 16 (bf16) or 32 (raw float32, the same as None).
// Other widths panic.
func Quant(bits int) Spec {
	switch {
	case bits >= 1 && bits <= 8 || bits == 16:
		return Spec{kind: KindQuant, bits: uint8(bits)}
	case bits == 32:
		return None()
	}
	panic(fmt.Sprintf("codec: Quant: %d bits not in 1..8, 16, 32", bits))
}

// QuantBitsForRate is the widest supported width that compresses float32 by
// at least r: floor(32/r) clamped to [1, 32], rounded down to 1..8, 16 or 32
// (r <= 1 gives 32, r = +Inf gives 1). r <= 0 or NaN panics.
func QuantBitsForRate(r float64) int {
	if !(r > 0) {
		panic(fmt.Sprintf("codec: QuantBitsForRate: rate %v <= 0", r))
	}
	b := math.Floor(32 / r)
	switch {
	case b >= 32:
		return 32
	case b >= 16:
		return 16
	case b >= 8:
		return 8
	case b >= 1:
		return int(b)
	}
	return 1
}

// ForRate returns the codec of the given kind compressing by rate r:
// None (r ignored), Trunc(r), or Quant(QuantBitsForRate(r)). r must be >= 1
// for trunc and quant.
func ForRate(kind Kind, r float64) (Spec, error) {
	if kind == KindNone {
		return None(), nil
	}
	if !(r >= 1) {
		return Spec{}, fmt.Errorf("%s codec: compression rate %v, want >= 1", kind, r)
	}
	if kind == KindTrunc {
		return Trunc(r), nil
	}
	return Quant(QuantBitsForRate(r)), nil
}

// quant is stochastic per-row affine quantization to b in 1..8 bits, on a
// grid whose origin is a multiple of 1/32 of its span, so that the header
// is 3 bytes: the scale and the origin's multiple.
//
// Encode, per row x[0..cols) (all arithmetic float32, round to nearest; no
// fused multiply-add: every product is rounded before it is added):
//
//	n      = 2^b - 1
//	lo,hi  = min, max of the row over its non-NaN values, plus 0 (which
//	         turns -0 into +0); none (NaN only, or cols = 0), or both of
//	         magnitude below 2^-96: the row is zero (scale = 0, k = 0)
//	w      = hi - lo, MaxFloat32 where that overflows
//	grid of a scale s: u = (n*s)*(1/32), k = floor(lo/u) (less 1 where
//	         k*u > lo, the division having rounded up) clamped to
//	         [-128, 127]; it fits when k*u <= lo and (k+32)*u >= hi
//	scale  = the first s, each rounded up to a bf16 and capped at
//	         sMax = bf16 below MaxFloat32/(5n), whose grid fits, among
//	           w/n (an origin that happens to fall on the grid),
//	           w/(n*31/32) (any row holding 0 fits: 1/32 of a span slack),
//	           hi/(n*159/32) if lo > 0, -lo/(n*4) if hi < 0 (rows far
//	           from 0: k = 127 or -128 and a wider span),
//	         then the last of those doubled until it fits or reaches sMax
//	origin = k*u (exact: n*s has at most 16 significant bits)
//	inv    = 1 / scale
//	f      = (x - origin) * (256*inv), clamped to [0, 256n] (NaN -> 0):
//	         the value in 1/256 steps (256*inv is exact)
//	g      = f rounded to the nearest integer, ties to even
//	q      = (g + r) >> 8                      r = r(i, j) of the package doc
//
// and Decode gives x^ = k*u + (float32(q) * scale). With r uniform, E[q] =
// g/256 exactly, so E[x^] = x up to float32 rounding and 2^-9 of a step
// (unbiased), and |x^ - x| <= scale (one step) plus half an ulp of the
// row's magnitude (rounding of the sum). (Rounding f to 1/256 of a step
// first makes the stochastic part an integer sum with the 8-bit draw,
// which is what a vector unit does fastest: g + r carries into bit 8 with
// probability (g&255)/256.) Every decoded value lies
// in [origin, origin + n*scale], which holds the row (up to the rounding of
// the division). The step is at most 2^-7 above (hi-lo)/n for a row whose
// grid origin falls on it (a row of ReLU outputs, whose min is 0), and at
// most 32/31 (1 + 2^-7) above it for any row that holds 0 or lies within
// 4 spans of it; a row far from 0 (all its values within 24% of each other)
// gets a span of about hi/5 (lo > 0): halo activations, gradients and
// residuals are almost never such rows. A constant row decodes exactly when
// it is 0; any other decodes within a step of its value, unbiased.
// (Version 2 sent lo as a float32, 6 header bytes in all: on a 64-wide
// 2-bit row the 3 bytes saved are 14% of its bytes.)
// Corner cases, outside what the trainer produces (it guarantees finite
// activations): values beyond the grid (rows whose span exceeds sMax*n, or
// infinities) are clamped to it; NaN values decode to the origin. Nothing
// panics and the bytes are the same on every implementation.

// quantHeader is the bytes of a quant(b) row's header: the scale as a
// bf16, then the grid origin's multiple k as an int8.
const quantHeader = 3

// quantStride is the bytes of one row of cols b-bit codes with its header.
func quantStride(cols int, b uint) int { return quantHeader + (cols*int(b)+7)/8 }

// maxBF16 is the largest finite bf16, as a float32.
const maxBF16 = 0x7f7f0000

// bf16Up rounds s >= 0 up to a bf16 (toward +Inf), at most maxBF16.
func bf16Up(s float32) float32 {
	w := math.Float32bits(s)
	if w&0xffff == 0 {
		return s
	}
	if w = w&^0xffff + 0x10000; w >= 0x7f800000 {
		w = maxBF16
	}
	return math.Float32frombits(w)
}

// quantTiny is the magnitude below which a row is sent as zero.
const quantTiny = 0x1.0p-96

// quantSMax is sMax for n = 2^b - 1.
func quantSMax(n float32) float32 {
	return math.Float32frombits(math.Float32bits(math.MaxFloat32/(5*n)) &^ 0xffff)
}

// quantGrid is the grid of scale s for a row [lo, hi]: its multiple k,
// origin k*u, and whether it fits.
func quantGrid(lo, hi, n, s float32) (k int8, origin float32, fits bool) {
	u := float32(float32(n*s) * (1.0 / 32))
	if u == 0 {
		return 0, 0, lo == 0 && hi == 0
	}
	f := float32(math.Floor(float64(lo / u)))
	if float32(f*u) > lo {
		f--
	}
	f = min(max(f, -128), 127)
	origin = float32(f * u) // rounded: never fused into a later add
	return int8(f), origin, origin <= lo && float32((f+32)*u) >= hi
}

// quantDecodeOrigin is the grid origin k*u of a header's scale and k.
func quantDecodeOrigin(scale float32, k int8, n float32) float32 {
	return float32(float32(k) * float32(float32(n*scale)*(1.0/32))) // rounded: never fused into the decode's add
}

// rowParams computes the origin, scale, inv and k of one row as specified
// above.
func rowParams(row []float32, n float32) (origin, scale, inv float32, k int8) {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range row {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return quantParams(lo, hi, n)
}

// quantParams is rowParams after the min/max pass (lo > hi: no values).
func quantParams(lo, hi, n float32) (origin, scale, inv float32, k int8) {
	if lo > hi || max(-lo, hi) < quantTiny {
		return 0, 0, 0, 0
	}
	lo, hi = lo+0, hi+0
	w := hi - lo
	if !(w <= math.MaxFloat32) {
		w = math.MaxFloat32
	}
	sMax := quantSMax(n)
	fits := false
	try := func(t float32) {
		scale = min(bf16Up(t), sMax)
		k, origin, fits = quantGrid(lo, hi, n, scale)
	}
	try(w / n)
	if !fits {
		try(w / (n * (31.0 / 32)))
	}
	if !fits && lo > 0 {
		try(hi / (n * (159.0 / 32)))
	} else if !fits && hi < 0 {
		try(-lo / (n * 4))
	}
	for !fits && scale < sMax {
		try(2 * scale)
	}
	inv = 1 / scale
	if inv > math.MaxFloat32/256 { // 256*inv must be finite
		return 0, 0, 0, 0
	}
	return origin, scale, inv, k
}

func quantEncode(dst []byte, src []float32, rows, cols int, b uint, seed uint64) {
	if rows == 0 {
		return
	}
	if encodeFast(dst, src, rows, cols, int(b), seed) {
		return
	}
	key := drawKey(seed)
	n := float32(int(1)<<b - 1)
	st := quantStride(cols, b)
	for i := range rows {
		row := src[i*cols : (i+1)*cols]
		out := dst[i*st : (i+1)*st]
		lo, scale, inv, k := rowParams(row, n)
		binary.LittleEndian.PutUint16(out[0:], uint16(math.Float32bits(scale)>>16))
		out[2] = byte(k)
		pack(out[quantHeader:], row, i, b, lo, 256*inv, 256*n, key)
	}
}

// drawKey is the draws' key (k0, k1) for a message seed (see the package
// doc).
func drawKey(seed uint64) [2]uint32 {
	h := rng.Mix64(seed)
	return [2]uint32{uint32(h), uint32(h >> 32)}
}

// drawBlock is the words w(i, 4p) .. w(i, 4p+3) of the package doc: the
// draws of columns 16p .. 16p+15 of row i.
func drawBlock(p, i int, key [2]uint32) [4]uint32 {
	rk := rng.Hash32(uint32(i) ^ key[0])
	var w [4]uint32
	for m := range w {
		w[m] = rng.Hash32(rk ^ (uint32(4*p+m)*0x9E3779B9 + key[1]))
	}
	return w
}

// draw is the byte of column j%16 in its block w.
func draw(w *[4]uint32, j int) uint32 { return w[j>>2&3] >> (8 * uint(j&3)) & 0xff }

// code is q for value x with the 8-bit draw r; inv256 = 256*inv and n256
// = 256*n.
func code(x, lo, inv256, n256 float32, r uint32) uint64 {
	f := float32((x - lo) * inv256)
	if !(f >= 0) {
		f = 0
	}
	if f > n256 {
		f = n256
	}
	g := uint32(math.RoundToEven(float64(f))) // exact: f <= 65280
	// Up one step when the fraction g&255 and r carry into bit 8.
	return uint64((g + r) >> 8)
}

// pack writes the b-bit codes of row i into out (len ceil(len(row)*b/8)):
// a group of 8 codes fills b bytes; one draw block serves 2 groups.
func pack(out []byte, row []float32, i int, b uint, lo, inv256, n256 float32, key [2]uint32) {
	var w [4]uint32
	for g := 0; 8*g < len(row); g++ {
		if g%2 == 0 {
			w = drawBlock(g/2, i, key)
		}
		x := row[8*g : min(8*g+8, len(row))]
		var acc uint64
		for t, v := range x {
			acc |= code(v, lo, inv256, n256, draw(&w, 8*g+t)) << (uint(t) * b)
		}
		o := out[int(b)*g:]
		for k := range (len(x)*int(b) + 7) / 8 {
			o[k] = byte(acc >> (8 * k))
		}
	}
}

func quantDecode(dst []float32, src []byte, rows, cols int, b uint) {
	if decodeFast(dst, src, rows, cols, int(b)) {
		return
	}
	st := quantStride(cols, b)
	n := float32(int(1)<<b - 1)
	for i := range rows {
		in := src[i*st : (i+1)*st]
		scale := math.Float32frombits(uint32(binary.LittleEndian.Uint16(in[0:])) << 16)
		lo := quantDecodeOrigin(scale, int8(in[2]), n)
		row, in := dst[i*cols:(i+1)*cols], in[quantHeader:]
		// Unrolled loops for the common widths decode whole groups of 8
		// codes (b bytes) about twice as fast as the general loop, which
		// then finishes the row.
		g := 0
		switch b {
		case 1:
			g = unpack1(row, in, lo, scale)
		case 2:
			g = unpack2(row, in, lo, scale)
		case 4:
			g = unpack4(row, in, lo, scale)
		case 8:
			g = unpack8(row, in, lo, scale)
		}
		unpack(row[8*g:], in[int(b)*g:], b, lo, scale)
	}
}

// unpack1, unpack2, unpack4 and unpack8 decode the whole groups of 8 codes
// of a row and return their number.
func unpack1(row []float32, in []byte, lo, scale float32) int {
	h := len(row) / 8
	for k, v := range in[:h] {
		r := row[8*k : 8*k+8 : 8*k+8]
		r[0] = lo + float32(float32(v&1)*scale)
		r[1] = lo + float32(float32(v>>1&1)*scale)
		r[2] = lo + float32(float32(v>>2&1)*scale)
		r[3] = lo + float32(float32(v>>3&1)*scale)
		r[4] = lo + float32(float32(v>>4&1)*scale)
		r[5] = lo + float32(float32(v>>5&1)*scale)
		r[6] = lo + float32(float32(v>>6&1)*scale)
		r[7] = lo + float32(float32(v>>7)*scale)
	}
	return h
}

func unpack2(row []float32, in []byte, lo, scale float32) int {
	h := len(row) / 8
	in = in[:2*h]
	for k := range 2 * h {
		v := in[k]
		r := row[4*k : 4*k+4 : 4*k+4]
		r[0] = lo + float32(float32(v&3)*scale)
		r[1] = lo + float32(float32(v>>2&3)*scale)
		r[2] = lo + float32(float32(v>>4&3)*scale)
		r[3] = lo + float32(float32(v>>6)*scale)
	}
	return h
}

func unpack4(row []float32, in []byte, lo, scale float32) int {
	h := len(row) / 8
	in = in[:4*h]
	for k := range 2 * h {
		a, b := in[2*k], in[2*k+1]
		r := row[4*k : 4*k+4 : 4*k+4]
		r[0] = lo + float32(float32(a&15)*scale)
		r[1] = lo + float32(float32(a>>4)*scale)
		r[2] = lo + float32(float32(b&15)*scale)
		r[3] = lo + float32(float32(b>>4)*scale)
	}
	return h
}

func unpack8(row []float32, in []byte, lo, scale float32) int {
	h := len(row) / 8
	for j, q := range in[:8*h] {
		row[j] = lo + float32(float32(q)*scale)
	}
	return h
}

// unpack decodes the b-bit codes in in into row, for any b.
func unpack(row []float32, in []byte, b uint, lo, scale float32) {
	mask := uint64(1)<<b - 1
	var acc uint64
	var nb uint
	p := 0
	for j := range row {
		if nb < b { // refill: 32 bits where the row has them, else a byte
			if p+4 <= len(in) {
				acc |= uint64(binary.LittleEndian.Uint32(in[p:])) << nb
				nb += 32
				p += 4
			} else {
				acc |= uint64(in[p]) << nb
				nb += 8
				p++
			}
		}
		row[j] = lo + float32(float32(acc&mask)*scale)
		acc >>= b
		nb -= b
	}
}

// bf16 is quant(16): stochastic rounding of float32 to bfloat16.
//
// Encode, per value with bits w = Float32bits(x) and r = 256*r(i,j) + 128
// (see the package doc):
//
//	NaN:     w>>16 | 0x0040 (quiet NaN, sign kept; never turns into Inf)
//	+-Inf:   w>>16
//	finite:  o = (w + r) >> 16; if o is +-Inf (carry out of the largest
//	         finite bf16): o = largest finite bf16 of the same sign
//
// Adding r to the discarded low half rounds the magnitude up with
// probability (low half)/2^16 (within 2^-9), which makes the result unbiased (except for
// the saturation above 3.3895e38). Finite values stay finite, NaN stays
// NaN, Inf stays Inf. Decode: Float32frombits(uint32(o) << 16), exact.
// toBF16 rounds w with random bits r as specified above.
func toBF16(w, r uint32) uint16 {
	if a := w & 0x7fffffff; a >= 0x7f800000 {
		if a > 0x7f800000 {
			return uint16(w>>16 | 0x0040)
		}
		return uint16(w >> 16)
	}
	o := (w + r) >> 16
	if o&0x7fff == 0x7f80 {
		o--
	}
	return uint16(o)
}

func bf16Encode(dst []byte, src []float32, rows, cols int, seed uint64) {
	if rows == 0 || cols == 0 {
		return
	}
	if encodeFast(dst, src, rows, cols, 16, seed) {
		return
	}
	key := drawKey(seed)
	for i := range rows {
		row := src[i*cols : (i+1)*cols]
		out := dst[2*i*cols : 2*(i+1)*cols]
		for j0 := 0; j0 < cols; j0 += 16 {
			w := drawBlock(j0/16, i, key)
			for j := j0; j < min(j0+16, cols); j++ {
				o := toBF16(math.Float32bits(row[j]), draw(&w, j)<<8|0x80)
				out[2*j], out[2*j+1] = byte(o), byte(o>>8)
			}
		}
	}
}

func bf16Decode(dst []float32, src []byte) {
	if decodeFast(dst, src, 1, len(dst), 16) {
		return
	}
	src = src[:2*len(dst)]
	for j := range dst {
		dst[j] = math.Float32frombits(uint32(src[2*j])<<16 | uint32(src[2*j+1])<<24)
	}
}
