package data

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Fingerprint is a 64-bit digest of the dataset's content: N, F, C, the
// CSR, the labels and the features (not the name or the splits), so that a
// partition can be matched to the dataset it was made from. It hashes 1 MiB
// blocks in parallel with XXH64 and the block digests in order, so the
// result does not depend on the number of workers.
func (d *Dataset) Fingerprint() uint64 {
	g := d.Graph
	hdr := []uint64{uint64(g.N), uint64(d.NumFeatures), uint64(d.NumClasses)}
	return Digest(hdr, g.Indptr, g.Indices, d.Labels, d.Features)
}

// digestBlock is the unit of parallel hashing.
const digestBlock = 1 << 20

// Digest hashes the little-endian bytes of each array (in 1 MiB
// blocks, in parallel), then each array's length and block digests, then
// the array digests.
func Digest(arrays ...any) uint64 {
	views := make([][]byte, len(arrays))
	for i, a := range arrays {
		switch v := a.(type) {
		case []byte:
			views[i] = v
		case []int32:
			views[i] = byteView(v)
		case []int64:
			views[i] = byteView(v)
		case []uint64:
			views[i] = byteView(v)
		case []float32:
			views[i] = byteView(v)
		case []float64:
			views[i] = byteView(v)
		default:
			panic(fmt.Sprintf("Digest: unsupported %T", a))
		}
	}
	type job struct{ view, block int }
	var jobs []job
	digests := make([][]uint64, len(views))
	for i, v := range views {
		nb := (len(v) + digestBlock - 1) / digestBlock
		digests[i] = make([]uint64, nb)
		for b := 0; b < nb; b++ {
			jobs = append(jobs, job{i, b})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(jobs)); w++ {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) {
					return
				}
				j := jobs[k]
				v := views[j.view]
				digests[j.view][j.block] = xxh64(v[j.block*digestBlock : min(len(v), (j.block+1)*digestBlock)])
			}
		})
	}
	wg.Wait()
	lengths := make([]int64, len(views))
	for i, v := range views {
		lengths[i] = int64(len(v))
	}
	return CombineDigests(lengths, digests)
}

// DigestBlock is the size of the blocks Digest hashes one by one.
const DigestBlock = digestBlock

// BlockDigest is the digest of one block (at most DigestBlock bytes) as
// Digest takes it.
func BlockDigest(b []byte) uint64 { return xxh64(b) }

// CombineDigests is Digest of arrays given by their byte lengths and the
// digests of their DigestBlock blocks, in order: what processes that each
// hold a part of an array compute together.
func CombineDigests(lengths []int64, blocks [][]uint64) uint64 {
	top := make([]uint64, len(lengths))
	for i, d := range blocks {
		top[i] = xxh64(byteView(append([]uint64{uint64(lengths[i])}, d...)))
	}
	return xxh64(byteView(top))
}

// Digester digests one array whose bytes arrive in order, in pieces of
// any size: Sum equals Digest of the whole array.
type Digester struct {
	buf    []byte // the block in progress
	blocks []uint64
	n      int64
}

// Write adds b to the array.
func (d *Digester) Write(b []byte) {
	d.n += int64(len(b))
	for len(b) > 0 {
		if len(d.buf) == 0 && len(b) >= digestBlock {
			d.blocks = append(d.blocks, xxh64(b[:digestBlock]))
			b = b[digestBlock:]
			continue
		}
		k := min(len(b), digestBlock-len(d.buf))
		d.buf = append(d.buf, b[:k]...)
		b = b[k:]
		if len(d.buf) == digestBlock {
			d.blocks = append(d.blocks, xxh64(d.buf))
			d.buf = d.buf[:0]
		}
	}
}

// Sum is the digest of the bytes written so far, as Digest gives it.
func (d *Digester) Sum() uint64 {
	blocks := d.blocks
	if len(d.buf) > 0 {
		blocks = append(blocks[:len(blocks):len(blocks)], xxh64(d.buf))
	}
	return CombineDigests([]int64{d.n}, [][]uint64{blocks})
}

// Bytes is the in-memory (little-endian) bytes of a numeric slice.
func Bytes[T int32 | int64 | uint64 | float32 | float64](s []T) []byte { return byteView(s) }

// byteView is the in-memory bytes of s (little-endian on every platform
// this project builds for, which the HDF5 format assumes too).
func byteView[T int32 | int64 | uint64 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// XXH64 (seed 0), as specified at github.com/Cyan4973/xxHash.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

func xxRound(acc, in uint64) uint64 {
	return bits.RotateLeft64(acc+in*xxPrime2, 31) * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	return (acc^xxRound(0, v))*xxPrime1 + xxPrime4
}

func xxh64(b []byte) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		p1 := xxPrime1 // a variable: the seed lanes wrap around
		v1, v2, v3, v4 := p1+xxPrime2, xxPrime2, uint64(0), -p1
		for ; len(b) >= 32; b = b[32:] {
			v1 = xxRound(v1, binary.LittleEndian.Uint64(b[0:]))
			v2 = xxRound(v2, binary.LittleEndian.Uint64(b[8:]))
			v3 = xxRound(v3, binary.LittleEndian.Uint64(b[16:]))
			v4 = xxRound(v4, binary.LittleEndian.Uint64(b[24:]))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(xxMerge(xxMerge(xxMerge(h, v1), v2), v3), v4)
	} else {
		h = xxPrime5
	}
	h += uint64(n)
	for ; len(b) >= 8; b = b[8:] {
		h ^= xxRound(0, binary.LittleEndian.Uint64(b))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
