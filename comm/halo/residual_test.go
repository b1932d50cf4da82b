package halo

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// haloError is the largest |received - sent| over rank p's halo rows, each
// relative to the row's largest magnitude.
func haloError(l haloLayout, mats []*kernels.Mat, p int) float64 {
	rs, f := l.recvStart(p), mats[p].Cols
	var worst float64
	for o := range l.owned {
		for k, src := range l.send[o][p] {
			got, want := mats[p].Row(l.owned[p]+rs[o]+k), mats[o].Row(int(src))
			var diff, size float64
			for j := 0; j < f; j++ {
				diff = max(diff, math.Abs(float64(got[j]-want[j])))
				size = max(size, math.Abs(float64(want[j])))
			}
			worst = max(worst, diff/size)
		}
	}
	return worst
}

// sameState checks that every sender's copy of the receivers' state equals
// what the receivers hold, bit for bit.
func sameState(t *testing.T, l haloLayout, xs []*Exchange[[]byte], layer, dir int) {
	t.Helper()
	q := len(xs)
	for s := range q {
		send, _ := xs[s].sides(dir)
		st := xs[s].states[layer][dir]
		for r := range q {
			_, recv := xs[r].sides(dir)
			rt := xs[r].states[layer][dir]
			n := send.Rows[r] * st.cols
			a := st.sent.Data[send.Start[r]*st.cols:][:n]
			b := rt.recv.Data[recv.Start[s]*rt.cols:][:n]
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("layer %d dir %d: rank %d's copy of rank %d's state differs at %d: %v, %v", layer, dir, s, r, i, a[i], b[i])
				}
			}
		}
	}
}

// TestResidualConverges: rows that do not change reach the receivers
// exactly under 2-bit and ternary residual coding (rows with their own
// headers or sharing them), both ends' states stay equal, and with skipping the rows
// stop travelling once they have arrived (the bytes fall to the bitmaps).
func TestResidualConverges(t *testing.T) {
	for _, c := range []codec.Spec{codec.Quant(2), codec.Quant(2).Grouped(3), codec.Tern(), codec.Tern().Grouped(3)} {
		t.Run(c.Name(), func(t *testing.T) { residualConverges(t, c) })
	}
}

func residualConverges(t *testing.T, c codec.Spec) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := randomLayout(rng, 3)
	const f, epochs = 11, 40
	for _, skip := range []float32{0, 1e-3} {
		var mu sync.Mutex
		xs := make([]*Exchange[[]byte], 3)
		errs := make([][]float64, 3) // per rank, per epoch: the halo error
		bytes := make([][]int64, 3)
		var mats []*kernels.Mat
		mats = runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			mu.Lock()
			xs[x.plan.Rank] = x
			mu.Unlock()
			x.SetCodecs(0, c, codec.None())
			if err := x.SetResidual(Residual{Forward: true, Backward: true, Skip: skip}); err != nil {
				return err
			}
			for e := range epochs {
				x.SetEpoch(7, e)
				x.Meter().Reset()
				if err := x.Forward(0, h); err != nil {
					return err
				}
				fw, bw := make([]int64, 1), make([]int64, 1)
				x.Meter().AddBytes(fw, bw)
				bytes[x.plan.Rank] = append(bytes[x.plan.Rank], fw[0])
				errs[x.plan.Rank] = append(errs[x.plan.Rank], math.Sqrt(x.Meter().ErrSq[0]/x.Meter().NormSq[0]))
			}
			return nil
		})
		sameState(t, l, xs, 0, 0)
		for p := range 3 {
			// Exact up to float32 rounding, or within the skip threshold.
			if e := haloError(l, mats, p); e > max(1e-6, float64(skip)) {
				t.Errorf("skip %v: rank %d's halo rows are off by %v of their size after %d epochs", skip, p, e, epochs)
			}
			if first, last := errs[p][0], errs[p][epochs-1]; skip == 0 && !(last < first/1000) {
				t.Errorf("rank %d's comp_error went from %v to %v", p, first, last)
			}
			if skip > 0 {
				var bitmaps int64
				for o := range 3 {
					if o != p {
						bitmaps += int64(bitmapSize(len(l.send[p][o])))
					}
				}
				if got := bytes[p][epochs-1]; got != bitmaps {
					t.Errorf("rank %d sent %d bytes in the last epoch, expected its bitmaps alone (%d)", p, got, bitmaps)
				}
			}
		}
	}
}

