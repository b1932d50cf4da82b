package rng

import (
	"math"
	"math/bits"
	"testing"
)

// TestHash32KnownAnswers pins Hash32 on a few inputs (the CUDA twin in
// kernels/cuda/common.cuh is checked against Hash32 by kernels/cuda/hosttwin).
func TestHash32KnownAnswers(t *testing.T) {
	for _, c := range []struct{ x, want uint32 }{
		{0, 0},
		{1, 0x688990c0},
		{0xffffffff, 0x6768824a},
		{0x9e3779b9, 0x01fce552},
	} {
		if got := Hash32(c.x); got != c.want {
			t.Errorf("Hash32(%08x) = %08x, want %08x", c.x, got, c.want)
		}
	}
}

// TestHash32Avalanche flips each input bit of many inputs: every output bit
// must flip with probability 1/2 within 1%.
func TestHash32Avalanche(t *testing.T) {
	const n = 1 << 14
	var flips [32][32]int
	x := uint32(0x12345678)
	for range n {
		x = x*1664525 + 1013904223
		h := Hash32(x)
		for i := range 32 {
			d := h ^ Hash32(x^1<<i)
			for d != 0 {
				j := bits.TrailingZeros32(d)
				flips[i][j]++
				d &= d - 1
			}
		}
	}
	for i := range 32 {
		for j := range 32 {
			if p := float64(flips[i][j]) / n; math.Abs(p-0.5) > 0.01+4*0.5/math.Sqrt(n) {
				t.Errorf("input bit %d flips output bit %d with probability %.4f", i, j, p)
			}
		}
	}
}
