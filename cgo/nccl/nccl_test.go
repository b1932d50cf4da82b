//go:build !cpu

package nccl

import (
	"strings"
	"testing"
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

// A library that loads but lacks NCCL's symbols is named with the symbol.
func TestMissingSymbol(t *testing.T) {
	err := loadFirst([]string{"libdl.so.2"})
	if want := "nccl: libdl.so.2 has no symbol ncclGetErrorString"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
