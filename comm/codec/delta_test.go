package codec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// deltaReference is DeltaEncode composed of the Go reference's steps: the
// differences, the skip test on their magnitudes' bits, Encode of the kept
// rows gathered, Decode, the reference update and SqDiff. Row k is forced
// where skip.Every > 0 and (k + skip.Phase) % skip.Every == 0.
func deltaReference(s Spec, m []float32, idx []int32, cols int, ref []float32, skip Skip, bitmap []byte, seed uint64) (dst []byte, kept int, errSq, normSq float64) {
	mag := func(x float32) uint32 { return math.Float32bits(x) &^ (1 << 31) }
	clear(bitmap)
	var gathered []float32
	var rows []int
	for k, r := range idx {
		x, d := m[int(r)*cols:int(r+1)*cols], make([]float32, cols)
		var md, mm uint32
		for j := range x {
			d[j] = x[j] - ref[k*cols+j]
			md, mm = max(md, mag(d[j])), max(mm, mag(x[j]))
		}
		if bitmap != nil {
			forced := skip.Every > 0 && (k+skip.Phase)%skip.Every == 0
			d := math.Float32frombits(md)
			if !forced && !(md > mag(math.MaxFloat32) || d > skip.Tau*math.Float32frombits(mm) && d > skip.Floor) {
				continue
			}
			bitmap[k>>3] |= 1 << (k & 7)
		}
		gathered, rows = append(gathered, d...), append(rows, k)
	}
	withReference(func() {
		dst = make([]byte, s.WireSize(len(rows), cols))
		s.Encode(dst, gathered, len(rows), cols, seed)
		dec := make([]float32, len(gathered))
		s.Decode(dec, dst, len(rows), cols)
		for i, k := range rows {
			for j := range cols {
				ref[k*cols+j] += dec[i*cols+j]
			}
		}
		errSq, normSq = SqDiff(m, idx, cols, ref)
	})
	return dst, len(rows), errSq, normSq
}

// The fused delta kernels against their composition of reference steps,
// bit for bit: every quant width below 16 and tern, widths 0..257, with
// and without skipping, rows with NaN, infinities, signed zeros,
// subnormals (a whole row of them: tern's s subnormal) and constants,
// references near and far from the rows.
func TestDeltaFused(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build: DeltaEncode composes the reference's steps")
	}
	r := rand.New(rand.NewPCG(31, 32))
	specials := []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.SmallestNonzeroFloat32, -1e-40, math.MaxFloat32, 1}
	specs := []Spec{Tern()}
	for b := 1; b <= 8; b++ {
		specs = append(specs, Quant(b))
	}
	for _, s := range specs {
		b := s.Name()
		for cols := 0; cols <= 257; cols++ {
			const mrows, n = 9, 7
			m := make([]float32, mrows*cols)
			for i := range m {
				m[i] = float32(r.NormFloat64())
				if r.IntN(40) == 0 {
					m[i] = specials[r.IntN(len(specials))]
				}
			}
			if cols > 0 {
				for j := range cols { // a constant row, and a subnormal one
					m[3*cols+j] = 0.75
					m[5*cols+j] = float32(r.NormFloat64() * 1e-41)
				}
			}
			idx := make([]int32, n)
			for k := range idx {
				idx[k] = int32(r.IntN(mrows))
			}
			ref := make([]float32, n*cols)
			for k := range n {
				// 0: zero, 1: close to its row, 2: unrelated, 3: its row
				// scaled, the residual's size around the skip threshold, 4:
				// its row (a residual of zeros: tern's s = 0)
				near, c := r.IntN(5), float32(r.Float64()*0.1)
				for j := range cols {
					x := m[int(idx[k])*cols+j]
					switch near {
					case 1:
						ref[k*cols+j] = x * (1 + float32(r.NormFloat64())*0.01)
					case 2:
						ref[k*cols+j] = float32(r.NormFloat64())
					case 3:
						ref[k*cols+j] = x * (1 - c)
					case 4:
						ref[k*cols+j] = x
					}
				}
			}
			for _, skip := range []Skip{{}, {Tau: 0.05}, {Tau: 0.05, Every: 3, Phase: 1}, {Tau: 0.5, Every: 2}, {Tau: 0.05, Floor: 0.5, Every: 3, Phase: 2}, {Tau: 1e-6, Floor: 2}, {Tau: 1e30}} {
				tau := skip.Tau
				var bmWant, bmGot []byte
				if skip.Skipping() {
					bmWant, bmGot = make([]byte, (n+7)/8), make([]byte, (n+7)/8)
				}
				seed := r.Uint64()
				refWant, refGot := append([]float32(nil), ref...), append([]float32(nil), ref...)
				want, wantK, wantE, wantN := deltaReference(s, m, idx, cols, refWant, skip, bmWant, seed)
				dst := make([]byte, s.WireSize(n, cols))
				kept, e, nn, ok := s.DeltaEncode(dst, m, idx, cols, refGot, skip, bmGot, seed, make([]float32, DeltaScratch(cols)))
				if cols == 0 {
					if ok {
						t.Fatalf("%s cols=0: DeltaEncode ran", b)
					}
					continue
				}
				if !ok {
					t.Fatalf("%s: no fused kernel on an AVX2 machine", b)
				}
				if kept != wantK || !bytes.Equal(dst[:s.WireSize(kept, cols)], want) || !bytes.Equal(bmGot, bmWant) ||
					!bytes.Equal(dst[s.WireSize(kept, cols):], make([]byte, len(dst)-s.WireSize(kept, cols))) {
					t.Fatalf("%s cols=%d skip=%+v: kept %d of %d (want %d), payload or bitmap differ", b, cols, skip, kept, n, wantK)
				}
				if !sameBits(refGot, refWant) {
					t.Fatalf("%s cols=%d tau=%g: the references differ", b, cols, tau)
				}
				if !same64(e, wantE) || !same64(nn, wantN) {
					t.Fatalf("%s cols=%d tau=%g: SqDiff %v, %v against %v, %v", b, cols, tau, e, nn, wantE, wantN)
				}
				// The receiver's add, onto another reference.
				rows := make([]int32, kept)
				for k := range rows {
					rows[k] = int32(r.IntN(n))
				}
				recvWant, recvGot := append([]float32(nil), ref...), append([]float32(nil), ref...)
				withReference(func() {
					dec := make([]float32, kept*cols)
					s.Decode(dec, want, kept, cols)
					for k, row := range rows {
						for j := range cols {
							recvWant[int(row)*cols+j] += dec[k*cols+j]
						}
					}
				})
				// Half the time with a copy-out, which must hold the
				// updated rows and leave the others alone.
				var out []float32
				if r.IntN(2) == 0 {
					out = make([]float32, len(ref))
					for i := range out {
						out[i] = -1
					}
				}
				if kept > 0 && !s.DecodeAdd(recvGot, rows, want, cols, out) {
					t.Fatalf("%s: DecodeAdd did not run", b)
				}
				if !sameBits(recvGot, recvWant) {
					t.Fatalf("%s cols=%d tau=%g: DecodeAdd differs", b, cols, tau)
				}
				if out != nil {
					wantOut := make([]float32, len(ref))
					for i := range wantOut {
						wantOut[i] = -1
					}
					for _, row := range rows {
						copy(wantOut[int(row)*cols:(int(row)+1)*cols], recvWant[int(row)*cols:(int(row)+1)*cols])
					}
					if !sameBits(out, wantOut) {
						t.Fatalf("%s cols=%d tau=%g: DecodeAdd's copy-out differs", b, cols, tau)
					}
				}
			}
		}
	}
	for _, s := range []Spec{Quant(16), Tern().Grouped(2), Quant(2).Grouped(2)} {
		if _, _, _, ok := s.DeltaEncode(nil, nil, []int32{0}, 1, nil, Skip{}, nil, 0, nil); ok || s.DeltaFused() {
			t.Fatalf("%s has no fused delta kernel, yet DeltaEncode ran", s.Name())
		}
	}
}

