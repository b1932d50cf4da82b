# gnn-spmd build. `make demo` and `make test` are the README's quickstart.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
# Debian keeps the serial HDF5 headers and library off the default paths.
export CGO_CFLAGS ?= -I/usr/include/hdf5/serial
export CGO_LDFLAGS ?= -L/usr/lib/x86_64-linux-gnu/hdf5/serial

# The dense products use the CBLAS library found at run time (OpenBLAS,
# BLIS or MKL; cgo/cblas), else pure Go: no build tag chooses it.
TAGS ?= cpu
GOFLAGS_TAGS := -tags "$(TAGS)"
BIN := bin/gnn-spmd

.PHONY: deps build mpich test-mpich test-cluster test-deadlink cpu cuda cuda-deps cuda-check gpu-bundle test-gpu-bundle test test-fma vet fuzz fuzz-h5 demo experiments bench inprocess clean
.DEFAULT_GOAL := build

deps:
	@scripts/deps.sh

# bin/gnn-spmd (training and data), bin/gnn-results (analysis of runs),
# bin/gnn-mpibench (the MPI transport's bandwidth).
build: deps
	go build $(GOFLAGS_TAGS) -o bin/ ./cmd/gnn-spmd ./cmd/gnn-results ./cmd/gnn-mpibench

# bin/gnn-spmd-mpich: the same binary against MPICH (Debian's libmpich-dev,
# installed beside Open MPI), for mpiexec.mpich and srun --mpi=pmi2.
MPICH_BIN := bin/gnn-spmd-mpich
mpich: deps
	go build -tags "$(TAGS) mpich" -o $(MPICH_BIN) ./cmd/gnn-spmd

# The MPI tests against MPICH: the test binary built with -tags mpich runs
# its ranks under mpiexec.mpich -n 4 (the equality with one process on the
# shared datasets, a killed rank, resume) and through the Slurm test
# cluster (srun --mpi=pmi2, mpiexec.mpich in sbatch and salloc).
test-mpich: mpich
	go test -tags "$(TAGS) mpich" -count=1 -run 'TestMPIEqualsOneProcess/.*/.*/mpiexec.mpich-np-4$$' ./cmd/gnn-spmd
	go test -tags "$(TAGS) mpich" -count=1 -run '^(TestMPIRankKilled|TestMPIResume|TestSlurm)$$' ./cmd/gnn-spmd

# The launcher tests, which make test also runs where it can (root, Slurm,
# network namespaces), here required: a missing tool fails instead of
# skipping. Then the MPICH ones.
test-cluster: build
	GNN_SPMD_CLUSTER_TESTS=require go test $(GOFLAGS_TAGS) -count=1 -run '^(TestSlurm|TestHosts)$$' -v ./cmd/gnn-spmd
	$(MAKE) test-mpich GNN_SPMD_CLUSTER_TESTS=require

# A host's link cut mid-training, in one direction and in both (make test
# samples one of the two): the job ends within --comm-timeout + 15 s.
test-deadlink: build
	GNN_SPMD_CLUSTER_TESTS=require GNN_SPMD_DEADLINK=all go test $(GOFLAGS_TAGS) -count=1 -run '^TestDeadLink$$' -v ./cmd/gnn-spmd

# The CPU-only build (what CI tests).
cpu: build

# The GPU build (no cpu tag): CUDA kernels from kernels/cuda/*.cu as embedded
# PTX, gorgonia.org/cu for the driver API, cuBLAS and NCCL loaded at run
# time. Needs a CUDA toolkit (nvcc, cuda.h, libcuda): scripts/cuda-deps.sh
# installs Debian's CUDA 11.8. The binary also runs --device cpu.
include kernels/cuda/ptx.mk
CUDA_TAGS ?=
CUDA_BIN := bin/gnn-spmd-cuda

cuda-deps:
	@scripts/cuda-deps.sh

cuda: deps cuda-deps
	$(MAKE) ptx
	go build -tags "$(CUDA_TAGS)" -o $(CUDA_BIN) ./cmd/gnn-spmd

# What CI checks of the GPU build on a machine without a GPU: everything
# compiles (tests included), and the tests run; those that need a GPU print
# SKIP and pass, the dlopen bindings' error paths run for real.
cuda-check: cuda
	@if go list -deps $(GOFLAGS_TAGS) ./... | grep -E 'gorgonia.org/cu|/cgo/(cublas|nccl|cudaprobe)$$'; then \
		echo "cuda-check: the CPU build imports the GPU packages above"; exit 1; fi
	go vet -tags "$(CUDA_TAGS)" ./...
	go test -tags "$(CUDA_TAGS)" -count=1 ./cgo/cublas ./cgo/nccl ./cgo/cudaprobe ./kernels/cuda ./comm ./comm/halo/gpu ./gnn/job

# bin/gpu-bundle: the GPU binary, the GPU test binaries, Open MPI's
# launcher (bin/gpu-bundle/bin/mpirun) and the shared libraries they need
# (ldd), for a GPU machine without Go, MPI or HDF5; run
# scripts/gpu-check.sh there.
gpu-bundle: cuda
	scripts/gpu-bundle.sh

