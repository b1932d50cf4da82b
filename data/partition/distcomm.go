package partition

// The collectives of a distributed partition, over the small interface it
// needs of the job's communicator (data packages do not import comm).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// Comm is what a distributed partition needs of a job's communicator:
// comm.Comm satisfies it (MPI ranks, or goroutine ranks for tests). Every
// rank calls the collectives in the same order.
type Comm interface {
	Rank() int
	Size() int
	AllToAllV(send, recv [][]byte) error
	AllReduceFloat64(x []float64) error
	Bcast(buf []byte, root int) error
}

// nativeMPI is a Comm over MPI that lends its communicator to PT-Scotch
// (comm.Native).
type nativeMPI interface {
	CallNative(f func(fcomm int32) error) error
}

// step names the next blocking call for the watchdog (comm.Watchdog's
// LabelName), when the Comm has one.
func step(c Comm, name string) {
	if l, ok := c.(interface{ LabelName(string) }); ok {
		l.LabelName("partition: " + name)
	}
}

// RankFailed ends a rank of a distributed partition whose peer failed: the
// peer reports why (Reported), every rank exits with its code.
type RankFailed struct{ Rank, Code int }

func (e *RankFailed) Error() string  { return fmt.Sprintf("rank %d failed (it reports why)", e.Rank) }
func (e *RankFailed) ExitCode() int  { return e.Code }
func (e *RankFailed) Reported() bool { return true }

// exitCode is err's own exit code (bad input: 2), else 1.
func exitCode(err error) int {
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return 1
}

// agree makes every rank learn whether any failed: the lowest failing rank
// returns its error, the others a *RankFailed naming it. Every step that can
// fail on one rank ends with it, so that no rank enters a collective its
// peers have left.
func agree(c Comm, what string, err error) error {
	q := c.Size()
	codes := make([]float64, q)
	if err != nil {
		codes[c.Rank()] = float64(exitCode(err))
	}
	step(c, what+": agreeing on failures")
	if rerr := c.AllReduceFloat64(codes); rerr != nil {
		if err != nil {
			return err
		}
		return rerr
	}
	first := slices.IndexFunc(codes, func(x float64) bool { return x != 0 })
	switch {
	case first < 0:
		return nil
	case first != c.Rank():
		return &RankFailed{Rank: first, Code: int(codes[first])}
	}
	var others []string
	for r, code := range codes[first+1:] {
		if code != 0 {
			others = append(others, strconv.Itoa(first+1+r))
		}
	}
	switch len(others) {
	case 0:
		return err
	case 1:
		return fmt.Errorf("%w (rank %s failed too)", err, others[0])
	}
	return fmt.Errorf("%w (ranks %s failed too)", err, strings.Join(others, ", "))
}

// Agree is agree for the steps of a distributed partition that its
// caller runs (the command's checks of its flags): every rank learns
// whether any failed, the lowest failing rank gets its own error back and
// the others a *RankFailed naming it.
func Agree(c Comm, what string, err error) error { return agree(c, what, err) }

// Setting is one thing every rank must have alike: what sets it and its
// value.
type Setting struct{ Name, Value string }

// agreeSettings stops every rank unless every rank's settings equal rank
// 0's: the lowest rank that differs names the first setting and both
// values.
func agreeSettings(c Comm, mine []Setting) error {
	var enc bytes.Buffer
	for _, s := range mine {
		enc.WriteString(s.Name + "\x00" + s.Value + "\x00")
	}
	theirs, err := bcastBytes(c, enc.Bytes(), "settings")
	if err != nil {
		return err
	}
	f := strings.Split(string(theirs), "\x00")
	for i, s := range mine {
		if c.Rank() == 0 {
			break
		}
		if 2*i+1 >= len(f) || f[2*i] != s.Name {
			err = &SetupError{fmt.Sprintf("rank %d: its settings do not match rank 0's (%s): the ranks run different builds", c.Rank(), s.Name)}
			break
		}
		if f[2*i+1] != s.Value {
			err = &SetupError{fmt.Sprintf("rank %d: %s is %s, rank 0 has %s: every rank must be started with the same settings and input", c.Rank(), s.Name, s.Value, f[2*i+1])}
			break
		}
	}
	return agree(c, "settings", err)
}

// SetupError is ranks started differently: a usage error.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }
func (e *SetupError) ExitCode() int { return 2 }