// sameBits is bit equality of two float32 slices, any NaN matching any
// other: which NaN an addition of two keeps depends on its operand order,
// which a compiler may swap.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// same64 is bit equality, any NaN matching any other (a NaN sum's payload
// depends on which NaN the vector unit meets first).
func same64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
}

// DecodeAdd against Decode and an add on the reference, from random
// payloads: headers of any bits (tern's s of ±0, NaN, infinite,
// subnormal; code bytes above 242), onto rows holding -0, NaN and
// infinities, rows repeated, with and without a copy-out.
func TestDecodeAddRandom(t *testing.T) {
	if !fast {
		t.Skip("no AVX2 path on this machine or build")
	}
	r := rand.New(rand.NewPCG(33, 34))
	specials := []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32}
	for _, s := range []Spec{Tern(), Quant(2), Quant(5)} {
		for cols := 1; cols <= 150; cols++ {
			const n, kept = 10, 13
			ref := make([]float32, n*cols)
			for i := range ref {
				ref[i] = float32(r.NormFloat64())
				if r.IntN(4) == 0 {
					ref[i] = specials[r.IntN(len(specials))]
				}
			}
			rows := make([]int32, kept)
			for k := range rows {
				rows[k] = int32(r.IntN(n))
			}
			p := randomBytes(r, s.WireSize(kept, cols))
			if s.Kind() == KindTern {
				st := ternStride(cols)
				for k := range kept {
					if h := p[ternKey+k*st:]; r.IntN(3) == 0 {
						h[0], h[1] = 0, []byte{0, 0x80}[r.IntN(2)]
					}
				}
			}
			want := append([]float32(nil), ref...)
			withReference(func() {
				dec := make([]float32, kept*cols)
				s.Decode(dec, p, kept, cols)
				for k, row := range rows {
					for j := range cols {
						want[int(row)*cols+j] += dec[k*cols+j]
					}
				}
			})
			got := append([]float32(nil), ref...)
			var out []float32
			if cols%2 == 0 {
				out = make([]float32, len(ref))
			}
			if !s.DecodeAdd(got, rows, p, cols, out) {
				t.Fatalf("%s: DecodeAdd did not run", s.Name())
			}
			if !sameBits(got, want) {
				t.Fatalf("%s cols=%d: DecodeAdd differs", s.Name(), cols)
			}
			for _, row := range rows {
				if out != nil && !sameBits(out[int(row)*cols:(int(row)+1)*cols], want[int(row)*cols:(int(row)+1)*cols]) {
					t.Fatalf("%s cols=%d: DecodeAdd's copy-out differs", s.Name(), cols)
				}
			}
		}
	}
}
