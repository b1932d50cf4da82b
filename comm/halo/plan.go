// Package halo is the halo exchange of layer-wise SPMD training: the plan of
// which rows travel between which ranks, built once from a rank's shard; one
// exchange that gathers, encodes, sends, decodes and scatter-adds those rows,
// written once over a small Memory interface with a host and a CUDA
// implementation; and the meters of its traffic, time and compression error.
//
// A rank's rows are [owned | halo]: rows [0, Owned) are its own nodes, rows
// [Owned+RecvStart[p], Owned+RecvStart[p+1]) the halo rows that rank p owns,
// in the order of p's send list for this rank. Forward, each rank sends the
// rows its peers hold as halo and receives its halo rows in place; backward,
// the gradients of the halo rows go back to their owners, who add them into
// the rows they sent. With residual coding (Residual) both ends also keep
// the receiver's copy of every row they exchange, and the payloads carry
// differences from it.
package halo

import "fmt"

// Plan is one rank's part of the halo layout: who sends which rows to whom.
type Plan struct {
	Rank  int // this rank
	Owned int // rows [0, Owned) belong to this rank
	// Send[p] lists the owned rows rank p holds as halo rows, in p's halo
	// order; Send[Rank] is empty.
	Send [][]int32
	// RecvStart (len Q+1): the halo rows from rank p are rows
	// Owned+RecvStart[p] .. Owned+RecvStart[p+1]-1.
	RecvStart []int
	sendStart []int // offsets of the send lists in a rank's stage, in rows
	// sendRows[r] and recvRows[r] are the rows sent to and received from
	// rank r per layer.
	sendRows, recvRows []int
}

// NewPlan checks the layout of a Q-rank job (Q = len(send)) and returns its
// plan: every send row must be an owned row, and the halo offsets ascending.
func NewPlan(rank, owned int, send [][]int32, recvStart []int) (*Plan, error) {
	q := len(send)
	switch {
	case len(recvStart) != q+1:
		return nil, fmt.Errorf("halo plan: %d send lists and %d halo offsets, expected %d offsets", q, len(recvStart), q+1)
	case rank < 0 || rank >= q:
		return nil, fmt.Errorf("halo plan: rank %d of %d ranks", rank, q)
	case recvStart[0] != 0:
		return nil, fmt.Errorf("halo plan: halo offsets start at %d, expected 0", recvStart[0])
	}
	p := &Plan{Rank: rank, Owned: owned, Send: send, RecvStart: recvStart, sendStart: make([]int, q+1),
		sendRows: make([]int, q), recvRows: make([]int, q)}
	for r, rows := range send {
		if recvStart[r+1] < recvStart[r] {
			return nil, fmt.Errorf("halo plan: halo offsets of rank %d run backwards (%d then %d)", r, recvStart[r], recvStart[r+1])
		}
		for _, i := range rows {
			if i < 0 || int(i) >= owned {
				return nil, fmt.Errorf("halo plan: rank %d's send list holds row %d, expected an owned row in [0, %d)", r, i, owned)
			}
		}
		p.sendStart[r+1] = p.sendStart[r] + len(rows)
		p.sendRows[r], p.recvRows[r] = len(rows), recvStart[r+1]-recvStart[r]
	}
	if len(send[rank]) != 0 || recvStart[rank+1] != recvStart[rank] {
		return nil, fmt.Errorf("halo plan: rank %d sends or receives rows of its own", rank)
	}
	return p, nil
}

// Size is the number of ranks.
func (p *Plan) Size() int { return len(p.Send) }

// HaloRows is the number of halo rows this rank receives per layer.
func (p *Plan) HaloRows() int { return p.RecvStart[len(p.RecvStart)-1] }

// SendRows is the number of rows this rank sends per layer, to all peers.
func (p *Plan) SendRows() int { return p.sendStart[len(p.Send)] }

// peers lists the ranks a forward exchange waits for (the owners of this
// rank's halo rows) and those a backward one waits for (the ranks this rank
// sends rows to).
func (p *Plan) peers() (from, to []int) {
	for r := range p.Send {
		if r == p.Rank {
			continue
		}
		if p.recvRows[r] > 0 {
			from = append(from, r)
		}
		if p.sendRows[r] > 0 {
			to = append(to, r)
		}
	}
	return from, to
}