// bcastBytes sends rank 0's b to every rank.
func bcastBytes(c Comm, b []byte, what string) ([]byte, error) {
	n := make([]byte, 8)
	binary.LittleEndian.PutUint64(n, uint64(len(b)))
	step(c, what+" broadcast")
	if err := c.Bcast(n, 0); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.LittleEndian.Uint64(n))
	if c.Rank() == 0 {
		copy(buf, b)
	}
	step(c, what+" broadcast")
	return buf, c.Bcast(buf, 0)
}

type elem interface {
	~int32 | ~int64 | ~uint64 | ~float32 | ~uint8
}

// view is the bytes of s.
func view[T elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// exchange sends send[p] to rank p and returns what every rank sent this
// one: the sizes first, then the values, as one all-to-all each.
func exchange[T elem](c Comm, what string, send [][]T) ([][]T, error) {
	q := c.Size()
	sizes := make([]int64, q)
	for p, s := range send {
		sizes[p] = int64(len(s))
	}
	got := make([]int64, q)
	sb, rb := make([][]byte, q), make([][]byte, q)
	for p := range q {
		sb[p], rb[p] = view(sizes[p:p+1]), view(got[p:p+1])
	}
	step(c, what+" (sizes)")
	if err := c.AllToAllV(sb, rb); err != nil {
		return nil, err
	}
	var total int64
	for _, n := range got {
		total += n
	}
	all := make([]T, total) // one allocation, so that the buffers lie together
	recv := make([][]T, q)
	var at int64
	for p, n := range got {
		recv[p] = all[at : at+n : at+n]
		at += n
		sb[p], rb[p] = view(send[p]), view(recv[p])
	}
	step(c, what)
	return recv, c.AllToAllV(sb, rb)
}

// allGather returns every rank's mine, by rank.
func allGather[T elem](c Comm, what string, mine []T) ([][]T, error) {
	send := make([][]T, c.Size())
	for p := range send {
		send[p] = mine
	}
	return exchange(c, what, send)
}

// allMax is the largest of every rank's v.
func allMax(c Comm, what string, v int64) (int64, error) {
	all, err := allGather(c, what, []int64{v})
	if err != nil {
		return 0, err
	}
	m := v
	for _, a := range all {
		m = max(m, a[0])
	}
	return m, nil
}

// distDigest computes, with the other ranks, the block digests (as
// data.Digest takes them) of an array of which this rank holds the bytes
// [off, off+len(local)), the ranks' pieces following one another in rank
// order. A block that starts in a rank's piece is hashed there, with the
// rest of it sent by the ranks after; every rank gets every block's
// digest, in order.
func distDigest(c Comm, what string, local []byte, off int64) ([]uint64, error) {
	const B = data.DigestBlock
	q, me := c.Size(), c.Rank()
	spans, err := allGather(c, what+" digest offsets", []int64{off, off + int64(len(local))})
	if err != nil {
		return nil, err
	}
	end := off + int64(len(local))
	// owner of the block starting at byte b*B: the rank whose piece holds it.
	owner := func(start int64) int {
		for k := range q {
			if spans[k][0] <= start && start < spans[k][1] {
				return k
			}
		}
		return -1
	}
	send := make([][]byte, q)
	headEnd := int64(len(local))
	if r := off % B; r != 0 && len(local) > 0 {
		headEnd = min(int64(len(local)), B-r)
		if k := owner(off - r); k >= 0 && k != me {
			send[k] = local[:headEnd]
		}
	} else {
		headEnd = 0
	}
	tails, err := exchange(c, what+" digest block ends", send)
	if err != nil {
		return nil, err
	}
	var mine []uint64
	buf := make([]byte, 0, B)
	for b := off + headEnd; b < end; b += B {
		if b+B <= end {
			mine = append(mine, data.BlockDigest(local[b-off:b-off+B]))
			continue
		}
		buf = append(buf[:0], local[b-off:]...)
		for k := me + 1; k < q; k++ {
			buf = append(buf, tails[k]...)
		}
		mine = append(mine, data.BlockDigest(buf))
	}
	all, err := allGather(c, what+" digests", mine)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, d := range all {
		out = append(out, d...)
	}
	return out, nil
}

// localDigest is the block digests of an array one rank holds whole.
func localDigest(b []byte) []uint64 {
	var out []uint64
	for lo := 0; lo < len(b); lo += data.DigestBlock {
		out = append(out, data.BlockDigest(b[lo:min(len(b), lo+data.DigestBlock)]))
	}
	return out
}
