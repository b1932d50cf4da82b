package comm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

var _ Comm = (*Local)(nil)

// within fails the test if f has not returned after d: a hang becomes a
// failure instead of a stuck test binary.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v: a collective hangs", d)
	}
}

// runRanks runs f on every rank of a fresh group and returns each rank's
// error.
func runRanks(q int, f func(c *Local) error) []error {
	ls := NewLocal(q)
	errs := make([]error, q)
	var wg sync.WaitGroup
	for r, c := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func payload(from, to, round, i int) byte { return byte(from*131 + to*31 + round*7 + i) }

func TestLocalAllToAllV(t *testing.T) {
	for _, q := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprint("Q=", q), func(t *testing.T) {
			const rounds = 5
			rng := rand.New(rand.NewPCG(uint64(q), 1))
			// size[k][p][d]: bytes from p to d in round k; about a
			// quarter are empty.
			size := make([][][]int, rounds)
			for k := range size {
				size[k] = make([][]int, q)
				for p := range size[k] {
					size[k][p] = make([]int, q)
					for d := range size[k][p] {
						if rng.IntN(4) > 0 {
							size[k][p][d] = rng.IntN(5000)
						}
					}
				}
			}
			within(t, 10*time.Second, func() {
				err := RunLocal(q, func(c *Local) error {
					r := c.Rank()
					send, recv := make([][]byte, q), make([][]byte, q)
					for k := 0; k < rounds; k++ {
						for p := 0; p < q; p++ {
							send[p] = make([]byte, size[k][r][p])
							for i := range send[p] {
								send[p][i] = payload(r, p, k, i)
							}
							recv[p] = make([]byte, size[k][p][r])
						}
						if err := c.AllToAllV(send, recv); err != nil {
							return err
						}
						for p := 0; p < q; p++ {
							for i, b := range recv[p] {
								if want := payload(p, r, k, i); b != want {
									return fmt.Errorf("round %d: rank %d byte %d from rank %d is %d, want %d", k, r, i, p, b, want)
								}
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// orderedSum is the documented result: s = x0; s += x1; ... in T.
func orderedSum[T float32 | float64](xs [][]T, i int) T {
	s := xs[0][i]
	for p := 1; p < len(xs); p++ {
		s += xs[p][i]
	}
	return s
}

func testLocalAllReduce[T float32 | float64](t *testing.T, reduce func(c *Local, x []T) error, bits func(T) uint64) {
	for _, q := range []int{1, 2, 3, 4, 8} {
		for _, n := range []int{0, 1, 15, 17, 300, 5000} {
			rng := rand.New(rand.NewPCG(uint64(q), uint64(n)))
			in := make([][]T, q)
			for p := range in {
				in[p] = make([]T, n)
				for i := range in[p] {
					// Mixed magnitudes and signs, so the order of
					// summation changes the rounding.
					in[p][i] = T(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8))))
				}
			}
			out := make([][]T, q)
			var err error
			within(t, 10*time.Second, func() {
				err = RunLocal(q, func(c *Local) error {
					out[c.Rank()] = append([]T(nil), in[c.Rank()]...)
					return reduce(c, out[c.Rank()])
				})
			})
			if err != nil {
				t.Fatalf("Q=%d n=%d: %v", q, n, err)
			}
			for i := 0; i < n; i++ {
				want := bits(orderedSum(in, i))
				for p := range out {
					if got := bits(out[p][i]); got != want {
						t.Fatalf("Q=%d n=%d: rank %d element %d has bits %#x, want %#x (the ordered sum)", q, n, p, i, got, want)
					}
				}
			}
		}
	}
}

func TestLocalAllReduceFloat32(t *testing.T) {
	testLocalAllReduce(t, (*Local).AllReduceFloat32, func(x float32) uint64 { return uint64(math.Float32bits(x)) })
}

func TestLocalAllReduceFloat64(t *testing.T) {
	testLocalAllReduce(t, (*Local).AllReduceFloat64, math.Float64bits)
}

func TestLocalBcastBarrier(t *testing.T) {
	for _, q := range []int{1, 3, 4} {
		for root := 0; root < q; root++ {
			within(t, 10*time.Second, func() {
				err := RunLocal(q, func(c *Local) error {
					buf := make([]byte, 1000)
					if c.Rank() == root {
						for i := range buf {
							buf[i] = byte(i * (root + 1))
						}
					}
					if err := c.Bcast(buf, root); err != nil {
						return err
					}
					for i, b := range buf {
						if b != byte(i*(root+1)) {
							return fmt.Errorf("rank %d byte %d is %d after Bcast from %d", c.Rank(), i, b, root)
						}
					}
					return c.Barrier()
				})
				if err != nil {
					t.Fatalf("Q=%d root %d: %v", q, root, err)
				}
			})
		}
	}
}

// TestLocalAllocs measures one rank's collectives while the other ranks run
// the same calls in a loop; AllocsPerRun counts the whole process's
// allocations, so all ranks are covered.
func TestLocalAllocs(t *testing.T) {
	const q, runs = 4, 50
	ls := NewLocal(q)
	bufs := func(r int) (send, recv [][]byte, x32 []float32, x64 []float64) {
		send, recv = make([][]byte, q), make([][]byte, q)
		for p := range send {
			send[p] = make([]byte, 100*(r+1)+p)
			recv[p] = make([]byte, 100*(p+1)+r)
		}
		return send, recv, make([]float32, 1000), make([]float64, 1000)
	}
	got := make([][]int, q)
	for r := range got {
		got[r] = make([]int, q)
	}
	step := func(c *Local, send, recv [][]byte, x32 []float32, x64 []float64) error {
		if err := c.AllToAllV(send, recv); err != nil {
			return err
		}
		if err := c.AllToAllVShort(send, recv, got[c.Rank()]); err != nil {
			return err
		}
		if err := c.AllReduceFloat32(x32); err != nil {
			return err
		}
		if err := c.AllReduceFloat64(x64); err != nil {
			return err
		}
		if err := c.Bcast(send[c.Rank()][:100], 0); err != nil {
			return err
		}
		return c.Barrier()
	}
	var wg sync.WaitGroup
	errs := make([]error, q)
	for r := 1; r < q; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send, recv, x32, x64 := bufs(r)
			for i := 0; i < runs+1; i++ { // AllocsPerRun adds one warm-up run
				if errs[r] = step(ls[r], send, recv, x32, x64); errs[r] != nil {
					ls[r].Fail(errs[r]) // so that rank 0 does not wait for us
					return
				}
			}
		}()
	}
	send, recv, x32, x64 := bufs(0)
	var allocs float64
	within(t, 20*time.Second, func() {
		allocs = testing.AllocsPerRun(runs, func() {
			if err := step(ls[0], send, recv, x32, x64); err != nil && errs[0] == nil {
				errs[0] = err
			}
		})
		wg.Wait()
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if allocs != 0 {
		t.Errorf("%v allocations per step of AllToAllV, AllToAllVShort, AllReduce, Bcast and Barrier on %d ranks, want 0", allocs, q)
	}
}

func TestLocalSizeMismatch(t *testing.T) {
	const q = 3
	var errs []error
	within(t, 5*time.Second, func() {
		errs = runRanks(q, func(c *Local) error {
			send, recv := make([][]byte, q), make([][]byte, q)
			for p := range send {
				send[p] = make([]byte, 4)
				recv[p] = make([]byte, 4)
			}
			if c.Rank() == 2 {
				recv[0] = make([]byte, 5) // rank 0 sends 4
			}
			err := c.AllToAllV(send, recv)
			if err == nil {
				return errors.New("mismatched AllToAllV succeeded")
			}
			// The group is intact: a matching call works.
			recv[0] = recv[0][:4]
			if err2 := c.AllToAllV(send, recv); err2 != nil {
				return fmt.Errorf("AllToAllV after a mismatch: %v", err2)
			}
			return fmt.Errorf("expected: %w", err)
		})
	})
	wantExpected(t, errs)
}

// TestLocalAllToAllVShort: messages shorter than their receive buffers
// arrive with their sizes; one longer than its buffer is an error on every
// rank, and the group still works.
func TestLocalAllToAllVShort(t *testing.T) {
	const q = 3
	var errs []error
	within(t, 5*time.Second, func() {
		errs = runRanks(q, func(c *Local) error {
			r := c.Rank()
			send, recv, got := make([][]byte, q), make([][]byte, q), make([]int, q)
			for p := range send {
				send[p] = make([]byte, r+p)
				for i := range send[p] {
					send[p][i] = payload(r, p, 0, i)
				}
				recv[p] = make([]byte, 10)
			}
			if err := c.AllToAllVShort(send, recv, got); err != nil {
				return err
			}
			for p := range recv {
				if got[p] != p+r {
					return fmt.Errorf("rank %d: %d bytes from rank %d, want %d", r, got[p], p, p+r)
				}
				for i, b := range recv[p][:got[p]] {
					if want := payload(p, r, 0, i); b != want {
						return fmt.Errorf("rank %d: byte %d from rank %d is %d, want %d", r, i, p, b, want)
					}
				}
			}
			if r == 2 {
				recv[1] = recv[1][:2] // rank 1 sends 3
			}
			err := c.AllToAllVShort(send, recv, got)
			if err == nil {
				return errors.New("AllToAllVShort into a short buffer succeeded")
			}
			recv[1] = recv[1][:10]
			if err2 := c.AllToAllVShort(send, recv, got); err2 != nil {
				return fmt.Errorf("AllToAllVShort after a mismatch: %v", err2)
			}
			return fmt.Errorf("expected: %w", err)
		})
	})
	wantExpected(t, errs)
}

// wantExpected checks that every rank returned the error it expected,
// wrapped as fmt.Errorf("expected: %w", err).
func wantExpected(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err == nil || errors.Unwrap(err) == nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

func TestLocalOpMismatch(t *testing.T) {
	var errs []error
	within(t, 5*time.Second, func() {
		errs = runRanks(2, func(c *Local) error {
			if c.Rank() == 0 {
				return c.Barrier()
			}
			return c.AllReduceFloat32(make([]float32, 3))
		})
	})
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: Barrier against AllReduceFloat32 succeeded", r)
		}
	}
	t.Log(errs[0])
}

func TestLocalArgumentMismatch(t *testing.T) {
	for name, f := range map[string]func(c *Local) error{
		"AllToAllV buffers": func(c *Local) error {
			return c.AllToAllV(make([][]byte, c.Size()+c.Rank()), make([][]byte, c.Size()))
		},
		"AllReduce length": func(c *Local) error { return c.AllReduceFloat64(make([]float64, 10+c.Rank())) },
		"Bcast root":       func(c *Local) error { return c.Bcast(make([]byte, 8), c.Rank()) },
		"Bcast range":      func(c *Local) error { return c.Bcast(make([]byte, 8), 5) },
		"Bcast length":     func(c *Local) error { return c.Bcast(make([]byte, 8+c.Rank()), 0) },
	} {
		var errs []error
		within(t, 5*time.Second, func() { errs = runRanks(3, f) })
		for r, err := range errs {
			if err == nil {
				t.Errorf("%s: rank %d got no error", name, r)
			}
		}
		t.Logf("%s: %v", name, errs[0])
	}
}

// TestLocalFail: ranks waiting in AllToAllV for a rank that fails return an
// error naming it, promptly.
func TestLocalFail(t *testing.T) {
	const q = 4
	boom := errors.New("boom")
	var errs []error
	var waited time.Duration
	within(t, 5*time.Second, func() {
		var failedAt time.Time
		errs = runRanks(q, func(c *Local) error {
			if c.Rank() == 1 {
				time.Sleep(50 * time.Millisecond)
				failedAt = time.Now()
				c.Fail(boom)
				return boom
			}
			err := c.AllToAllV(make([][]byte, q), make([][]byte, q))
			if c.Rank() == 0 {
				waited = time.Since(failedAt)
			}
			return err
		})
	})
	for r, err := range errs {
		var re *RankError
		if r != 1 && (!errors.As(err, &re) || re.Rank != 1 || !errors.Is(err, boom)) {
			t.Fatalf("rank %d: got %v, want a RankError for rank 1 wrapping boom", r, err)
		}
	}
	if waited > time.Second {
		t.Errorf("the waiting ranks returned %v after the failure", waited)
	}
	t.Logf("%v; returned %v after Fail", errs[0], waited)
}

func TestLocalAbort(t *testing.T) {
	err := error(nil)
	within(t, 5*time.Second, func() {
		err = RunLocal(3, func(c *Local) error {
			if c.Rank() == 2 {
				c.Abort(7)
				return nil
			}
			for {
				if err := c.AllReduceFloat32(make([]float32, 4)); err != nil {
					var ae *AbortError
					if !errors.As(err, &ae) || ae.Rank != 2 || ae.Code != 7 {
						return fmt.Errorf("got %v, want rank 2's abort with code 7", err)
					}
					return err
				}
			}
		})
	})
	var ae *AbortError
	if !errors.As(err, &ae) || ae.Code != 7 {
		t.Fatalf("RunLocal returned %v, want the AbortError with code 7", err)
	}
}

func TestLocalPanicAndClose(t *testing.T) {
	var err error
	within(t, 5*time.Second, func() {
		err = RunLocal(3, func(c *Local) error {
			if c.Rank() == 0 {
				var m map[int]int
				m[0] = 1 // panics
			}
			return c.Barrier()
		})
	})
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 0 {
		t.Fatalf("RunLocal returned %v, want rank 0's panic", err)
	}
	// A rank that returns early leaves its peers' collectives with an error.
	within(t, 5*time.Second, func() {
		err = RunLocal(3, func(c *Local) error {
			if c.Rank() == 1 {
				return nil
			}
			return c.Barrier()
		})
	})
	if !errors.As(err, &re) || re.Rank != 1 || !errors.Is(err, ErrRankClosed) {
		t.Fatalf("RunLocal returned %v, want rank 1 closed", err)
	}
}

func BenchmarkLocalAllToAllV(b *testing.B) {
	for _, per := range []int{1 << 10, 1 << 16, 1 << 20} {
		b.Run(fmt.Sprintf("Q=4/%dB-per-peer", per), func(b *testing.B) {
			const q = 4
			b.SetBytes(int64(q * q * per))
			err := RunLocal(q, func(c *Local) error {
				send, recv := make([][]byte, q), make([][]byte, q)
				for p := range send {
					send[p], recv[p] = make([]byte, per), make([]byte, per)
				}
				for i := 0; i < b.N; i++ {
					if err := c.AllToAllV(send, recv); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
