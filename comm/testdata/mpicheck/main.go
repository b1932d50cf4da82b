// Command mpicheck exercises comm.MPI under mpirun; comm/mpi_test.go builds
// and runs it, since cgo cannot appear in tests and a test is one process.
//
//	mpirun -np Q mpicheck -mode check      collectives against known answers; prints "ok rank r"
//	mpirun -np Q mpicheck -mode loop       prints "pid rank r PID", then loops on collectives
//	mpirun -np Q mpicheck -mode abort      rank 1 calls Abort(3) while the others wait in Barrier
//	mpirun -np Q mpicheck -mode abortbusy  rank 0 calls Abort(4) while its MPI thread waits in Barrier
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
)

func main() {
	mode := flag.String("mode", "check", "check, loop, abort or abortbusy")
	seconds := flag.Float64("seconds", 60, "loop: how long to loop")
	flag.Parse()
	m, err := comm.NewMPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch *mode {
	case "check":
		err = check(m)
	case "loop":
		err = loop(m, *seconds)
	case "abort":
		if err = m.Barrier(); err == nil {
			if m.Rank() == 1 {
				m.Abort(3)
			}
			err = m.Barrier()
		}
	case "abortbusy":
		if m.Rank() == 0 {
			go func() {
				time.Sleep(500 * time.Millisecond)
				m.Abort(4)
			}()
			err = m.Barrier() // the MPI thread waits here for rank 1
		} else {
			time.Sleep(60 * time.Second)
		}
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", m.Rank(), err)
		m.Abort(1)
	}
	if err := m.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", m.Rank(), err)
		os.Exit(1)
	}
	if *mode == "check" {
		fmt.Printf("ok rank %d\n", m.Rank())
	}
}

func payload(from, to, round, i int) byte { return byte(from*131 + to*31 + round*7 + i) }

// sizes returns the bytes each rank sends each other rank in a round, the
// same on every rank; about a quarter are empty.
func sizes(q, round int) [][]int {
	rng := rand.New(rand.NewPCG(uint64(q), uint64(round)))
	s := make([][]int, q)
	for p := range s {
		s[p] = make([]int, q)
		for d := range s[p] {
			if rng.IntN(4) > 0 {
				s[p][d] = rng.IntN(1 << 16)
			}
		}
	}
	return s
}

// allToAll runs one AllToAllV of the given round between the buffers alloc
// hands out, and checks what arrived.
func allToAll(m *comm.MPI, round int, alloc func(p, n int, recv bool) []byte) error {
	q, r := m.Size(), m.Rank()
	size := sizes(q, round)
	send, recv := make([][]byte, q), make([][]byte, q)
	for p := 0; p < q; p++ {
		send[p] = alloc(p, size[r][p], false)
		for i := range send[p] {
			send[p][i] = payload(r, p, round, i)
		}
		recv[p] = alloc(p, size[p][r], true)
		clear(recv[p])
	}
	if err := m.AllToAllV(send, recv); err != nil {
		return err
	}
	for p := 0; p < q; p++ {
		for i, b := range recv[p] {
			if want := payload(p, r, round, i); b != want {
				return fmt.Errorf("AllToAllV round %d: byte %d from rank %d is %d, want %d", round, i, p, b, want)
			}
		}
	}
	return nil
}

// allToAllShort runs one AllToAllVShort of the given round into receive
// buffers longer than the messages (by p+r+1 bytes, and 64 KiB more from
// rank 0, past the eager limit) and checks the counts and the bytes.
func allToAllShort(m *comm.MPI, round int) error {
	q, r := m.Size(), m.Rank()
	size := sizes(q, round)
	send, recv, got := make([][]byte, q), make([][]byte, q), make([]int, q)
	for p := 0; p < q; p++ {
		n := size[r][p]
		if r == 0 {
			n += 64 << 10
		}
		send[p] = make([]byte, n)
		for i := range send[p] {
			send[p][i] = payload(r, p, round, i)
		}
		n = size[p][r] + p + r + 1
		if p == 0 {
			n += 64 << 10
		}
		recv[p] = make([]byte, n)
	}
	if err := m.AllToAllVShort(send, recv, got); err != nil {
		return err
	}
	for p := 0; p < q; p++ {
		want := size[p][r]
		if p == 0 {
			want += 64 << 10
		}
		if got[p] != want {
			return fmt.Errorf("AllToAllVShort round %d: %d bytes from rank %d, want %d", round, got[p], p, want)
		}
		for i, b := range recv[p][:got[p]] {
			if w := payload(p, r, round, i); b != w {
				return fmt.Errorf("AllToAllVShort round %d: byte %d from rank %d is %d, want %d", round, i, p, b, w)
			}
		}
	}
	return nil
}