// TestResidualRefresh: under a skip threshold so loose that rows stay out
// after their first coarse copy, the rows that stop changing stay off by
// up to the threshold; with Refresh every row goes every few epochs all
// the same, and they reach the receivers exactly.
func TestResidualRefresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	l := randomLayout(rng, 3)
	const f, epochs, skip = 16, 80, 0.5
	for _, refresh := range []int{0, 4} {
		mats := runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			x.SetCodecs(0, codec.Quant(2), codec.None())
			if err := x.SetResidual(Residual{Forward: true, Skip: skip, Refresh: refresh}); err != nil {
				return err
			}
			for e := range epochs {
				x.SetEpoch(7, e)
				if err := x.Forward(0, h); err != nil {
					return err
				}
			}
			return nil
		})
		for p := range 3 {
			e := haloError(l, mats, p)
			if refresh > 0 && e > 1e-6 {
				t.Errorf("refresh %d: rank %d's halo rows are off by %v of their size after %d epochs", refresh, p, e, epochs)
			}
			if refresh == 0 && e < 1e-3 {
				t.Errorf("no refresh: rank %d's halo rows are off by only %v: the threshold left none out", p, e)
			}
		}
	}
}

// TestResidualBackward: constant gradients returned under 2-bit residual
// coding add up, epoch after epoch, to the exact sums at the owners.
func TestResidualBackward(t *testing.T) {
	for _, c := range []codec.Spec{codec.Quant(2), codec.Quant(2).Grouped(4), codec.Tern(), codec.Tern().Grouped(4)} {
		t.Run(c.Name(), func(t *testing.T) { residualBackward(t, c) })
	}
}

func residualBackward(t *testing.T, c codec.Spec) {
	rng := rand.New(rand.NewPCG(7, 8))
	l := randomLayout(rng, 3)
	const f, epochs = 6, 40
	xs := make([]*Exchange[[]byte], 3)
	var mu sync.Mutex
	mats := runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
		mu.Lock()
		xs[x.plan.Rank] = x
		mu.Unlock()
		x.SetCodecs(0, codec.None(), c)
		if err := x.SetResidual(Residual{Forward: true, Backward: true, Skip: 1e-4}); err != nil {
			return err
		}
		own := h.View(0, x.plan.Owned)
		for e := range epochs {
			x.SetEpoch(9, e)
			clear(own.Data)
			for i := x.plan.Owned; i < h.Rows; i++ {
				for j := range f {
					h.Data[i*f+j] = float32(i%5) - float32(j)/3 // the same gradient every epoch
				}
			}
			if err := backward(x, 0, h); err != nil {
				return err
			}
		}
		return nil
	})
	sameState(t, l, xs, 0, 1)
	for r := range 3 {
		want := make([]float64, l.owned[r]*f)
		for p := range 3 {
			rs := l.recvStart(p)
			for k, i := range l.send[r][p] {
				row := l.owned[p] + rs[r] + k
				for j := range f {
					want[int(i)*f+j] += float64(row%5) - float64(j)/3
				}
			}
		}
		for i, w := range want {
			if got := mats[r].Data[i]; math.Abs(float64(got)-w) > 1e-3 {
				t.Fatalf("rank %d value %d: %v, want %v", r, i, got, w)
			}
		}
	}
}

