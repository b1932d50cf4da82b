package kernels

import (
	"syscall"
	"unsafe"
)

// hugePage is the x86-64 and arm64 transparent huge page size.
const hugePage = 2 << 20

// adviseHuge asks Linux to back s with transparent huge pages where it
// allows them on request (enabled = madvise, the common default; Go's heap
// no longer asks). The aggregation gathers rows at random from matrices of
// hundreds of MB, and with 4 KiB pages nearly every row misses the TLB.
// The advice covers the 2 MiB pages inside s; refusals are ignored, since
// it changes speed only.
func adviseHuge(s []float32) {
	n := len(s) * 4
	if n < 4*hugePage {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n)
	lo := (hugePage - int(uintptr(unsafe.Pointer(&b[0]))%hugePage)) % hugePage
	hi := lo + (n-lo)/hugePage*hugePage
	_ = syscall.Madvise(b[lo:hi], syscall.MADV_HUGEPAGE)
}
