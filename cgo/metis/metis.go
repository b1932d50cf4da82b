// Package metis is a thin cgo binding to METIS 5.1's k-way graph
// partitioner (METIS_PartGraphKway) as packaged by Debian (-lmetis, 32-bit
// idx_t and real_t).
package metis

/*
#cgo LDFLAGS: -lmetis
#include <metis.h>
#include <signal.h>

// Debian's METIS must be built with 32-bit idx_t: the Go side passes int32.
_Static_assert(sizeof(idx_t) == 4, "metis.h: idx_t is not 32-bit");
_Static_assert(sizeof(real_t) == 4, "metis.h: real_t is not 32-bit");

// METIS traps SIGABRT and SIGTERM with signal(2) for the duration of a call
// and restores the old handlers with signal(2) too, which drops the
// SA_ONSTACK and SA_SIGINFO flags the Go runtime needs: a later SIGTERM would
// then crash the process with "non-Go code set up signal handler without
// SA_ONSTACK flag". Saving and restoring the full sigaction avoids that.
static int part_kway(idx_t *nvtxs, idx_t *ncon, idx_t *xadj, idx_t *adjncy,
		idx_t *vwgt, idx_t *nparts, real_t *ubvec, idx_t *options, idx_t *edgecut, idx_t *part) {
	struct sigaction abrt, term;
	sigaction(SIGABRT, NULL, &abrt);
	sigaction(SIGTERM, NULL, &term);
	int rc = METIS_PartGraphKway(nvtxs, ncon, xadj, adjncy, vwgt, NULL, NULL,
		nparts, NULL, ubvec, options, edgecut, part);
	sigaction(SIGABRT, &abrt, NULL);
	sigaction(SIGTERM, &term, NULL);
	return rc;
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
)

// NumOptions is the length of METIS's options array (METIS_NOPTIONS).
const NumOptions = C.METIS_NOPTIONS

// Indices into Options (the METIS_OPTION_* constants this project uses).
const (
	OptionObjType   = C.METIS_OPTION_OBJTYPE
	OptionCType     = C.METIS_OPTION_CTYPE
	OptionIPType    = C.METIS_OPTION_IPTYPE
	OptionRType     = C.METIS_OPTION_RTYPE
	OptionDbgLvl    = C.METIS_OPTION_DBGLVL
	OptionNIter     = C.METIS_OPTION_NITER
	OptionNCuts     = C.METIS_OPTION_NCUTS
	OptionSeed      = C.METIS_OPTION_SEED
	OptionMinConn   = C.METIS_OPTION_MINCONN
	OptionContig    = C.METIS_OPTION_CONTIG
	OptionUFactor   = C.METIS_OPTION_UFACTOR
	OptionNumbering = C.METIS_OPTION_NUMBERING
)

// Options is METIS's options array; -1 means "METIS's default".
type Options [NumOptions]int32

// DefaultOptions returns the options METIS_SetDefaultOptions sets (all -1).
func DefaultOptions() Options {
	var o Options
	C.METIS_SetDefaultOptions((*C.idx_t)(&o[0]))
	return o
}

// Graph is an undirected graph in METIS's CSR form: the neighbours of vertex
// i are Adjncy[Xadj[i]:Xadj[i+1]]. Every edge must appear in both directions
// and there must be no self loops; METIS does not check this and silently
// returns poor partitions otherwise.
type Graph struct {
	Xadj   []int32 // len n+1, Xadj[0] = 0, non-decreasing
	Adjncy []int32 // len Xadj[n], vertex ids in [0, n)
	// Optional vertex weights, NCon per vertex (len n*NCon), non-negative;
	// nil gives every vertex weight 1 (NCon must then be 0 or 1).
	Vwgt []int32
	NCon int // balance constraints; 0 means 1
	// Optional per-constraint imbalance tolerance (max part weight over the
	// mean), NCon values >= 1; nil means METIS's default (1.03 for k-way).
	UBVec []float32
}

// mu serialises calls: GKlib keeps its allocation and signal-trap state in
// process globals, so concurrent METIS calls are not safe.
var mu sync.Mutex

// PartGraphKway partitions g into nparts parts with METIS_PartGraphKway,
// minimising the edge cut while keeping every balance constraint within
// METIS's tolerance (UFactor, default 1.03 for k-way). opts nil means
// DefaultOptions. It returns each vertex's part in [0, nparts) and the
// number of cut (undirected) edges.
func PartGraphKway(g Graph, nparts int, opts *Options) (part []int32, edgeCut int64, err error) {
	if len(g.Xadj) == 0 {
		return nil, 0, fmt.Errorf("metis: xadj is empty, expected n+1 entries")
	}
	n := len(g.Xadj) - 1
	ncon := max(g.NCon, 1)
	if err := check(g, n, ncon); err != nil {
		return nil, 0, err
	}
	if nparts < 1 || nparts > math.MaxInt32 {
		return nil, 0, fmt.Errorf("metis: %d parts, expected at least 1", nparts)
	}
	part = make([]int32, n)
	if n == 0 || nparts == 1 {
		return part, 0, nil // METIS 5.1 dies with SIGFPE for nparts = 1
	}
	o := DefaultOptions()
	if opts != nil {
		o = *opts
	}
	o[OptionNumbering] = 0 // the Go side is always 0-based
	var vwgt *C.idx_t
	if g.Vwgt != nil {
		vwgt = (*C.idx_t)(&g.Vwgt[0])
	}
	var ubvec *C.real_t
	if g.UBVec != nil {
		ubvec = (*C.real_t)(&g.UBVec[0])
	}
	// METIS takes non-const pointers to the input but only writes part and
	// edgecut, so passing Go memory directly is safe (it holds no pointers).
	adjncy := g.Adjncy
	if len(adjncy) == 0 {
		adjncy = []int32{0} // a valid address for an edgeless graph
	}
	cn, cncon, cparts := C.idx_t(n), C.idx_t(ncon), C.idx_t(nparts)
	var cut C.idx_t
	mu.Lock()
	rc := C.part_kway(&cn, &cncon, (*C.idx_t)(&g.Xadj[0]), (*C.idx_t)(&adjncy[0]), vwgt,
		&cparts, ubvec, (*C.idx_t)(&o[0]), &cut, (*C.idx_t)(&part[0]))
	mu.Unlock()
	switch rc {
	case C.METIS_OK:
		return part, int64(cut), nil
	case C.METIS_ERROR_INPUT:
		return nil, 0, fmt.Errorf("metis: METIS_PartGraphKway rejected its input (METIS_ERROR_INPUT; n=%d, ncon=%d, nparts=%d)", n, ncon, nparts)
	case C.METIS_ERROR_MEMORY:
		return nil, 0, fmt.Errorf("metis: METIS_PartGraphKway ran out of memory (n=%d, %d adjacency entries)", n, len(g.Adjncy))
	}
	return nil, 0, fmt.Errorf("metis: METIS_PartGraphKway failed with status %d", int(rc))
}

// check validates what METIS would otherwise read out of bounds on: the CSR
// shape, vertex ids, weights, and (cheaply) self loops.
func check(g Graph, n, ncon int) error {
	if g.Xadj[0] != 0 {
		return fmt.Errorf("metis: xadj[0] = %d, expected 0", g.Xadj[0])
	}
	for i := 0; i < n; i++ {
		if g.Xadj[i+1] < g.Xadj[i] {
			return fmt.Errorf("metis: xadj decreases at vertex %d", i)
		}
	}
	if int(g.Xadj[n]) != len(g.Adjncy) {
		return fmt.Errorf("metis: xadj[n] = %d, but adjncy has %d entries", g.Xadj[n], len(g.Adjncy))
	}
	for i := 0; i < n; i++ {
		for _, v := range g.Adjncy[g.Xadj[i]:g.Xadj[i+1]] {
			if v < 0 || int(v) >= n {
				return fmt.Errorf("metis: vertex %d has neighbour %d, expected an id in [0, %d)", i, v, n)
			}
			if int(v) == i {
				return fmt.Errorf("metis: vertex %d has a self loop, which METIS does not allow", i)
			}
		}
	}
	if g.UBVec != nil {
		if len(g.UBVec) != ncon {
			return fmt.Errorf("metis: %d imbalance tolerances for %d constraints", len(g.UBVec), ncon)
		}
		for c, u := range g.UBVec {
			if !(u >= 1) {
				return fmt.Errorf("metis: constraint %d has imbalance tolerance %v, expected >= 1", c, u)
			}
		}
	}
	if g.Vwgt == nil {
		if ncon != 1 {
			return fmt.Errorf("metis: %d constraints but no vertex weights", ncon)
		}
		return nil
	}
	if len(g.Vwgt) != n*ncon {
		return fmt.Errorf("metis: %d vertex weights, expected n*ncon = %d*%d", len(g.Vwgt), n, ncon)
	}
	total := make([]int64, ncon)
	for k, w := range g.Vwgt {
		if w < 0 {
			return fmt.Errorf("metis: vertex %d constraint %d has weight %d, expected >= 0", k/ncon, k%ncon, w)
		}
		total[k%ncon] += int64(w)
	}
	for c, t := range total {
		if t > math.MaxInt32 {
			return fmt.Errorf("metis: constraint %d has total weight %d, beyond METIS's 32-bit idx_t", c, t)
		}
	}
	return nil
}