// TestKeep: a row goes when its residual exceeds the threshold relative to
// the row and the floor, and always when the residual holds a NaN or an
// infinity.
func TestKeep(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	m := kernels.Mat{Rows: 6, Cols: 2, Data: []float32{1, -2, 1, -2, 0, 0, 1, inf, nan, 1, 1, 1}}
	state := kernels.Mat{Rows: 6, Cols: 2, Data: []float32{0.9, -2, 0.7, -2, 0, 0, 1, 0, 0, 1, 1, 1}}
	d := kernels.NewMat(6, 2)
	dmax, mmax := make([]uint32, 6), make([]uint32, 6)
	for _, on := range fastModes(t) {
		fast = on
		bitmap := []byte{0xff}
		(&Host{}).Residual([]int32{0, 1, 2, 3, 4, 5}, &m, &state, 0, d, dmax, mmax)
		n := keep(dmax, mmax, codec.Skip{Tau: 0.1}, bitmap)
		if want := byte(0b11010); bitmap[0] != want || n != 3 {
			t.Errorf("AVX2 %v: bitmap %08b (%d rows), expected %08b (3 rows)", on, bitmap[0], n, want)
		}
		// Refreshed every 3 exchanges from row 0: rows 0 and 3 go whatever
		// their residuals.
		n = keep(dmax, mmax, codec.Skip{Tau: 0.1, Every: 3}, bitmap)
		if want := byte(0b11011); bitmap[0] != want || n != 4 {
			t.Errorf("AVX2 %v, refresh: bitmap %08b (%d rows), expected %08b (4 rows)", on, bitmap[0], n, want)
		}
		// A floor of 0.5 leaves row 1 out too (its residual is 0.3); the
		// infinite and NaN residuals still go.
		n = keep(dmax, mmax, codec.Skip{Tau: 0.1, Floor: 0.5}, bitmap)
		if want := byte(0b11000); bitmap[0] != want || n != 2 {
			t.Errorf("AVX2 %v, floor: bitmap %08b (%d rows), expected %08b (2 rows)", on, bitmap[0], n, want)
		}
		if got := d.Row(1)[0]; got != 1-0.7 {
			t.Errorf("AVX2 %v: residual %v, expected %v", on, got, float32(1-0.7))
		}
	}
}

// fastModes runs the rest of a test with the AVX2 row operations (where
// the machine has them) and with the Go ones, restoring the choice after.
func fastModes(t *testing.T) []bool {
	was := fast
	t.Cleanup(func() { fast = was })
	modes := []bool{false}
	if was {
		modes = append(modes, true)
	}
	return modes
}

// TestFastRows: the AVX2 residual and scatter-add equal the Go ones bit
// for bit, special values and odd widths included.
func TestFastRows(t *testing.T) {
	if !fast {
		t.Skip("this machine runs the Go row operations only")
	}
	defer func() { fast = true }()
	rng := rand.New(rand.NewPCG(13, 14))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, math.MaxFloat32}
	for _, f := range []int{1, 7, 8, 9, 31, 64, 129} {
		m, s := kernels.NewMat(20, f), kernels.NewMat(12, f)
		for i := range m.Data {
			m.Data[i] = float32(rng.NormFloat64())
			if rng.IntN(10) == 0 {
				m.Data[i] = special[rng.IntN(len(special))]
			}
		}
		for i := range s.Data {
			s.Data[i] = float32(rng.NormFloat64())
		}
		idx := make([]int32, 10)
		for k := range idx {
			idx[k] = int32(rng.IntN(20))
		}
		var out [2][]uint32
		var d [2]*kernels.Mat
		var added [2][]float32
		for i, on := range []bool{false, true} {
			fast = on
			h := &Host{}
			d[i] = kernels.NewMat(12, f)
			bitmap := make([]byte, 2)
			dmax, mmax := make([]uint32, 10), make([]uint32, 10)
			h.Residual(idx, m, s, 2, d[i], dmax, mmax)
			keep(dmax, mmax, codec.Skip{Tau: 0.5, Every: 3, Phase: 2}, bitmap)
			out[i] = append(append(dmax, mmax...), uint32(bitmap[0]), uint32(bitmap[1]))
			dst := kernels.NewMat(20, f)
			copy(dst.Data, m.Data)
			h.ScatterAdd(idx[:5:5], s, 3, dst) // distinct rows: a scatter-add's contract
			added[i] = dst.Data
		}
		for k := range out[0] {
			if out[0][k] != out[1][k] {
				t.Fatalf("width %d: maxima or bitmap %d: %x (Go) and %x (AVX2)", f, k, out[0][k], out[1][k])
			}
		}
		for k := range d[0].Data {
			if a, b := math.Float32bits(d[0].Data[k]), math.Float32bits(d[1].Data[k]); a != b && !(d[0].Data[k] != d[0].Data[k] && d[1].Data[k] != d[1].Data[k]) {
				t.Fatalf("width %d: residual %d: %x (Go) and %x (AVX2)", f, k, a, b)
			}
		}
		for k := range added[0] {
			if a, b := math.Float32bits(added[0][k]), math.Float32bits(added[1][k]); a != b && !(added[0][k] != added[0][k] && added[1][k] != added[1][k]) {
				t.Fatalf("width %d: scatter-add %d: %x (Go) and %x (AVX2)", f, k, a, b)
			}
		}
	}
}

