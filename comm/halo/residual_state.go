package halo

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gnn-spmd/gnn-spmd/comm"
)

// ResidualBlock is one rank's sender-side residual state of one exchange:
// the reconstructions its peers hold of the rows it sends them, Rows[p] of
// them for peer p, in peer order. Its receiver-side state is the same rows
// held by the senders, so a checkpoint stores the sender sides only.
type ResidualBlock struct {
	Layer, Dir, Cols int // Dir: 0 forward, 1 backward
	Rows             []int
	Data             []float32
}

// ResidualTable is every rank's ResidualBlock of one exchange, as a
// checkpoint stores it: Rows[s][r] rows that rank s sends rank r, and Data
// the rows of all blocks in (s, r) order.
type ResidualTable struct {
	Layer, Dir, Cols int
	Rows             [][]int64
	Data             []float32
}

// ResidualBlocks lists the exchanges that have residual state, in (layer,
// direction) order. The blocks share host memory with the state; a
// device's state is copied to the host.
func (x *Exchange[P]) ResidualBlocks() []ResidualBlock {
	var b []ResidualBlock
	for l, dirs := range x.states {
		for dir, s := range dirs {
			if s.cols == 0 {
				continue
			}
			send, _ := x.sides(dir)
			data := s.sent.Data
			if data == nil && s.sent.Len() > 0 {
				data = make([]float32, s.sent.Len())
				x.residualMemory().Get(bytesOf(data), x.mem.Rows(&s.sent, 0, s.sent.Rows))
			}
			b = append(b, ResidualBlock{Layer: l, Dir: dir, Cols: s.cols, Rows: send.Rows, Data: data})
		}
	}
	return b
}

// RestoreResidual sets this rank's residual state from a checkpoint's
// tables: its own blocks as the sender, and its peers' blocks addressed to
// it as the receiver. The tables must describe this rank's layout.
func (x *Exchange[P]) RestoreResidual(tables []ResidualTable) error {
	me, q := x.plan.Rank, x.plan.Size()
	for _, t := range tables {
		if t.Layer < 0 || t.Layer >= len(x.states) || t.Dir < 0 || t.Dir > 1 || t.Cols < 1 || len(t.Rows) != q {
			return fmt.Errorf("residual state of layer %d direction %d, %d wide, for %d ranks: this run has %d layers and %d ranks",
				t.Layer, t.Dir, t.Cols, len(t.Rows), len(x.states), q)
		}
		send, recv := x.sides(t.Dir)
		what := dirName[t.Dir]
		// off[s][r] is the first value of block (s, r).
		off := make([][]int, q)
		n := 0
		for s := range q {
			if len(t.Rows[s]) != q {
				return fmt.Errorf("residual state of layer %d %s: rank %d has %d peers, expected %d", t.Layer, what, s, len(t.Rows[s]), q)
			}
			off[s] = make([]int, q)
			for r, k := range t.Rows[s] {
				off[s][r] = n
				n += int(k) * t.Cols
			}
		}
		if n != len(t.Data) {
			return fmt.Errorf("residual state of layer %d %s: %d values for %d rows of %d", t.Layer, what, len(t.Data), n/t.Cols, t.Cols)
		}
		for p := range q {
			if t.Rows[me][p] != int64(send.Rows[p]) || t.Rows[p][me] != int64(recv.Rows[p]) {
				return fmt.Errorf("residual state of layer %d %s: ranks %d and %d exchange %d and %d rows, this partition %d and %d",
					t.Layer, what, me, p, t.Rows[me][p], t.Rows[p][me], send.Rows[p], recv.Rows[p])
			}
		}
		s := x.newResidual(t.Cols, sumInts(send.Rows), sumInts(recv.Rows))
		mem := x.residualMemory()
		mem.Put(x.mem.Rows(&s.sent, 0, s.sent.Rows), bytesOf(t.Data[off[me][0]:off[me][0]+s.sent.Len()]))
		at := 0
		for p := range q {
			mem.Put(x.mem.Rows(&s.recv, at, at+recv.Rows[p]), bytesOf(t.Data[off[p][me]:off[p][me]+recv.Rows[p]*t.Cols]))
			at += recv.Rows[p]
		}
		x.states[t.Layer][t.Dir] = s
	}
	return nil
}

var opGatherResidual = [2]comm.Op{{Name: "residual state sizes to rank 0"}, {Name: "residual state to rank 0"}}

// GatherResidual collects every rank's residual blocks on rank 0, which
// returns them as tables; the other ranks return nil. Every rank calls it
// with its blocks at the same point. layers bounds the layer numbers.
func GatherResidual(c comm.Comm, blocks []ResidualBlock, layers int) ([]ResidualTable, error) {
	q, me := c.Size(), c.Rank()
	// The header: per (layer, direction) the width (0: no state) and the
	// rows per peer.
	slot := 1 + q
	head := make([]int64, 2*layers*slot)
	var values []float32
	for _, b := range blocks {
		h := head[(2*b.Layer+b.Dir)*slot:]
		h[0] = int64(b.Cols)
		for p, r := range b.Rows {
			h[1+p] = int64(r)
		}
		values = append(values, b.Data...)
	}
	send, recv := make([][]byte, q), make([][]byte, q)
	send[0] = int64Bytes(head)
	if me == 0 {
		for s := range recv {
			recv[s] = make([]byte, len(send[0]))
		}
	}
	comm.Label(c, &opGatherResidual[0])
	if err := c.AllToAllV(send, recv); err != nil {
		return nil, fmt.Errorf("residual state gather: %w", err)
	}
	heads := make([][]int64, q)
	if me == 0 {
		for s := range q {
			heads[s] = bytesInt64(recv[s])
			n := 0
			for i := 0; i < len(heads[s]); i += slot {
				for _, r := range heads[s][i+1 : i+slot] {
					n += int(r * heads[s][i])
				}
			}
			recv[s] = make([]byte, 4*n)
		}
	}
	send[0] = bytesOf(values)
	if send[0] == nil {
		send[0] = []byte{}
	}
	comm.Label(c, &opGatherResidual[1])
	if err := c.AllToAllV(send, recv); err != nil {
		return nil, fmt.Errorf("residual state gather: %w", err)
	}
	if me != 0 {
		return nil, nil
	}
	at := make([]int, q) // next byte of each rank's values
	var tables []ResidualTable
	for i := range 2 * layers {
		cols := heads[0][i*slot]
		for s := range q {
			if heads[s][i*slot] != cols {
				return nil, fmt.Errorf("residual state gather: layer %d has width %d on rank 0 and %d on rank %d", i/2, cols, heads[s][i*slot], s)
			}
		}
		if cols == 0 {
			continue
		}
		t := ResidualTable{Layer: i / 2, Dir: i % 2, Cols: int(cols), Rows: make([][]int64, q)}
		for s := range q {
			t.Rows[s] = heads[s][i*slot+1 : (i+1)*slot]
			n := 0
			for _, r := range t.Rows[s] {
				n += 4 * int(r*cols)
			}
			for k := at[s]; k < at[s]+n; k += 4 {
				t.Data = append(t.Data, math.Float32frombits(binary.LittleEndian.Uint32(recv[s][k:])))
			}
			at[s] += n
		}
		tables = append(tables, t)
	}
	return tables, nil
}

func int64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func bytesInt64(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}
