// Package par holds the parallel loops of the data packages: a range split
// into one chunk per core, and the atomic minimum that lets a parallel scan
// report the first bad entry whatever the scheduling.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Range splits [0, n) into one contiguous chunk per worker and runs
// body on each concurrently.
func Range(n int, body func(lo, hi int)) {
	w := runtime.GOMAXPROCS(0)
	if w > n {
		w = n
	}
	if w <= 1 {
		if n > 0 {
			body(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for t := 0; t < w; t++ {
		lo, hi := t*n/w, (t+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(lo, hi)
		}()
	}
	wg.Wait()
}

// StoreMin lowers a (-1 = unset) to k, so that parallel scans report the
// first offending entry whatever the scheduling.
func StoreMin(a *atomic.Int64, k int64) {
	for {
		old := a.Load()
		if old != -1 && old <= k {
			return
		}
		if a.CompareAndSwap(old, k) {
			return
		}
	}
}
