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
