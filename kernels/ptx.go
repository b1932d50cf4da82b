//go:build !cpu

package kernels

import "embed"

// PTX holds the PTX of the CUDA kernels in kernels/*.cu, built by `make ptx`
// (kernels/ptx.mk) into ptx/X.sm80.ptx (-arch=compute_80) and
// ptx/X.sm90.ptx (-arch=compute_90) for each kernel file X. The CUDA device
// loads the sm90 file on compute capability >= 9.0, else the sm80 one. The
// GPU build does not compile until `make ptx` has run; the CPU build (-tags
// cpu) does not embed anything.
//
//go:embed ptx/*.ptx
var PTX embed.FS
