//go:build !cpu

// Package cuda is the GPU Device: every kernels.Device primitive as a CUDA
// kernel (kernels/cuda/*.cu, embedded as PTX) or a cuBLAS product, on matrices
// that stay in device memory, plus the halo primitives the GPU exchange
// needs (row gather and scatter-add, the codecs). The CPU device is the
// reference each kernel is tested against.
//
// A Device binds one GPU's primary context to the goroutine that made it:
// New locks that goroutine to its OS thread (CUDA's current context is per
// thread), and every call must come from it. Several Devices may share one
// GPU (one per rank of an in-process job); all work goes to the context's
// default stream, so it runs in the order it was issued.
package cuda

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/cgo/cublas"
	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe" // before gorgonia.org/cu: a clear message when there is no GPU
	"github.com/gnn-spmd/gnn-spmd/kernels"
	"gorgonia.org/cu"
)

// Error is what a Device panics with when CUDA fails (out of memory, a
// failed launch): Device methods have no error results, and a failure there
// ends the rank. Callers that want a one-line error recover it.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return "cuda: " + e.Op + ": " + e.Err.Error() }

func fail(op string, err error) {
	if err != nil {
		panic(&Error{op, err})
	}
}

// kernel names, in the order of Device.fns.
const (
	kSpMM = iota
	kGather
	kScatterAdd
	kAddBias
	kBiasGradPartial
	kBiasGradFinish
	kReLU
	kReLUBackward
	kMul
	kDropout
	kAdam
	kSumSquaresPartial
	kSumF64Partial
	kSoftmaxXent
	kCountCorrect
	kScoreHistogram
	kQuantEncode
	kQuantDecode
	kBF16Encode
	kBF16Decode
	kTruncEncode
	kTruncDecode
	kSqDiffPartial
	kAttnForwardStats
	kAttnForwardOut
	kAttnBackwardDst
	kAttnBackwardSrc
	kAttnTerms
	kAttnTermsDP
	kAttnTermsPartial
	kAttnTermsFinish
	kELU
	kELUBackward
	kResidualSub
	kRowSqNorms
	kTernEncode
	kTernDecode
	numKernels
)

var kernelNames = [numKernels]string{
	"spmm_csr", "gather_rows", "scatter_add_rows", "add_bias", "bias_grad_partial",
	"bias_grad_finish", "relu", "relu_backward", "mul", "dropout", "adam",
	"sum_squares_partial", "sum_f64_partial", "softmax_xent", "count_correct",
	"score_histogram", "quant_encode", "quant_decode", "bf16_encode", "bf16_decode",
	"trunc_encode", "trunc_decode", "sq_diff_partial", "attn_forward_stats", "attn_forward_out",
	"attn_backward_dst", "attn_backward_src", "attn_terms", "attn_terms_dp", "attn_terms_partial",
	"attn_terms_finish", "elu", "elu_backward", "residual_sub", "row_sq_norms",
	"tern_encode", "tern_decode",
}

const (
	block        = 256 // threads per block; the *_partial reductions require exactly 256
	maxPartials  = 1024
	partialDbls  = 2 * maxPartials // sq_diff_partial writes two per block
	rowsPerChunk = 4096            // bias gradient: rows summed per partial
	maxArgs      = 24              // kernel arguments (attn_backward_dst has 19)
)

// Device is one rank's handle on a GPU.
type Device struct {
	ordinal int
	dev     cu.Device
	ctx     cu.CUContext
	mods    []cu.Module
	fns     [numKernels]cu.Function
	blas    *cublas.Handle
	info    cudaprobe.Device
	sms     int
	name    string
	cc      [2]int

	args [maxArgs]uint64
	argp [maxArgs]unsafe.Pointer

	allocs  map[cu.DevicePtr]int64
	ints    map[intsKey]cu.DevicePtr
	adjs    map[*kernels.Adj]*deviceAdj
	edges   map[*kernels.EdgesBySource]*deviceEdges
	partial cu.DevicePtr // partialDbls doubles of block partial sums
	host    []float64    // their host copy
	counter cu.DevicePtr // one uint32 (CountCorrect)
	scratch cu.DevicePtr // grown on demand: row losses, bias partials, histograms
	scrLen  int64
	once    cu.DevicePtr // grown on demand: the row list of the launch being issued (intsOnce)
	onceLen int64
}

var _ kernels.Device = (*Device)(nil)

type intsKey struct {
	p *int32
	n int
}

type deviceAdj struct {
	ptr, col, val cu.DevicePtr // val 0: all ones
}

