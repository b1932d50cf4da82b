package data

import "testing"

func TestXXH64Vectors(t *testing.T) {
	// From libxxhash 0.8.1's XXH64(buf, len, 0), buf[i] = byte(7i+3).
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	for _, c := range []struct {
		n    int
		want uint64
	}{
		{0, 0xef46db3751d8e999}, {1, 0x1f25c8d0bc1f4bb6}, {3, 0x31d2363f52e564c9}, {4, 0x9bb64b7d66ee9fda},
		{7, 0x9a7b149959ce60d8}, {8, 0xdab99d95c6f90092}, {12, 0xd52e407833af5133}, {31, 0xa2aa5f33cc4a6119},
		{32, 0x23c3c17ef790fd97}, {33, 0x50a7cfc7ba588784}, {63, 0x5e3e54b431c7493c}, {64, 0x0eb64b3ef6eeb01f},
		{100, 0xa61f8d4c170fe531}, {299, 0x5e6f8a0c9110e74e}, {300, 0x240004dbee0ba6dc},
	} {
		if got := xxh64(buf[:c.n]); got != c.want {
			t.Errorf("xxh64 of %d bytes = %016x, want %016x", c.n, got, c.want)
		}
	}
	if got := xxh64([]byte("abc")); got != 0x44bc2cf5ad770999 {
		t.Errorf("xxh64(abc) = %016x", got)
	}
}

// BenchmarkDigest: the digest every HDF5 reader recomputes over each array
// it loads (data/h5's digest attribute), on 256 MiB of float32s.
func BenchmarkDigest(b *testing.B) {
	v := make([]float32, 64<<20)
	for i := range v {
		v[i] = float32(i)
	}
	b.SetBytes(int64(4 * len(v)))
	for b.Loop() {
		Digest(v)
	}
}

// TestDigester: an array digested in pieces of any size, and from block
// digests, gives Digest's value.
func TestDigester(t *testing.T) {
	for _, n := range []int{0, 1, 7, DigestBlock - 1, DigestBlock, DigestBlock + 3, 3*DigestBlock + 5} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i>>9)
		}
		want := Digest(b)
		for _, piece := range []int{1, 1000, DigestBlock - 3, DigestBlock, 2*DigestBlock + 1} {
			if n > 100000 && piece == 1 {
				continue
			}
			var d Digester
			for lo := 0; lo < n; lo += piece {
				d.Write(b[lo:min(n, lo+piece)])
			}
			if got := d.Sum(); got != want {
				t.Fatalf("n %d, pieces of %d: %x, want %x", n, piece, got, want)
			}
		}
		var blocks []uint64
		for lo := 0; lo < n; lo += DigestBlock {
			blocks = append(blocks, BlockDigest(b[lo:min(n, lo+DigestBlock)]))
		}
		if got := CombineDigests([]int64{int64(n)}, [][]uint64{blocks}); got != want {
			t.Fatalf("n %d from blocks: %x, want %x", n, got, want)
		}
	}
}
