//go:build !cpu

package nccl

import (
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe/cudalib"
)

// Without NCCL, every entry point says which sonames it tried and how to fix it.
func TestNoLibrary(t *testing.T) {
	if _, err := GetUniqueID(); err == nil || !strings.Contains(err.Error(), "cannot load") {
		t.Skipf("NCCL loads here (GetUniqueID: %v)", err)
	}
	_, err := GetUniqueID()
	t.Log(err)
	want := "nccl: cannot load NCCL (tried libnccl.so.2, libnccl.so): "
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "; install NCCL or put it on LD_LIBRARY_PATH") {
		t.Errorf("got %q, want %q...", msg, want)
	}
	if _, err2 := Version(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("Version: %v", err2)
	}
	if _, err2 := InitRank(2, UniqueID{}, 0); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("InitRank: %v", err2)
	}
	tried := Attempts()
	if len(tried) != len(cudalib.NCCL.Find(cudalib.Default().Dirs())) {
		t.Errorf("%d attempts for the candidates", len(tried))
	}
	for _, a := range tried {
		if a.OK || a.Result == "" {
			t.Errorf("attempt %+v", a)
		}
	}
}

func TestDestroyedComm(t *testing.T) {
	var c Comm
	if err := c.AllReduceFloat32(0, 0, 1, nil); err != errClosed {
		t.Errorf("AllReduceFloat32 on a destroyed comm: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy twice: %v", err)
	}
	if err := c.Abort(); err != nil {
		t.Errorf("Abort after Destroy: %v", err)
	}
}

// A library that loads but lacks NCCL's symbols is named with the symbol,
// and the next candidate is tried.
func TestMissingSymbol(t *testing.T) {
	tried, err := loadFirst([]cudalib.Candidate{{Soname: "libdl.so.2"}, {Soname: "libnccl.so.99"}})
	if err == nil || !strings.Contains(err.Error(), "libnccl.so.99: cannot open shared object file") {
		t.Errorf("got %v", err)
	}
	if want := "libdl.so.2 has no symbol ncclGetErrorString"; len(tried) != 2 || tried[0].Result != want {
		t.Errorf("attempts %+v, want the first to say %q", tried, want)
	}
}

func TestVersionText(t *testing.T) {
	for v, want := range map[int]string{22105: "2.21.5", 2803: "2.8.3", 22703: "2.27.3"} {
		if got := versionText(v); got != want {
			t.Errorf("versionText(%d) = %q, want %q", v, got, want)
		}
	}
}
