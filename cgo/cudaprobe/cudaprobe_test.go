//go:build !cpu

package cudaprobe

import (
	"os"
	"path/filepath"
	"strings"
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

func TestOrdinal(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "3")
	for _, c := range []struct {
		local, override, visible, want int
		err                            string
	}{
		{0, -1, 4, 0, ""}, {3, -1, 4, 3, ""}, {5, -1, 4, 1, ""}, // all of a node's GPUs visible
		{1, -1, 1, 0, ""}, {7, -1, 1, 0, ""}, // one visible GPU per rank (Slurm)
		{-1, -1, 2, 0, ""},                 // no local rank known
		{3, 1, 2, 1, ""}, {0, 0, 1, 0, ""}, // --gpu
		{0, 2, 2, 0, `--gpu 2: this node shows 2 GPU(s), ordinals 0 to 1 (CUDA_VISIBLE_DEVICES="3")`},
		{0, -1, 0, 0, `no GPU is visible (CUDA_VISIBLE_DEVICES="3")`},
	} {
		got, err := Ordinal(c.local, c.override, c.visible)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Ordinal(%d, %d, %d): %v, want %q", c.local, c.override, c.visible, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Ordinal(%d, %d, %d) = %d, %v; want %d", c.local, c.override, c.visible, got, err, c.want)
		}
	}
}

// The report runs with or without a GPU: it names the driver's state, the
// search and each library's attempts, and what is missing.
func TestReport(t *testing.T) {
	var b strings.Builder
	err := Report(&b)
	out := b.String()
	t.Logf("%s(err %v)", out, err)
	for _, want := range []string{"GPU build", "CUDA driver: ", "library search, in order:", "\ncuBLAS (libcublas.so.13, ", "\nNCCL (libnccl.so.2, "} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if Reason() != "" {
		if err == nil || !strings.Contains(err.Error(), "a GPU") || !strings.Contains(out, "no usable GPU: "+Reason()) {
			t.Errorf("without a GPU: err %v", err)
		}
		if _, err := Describe(0); err == nil {
			t.Error("Describe(0) without a GPU")
		}
		return
	}
	d, err := Describe(0)
	if err != nil || d.Name == "" || d.Memory <= 0 || d.SMs <= 0 || len(d.PCI) != len("0000:00:00.0") {
		t.Errorf("Describe(0) = %+v, %v", d, err)
	}
}
