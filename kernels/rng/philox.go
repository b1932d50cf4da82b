package rng

import "math/bits"

// Philox4x32 is Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011; the generator of cuRAND and of JAX's
// philox): a counter-based generator whose ten rounds need only 32-bit
// multiplies, so that it vectorises on CPUs (four products per AVX2
// instruction) and runs one block per thread on a GPU. One call gives 128
// random bits for one 128-bit counter. Per round, with the key bumped by
// (0x9E3779B9, 0xBB67AE85) before every round after the first:
//
//	hi0:lo0 = 0xD2511F53 * ctr[0]   (the 64-bit product's halves)
//	hi1:lo1 = 0xCD9E8D57 * ctr[2]
//	ctr     = (hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0)
//
// kernels/cuda/common.cuh and comm/codec's AVX2 encoders are its twins.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := range 10 {
		if r > 0 {
			k0 += 0x9E3779B9
			k1 += 0xBB67AE85
		}
		hi0, lo0 := bits.Mul32(0xD2511F53, c0)
		hi1, lo1 := bits.Mul32(0xCD9E8D57, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}
