//go:build !cpu

package cuda

import "embed"

// ptxFS holds the PTX of the CUDA kernels in kernels/cuda/*.cu, built by `make
// ptx` (kernels/cuda/ptx.mk) into ptx/X.sm80.ptx (-arch=compute_80) and
// ptx/X.sm90.ptx (-arch=compute_90) for each kernel file X. The device
// loads the sm90 file on compute capability >= 9.0, else the sm80 one. This
// package does not compile until `make ptx` has run; nothing else in the GPU
// build needs the PTX.
//
//go:embed ptx/*.ptx
var ptxFS embed.FS
