// Package rng holds the counter-based generators behind every seeded draw
// of the project: Mix64 for dropout masks, the generator's streams and the
// derivation of per-message seeds, Hash32 for the codecs' stochastic
// rounding. Draws are a function of the seed and the element's coordinates,
// so any device reproduces them in any order and on any thread count;
// kernels/cuda/common.cuh holds the CUDA twins.
package rng

// Mix64 is the splitmix64 finaliser (all arithmetic mod 2^64, >> logical):
//
//	z += 0x9E3779B97F4A7C15
//	z  = (z ^ z>>30) * 0xBF58476D1CE4E5B9
//	z  = (z ^ z>>27) * 0x94D049BB133111EB
//	z ^= z>>31
func Mix64(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
