package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
)

// fuzzCodec maps two fuzzed bytes to a codec of any kind and width.
func fuzzCodec(kind, arg uint8) Spec {
	switch kind % 4 {
	case 0:
		return None()
	case 1:
		return Trunc(1 + float64(arg)/16)
	case 3:
		return Tern().Grouped(int(arg % 5))
	}
	widths := [...]int{1, 2, 3, 4, 5, 6, 7, 8, 16, 32}
	return Quant(widths[int(arg)%len(widths)])
}

// FuzzDecode decodes arbitrary payloads of the right length: no panic, no
// write outside dst, and the values each format can produce. A payload or
// destination one element off panics with the codec's own message (the
// documented contract) rather than reading or writing past a buffer.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint16(0), uint8(0), uint8(0))
	f.Add([]byte{1, 2, 3, 4}, uint8(1), uint16(1), uint8(0), uint8(0))
	f.Add([]byte{0, 0, 0x80, 0x7f, 0, 0, 0x80, 0x7f, 0xff}, uint8(1), uint16(3), uint8(2), uint8(0))
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0xff, 0xff, 0x7f, 0x7f, 0x5a}, uint8(2), uint16(9), uint8(2), uint8(2))
	f.Add([]byte{0xff, 0x7f, 0x80, 0xff}, uint8(3), uint16(7), uint8(2), uint8(8))
	f.Add([]byte{0, 0, 0, 0x3f, 0, 0, 0x80, 0x3f}, uint8(4), uint16(255), uint8(2), uint8(7))
	f.Add([]byte{9, 8, 7}, uint8(5), uint16(33), uint8(1), uint8(48))
	f.Add([]byte{0xab}, uint8(2), uint16(256), uint8(2), uint8(9))
	f.Fuzz(func(t *testing.T, payload []byte, rows uint8, cols uint16, kind, arg uint8) {
		c := fuzzCodec(kind, arg)
		r, k := int(rows%17), int(cols%300)
		ws := c.WireSize(r, k)
		p := make([]byte, ws)
		for i := range p { // repeat the fuzzed bytes to the exact length
			if len(payload) > 0 {
				p[i] = payload[i%len(payload)]
			}
		}
		y := make([]float32, r*k+1)
		y[r*k] = 42
		c.Decode(y[:r*k], p, r, k)
		if y[r*k] != 42 {
			t.Fatalf("%s: Decode wrote past dst", c.Name())
		}
		for _, bad := range [][2]int{{r * k, ws + 1}, {r * k, ws - 1}, {r*k + 1, ws}, {r*k - 1, ws}} {
			if bad[0] < 0 || bad[1] < 0 {
				continue
			}
			if msg := decodePanic(c, make([]float32, bad[0]), make([]byte, bad[1]), r, k); !strings.HasPrefix(msg, "codec: ") {
				t.Fatalf("%s: Decode of %d bytes into %d values for %d x %d: panic %q, want codec's shape panic",
					c.Name(), bad[1], bad[0], r, k, msg)
			}
		}
		switch {
		case c.Kind() == KindTrunc:
			keep := c.Keep(k)
			for i := range r {
				for j := keep; j < k; j++ {
					if y[i*k+j] != 0 {
						t.Fatalf("%s: dropped column %d decoded to %v", c.Name(), j, y[i*k+j])
					}
				}
			}
		case c.Kind() == KindQuant && c.Bits() <= 8:
			n := float32(int(1)<<c.Bits() - 1)
			st := quantStride(k, uint(c.Bits()))
			for i := range r {
				lo, scale := quantHeaderOf(p[i*st:], c.Bits())
				top := lo + float32(n*scale)
				if lo != lo || math.IsInf(float64(lo), 0) || !(scale >= 0 && scale <= math.MaxFloat32) || top != top {
					continue // garbage header: only "no panic" applies
				}
				for _, v := range y[i*k : (i+1)*k] {
					if !(v >= lo && v <= top) {
						t.Fatalf("%s: lo %v scale %v decoded %v", c.Name(), lo, scale, v)
					}
				}
			}
		case c.Kind() == KindQuant:
			for j, v := range y[:r*k] {
				if w := math.Float32bits(v); w&0xffff != 0 || uint16(w>>16) != binary.LittleEndian.Uint16(p[2*j:]) {
					t.Fatalf("bf16 %04x decoded to %08x", binary.LittleEndian.Uint16(p[2*j:]), w)
				}
			}
		}
	})
}

// decodePanic runs c.Decode and returns what it panicked with, "" if it did
// not panic.
func decodePanic(c Spec, dst []float32, src []byte, rows, cols int) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	c.Decode(dst, src, rows, cols)
	return ""
}

