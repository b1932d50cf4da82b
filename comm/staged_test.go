//go:build !cpu

package comm

// The device transports of one GPU against the host communicator: goroutine
// ranks (Local), each with its own Device on GPU 0, move the same payloads
// through a device transport and through the Local itself, which must give
// the same bytes (and, for the short all-to-all, the same counts). The
// host-staged transport works over any host communicator, so goroutine
// ranks test it on one GPU as MPI ranks would use it. Without a GPU the
// cudaprobe import makes this binary print SKIP and exit 0.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/kernels"
	"github.com/gnn-spmd/gnn-spmd/kernels/cuda"
)

// payloadBytes is rank from's payload of n bytes for rank to in round
// (payload's bytes).
func payloadBytes(round, from, to, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = payload(from, to, round, i)
	}
	return b
}

// sizeOf is the size of rank from's payload for rank to in round: some
// empty, the rest up to a few KiB, different every round.
func sizeOf(round, from, to int) int {
	if (from+to+round)%4 == 3 {
		return 0
	}
	return 1 + (from*977+to*131+round*3181)%5000
}

// deviceRank is one goroutine rank's GPU and its payload buffers.
type deviceRank struct {
	dev *cuda.Device
	buf []kernels.Bytes
}

func (d *deviceRank) upload(b []byte) kernels.Bytes {
	g := d.dev.NewBytes(max(len(b), 1))
	g.Len = len(b)
	d.dev.UploadBytes(g, b)
	d.buf = append(d.buf, g)
	return g
}

func (d *deviceRank) alloc(n int) kernels.Bytes {
	g := d.dev.NewBytes(max(n, 1))
	g.Len = n
	d.buf = append(d.buf, g)
	return g
}

func (d *deviceRank) download(g kernels.Bytes, n int) []byte {
	b := make([]byte, n)
	d.dev.DownloadBytes(b, kernels.Bytes{Ptr: g.Ptr, Len: n})
	return b
}

func (d *deviceRank) close() {
	for _, g := range d.buf {
		d.dev.Free(g)
	}
	d.dev.Close()
}

