package codec

import (
	"encoding/binary"
	"math"
)

// tern is the ternary code of residual coding: subtractively dithered
// rounding to three levels. Every value x of a row becomes a code q in
// {-1, 0, 1}, the nearest integer to x/s + u, and decodes as (q - u) s,
// where s is the row's largest magnitude M (rounded up to a bf16) and u a
// dither in (-1/2, 1/2) that both ends draw from the payload's key. The
// error (q - u - x/s) s is then at most s/2, about M/2, whatever x is, and
// has mean 0 over the dither: unbiased, like quant's stochastic rounding,
// but bounded by half the residual's largest magnitude where 2-bit quant
// is bounded by two thirds of its span, in 1.6 bits a value where quant
// takes 2. Error feedback through it contracts (a 1-bit code errs by up to
// the whole range and does not; docs/VARCO.md). Only residual-coded
// exchanges use it: the rung of quant's ladder at TernRate.
//
// A payload of rows >= 1 starts with its key (k0, k1), 8 bytes little
// endian: drawKey of the Encode seed. Each row (i = 0, 1, ... in the
// payload) then goes as s's bf16 (2 bytes, little endian) and its codes
// t = q + 1 five to a byte, t0 + 3 t1 + 9 t2 + 27 t3 + 81 t4, the last
// byte padded with zero codes: 2 + ceil(cols/5) bytes. In float32
// arithmetic, round to nearest, no fused multiply-add:
//
//	M   = the largest magnitude among the row's non-NaN values (0 if none)
//	s   = M rounded up to a bf16, capped at the largest finite bf16
//	inv = 1 / s (rows with s = 0 code every value 1 and decode to 0)
//	u   = (r - 128) / 256 + 1/512, r = r(i, j) the 8-bit draw of quant's
//	      package doc under the payload's key
//	v   = x * inv + u
//	t   = 2 where v >= 1/2, 0 where v < -1/2, else 1 (NaN too)
//
// and decodes as ((t - 1) - u) * s. A value of magnitude at most s decodes
// within s/2 (plus float32 rounding) of itself; M from 2^-96 to 1e38 keeps
// s normal and within 2^-7 of M. Grouped (tern(g)), g rows share one s,
// coded as one row of g times the width, the rest as one shorter row
// (Spec.Groups), all under the payload's one key: row i of the draws is
// the group's index, the rest's being the number of whole groups. On AVX2
// machines fast_amd64.c codes and decodes it (Encode, EncodeGather,
// Decode, and residual coding's fused DeltaEncode and DecodeAdd) to the
// same bytes and bits as the Go code here, which is the reference.

// TernRate is the rate of the ternary code's rung: 32 bits to log2(3)
// ≈ 1.58, 1.6 as packed, rounded to 20.
const TernRate = 20

// TernBits is the bits per value the metrics report for the ternary code
// (the next whole bit above its 1.6).
const TernBits = 2

// ternKey and ternHeader are the bytes of a ternary payload's key and of
// a row's header (s as a bf16).
const ternKey, ternHeader = 8, 2

// Tern returns the ternary code of residuals. Bytes above 242 (none that
// Encode writes) decode as five codes of 1.
func Tern() Spec { return Spec{kind: KindTern} }

func ternStride(cols int) int { return ternHeader + (cols+4)/5 }

// ternScale is s for a row whose largest magnitude is m (finite or +Inf).
func ternScale(m float32) float32 {
	return min(bf16Up(m), math.Float32frombits(maxBF16))
}

// ternDither is u for the 8-bit draw r.
func ternDither(r uint32) float32 { return float32(int32(r)-128)/256 + 1.0/512 }