func check(m *comm.MPI) error {
	q, r := m.Size(), m.Rank()
	// Go's signal handling must survive MPI_Init: a nil dereference is
	// still a recoverable panic.
	if !recovers(func() {
		var p *int
		_ = *p
	}) {
		return errors.New("a nil dereference did not panic")
	}
	plain := func(p, n int, recv bool) []byte { return make([]byte, n) }
	// Buffers for ranks 0 and 1 at both ends of a 2.5 GiB allocation
	// (address space only, allocated once since reused memory is zeroed):
	// each side spans more than an int displacement reaches, so the
	// contiguous mode stages them.
	big := make([]byte, 5<<29)
	for _, mode := range []comm.AllToAllVMode{comm.AllToAllVContiguous, comm.AllToAllVScattered} {
		m.SetAllToAllVMode(mode)
		for round := 0; round < 4; round++ {
			if err := allToAll(m, round, plain); err != nil {
				return fmt.Errorf("mode %d: %w", mode, err)
			}
		}
		far := func(p, n int, recv bool) []byte {
			off := 0
			if recv {
				off = 1 << 16
			}
			switch p {
			case 0:
				return big[off : off+n]
			case 1:
				return big[len(big)-off-n : len(big)-off]
			}
			return make([]byte, n)
		}
		if err := allToAll(m, 9, far); err != nil {
			return fmt.Errorf("mode %d, buffers 2.5 GiB apart: %w", mode, err)
		}
	}
	m.SetAllToAllVMode(comm.AllToAllVContiguous)

	// MPI_THREAD_SERIALIZED lets any thread call MPI: run collectives from
	// threads that exist for one call each (a goroutine that ends locked
	// takes its thread with it).
	for round := 10; round < 14; round++ {
		errc := make(chan error)
		go func() {
			runtime.LockOSThread()
			errc <- allToAll(m, round, plain)
		}()
		if err := <-errc; err != nil {
			return fmt.Errorf("from a new thread: %w", err)
		}
	}

	// Messages shorter than their receive buffers, three rounds in a row (the
	// order of one tag's messages between two ranks keeps them apart).
	for round := 20; round < 23; round++ {
		if err := allToAllShort(m, round); err != nil {
			return err
		}
	}

	// Wrong arguments fail locally, on every rank alike.
	if err := m.AllToAllV(make([][]byte, q+1), make([][]byte, q)); err == nil {
		return errors.New("AllToAllV with q+1 send buffers succeeded")
	}
	if err := m.Bcast(make([]byte, 1), q); err == nil {
		return errors.New("Bcast from a root outside the world succeeded")
	}

	for root := 0; root < q; root++ {
		buf := make([]byte, 1000+root)
		if r == root {
			for i := range buf {
				buf[i] = byte(i * (root + 3))
			}
		}
		if err := m.Bcast(buf, root); err != nil {
			return err
		}
		for i, b := range buf {
			if b != byte(i*(root+3)) {
				return fmt.Errorf("Bcast from %d: byte %d is %d", root, i, b)
			}
		}
	}

	for _, n := range []int{0, 1, 1000, 1 << 20} {
		if err := checkAllReduce(m, n); err != nil {
			return err
		}
	}
	return m.Barrier()
}

func recovers(f func()) (ok bool) {
	defer func() { ok = recover() != nil }()
	f()
	return false
}

// input is rank p's AllReduce input: mixed magnitudes and signs, so the
// order of summation shows in the rounding.
func input(p, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(p), uint64(n)))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6))))
	}
	return x
}

// checkAllReduce checks that AllReduceFloat32 gives the same bits on every
// rank and in every repetition, and a sum close to the exact one.
func checkAllReduce(m *comm.MPI, n int) error {
	q := m.Size()
	var first []float32
	for rep := 0; rep < 2; rep++ {
		x := input(m.Rank(), n)
		if err := m.AllReduceFloat32(x); err != nil {
			return err
		}
		if rep == 0 {
			first = x
		} else if !bitsEqual(x, first) {
			return fmt.Errorf("AllReduceFloat32 of %d elements: the same inputs gave different bits", n)
		}
	}
	// Every rank compares its hash with rank 0's.
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, first)
	mine := h.Sum(nil)
	root := bytes.Clone(mine)
	if err := m.Bcast(root, 0); err != nil {
		return err
	}
	if !bytes.Equal(mine, root) {
		return fmt.Errorf("AllReduceFloat32 of %d elements: rank %d's result differs from rank 0's", n, m.Rank())
	}
	in := make([][]float32, q)
	for p := range in {
		in[p] = input(p, n)
	}
	for i := range first {
		exact, mag := 0.0, 0.0
		for p := range in {
			exact += float64(in[p][i])
			mag += math.Abs(float64(in[p][i]))
		}
		if math.Abs(float64(first[i])-exact) > float64(q)*1.2e-7*mag {
			return fmt.Errorf("AllReduceFloat32 element %d is %g, the exact sum %g", i, first[i], exact)
		}
	}
	return nil
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

func loop(m *comm.MPI, seconds float64) error {
	fmt.Printf("pid rank %d %d\n", m.Rank(), os.Getpid())
	q := m.Size()
	send, recv := make([][]byte, q), make([][]byte, q)
	for p := range send {
		send[p], recv[p] = make([]byte, 1<<16), make([]byte, 1<<16)
	}
	x := make([]float32, 1<<12)
	for end := time.Now().Add(time.Duration(seconds * float64(time.Second))); time.Now().Before(end); {
		if err := m.AllToAllV(send, recv); err != nil {
			return err
		}
		if err := m.AllReduceFloat32(x); err != nil {
			return err
		}
	}
	return nil
}
