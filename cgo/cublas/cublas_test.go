//go:build !cpu

package cublas

import (
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe/cudalib"
)

// reset forgets what the loader did, for a test that loads from other
// candidates (the C function pointers are rebound by the next load).
func reset(t *testing.T, cs []cudalib.Candidate) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if fixed {
		t.Skip("a handle exists: the loaded cuBLAS stays")
	}
	cands, next, attempts, loaded, rejected = cs, 0, nil, -1, map[string]bool{}
}

// Where cuBLAS loads but there is no GPU, every library found gives way to
// the next and the error names each with its cublasCreate_v2 status;
// without cuBLAS, the error says which sonames were tried.
func TestOpenWithoutGPU(t *testing.T) {
	h, err := Open()
	for _, a := range Attempts() {
		t.Logf("%s at %s: %s", a.Soname, a.Where(), a.Result)
	}
	if err == nil {
		t.Log("cuBLAS loaded and a handle was created: a GPU is present")
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Log(err)
	msg := err.Error()
	if strings.HasPrefix(msg, "cublas: cannot load") {
		for _, so := range cudalib.CuBLAS.Sonames {
			if !strings.Contains(msg, so) {
				t.Errorf("error %q does not name %s", msg, so)
			}
		}
		return
	}
	if !strings.HasPrefix(msg, "cublas: no cuBLAS here creates a handle: ") || !strings.Contains(msg, ": cuBLAS ") {
		t.Fatalf("want a load error or the handle failure of each library, got %q", msg)
	}
	n := 0
	for _, a := range Attempts() {
		if a.File == "" || a.Result == "the same file as an earlier candidate" {
			continue
		}
		n++
		if a.OK || !strings.Contains(a.Result, "but cublasCreate_v2: CUBLAS_STATUS_") || !strings.Contains(msg, a.File+": "+a.Result) {
			t.Errorf("attempt %+v: want a failed handle named in the error", a)
		}
	}
	if n == 0 {
		t.Error("no attempt loaded a library, yet the error says one created no handle")
	}
	if _, err2 := Open(); err2 == nil || err2.Error() != msg {
		t.Errorf("Open again: %v, want the same error", err2)
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

// The load error names every soname and dlerror's last message; a
// library without cuBLAS's symbols is named with the symbol, and the next
// candidate is tried.
func TestLoadError(t *testing.T) {
	reset(t, []cudalib.Candidate{{Soname: "libdl.so.2"}, {Soname: "libcublas.so.98"}, {Soname: "libcublas.so.99"}})
	defer reset(t, nil)
	err := Load()
	want := "cublas: cannot load cuBLAS (tried libcublas.so.13, libcublas.so.12, libcublas.so.11, libcublas.so): libcublas.so.99: cannot open shared object file"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %q...", err, want)
	}
	got := Attempts()
	if len(got) != 3 || got[0].Result != "libdl.so.2 has no symbol cublasCreate_v2" || got[0].OK ||
		!strings.HasPrefix(got[2].Result, "libcublas.so.99: cannot open") {
		t.Errorf("attempts: %+v", got)
	}
}
