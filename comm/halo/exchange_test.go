package halo

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/comm/codec"
	"github.com/gnn-spmd/gnn-spmd/kernels"
)

// haloLayout is a random 3-rank layout: owned[r] rows on rank r, and
// send[r][p] the owned rows of r that p holds as halo (in p's order).
type haloLayout struct {
	owned []int
	send  [][][]int32
}

func randomLayout(rng *rand.Rand, q int) haloLayout {
	l := haloLayout{owned: make([]int, q), send: make([][][]int32, q)}
	for r := range l.owned {
		l.owned[r] = 5 + rng.IntN(20)
	}
	for r := 0; r < q; r++ {
		l.send[r] = make([][]int32, q)
		for p := 0; p < q; p++ {
			if p == r {
				continue
			}
			for _, i := range rng.Perm(l.owned[r])[:rng.IntN(l.owned[r])] {
				l.send[r][p] = append(l.send[r][p], int32(i))
			}
		}
	}
	return l
}

// recvStart of rank p: halo rows grouped by owner rank.
func (l haloLayout) recvStart(p int) []int {
	q := len(l.owned)
	rs := make([]int, q+1)
	for o := 0; o < q; o++ {
		rs[o+1] = rs[o] + len(l.send[o][p])
	}
	return rs
}

// runExchange runs body on every rank of a Local group with its exchange and
// its (owned+halo) x f matrix, whose owned rows hold value(rank, row, col).
func runExchange(t testing.TB, l haloLayout, f int, body func(x *Exchange[[]byte], h *kernels.Mat) error) []*kernels.Mat {
	q := len(l.owned)
	mats := make([]*kernels.Mat, q)
	err := comm.RunLocal(q, func(c *comm.Local) error {
		r := c.Rank()
		rs := l.recvStart(r)
		h := kernels.NewMat(l.owned[r]+rs[q], f)
		for i := 0; i < l.owned[r]; i++ {
			for j := 0; j < f; j++ {
				h.Data[i*f+j] = value(r, i, j)
			}
		}
		mats[r] = h
		plan, err := NewPlan(r, l.owned[r], l.send[r], rs)
		if err != nil {
			return err
		}
		x, err := NewHost(plan, c, 1)
		if err != nil {
			return err
		}
		return body(x, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mats
}

func value(rank, row, col int) float32 { return float32(rank*1000+row) + float32(col)/16 }

func TestExchangeForwardRawAndTrunc(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := randomLayout(rng, 3)
	const f = 9
	for _, c := range []codec.Spec{codec.None(), codec.Trunc(2), codec.Quant(8)} {
		sent := make([]int64, 3)
		mats := runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
			x.SetCodecs(0, c, codec.None())
			if err := x.Forward(0, h); err != nil {
				return err
			}
			fw, bw := make([]int64, 1), make([]int64, 1)
			x.Meter().AddBytes(fw, bw)
			sent[x.plan.Rank] = fw[0]
			return nil
		})
		for p := 0; p < 3; p++ {
			rs := l.recvStart(p)
			var want int64
			for o := 0; o < 3; o++ {
				rows := len(l.send[p][o])
				want += int64(c.WireSize(rows, f))
				for k, src := range l.send[o][p] {
					got := mats[p].Row(l.owned[p] + rs[o] + k)
					for j := 0; j < f; j++ {
						v := value(o, int(src), j)
						switch {
						case c.Raw() && got[j] != v:
							t.Fatalf("raw: rank %d halo row from %d col %d = %v, want %v", p, o, j, got[j], v)
						case c.Name() == "trunc(r=2)" && j < 4 && got[j] != v,
							c.Name() == "trunc(r=2)" && j >= 4 && got[j] != 0:
							t.Fatalf("trunc: rank %d col %d = %v (input %v)", p, j, got[j], v)
						case c.Name() == "quant(b=8)" && math.Abs(float64(got[j]-v)) > 2000.0/255:
							t.Fatalf("quant: rank %d col %d = %v, input %v", p, j, got[j], v)
						}
					}
				}
			}
			if sent[p] != want {
				t.Errorf("codec %s: rank %d counted %d bytes, wire sizes add to %d", c.Name(), p, sent[p], want)
			}
		}
	}
}

// backward runs both steps of the backward exchange on h, owned rows then
// halo rows.
func backward(x *Exchange[[]byte], layer int, h *kernels.Mat) error {
	if err := x.BackwardSend(layer, h.View(x.plan.Owned, h.Rows)); err != nil {
		return err
	}
	return x.BackwardAdd(layer, h.View(0, x.plan.Owned))
}

// TestExchangeBackwardAdds: every owner adds each returned gradient row into
// the row it sent, whatever the codec (checked exactly for raw rows).
func TestExchangeBackwardAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := randomLayout(rng, 3)
	const f = 5
	mats := runExchange(t, l, f, func(x *Exchange[[]byte], h *kernels.Mat) error {
		// Halo rows carry 1 in every column; owned rows keep their values.
		for i := x.plan.Owned * f; i < len(h.Data); i++ {
			h.Data[i] = 1
		}
		return backward(x, 0, h)
	})
	for r := 0; r < 3; r++ {
		times := make([]int, l.owned[r])
		for p := 0; p < 3; p++ {
			for _, i := range l.send[r][p] {
				times[i]++
			}
		}
		for i := 0; i < l.owned[r]; i++ {
			for j := 0; j < f; j++ {
				if got, want := mats[r].Data[i*f+j], value(r, i, j)+float32(times[i]); got != want {
					t.Fatalf("rank %d row %d: %v, want %v", r, i, got, want)
				}
			}
		}
	}
}