// onGPU runs q goroutine ranks, each with a Device on GPU 0 and the device
// transport newTr makes over its Local.
func onGPU(t *testing.T, q int, newTr func(*Local, GPU) DeviceTransport, f func(c *Local, d *deviceRank, tr DeviceTransport) error) {
	err := RunLocal(q, func(c *Local) error {
		dev, err := cuda.New(0)
		if err != nil {
			return err
		}
		d := &deviceRank{dev: dev}
		defer d.close()
		return f(c, d, newTr(c, dev))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func newHostStaged(c *Local, g GPU) DeviceTransport { return NewHostStaged(c, g) }
func newSharedGPU(c *Local, g GPU) DeviceTransport  { return NewSharedGPU(c, g) }

// deviceExchange runs round's all-to-all on the device transport (short: with
// receive buffers longer than the payloads) and on the host, and compares.
func deviceExchange(c *Local, d *deviceRank, tr DeviceTransport, round int, short bool) error {
	r, q := c.Rank(), c.Size()
	send, recv := make([]kernels.Bytes, q), make([]kernels.Bytes, q)
	hostSend, hostRecv := make([][]byte, q), make([][]byte, q)
	got, hostGot := make([]int, q), make([]int, q)
	for p := range q {
		hostSend[p] = payloadBytes(round, r, p, sizeOf(round, r, p))
		send[p] = d.upload(hostSend[p])
		n := sizeOf(round, p, r)
		if short {
			n += 3 + p // the bound, past what p sends
		}
		recv[p], hostRecv[p] = d.alloc(n), make([]byte, n)
	}
	var err error
	if short {
		err = tr.AllToAllVShort(send, recv, got)
	} else {
		err = tr.AllToAllV(send, recv)
	}
	if err != nil {
		return err
	}
	if short {
		err = c.AllToAllVShort(hostSend, hostRecv, hostGot)
	} else {
		err = c.AllToAllV(hostSend, hostRecv)
	}
	if err != nil {
		return err
	}
	for p := range q {
		n := len(hostRecv[p])
		if short {
			if got[p] != hostGot[p] {
				return fmt.Errorf("round %d: rank %d got %d bytes from rank %d, the host %d", round, r, got[p], p, hostGot[p])
			}
			n = got[p]
		}
		if b := d.download(recv[p], n); !slices.Equal(b, hostRecv[p][:n]) {
			return fmt.Errorf("round %d: rank %d's %d bytes from rank %d differ from the host's", round, r, n, p)
		}
	}
	return nil
}

func TestHostStagedAllToAllV(t *testing.T) {
	onGPU(t, 3, newHostStaged, func(c *Local, d *deviceRank, tr DeviceTransport) error {
		for round := range 4 {
			if err := deviceExchange(c, d, tr, round, false); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestHostStagedAllToAllVShort(t *testing.T) {
	onGPU(t, 3, newHostStaged, func(c *Local, d *deviceRank, tr DeviceTransport) error {
		for round := range 4 {
			if err := deviceExchange(c, d, tr, round, true); err != nil {
				return err
			}
		}
		return tooLongRefused(c, d, tr)
	})
}

func TestSharedGPUAllToAllVShort(t *testing.T) {
	onGPU(t, 3, newSharedGPU, func(c *Local, d *deviceRank, tr DeviceTransport) error {
		for round := range 4 {
			if err := deviceExchange(c, d, tr, round, true); err != nil {
				return err
			}
		}
		return tooLongRefused(c, d, tr)
	})
}

// tooLongRefused: every rank sends each peer one byte past the bound that
// peer gave, so that every rank fails (a transport may let the sender wait
// otherwise) and says who sent how much to whom.
func tooLongRefused(c *Local, d *deviceRank, tr DeviceTransport) error {
	r, q := c.Rank(), c.Size()
	send, recv, got := make([]kernels.Bytes, q), make([]kernels.Bytes, q), make([]int, q)
	for p := range q {
		n := 10
		if p != r {
			n = 11
		}
		send[p], recv[p] = d.upload(payloadBytes(0, r, p, n)), d.alloc(10)
	}
	err := tr.AllToAllVShort(send, recv, got)
	if err == nil || !strings.Contains(err.Error(), "sends 11 bytes to rank") || !strings.Contains(err.Error(), "which takes at most 10") {
		return fmt.Errorf("rank %d: payloads past their bound: %v, want the sender, 11 bytes, the receiver and its bound 10", r, err)
	}
	return nil
}

// TestHostStagedKeepsBuffers: once sized, the host staging buffers serve
// later calls of no larger payloads (the short call's receive bounds are
// the largest), and AllReduceMat sums as the host does.
func TestHostStagedKeepsBuffers(t *testing.T) {
	onGPU(t, 2, newHostStaged, func(c *Local, d *deviceRank, tr DeviceTransport) error {
		s := tr.(*HostStaged)
		if err := deviceExchange(c, d, s, 1, true); err != nil {
			return err
		}
		sendBuf, recvBuf := &s.sendBuf[:1][0], &s.recvBuf[:1][0]
		for round := range 3 {
			if err := deviceExchange(c, d, s, 1, round%2 == 1); err != nil {
				return err
			}
			if &s.sendBuf[:1][0] != sendBuf || &s.recvBuf[:1][0] != recvBuf {
				return fmt.Errorf("rank %d: a call of the same sizes allocated new staging buffers", c.Rank())
			}
		}
		x := make([]float32, 1000)
		for i := range x {
			x[i] = float32(i%17)*0.25 + float32(c.Rank())
		}
		m := d.dev.NewMat(20, 50) // freed with the Device
		d.dev.Upload(m, x)
		Label(s, &Op{Name: "test all-reduce"})
		if err := s.AllReduceMat(m); err != nil {
			return err
		}
		if err := c.AllReduceFloat32(x); err != nil {
			return err
		}
		back := make([]float32, len(x))
		d.dev.Download(back, m)
		if !slices.Equal(back, x) {
			return fmt.Errorf("rank %d: AllReduceMat differs from the host's sum", c.Rank())
		}
		return nil
	})
}
