# PTX of the CUDA kernels (kernels/cuda/*.cu), embedded by kernels/cuda/ptx.go into
# the GPU build. Included from the top Makefile; paths are relative to the
# repository root. `make ptx` needs nvcc (CUDA 11.8 or later); the CPU build
# (-tags cpu) needs neither nvcc nor these files.
#
# One PTX per kernel file and architecture: compute_80 (A100) and
# compute_90 (H100/H200; the device loads it on compute capability >= 9.0).
# -fmad=false keeps every product separately rounded, as in the Go twins,
# so that results match the CPU bit for bit where the operation order does;
# division, sqrt and subnormals keep nvcc's IEEE defaults (spelled out:
# -prec-div=true -prec-sqrt=true -ftz=false; never --use_fast_math).
# Warnings are errors (PTX_WERROR= turns that off).

NVCC ?= nvcc
PTX_NVCCFLAGS ?= -O3 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false
PTX_WERROR ?= -Werror all-warnings
PTX_SRC := $(wildcard kernels/cuda/*.cu)
PTX_OUT := $(patsubst kernels/cuda/%.cu,kernels/cuda/ptx/%.sm80.ptx,$(PTX_SRC)) \
	$(patsubst kernels/cuda/%.cu,kernels/cuda/ptx/%.sm90.ptx,$(PTX_SRC))

.PHONY: ptx ptx-clean

ptx: $(PTX_OUT)

kernels/cuda/ptx/%.sm80.ptx: kernels/cuda/%.cu $(wildcard kernels/cuda/*.cuh)
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_80 $(PTX_NVCCFLAGS) $(PTX_WERROR) -o $@ $<

kernels/cuda/ptx/%.sm90.ptx: kernels/cuda/%.cu $(wildcard kernels/cuda/*.cuh)
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_90 $(PTX_NVCCFLAGS) $(PTX_WERROR) -o $@ $<

ptx-clean:
	rm -f kernels/cuda/ptx/*.ptx