// ternEncode writes rows of cols values, the draws' rows numbered from
// first, under key.
func ternEncode(dst []byte, src []float32, rows, cols, first int, key [2]uint32) {
	if ternEncodeFast(dst, src, nil, rows, cols, first, key) {
		return
	}
	st := ternStride(cols)
	for i := range rows {
		row := src[i*cols : (i+1)*cols]
		out := dst[i*st : (i+1)*st]
		var m float32
		for _, v := range row {
			if a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31)); a > m { // NaN is never larger
				m = a
			}
		}
		s := ternScale(m)
		binary.LittleEndian.PutUint16(out, uint16(math.Float32bits(s)>>16))
		var inv float32
		if s > 0 {
			inv = 1 / s
		}
		var w [4]uint32
		for j := 0; j*5 < cols; j++ {
			var b, p byte = 0, 1
			for c := j * 5; c < min(j*5+5, cols); c++ {
				if c%16 == 0 {
					w = drawBlock(c/16, first+i, key)
				}
				t := byte(1)
				if s > 0 {
					v := float32(row[c]*inv) + ternDither(draw(&w, c))
					switch {
					case v >= 0.5:
						t = 2
					case v < -0.5:
						t = 0
					}
				}
				b += t * p
				p *= 3
			}
			out[ternHeader+j] = b
		}
	}
}

// ternDigits[b] are the five codes of byte b, each minus 1 (bytes above
// 242 hold none: zeros).
var ternDigits = func() (d [256][5]int8) {
	for b := range 243 {
		v := b
		for k := range 5 {
			d[b][k] = int8(v%3) - 1
			v /= 3
		}
	}
	return d
}()

func ternDecode(dst []float32, src []byte, rows, cols, first int, key [2]uint32) {
	if ternDecodeFast(dst, src, rows, cols, first, key) {
		return
	}
	st := ternStride(cols)
	for i := range rows {
		in := src[i*st : (i+1)*st]
		s := math.Float32frombits(uint32(binary.LittleEndian.Uint16(in)) << 16)
		row := dst[i*cols : (i+1)*cols]
		if s == 0 {
			clear(row)
			continue
		}
		var w [4]uint32
		for c := range row {
			if c%16 == 0 {
				w = drawBlock(c/16, first+i, key)
			}
			row[c] = (float32(ternDigits[in[ternHeader+c/5]][c%5]) - ternDither(draw(&w, c))) * s
		}
	}
}

// ternWireSize is the payload of whole rows of width values and, if rest
// > 0, one row of restCols values: nothing without rows.
func ternWireSize(whole, width, rest, restCols int) int {
	if whole == 0 && rest == 0 {
		return 0
	}
	n := ternKey + whole*ternStride(width)
	if rest > 0 {
		n += ternStride(restCols)
	}
	return n
}

// ternEncodeAll is Encode for tern(g): the key, the whole groups, the rest.
func (s Spec) ternEncodeAll(dst []byte, src []float32, rows, cols int, seed uint64) {
	if rows == 0 {
		return
	}
	key := drawKey(seed)
	putTernKey(dst, key)
	whole, rest, w, at := s.Groups(rows, cols)
	ternEncode(dst[ternKey:at], src[:whole*w], whole, w, 0, key)
	if rest > 0 {
		ternEncode(dst[at:], src[whole*w:], 1, rest*cols, whole, key)
	}
}

// putTernKey writes key at the head of a payload.
func putTernKey(dst []byte, key [2]uint32) {
	binary.LittleEndian.PutUint32(dst, key[0])
	binary.LittleEndian.PutUint32(dst[4:], key[1])
}

// ternEncodeGather is EncodeGather for ungrouped tern on the AVX2 path: the
// rows idx of src coded where they lie. It reports whether it ran (not
// where an index lies outside src: the gathering copy panics on it).
func ternEncodeGather(dst []byte, src []float32, idx []int32, cols int, seed uint64) bool {
	if !fast || len(idx) == 0 || cols == 0 {
		return false
	}
	for _, r := range idx {
		if r < 0 || (int(r)+1)*cols > len(src) {
			return false
		}
	}
	key := drawKey(seed)
	putTernKey(dst, key)
	return ternEncodeFast(dst[ternKey:], src, idx, len(idx), cols, 0, key)
}

// ternDecodeAll is Decode for tern(g).
func (s Spec) ternDecodeAll(dst []float32, src []byte, rows, cols int) {
	if len(src) == 0 {
		return
	}
	key := [2]uint32{binary.LittleEndian.Uint32(src), binary.LittleEndian.Uint32(src[4:])}
	whole, rest, w, at := s.Groups(rows, cols)
	ternDecode(dst[:whole*w], src[ternKey:at], whole, w, 0, key)
	if rest > 0 {
		ternDecode(dst[whole*w:], src[at:], 1, rest*cols, whole, key)
	}
}