// TestResidualGatherRestore: a rank's state gathered on rank 0 (as a
// checkpoint stores it) and restored into fresh exchanges continues the run
// bit for bit.
func TestResidualGatherRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := randomLayout(rng, 3)
	const f, layers = 5, 2
	run := func(from []ResidualTable, first, last int, gather bool) (tables []ResidualTable, out []*kernels.Mat) {
		out = make([]*kernels.Mat, 3)
		err := comm.RunLocal(3, func(c *comm.Local) error {
			r := c.Rank()
			rs := l.recvStart(r)
			plan, err := NewPlan(r, l.owned[r], l.send[r], rs)
			if err != nil {
				return err
			}
			x, err := NewHost(plan, c, layers)
			if err != nil {
				return err
			}
			if err := x.RestoreResidual(from); err != nil {
				return err
			}
			x.SetCodecs(0, codec.Quant(2), codec.Quant(4))
			x.SetCodecs(1, codec.Quant(3), codec.Quant(2))
			if err := x.SetResidual(Residual{Forward: true, Backward: true, Skip: 0.01}); err != nil {
				return err
			}
			h := kernels.NewMat(l.owned[r]+rs[3], f)
			for e := first; e < last; e++ {
				x.SetEpoch(3, e)
				for i := range h.Data {
					h.Data[i] = float32(math.Sin(float64(i*7+r*13) + float64(e)/5))
				}
				for layer := range layers {
					if err := x.Forward(layer, h); err != nil {
						return err
					}
					if err := backward(x, layer, h); err != nil {
						return err
					}
				}
			}
			out[r] = h
			if gather {
				t, err := GatherResidual(c, x.ResidualBlocks(), layers)
				if r == 0 {
					tables = t
				}
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tables, out
	}
	_, whole := run(nil, 0, 8, false)
	tables, _ := run(nil, 0, 5, true)
	if len(tables) != 2*layers {
		t.Fatalf("%d tables, expected %d", len(tables), 2*layers)
	}
	_, resumed := run(tables, 5, 8, false)
	for r := range 3 {
		for i := range whole[r].Data {
			if math.Float32bits(whole[r].Data[i]) != math.Float32bits(resumed[r].Data[i]) {
				t.Fatalf("rank %d value %d: %v resumed, %v in one run", r, i, resumed[r].Data[i], whole[r].Data[i])
			}
		}
	}
	bad := tables[0]
	bad.Rows = append([][]int64{}, bad.Rows...)
	bad.Rows[0] = append([]int64{}, bad.Rows[0]...)
	bad.Rows[0][1]++
	err := comm.RunLocal(3, func(c *comm.Local) error {
		r := c.Rank()
		plan, _ := NewPlan(r, l.owned[r], l.send[r], l.recvStart(r))
		x, _ := NewHost(plan, c, layers)
		return x.RestoreResidual([]ResidualTable{bad})
	})
	if err == nil {
		t.Errorf("a table of another layout was restored")
	}
}

// TestResidualFused: the host's one-pass residual kernels (codec's
// DeltaEncode and DecodeAdd) give the composed steps' halo rows, gradients,
// bytes and comp_error sums bit for bit, epoch after epoch, with and
// without skipping, in both directions, and so does the plain backward's
// fused decode and scatter-add (residual coding forward only).
func TestResidualFused(t *testing.T) {
	if !fast || !codec.Quant(2).DeltaFused() {
		t.Skip("no fused residual kernels on this machine or build")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	l := randomLayout(rng, 3)
	const f, epochs = 37, 6
	type trace struct {
		rows   [][]float32 // per rank: h after the last epoch
		counts [][]float64 // per rank: every epoch's bytes and error sums
	}
	run := func(fused bool, b int, skip float32, backwardRes bool) trace {
		fast = fused
		defer func() { fast = true }()
		tr := trace{rows: make([][]float32, 3), counts: make([][]float64, 3)}
		var mu sync.Mutex
		runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			r := x.plan.Rank
			if b == 0 { // the ternary rung
				x.SetCodecs(0, codec.Tern(), codec.Tern())
			} else {
				x.SetCodecs(0, codec.Quant(b), codec.Quant(max(1, b-1)))
			}
			if err := x.SetResidual(Residual{Forward: true, Backward: backwardRes, Skip: skip}); err != nil {
				return err
			}
			var counts []float64
			for e := range epochs {
				x.SetEpoch(9, e)
				x.Meter().Reset()
				for i := range x.plan.Owned * f {
					h.Data[i] = float32(math.Sin(float64(i*3+r*11)) * (1 + 0.02*float64(e)))
				}
				for i := x.plan.Owned * f; i < len(h.Data); i++ {
					h.Data[i] = -7 // as an evaluation pass leaves them: Forward must write every halo row
				}
				if err := x.Forward(0, h); err != nil {
					return err
				}
				if err := backward(x, 0, h); err != nil {
					return err
				}
				fw, bw := make([]int64, 1), make([]int64, 1)
				x.Meter().AddBytes(fw, bw)
				counts = append(counts, float64(fw[0]), float64(bw[0]), x.Meter().ErrSq[0], x.Meter().NormSq[0])
			}
			mu.Lock()
			tr.rows[r], tr.counts[r] = append([]float32(nil), h.Data...), counts
			mu.Unlock()
			return nil
		})
		return tr
	}
	for _, b := range []int{0, 1, 2, 3, 8} { // 0: ternary
		for _, skip := range []float32{0, 0.05} {
			for _, backwardRes := range []bool{true, false} {
				want, got := run(false, b, skip, backwardRes), run(true, b, skip, backwardRes)
				for r := range 3 {
					for i := range want.rows[r] {
						if math.Float32bits(want.rows[r][i]) != math.Float32bits(got.rows[r][i]) {
							t.Fatalf("%d bits, skip %v, backward residual %v: rank %d value %d: %v composed, %v fused", b, skip, backwardRes, r, i, want.rows[r][i], got.rows[r][i])
						}
					}
					for i := range want.counts[r] {
						if math.Float64bits(want.counts[r][i]) != math.Float64bits(got.counts[r][i]) {
							t.Fatalf("%d bits, skip %v, backward residual %v: rank %d epoch %d count %d: %v composed, %v fused", b, skip, backwardRes, r, i/4, i%4, want.counts[r][i], got.counts[r][i])
						}
					}
				}
			}
		}
	}
}

// TestResidualOneBitPlain: under residual coding, 1-bit exchanges go as
// plain 1-bit ones, bit for bit, and leave the state alone (none is even
// allocated); 2-bit ones in the same run still code residuals.
func TestResidualOneBitPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	l := randomLayout(rng, 3)
	const f, epochs = 9, 5
	run := func(res Residual) (rows [][]float32, state []int64) {
		rows, state = make([][]float32, 3), make([]int64, 3)
		var mu sync.Mutex
		runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			r := x.plan.Rank
			x.SetCodecs(0, codec.Quant(1), codec.Quant(1))
			if err := x.SetResidual(res); err != nil {
				return err
			}
			for e := range epochs {
				x.SetEpoch(5, e)
				for i := range x.plan.Owned * f {
					h.Data[i] = float32(math.Cos(float64(i*5+r) + float64(e)/3))
				}
				if err := x.Forward(0, h); err != nil {
					return err
				}
				if err := backward(x, 0, h); err != nil {
					return err
				}
			}
			mu.Lock()
			rows[r], state[r] = append([]float32(nil), h.Data...), x.ResidualBytes()
			mu.Unlock()
			return nil
		})
		return rows, state
	}
	want, _ := run(Residual{})
	got, state := run(Residual{Forward: true, Backward: true, Skip: 0.01})
	for r := range 3 {
		if state[r] != 0 {
			t.Errorf("rank %d holds %d bytes of residual state after 1-bit exchanges", r, state[r])
		}
		for i := range want[r] {
			if math.Float32bits(got[r][i]) != math.Float32bits(want[r][i]) {
				t.Fatalf("rank %d value %d: %v under residual coding, %v plain", r, i, got[r][i], want[r][i])
			}
		}
	}
}