// deviceEdges is the device copy of an EdgesBySource.
type deviceEdges struct {
	ptr, dst, rank cu.DevicePtr
}

// New binds GPU ordinal (the rank's choice, see cudaprobe.Ordinal) to the
// calling goroutine, which it locks to its OS thread for good, and loads
// the kernels and cuBLAS. On failure it releases what it took: the
// context, the modules, the allocations and the thread.
func New(ordinal int) (_ *Device, err error) {
	runtime.LockOSThread()
	d := &Device{ordinal: ordinal, allocs: map[cu.DevicePtr]int64{}, ints: map[intsKey]cu.DevicePtr{},
		adjs: map[*kernels.Adj]*deviceAdj{}, edges: map[*kernels.EdgesBySource]*deviceEdges{},
		host: make([]float64, partialDbls)}
	defer func() {
		// alloc panics with an *Error: out of memory here is New's error.
		if v := recover(); v != nil {
			e, ok := v.(*Error)
			if !ok {
				panic(v)
			}
			err = e
		}
		if err != nil {
			d.release()
			runtime.UnlockOSThread()
		}
	}()
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: GPU %d requested but this node shows %d (CUDA_VISIBLE_DEVICES=%q)", ordinal, n, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	if d.info, err = cudaprobe.Describe(ordinal); err != nil {
		return nil, err
	}
	d.name, d.cc, d.sms = d.info.Name, d.info.CC, d.info.SMs
	if d.cc[0] < 8 {
		return nil, fmt.Errorf("cuda: GPU %d (%s) has compute capability %d.%d; the kernels are built for 8.0 and later", ordinal, d.name, d.cc[0], d.cc[1])
	}
	if d.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, fmt.Errorf("cuda: GPU %d: %w", ordinal, err)
	}
	ctx, err := d.dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: GPU %d context: %w", ordinal, err)
	}
	d.ctx = ctx
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		return nil, fmt.Errorf("cuda: GPU %d set context: %w", ordinal, err)
	}
	if err = d.load(); err != nil {
		return nil, err
	}
	if d.blas, err = cublas.Open(); err != nil {
		return nil, err
	}
	for i := range d.argp {
		d.argp[i] = unsafe.Pointer(&d.args[i])
	}
	d.partial = d.alloc("reduction partials", 8*partialDbls)
	d.counter = d.alloc("counter", 8)
	return d, nil
}

// jitLog is the size of each JIT log buffer (the driver truncates there).
const jitLog = 16 << 10

// load JIT-compiles the PTX for this GPU's architecture and looks up every
// kernel; a PTX the driver rejects is reported with the JIT's logs.
func (d *Device) load() error {
	arch := "sm80"
	if d.cc[0] >= 9 {
		arch = "sm90"
	}
	files, err := fs.Glob(ptxFS, "ptx/*."+arch+".ptx")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("cuda: no %s PTX embedded in this binary (build it with make cuda)", arch)
	}
	found := 0
	for _, f := range files {
		src, err := fs.ReadFile(ptxFS, f)
		if err != nil {
			return fmt.Errorf("cuda: reading embedded %s: %w", f, err)
		}
		info, errs := &cu.JITInfoLogBuffer{Buffer: make([]byte, jitLog)}, &cu.JITErrorLogBuffer{Buffer: make([]byte, jitLog)}
		mod, err := cu.LoadDataEx(string(src), info, errs)
		if err != nil {
			return fmt.Errorf("cuda: loading %s on %s (driver %d): %w%s", f, d.name, cu.Version(), err,
				logText("JIT error log", errs.Buffer)+logText("JIT info log", info.Buffer))
		}
		d.mods = append(d.mods, mod)
		for k, name := range kernelNames {
			if fn, err := mod.Function(name); err == nil {
				d.fns[k] = fn
				found++
			}
		}
	}
	if found != numKernels {
		var missing []string
		for k, name := range kernelNames {
			if d.fns[k] == (cu.Function{}) {
				missing = append(missing, name)
			}
		}
		return fmt.Errorf("cuda: the embedded PTX lacks kernels %s", strings.Join(missing, ", "))
	}
	return nil
}

