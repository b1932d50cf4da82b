package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// CPU is the multi-threaded reference Device. Its worker goroutines are
// started once by NewCPU and stopped by Close; every kernel keeps its
// per-call state in a task struct inside the CPU value, so that repeated
// calls do not allocate.
type CPU struct {
	threads int

	// Worker pool. run publishes cur/nTasks, then wakes helpers through
	// wake; all participants pull chunk indices from next.
	wake   chan struct{}
	wg     sync.WaitGroup
	cur    task
	nTasks int64
	next   atomic.Int64
	closed bool

	spmm     spmmTask
	spmmRows spmmTask
	bias     biasTask
	bgrad    biasGradTask
	relu     reluTask
	reluB    reluBackTask
	drop     dropoutTask
	mul      mulTask
	zero     zeroTask
	sce      sceTask
	correct  correctTask
	adam     adamTask
	gemm     gemmTask
	attn     attentionTask
	terms    termsTask
	elu      eluTask
}

var _ Device = (*CPU)(nil)

// task is one kernel call split into chunks; do(c) processes chunk c. Chunk
// boundaries are fixed before dispatch, so which goroutine runs a chunk
// never changes the result.
type task interface{ do(c int) }

// NewCPU returns a CPU device running on threads goroutines (the caller's
// plus threads-1 workers); threads <= 0 means runtime.GOMAXPROCS(0). The
// workers live until Close.
func NewCPU(threads int) *CPU {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &CPU{threads: threads}
	if threads > 1 {
		p.wake = make(chan struct{}, threads-1)
		for i := 0; i < threads-1; i++ {
			go p.worker()
		}
	}
	return p
}

// Threads reports how many goroutines the device computes on.
func (p *CPU) Threads() int { return p.threads }

// Close stops the worker goroutines. The device stays usable afterwards but
// runs single-threaded.
func (p *CPU) Close() {
	if p.closed {
		return
	}
	p.closed = true
	if p.wake != nil {
		close(p.wake)
	}
	p.threads = 1
}

func (p *CPU) worker() {
	for range p.wake {
		p.drain()
		p.wg.Done()
	}
}

func (p *CPU) drain() {
	t, n := p.cur, p.nTasks
	for {
		c := p.next.Add(1) - 1
		if c >= n {
			return
		}
		t.do(int(c))
	}
}

// run executes chunks 0..n-1 of t on the pool and returns when all are done.
func (p *CPU) run(t task, n int) {
	if n <= 1 || p.threads == 1 {
		for c := 0; c < n; c++ {
			t.do(c)
		}
		return
	}
	p.cur, p.nTasks = t, int64(n)
	p.next.Store(0)
	k := min(p.threads-1, n-1)
	p.wg.Add(k)
	for i := 0; i < k; i++ {
		p.wake <- struct{}{}
	}
	p.drain()
	p.wg.Wait()
	p.cur = nil
}

// grain is the least work (elements touched) worth a chunk of its own;
// below it the hand-off to a worker costs more than it saves.
const grain = 1 << 14

// chunks returns how many chunks to cut work into for a kernel whose result
// does not depend on the cut: a few per thread, for load balance.
func (p *CPU) chunks(work int) int {
	if p.threads == 1 {
		return 1
	}
	return max(1, min(4*p.threads, (work+grain-1)/grain))
}

// maxBlocks bounds the number of partial results of a reduction.
const maxBlocks = 256

// blocks returns how many blocks a reduction over work elements uses. It
// depends on the size only, not on the thread count, so that partial sums,
// combined in block order, give the same bits for any thread count.
func blocks(work int) int {
	return max(1, min(maxBlocks, (work+grain-1)/grain))
}

// span returns the bounds of part c of n items cut into nc near-equal parts.
func span(n, nc, c int) (lo, hi int) {
	return c * n / nc, (c + 1) * n / nc
}

func checkMat(name string, m *Mat) {
	if m.Rows < 0 || m.Cols < 0 || len(m.Data) < m.Rows*m.Cols {
		panic(fmt.Sprintf("kernels: %s: bad matrix %dx%d with %d elements", name, m.Rows, m.Cols, len(m.Data)))
	}
}

func sameShape(op string, a, b *Mat) {
	checkMat(op, a)
	checkMat(op, b)
	if a.Rows != b.Rows || a.Cols != b.Cols {
		panic(fmt.Sprintf("kernels: %s: shape mismatch %dx%d vs %dx%d", op, a.Rows, a.Cols, b.Rows, b.Cols))
	}
}

// NewMat allocates a zeroed host matrix.
func (p *CPU) NewMat(rows, cols int) *Mat { return NewMat(rows, cols) }

// Upload copies src into dst unless they are the same memory.
func (p *CPU) Upload(dst *Mat, src []float32) {
	d := dst.Data[:dst.Len()]
	if len(src) != len(d) {
		panic(fmt.Sprintf("kernels: Upload: %d values into %dx%d", len(src), dst.Rows, dst.Cols))
	}
	if len(d) > 0 && &d[0] == &src[0] {
		return
	}
	copy(d, src)
}

// Download copies src into dst unless they are the same memory.
func (p *CPU) Download(dst []float32, src *Mat) {
	s := src.Data[:src.Len()]
	if len(s) != len(dst) {
		panic(fmt.Sprintf("kernels: Download: %dx%d into %d values", src.Rows, src.Cols, len(dst)))
	}
	if len(s) > 0 && &s[0] == &dst[0] {
		return
	}
	copy(dst, s)
}

// Copy copies src into dst.
func (p *CPU) Copy(dst, src *Mat) {
	sameShape("Copy", dst, src)
	copy(dst.Data[:dst.Len()], src.Data[:src.Len()])
}

// Host is true: the CPU's matrices are host slices.
func (p *CPU) Host() bool { return true }

// Synchronize has nothing to wait for: every CPU kernel returns when done.
func (*CPU) Synchronize() error { return nil }