// FuzzCodecRoundTrip encodes arbitrary float32 bits (NaN, Inf, subnormals
// included): no panic, exact payload length, same bytes for the same seed
// and as the plain reference transcriptions, and for rows without
// infinities every quant value inside [min, max].
func FuzzCodecRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(1), uint8(2), uint8(3), uint64(0))
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 1, 0, 0, 0}, uint8(1), uint8(2), uint8(0), uint64(1))
	f.Add([]byte{0xff, 0xff, 0x7f, 0x7f, 0xff, 0xff, 0x7f, 0xff, 0, 0, 0xc0, 0x7f}, uint8(1), uint8(2), uint8(1), uint64(2))
	f.Add([]byte{0xff, 0xff, 0x7f, 0x7f, 1, 0, 0x80, 0x7f, 0xff, 0xff, 0x7f, 0x7f, 0, 0, 0, 0}, uint8(2), uint8(2), uint8(8), uint64(3))
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, uint8(3), uint8(2), uint8(7), uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, rows uint8, kind, arg uint8, seed uint64) {
		c := fuzzCodec(kind, arg)
		x := make([]float32, len(data)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		r := int(rows%8) + 1
		k := len(x) / r
		x = x[:r*k]
		ws := c.WireSize(r, k)
		p := make([]byte, ws+1)
		p[ws] = 0x5c
		c.Encode(p[:ws], x, r, k, seed)
		if p[ws] != 0x5c {
			t.Fatalf("%s: Encode wrote past WireSize", c.Name())
		}
		p2 := make([]byte, ws)
		c.Encode(p2, x, r, k, seed)
		if string(p2) != string(p[:ws]) {
			t.Fatalf("%s: same seed, other bytes", c.Name())
		}
		switch {
		case c.Kind() == KindQuant && c.Bits() <= 8:
			if want := refQuant(x, r, k, c.Bits(), seed); string(want) != string(p2) {
				t.Fatalf("%s: payload %x, reference %x", c.Name(), p2, want)
			}
		case c.Kind() == KindQuant:
			if want := refBF16(x, k, seed); string(want) != string(p2) {
				t.Fatalf("%s: payload %x, reference %x", c.Name(), p2, want)
			}
		case c.Kind() == KindTern: // the AVX2 path, where it runs, against the Go reference
			want, wy, y := make([]byte, ws), make([]float32, r*k), make([]float32, r*k)
			withReference(func() {
				c.Encode(want, x, r, k, seed)
				c.Decode(wy, p2, r, k)
			})
			if string(want) != string(p2) {
				t.Fatalf("%s: payload %x, reference %x", c.Name(), p2, want)
			}
			c.Decode(y, p2, r, k)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(wy[i]) {
					t.Fatalf("%s: value %d decoded to %v, reference %v", c.Name(), i, y[i], wy[i])
				}
			}
		}
		y := make([]float32, r*k)
		c.Decode(y, p[:ws], r, k)
		keep := k // raw codecs: all columns bit-exact
		switch {
		case c.Kind() == KindTrunc:
			keep = c.Keep(k)
		case c.Kind() == KindQuant && c.Bits() == 16:
			return
		case c.Kind() == KindQuant:
			keep = -1
		case c.Kind() == KindTern:
			ternWithin(t, c, x, y, r, k)
			return
		}
		for i := range r * k {
			want := math.Float32bits(x[i])
			if i%k >= keep {
				want = 0
			}
			if keep >= 0 && math.Float32bits(y[i]) != want {
				t.Fatalf("%s: %v decoded to %v", c.Name(), x[i], y[i])
			}
		}
		if keep >= 0 {
			return
		}
		for i := range r {
			row := x[i*k : (i+1)*k]
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			finite := true
			for _, v := range row {
				finite = finite && !math.IsInf(float64(v), 0)
				if v == v {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
			if !finite || lo > hi {
				continue
			}
			hdr := p[i*quantStride(k, uint(c.Bits())):]
			origin, _ := quantHeaderOf(hdr, c.Bits())
			top := quantTop(hdr, c.Bits())
			if m := max(-lo, hi); m >= 0x1p-96 && m <= 1e37 && !(origin <= lo && top >= hi) { // wider rows are clamped, tiny ones sent as 0
				t.Fatalf("%s: grid [%v, %v] does not hold the row [%v, %v]", c.Name(), origin, top, lo, hi)
			}
			for j, v := range y[i*k : (i+1)*k] {
				if row[j] == row[j] && !(v >= origin && v <= top) {
					t.Fatalf("%s: %v decoded to %v outside [%v, %v]", c.Name(), row[j], v, origin, top)
				}
			}
		}
	})
}

// ternWithin checks a ternary round trip: each group's values decode
// within s/2 of themselves (NaN as 0), s the group's largest magnitude
// rounded up to a bf16 (tern.go).
func ternWithin(t *testing.T, c Spec, x, y []float32, r, k int) {
	_, _, w, _ := c.Groups(r, k)
	for at := 0; at < len(x) && w > 0; at += w {
		part, dec := x[at:min(at+w, len(x))], y[at:min(at+w, len(x))]
		var m float32
		for _, v := range part {
			if v == v {
				m = max(m, float32(math.Abs(float64(v))))
			}
		}
		if m > 1e38 || m < 0x1p-96 {
			continue // clamped to the largest bf16, or s subnormal
		}
		s := float64(bf16Up(m))
		for i, v := range part {
			if v != v {
				v = 0
			}
			if d := float64(dec[i]); math.Abs(d-float64(v)) > s*(0.5+1e-6) {
				t.Fatalf("%s: %v decoded to %v (s = %v)", c.Name(), v, d, s)
			}
		}
	}
}
