//go:build mpich || nompi

package ptscotch

import "errors"

// Graph is one process's piece of an undirected distributed graph (see the
// Open MPI build's ptscotch.go).
type Graph struct {
	Ptr, Adj, Weights []Num
}

// Num is PT-Scotch's index type.
type Num = int64

// MaxNum is the largest index PT-Scotch takes.
const MaxNum = int64(1<<63 - 1)

// errAbsent: Debian builds PT-Scotch against Open MPI, whose symbols would
// clash with MPICH's in one process, and a nompi build has no MPI at all.
var errAbsent = errors.New("ptscotch: this binary is built without PT-Scotch (-tags mpich or nompi; Debian's PT-Scotch is built against Open MPI): use the Open MPI build (make build), or the random method")

// Part returns an error: this build has no PT-Scotch.
func Part(fcomm int32, procs int, g Graph, parts int, seed uint64, balance float64) ([]Num, error) {
	return nil, errAbsent
}

// Check returns an error: this build has no PT-Scotch.
func Check(fcomm int32, g Graph) error { return errAbsent }

// Available reports whether this build links PT-Scotch.
const Available = false
