//go:build !cpu

package cudaprobe

import (
	"os"
	"path/filepath"
	"testing"
)

// Reason is empty iff the CUDA driver found a device. The kernel driver's
// device nodes are the independent witness: no /dev/nvidiaN means no GPU.
func TestReason(t *testing.T) {
	nodes, _ := filepath.Glob("/dev/nvidia[0-9]*")
	t.Logf("Reason() = %q, device nodes %v", Reason(), nodes)
	if len(nodes) == 0 && Reason() == "" {
		t.Error("no /dev/nvidiaN, yet the probe found a GPU")
	}
	// CUDA_VISIBLE_DEVICES may hide every device from CUDA on purpose.
	if _, hidden := os.LookupEnv("CUDA_VISIBLE_DEVICES"); len(nodes) > 0 && Reason() != "" && !hidden {
		t.Errorf("%v exist, yet the probe found no GPU: %s", nodes, Reason())
	}
}

func TestIsTest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"/usr/bin/gnn-spmd", "train"}, false},
		{[]string{"/tmp/go-build1/b001/kernels.test"}, true},
		{[]string{"./cuda-tests", "-test.v=true"}, true},
		{[]string{"./gnn-spmd", "-v", "test.x"}, false},
	} {
		if got := isTest(c.args); got != c.want {
			t.Errorf("isTest(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
