package job

import (
	"bytes"
	"fmt"
)

// The transport of device payloads between MPI ranks (--gpu-transport):
// NCCL straight from device memory, or MPI through host memory where NCCL
// cannot serve (it refuses two ranks on one GPU). Goroutine ranks of one
// process always copy between their buffers on the one GPU they share.
const (
	GPUTransportAuto = "auto"
	GPUTransportNCCL = "nccl"
	GPUTransportMPI  = "mpi"
)

// gpuIdentity is the GPU an MPI rank bound: its node and PCI bus id, which
// together name one physical device (identical nodes repeat bus ids).
type gpuIdentity struct {
	Host, PCI string
}

// transportChoice is the transport the ranks chose (GPUTransportNCCL or
// GPUTransportMPI) and why, for the run header.
type transportChoice struct {
	Name, Why string
	// Shared names two ranks bound to one GPU, which NCCL refuses ("":
	// none), for the error of a --gpu-transport nccl that fails there.
	Shared string
}

func (c transportChoice) String() string {
	if c.Name == GPUTransportMPI {
		return "mpi (host-staged; " + c.Why + ")"
	}
	return c.Name + " (" + c.Why + ")"
}

// chooseGPUTransport picks the MPI ranks' transport from --gpu-transport
// and every rank's GPU (gpus[r] is rank r's). Every rank calls it with the
// same arguments, so all choose alike.
func chooseGPUTransport(flag string, gpus []gpuIdentity) transportChoice {
	shared := sharedGPU(gpus)
	switch {
	case flag == GPUTransportNCCL || flag == GPUTransportMPI:
		return transportChoice{Name: flag, Why: "--gpu-transport " + flag, Shared: shared}
	case shared != "":
		return transportChoice{Name: GPUTransportMPI, Why: shared, Shared: shared}
	}
	return transportChoice{Name: GPUTransportNCCL, Why: "every rank has a GPU of its own"}
}

// sharedGPU names the first two ranks bound to one GPU, "" if none.
func sharedGPU(gpus []gpuIdentity) string {
	seen := make(map[gpuIdentity]int, len(gpus))
	for r, g := range gpus {
		if first, ok := seen[g]; ok {
			return fmt.Sprintf("ranks %d and %d share GPU %s on %s", first, r, g.PCI, g.Host)
		}
		seen[g] = r
	}
	return ""
}

// gpuRecordBytes is the size of one rank's record in the setup exchange:
// a failure flag, then host name and PCI bus id, each ended by a zero
// byte (a Linux host name has at most 64 bytes, a bus id 12).
const gpuRecordBytes = 256

// encodeGPURecord writes a rank's record into rec (gpuRecordBytes long):
// its GPU, or that its setup failed. A host name too long for the record
// is cut, which at worst makes auto choose the host-staged transport.
func encodeGPURecord(rec []byte, g gpuIdentity, failed bool) {
	clear(rec)
	if failed {
		rec[0] = 1
		return
	}
	room := len(rec) - 1 - len(g.PCI) - 2
	host := g.Host
	if len(host) > room {
		host = host[:room]
	}
	copy(rec[1:], host+"\x00"+g.PCI)
}

// decodeGPURecord reads what encodeGPURecord wrote.
func decodeGPURecord(rec []byte) (g gpuIdentity, failed bool) {
	if rec[0] != 0 {
		return g, true
	}
	host, rest, _ := bytes.Cut(rec[1:], []byte{0})
	pci, _, _ := bytes.Cut(rest, []byte{0})
	return gpuIdentity{Host: string(host), PCI: string(pci)}, false
}
