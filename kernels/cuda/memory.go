//go:build !cpu

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"gorgonia.org/cu"
)

// Device memory: matrices and payload buffers, and the copies between
// host and device.

// Host is false: matrices live in GPU memory.
func (d *Device) Host() bool { return false }

// NewMat allocates a zeroed rows x cols matrix in GPU memory.
func (d *Device) NewMat(rows, cols int) *kernels.Mat {
	n := int64(rows) * int64(cols)
	p := d.alloc(fmt.Sprintf("a %dx%d matrix", rows, cols), 4*n)
	fail("zero", cu.MemsetD32(p, 0, max(n, 1)))
	return &kernels.Mat{Rows: rows, Cols: cols, Ptr: uintptr(p)}
}

// Upload copies host values into dst.
func (d *Device) Upload(dst *kernels.Mat, src []float32) {
	if len(src) != dst.Len() {
		panic(fmt.Sprintf("cuda: Upload: %d values into %dx%d", len(src), dst.Rows, dst.Cols))
	}
	if len(src) > 0 {
		fail("upload", cu.MemcpyHtoD(cu.DevicePtr(mat(dst)), unsafe.Pointer(&src[0]), int64(4*len(src))))
	}
}

// Download copies src into host values.
func (d *Device) Download(dst []float32, src *kernels.Mat) {
	if len(dst) != src.Len() {
		panic(fmt.Sprintf("cuda: Download: %dx%d into %d values", src.Rows, src.Cols, len(dst)))
	}
	if len(dst) > 0 {
		d.download(unsafe.Pointer(&dst[0]), cu.DevicePtr(mat(src)), int64(4*len(dst)))
	}
}

// Copy copies src into dst on the device.
func (d *Device) Copy(dst, src *kernels.Mat) {
	shape("Copy", dst, src)
	if n := dst.Len(); n > 0 {
		fail("copy", cu.MemcpyDtoD(cu.DevicePtr(mat(dst)), cu.DevicePtr(mat(src)), int64(4*n)))
	}
}

// zero sets m to 0.
func (d *Device) zero(m *kernels.Mat) {
	if n := m.Len(); n > 0 {
		fail("zero", cu.MemsetD32(cu.DevicePtr(mat(m)), 0, int64(n)))
	}
}

// NewBytes allocates n bytes of device memory.
func (d *Device) NewBytes(n int) kernels.Bytes {
	return kernels.Bytes{Ptr: uintptr(d.alloc("a payload buffer", int64(n))), Len: n}
}

// Free releases a buffer from NewBytes.
func (d *Device) Free(b kernels.Bytes) {
	if b.Ptr != 0 {
		fail("free", cu.MemFree(cu.DevicePtr(b.Ptr)))
		delete(d.allocs, cu.DevicePtr(b.Ptr))
	}
}

// DownloadBytes copies a payload to the host (the host-staged transport's
// send, tests). It waits for the work queued before it.
func (d *Device) DownloadBytes(dst []byte, src kernels.Bytes) {
	if len(dst) != src.Len {
		panic(fmt.Sprintf("cuda: DownloadBytes: %d bytes into %d", src.Len, len(dst)))
	}
	if len(dst) > 0 {
		d.download(ptrOf(dst), cu.DevicePtr(src.Ptr), int64(len(dst)))
	}
}

// UploadBytes copies host bytes into a payload buffer (the host-staged
// transport's receive). src may be reused once it returns: the driver has
// copied pageable memory out by then.
func (d *Device) UploadBytes(dst kernels.Bytes, src []byte) {
	if len(src) != dst.Len {
		panic(fmt.Sprintf("cuda: UploadBytes: %d bytes into %d", len(src), dst.Len))
	}
	if len(src) > 0 {
		fail("upload", cu.MemcpyHtoD(cu.DevicePtr(dst.Ptr), ptrOf(src), int64(len(src))))
	}
}

// CopyBytes copies n bytes between device buffers (the in-process
// transport's "send").
func (d *Device) CopyBytes(dst, src uintptr, n int) {
	if n > 0 {
		fail("copy", cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n)))
	}
}