# The bundle's mpirun with the CPU binary, 2 ranks, in a mount namespace
# where the system's Open MPI is covered; and that it fails without the
# bundle's MPI plugins or libmpi. Needs root (unshare -m); not in make test.
test-gpu-bundle: build
	scripts/test-gpu-bundle.sh

vet: deps
	go vet $(GOFLAGS_TAGS) ./...

# cmd/gnn-spmd is the longest package: on the 2-core machine busy with
# other work it took 4 min 48 s without its sampled corrupt-byte sweep
# and ran past Go's default 10 min per package with it: hence -timeout 20m.
test: build vet
	go test $(GOFLAGS_TAGS) -count=1 -timeout 20m ./...

# The CPU kernels and codecs built for a target with FMA (GOAMD64=v3), where
# Go may fuse a*b + c: they must still give the bits of the GPU kernels
# (built with -fmad=false) and of the default build.
test-fma: deps
	@if grep -qw fma /proc/cpuinfo; then GOAMD64=v3 go test $(GOFLAGS_TAGS) -count=1 ./kernels ./kernels/cuda/hosttwin ./comm/codec ./gnn/job; \
	else echo "test-fma: this CPU has no FMA; skipped"; fi

# The corrupt-byte sweep over every byte of a small dataset, part file and
# checkpoint, each set to 0x00 and to 0xff (`make test` samples every 37th
# byte from a random phase): 140,000 runs, about an hour on 2 cores.
fuzz-h5: build
	GNN_SPMD_SWEEP_STRIDE=1 go test $(GOFLAGS_TAGS) -count=1 -timeout 6h -run 'TestCorruptByteSweep$$' -v ./cmd/gnn-spmd

# Every fuzz target for FUZZTIME each (go test -fuzz takes one target per
# run): the OGB text loaders, the HDF5 dataset, partition and checkpoint
# readers, and the halo codecs. CI runs this after `make test`: 7 targets x
# 15s = 105 s of fuzzing. A failing input is written to
# <pkg>/testdata/fuzz/<target>/ and reruns with plain `go test` from then on.
# Minimization is off by default: on the slow HDF5 targets it would spend
# most of a short run minimizing each new input, and when a process dies
# while minimizing, Go saves the input it was minimizing instead of the one
# that crashed ("while minimizing: EOF", golang/go#52569). Set
# FUZZMINIMIZETIME=30s to minimize a crasher.
# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" as -fuzztime ends, with no input at fault
# (golang/go#75804, fixed in Go 1.27): such a run, which wrote no failing
# input, counts as passed and says so.
FUZZTIME ?= 15s
FUZZMINIMIZETIME ?= 0
FUZZ_TARGETS := data/ogb:FuzzLoadOGB data/ogb:FuzzOGBNumbers data/datafile:FuzzReadH5 data/partition:FuzzReadShard \
	gnn/ckpt:FuzzReadCheckpoint comm/codec:FuzzDecode comm/codec:FuzzCodecRoundTrip
fuzz: deps
	@set -o pipefail; failed=""; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*} name=$${t#*:}; \
		echo "fuzz: $$name in ./$$pkg for $(FUZZTIME)"; \
		log=$$(mktemp); \
		if ! go test $(GOFLAGS_TAGS) -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) \
			-fuzzminimizetime $(FUZZMINIMIZETIME) ./$$pkg 2>&1 | tee $$log; then \
			if grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written' $$log; then \
				echo "fuzz: $$name: the coordinator's end-of-run race (golang/go#75804), no failing input: passed"; \
			else failed="$$failed $$name"; fi; \
		fi; \
		rm -f $$log; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed"; exit 1; fi

# The built-in default: a generated 50k-node graph trained by
# `mpirun -np 4 gnn-spmd train` (four processes, METIS partition computed
# by every rank), with the recommended compression (--compress recommended: 2-bit
# quantized halo rows on every layer), then with full communication, and
# the two compared. As root Open MPI needs the two ALLOW_RUN_AS_ROOT
# variables; with fewer cores than ranks, --oversubscribe and ranks that
# yield while they wait.
DEMO_DATA := bin/demo-csbm-50k.h5
DEMO_MPIRUN := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 4 --oversubscribe --mca mpi_yield_when_idle 1
DEMO_TRAIN := $(DEMO_MPIRUN) $(BIN) train --data $(DEMO_DATA) --partition metis --epochs 60 --hidden 128
$(DEMO_DATA):
	$(BIN) gen --out $(DEMO_DATA) --nodes 50000 --classes 10 --degree 16 --homophily 0.7 --features 64 --snr 0.8 --seed 1
demo: build
	@$(MAKE) --no-print-directory $(DEMO_DATA)
	$(DEMO_TRAIN) --compress recommended --metrics bin/demo-quant.jsonl
	$(DEMO_TRAIN) --quiet --metrics bin/demo-full.jsonl
	bin/gnn-results compare full=bin/demo-full.jsonl quant=bin/demo-quant.jsonl

experiments: build
	scripts/experiments.sh

bench: build
	scripts/bench.sh

# The compressed epoch against full communication's in one process (4
# goroutine ranks, no network) on the demo graph, modes taking turns.
inprocess: build
	@$(MAKE) --no-print-directory $(DEMO_DATA)
	scripts/inprocess.sh

clean: ptx-clean
	rm -rf bin
