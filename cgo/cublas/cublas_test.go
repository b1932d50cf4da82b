//go:build !cpu

package cublas

import (
	"strings"
	"testing"
)

// On a machine without cuBLAS, Open says which sonames it tried; where
// cuBLAS loads but there is no GPU, cublasCreate_v2 fails with a named status.
func TestOpenWithoutGPU(t *testing.T) {
	h, err := Open()
	if err == nil {
		t.Log("cuBLAS loaded and a handle was created: a GPU is present")
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Log(err)
	msg := err.Error()
	if strings.Contains(msg, "cannot load") {
		for _, so := range sonames {
			if !strings.Contains(msg, so) {
				t.Errorf("error %q does not name %s", msg, so)
			}
		}
		return
	}
	if !strings.HasPrefix(msg, "cublas: cublasCreate_v2: CUBLAS_STATUS_") {
		t.Errorf("want a load error or a named cublasCreate_v2 status, got %q", msg)
	}
}

func TestStatusName(t *testing.T) {
	for code, want := range map[int]string{
		0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 7: "CUBLAS_STATUS_INVALID_VALUE",
		13: "CUBLAS_STATUS_EXECUTION_FAILED", 16: "CUBLAS_STATUS_LICENSE_ERROR", 99: "cublasStatus_t 99",
	} {
		if got := StatusName(code); got != want {
			t.Errorf("StatusName(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestClosedHandle(t *testing.T) {
	var h Handle
	if err := h.Sgemm(false, false, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1); err != errClosed {
		t.Errorf("Sgemm on a closed handle: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close twice: %v", err)
	}
}

// The load error names every soname tried and dlerror's last message.
func TestLoadError(t *testing.T) {
	err := loadFirst([]string{"libcublas.so.98", "libcublas.so.99"})
	want := "cublas: cannot load cuBLAS (tried libcublas.so.98, libcublas.so.99): libcublas.so.99: cannot open shared object file"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %q...", err, want)
	}
}
