package job

import (
	"strings"
	"testing"
)

// TestValidateGPUTransport: --gpu-transport takes nccl, mpi or auto, and a
// value other than auto needs --device cuda (which the CPU build refuses
// by itself).
func TestValidateGPUTransport(t *testing.T) {
	for _, c := range []struct {
		device, transport string
		want              string // "" = valid
	}{
		{"cpu", GPUTransportAuto, ""},
		{"cpu", GPUTransportMPI, "train: --gpu-transport applies to --device cuda"},
		{"cpu", GPUTransportNCCL, "train: --gpu-transport applies to --device cuda"},
		{"cpu", "gloo", `train: --gpu-transport: got "gloo", expected nccl, mpi or auto`},
		{"cuda", "", `train: --gpu-transport: got "", expected nccl, mpi or auto`},
	} {
		s := DefaultSpec()
		s.Data, s.Device, s.GPUTransport = "graph.h5", c.device, c.transport
		err := s.Validate()
		if DefaultDevice == "cpu" && c.device == "cuda" {
			// The CPU build refuses --device cuda before anything else
			// of the GPU's.
			if err == nil || !strings.Contains(err.Error(), "--device cuda") {
				t.Errorf("--device cuda --gpu-transport %q in the CPU build: %v, want --device cuda refused", c.transport, err)
			}
			continue
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("--device %s --gpu-transport %q: %v, want valid", c.device, c.transport, err)
		case c.want != "" && (err == nil || err.Error() != c.want || ExitCode(err) != ExitBadInput):
			t.Errorf("--device %s --gpu-transport %q: %v, want %q (exit 2)", c.device, c.transport, err, c.want)
		}
	}
}
