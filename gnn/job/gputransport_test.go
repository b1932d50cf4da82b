package job

import (
	"strings"
	"testing"
)

// TestChooseGPUTransport: auto picks NCCL where every rank has a GPU of its
// own (by node and PCI bus id: identical nodes repeat bus ids) and the
// host-staged transport where two ranks share one; an explicit value is
// taken as given.
func TestChooseGPUTransport(t *testing.T) {
	const busA, busB = "0000:41:00.0", "0000:c1:00.0"
	distinct := []gpuIdentity{{"node1", busA}, {"node1", busB}, {"node2", busA}, {"node2", busB}}
	shared := []gpuIdentity{{"node1", busA}, {"node1", busB}, {"node2", busA}, {"node1", busB}}
	for _, c := range []struct {
		flag   string
		gpus   []gpuIdentity
		want   string
		shared bool
	}{
		{GPUTransportAuto, distinct, "nccl (every rank has a GPU of its own)", false},
		{GPUTransportAuto, shared, "mpi (host-staged; ranks 1 and 3 share GPU 0000:c1:00.0 on node1)", true},
		{GPUTransportAuto, []gpuIdentity{{"n", busA}, {"n", busA}}, "mpi (host-staged; ranks 0 and 1 share GPU 0000:41:00.0 on n)", true},
		{GPUTransportNCCL, shared, "nccl (--gpu-transport nccl)", true},
		{GPUTransportMPI, distinct, "mpi (host-staged; --gpu-transport mpi)", false},
	} {
		got := chooseGPUTransport(c.flag, c.gpus)
		if got.String() != c.want || (got.Shared != "") != c.shared {
			t.Errorf("%s over %v: %q (shared %q), want %q (shared %v)", c.flag, c.gpus, got, got.Shared, c.want, c.shared)
		}
	}
}

// TestGPURecord: a rank's record of its GPU, or of its failure, reads back
// as written; a host name too long for it is cut, not overrun.
func TestGPURecord(t *testing.T) {
	rec := make([]byte, gpuRecordBytes)
	for _, g := range []gpuIdentity{{"node-7.cluster", "0000:41:00.0"}, {"", "0000:00:00.0"}, {strings.Repeat("h", 300), "0000:41:00.0"}} {
		encodeGPURecord(rec, g, false)
		back, failed := decodeGPURecord(rec)
		if failed || back.PCI != g.PCI || !strings.HasPrefix(g.Host, back.Host) || len(back.Host) < min(len(g.Host), 200) {
			t.Errorf("%+v came back as %+v (failed %v)", g, back, failed)
		}
	}
	encodeGPURecord(rec, gpuIdentity{"node", "0000:41:00.0"}, true)
	if _, failed := decodeGPURecord(rec); !failed {
		t.Error("a failed rank's record reads as a GPU")
	}
}