// logText is a JIT log on one line: "; <what>: line; line", or "" when
// it is empty.
func logText(what string, buf []byte) string {
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	var lines []string
	for _, l := range strings.Split(string(buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "; " + what + ": " + strings.Join(lines, "; ")
}

// MakeCurrent binds the calling goroutine to the Device's context (for a
// caller that moves a Device to another goroutine, as tests do): it locks
// the goroutine to its OS thread and makes the context current there.
func (d *Device) MakeCurrent() error {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("cuda: GPU %d set context: %w", d.ordinal, err)
	}
	return nil
}

// Name describes the GPU: "NVIDIA H200 (cc 9.0, 132 SMs)".
func (d *Device) Name() string {
	return fmt.Sprintf("%s (cc %d.%d, %d SMs)", d.name, d.cc[0], d.cc[1], d.sms)
}

// Info is the driver's description of the GPU (PCI bus id, memory).
func (d *Device) Info() cudaprobe.Device { return d.info }

// GridPass is what one launch covers in one pass of its loop: threads of a
// grid-stride kernel, warps (rows) of a warp-per-row one, and elements of
// a block reduction. Tests size inputs past them.
func (d *Device) GridPass() (threads, warps, reduced int) {
	threads = 32 * d.sms * block
	return threads, threads / 32, maxPartials * block
}

// Allocated is the number of device allocations the Device holds and
// their bytes (tests: what grows must free what it replaces).
func (d *Device) Allocated() (n int, bytes int64) {
	for _, b := range d.allocs {
		bytes += b
	}
	return len(d.allocs), bytes
}

// Close frees every allocation and releases the context.
func (d *Device) Close() { d.release() }

// release frees what the Device holds: allocations, cuBLAS, modules and
// its reference to the primary context.
func (d *Device) release() {
	for p := range d.allocs {
		_ = cu.MemFree(p)
	}
	clear(d.allocs)
	if d.blas != nil {
		_ = d.blas.Close()
		d.blas = nil
	}
	for _, m := range d.mods {
		_ = m.Unload()
	}
	d.mods = nil
	if d.ctx != (cu.CUContext{}) {
		_ = d.dev.ReleasePrimaryCtx()
		d.ctx = cu.CUContext{}
	}
}

// Synchronize waits for all issued work and reports an asynchronous
// failure (a faulting kernel) as an error.
func (d *Device) Synchronize() error {
	if err := cu.Synchronize(); err != nil {
		return &Error{"synchronize", err}
	}
	return nil
}

func (d *Device) alloc(what string, bytes int64) cu.DevicePtr {
	p, err := cu.MemAlloc(max(bytes, 8))
	if err != nil {
		free, total, _ := cu.MemInfo()
		panic(&Error{fmt.Sprintf("allocating %s (%.1f MiB; %.1f of %.1f MiB free)", what, float64(bytes)/(1<<20),
			float64(free)/(1<<20), float64(total)/(1<<20)), err})
	}
	d.allocs[p] = bytes
	return p
}

// ---- launches ----

// Argument encoding: gorgonia.org/cu copies 8 bytes per argument.
func i32(v int) uint64 {
	if v != int(int32(v)) {
		panic(fmt.Sprintf("cuda: kernel argument %d overflows int32", v))
	}
	return uint64(uint32(int32(v)))
}
func i64(v int) uint64     { return uint64(int64(v)) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func mat(m *kernels.Mat) uint64 {
	if m.Data != nil {
		panic("cuda: a host matrix was passed to the GPU device")
	}
	return uint64(m.Ptr)
}
func dptr(p cu.DevicePtr) uint64 { return uint64(p) }

// launch runs kernel k over n work items (threads, or warps when warps is
// set) with a grid-stride grid capped at 32 blocks per SM.
func (d *Device) launch(k int, n int, warps bool, args ...uint64) {
	threads := int64(n)
	if warps {
		threads *= 32
	}
	grid := int((threads + block - 1) / block)
	d.launchGrid(k, min(max(grid, 1), 32*d.sms), args...)
}

func (d *Device) launchGrid(k, grid int, args ...uint64) {
	copy(d.args[:], args)
	fail(kernelNames[k], d.fns[k].Launch(grid, 1, 1, block, 1, 1, 0, cu.NoStream, d.argp[:len(args)]))
}

// partialGrid is the fixed grid of a *_partial reduction over n items:
// fixed for a given n, so the sum's rounding is the same on every call.
func partialGrid(n int) int { return min(max((n+block-1)/block, 1), maxPartials) }

// sumPartials downloads the first n partial sums (stride apart, from
// offset) and adds them in order.
func (d *Device) sumPartials(n, stride, offset int) float64 {
	d.download(unsafe.Pointer(&d.host[0]), d.partial, int64(8*n*stride))
	var s float64
	for b := 0; b < n; b++ {
		s += d.host[b*stride+offset]
	}
	return s
}

func (d *Device) download(dst unsafe.Pointer, src cu.DevicePtr, bytes int64) {
	if bytes > 0 {
		fail("download", cu.MemcpyDtoH(dst, src, bytes))
	}
}

// scratchBuf returns at least bytes of scratch device memory.
func (d *Device) scratchBuf(bytes int64) cu.DevicePtr {
	return d.grow(&d.scratch, &d.scrLen, bytes, "scratch")
}

// grow returns *buf, replaced by an allocation of at least bytes (at least
// twice the old one) where *n, its size, is short.
func (d *Device) grow(buf *cu.DevicePtr, n *int64, bytes int64, what string) cu.DevicePtr {
	if bytes > *n {
		if *buf != 0 {
			fail("free "+what, cu.MemFree(*buf))
			delete(d.allocs, *buf)
		}
		*n = max(bytes, 2**n)
		*buf = d.alloc(what, *n)
	}
	return *buf
}

// Ints returns the device copy of an index slice, uploading it on first
// use (index slices are fixed for a run: labels, masks, send lists).
func (d *Device) Ints(x []int32) uint64 {
	if len(x) == 0 {
		return 0
	}
	key := intsKey{&x[0], len(x)}
	if p, ok := d.ints[key]; ok {
		return dptr(p)
	}
	p := d.alloc("index list", int64(4*len(x)))
	fail("upload index list", cu.MemcpyHtoD(p, unsafe.Pointer(&x[0]), int64(4*len(x))))
	d.ints[key] = p
	return dptr(p)
}

// intsOnce uploads x into the device buffer of lists used once and
// returns its address. The copy is ordered on the stream after the
// kernels issued before it, so the buffer is free to overwrite by then.
func (d *Device) intsOnce(x []int32) uint64 {
	if len(x) == 0 {
		return 0
	}
	bytes := int64(4 * len(x))
	p := d.grow(&d.once, &d.onceLen, bytes, "row list")
	fail("upload row list", cu.MemcpyHtoD(p, unsafe.Pointer(&x[0]), bytes))
	return dptr(p)
}

func (d *Device) adj(a *kernels.Adj) *deviceAdj {
	if g, ok := d.adjs[a]; ok {
		return g
	}
	nnz := a.Ptr[a.Rows]
	g := &deviceAdj{ptr: d.alloc("CSR row pointers", int64(8*(a.Rows+1))), col: d.alloc("CSR columns", 4*nnz)}
	fail("upload CSR", cu.MemcpyHtoD(g.ptr, unsafe.Pointer(&a.Ptr[0]), int64(8*(a.Rows+1))))
	if nnz > 0 {
		fail("upload CSR", cu.MemcpyHtoD(g.col, unsafe.Pointer(&a.Col[0]), 4*nnz))
		if a.Val != nil {
			g.val = d.alloc("CSR weights", 4*nnz)
			fail("upload CSR", cu.MemcpyHtoD(g.val, unsafe.Pointer(&a.Val[0]), 4*nnz))
		}
	}
	d.adjs[a] = g
	return g
}

// edgesBySource returns the device copy of e, uploading it on first use
// (like an Adj, it is fixed for a run).
func (d *Device) edgesBySource(e *kernels.EdgesBySource) *deviceEdges {
	if g, ok := d.edges[e]; ok {
		return g
	}
	n := len(e.Ptr)
	nnz := e.Ptr[n-1]
	g := &deviceEdges{ptr: d.alloc("edges by source: pointers", int64(8*n)), dst: d.alloc("edges by source: destinations", 4*nnz),
		rank: d.alloc("edges by source: ranks", 4*nnz)}
	fail("upload edges by source", cu.MemcpyHtoD(g.ptr, unsafe.Pointer(&e.Ptr[0]), int64(8*n)))
	if nnz > 0 {
		fail("upload edges by source", cu.MemcpyHtoD(g.dst, unsafe.Pointer(&e.Dst[0]), 4*nnz))
		fail("upload edges by source", cu.MemcpyHtoD(g.rank, unsafe.Pointer(&e.Rank[0]), 4*nnz))
	}
	d.edges[e] = g
	return g
}

func shape(op string, a, b *kernels.Mat) {
	if a.Rows != b.Rows || a.Cols != b.Cols {
		panic(fmt.Sprintf("cuda: %s: shapes %dx%d and %dx%d", op, a.Rows, a.Cols, b.Rows, b.Cols))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ptrOf(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
