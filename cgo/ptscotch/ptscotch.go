//go:build !mpich && !nompi

// Package ptscotch is a thin cgo binding to PT-Scotch 7's distributed k-way
// graph partitioner (SCOTCH_dgraphPart) as Debian packages it
// (libptscotch-dev), built against Open MPI. It links Debian's default
// variant, whose index type SCOTCH_Num (Num here) is a 32-bit int: a
// graph's global arc count (both directions of every edge) must stay below
// 2^31. With -tags scotch64 it links the 64-bit variant (scotch-int64)
// instead, which lifts that limit and doubles PT-Scotch's memory (it holds
// about 45 bytes per local arc with 32-bit indices). Both variants share a
// soname, so that build names the 64-bit one's directory in its run path.
//
// PT-Scotch calls MPI itself on the communicator it is given; the caller
// makes sure no other MPI call runs meanwhile (comm.MPI.CallNative).
package ptscotch

/*
#cgo pkg-config: ompi-c
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <ptscotch.h>


// PT-Scotch reports errors through SCOTCH_errorPrint, which
// libptscotcherr prints to stderr. This program's own definitions come
// first in symbol resolution, so the message is kept for the Go error
// instead (the first of a call: later ones are consequences).
static char errbuf[512];

void SCOTCH_errorProg(const char * const name) { (void)name; }

void SCOTCH_errorPrint(const char * const fmt, ...) {
	if (errbuf[0] != 0) return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
}

void SCOTCH_errorPrintW(const char * const fmt, ...) { (void)fmt; }

static const char *last_error(void) { return errbuf; }

// part builds the distributed graph of this process's vertlocnbr vertices
// (CSR vertloctab/edgeloctab with global ids, optional weights) on the
// communicator whose Fortran handle is fcomm, and partitions it into
// partnbr parts with the default strategy at imbalance ratio balance.
// step names the call that failed.
static int part(MPI_Fint fcomm, SCOTCH_Num vertlocnbr, SCOTCH_Num *vertloctab, SCOTCH_Num *veloloctab,
		SCOTCH_Num edgelocnbr, SCOTCH_Num *edgeloctab, SCOTCH_Num partnbr, SCOTCH_Num procnbr,
		SCOTCH_Num seed, double balance, SCOTCH_Num *partloctab, const char **step) {
	errbuf[0] = 0;
	// PT-Scotch allocates and frees arrays of every size per coarsening
	// level; glibc's adaptive mmap threshold lets the mid-sized ones
	// fragment the heap. A fixed one returns them to the system when freed
	// (2% lower peak on the products-size graph).
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	SCOTCH_Context ctx;
	SCOTCH_Dgraph g, cg;
	SCOTCH_Strat s;
	// A context of one thread with a fixed seed: with its default threads
	// PT-Scotch gave another partition on every run.
	*step = "SCOTCH_contextInit";
	if (SCOTCH_contextInit(&ctx) != 0) return 1;
	int rc = SCOTCH_contextOptionSetNum(&ctx, SCOTCH_OPTIONNUMDETERMINISTIC, 1);
	if (rc == 0) rc = SCOTCH_contextOptionSetNum(&ctx, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1);
	if (rc == 0) {
		*step = "SCOTCH_contextThreadSpawn";
		rc = SCOTCH_contextThreadSpawn(&ctx, 1, NULL);
	}
	if (rc == 0) {
		SCOTCH_contextRandomSeed(&ctx, seed);
		*step = "SCOTCH_dgraphInit";
		rc = SCOTCH_dgraphInit(&g, MPI_Comm_f2c(fcomm));
	}
	if (rc != 0) {
		SCOTCH_contextExit(&ctx);
		return rc;
	}
	*step = "SCOTCH_dgraphBuild";
	rc = SCOTCH_dgraphBuild(&g, 0, vertlocnbr, vertlocnbr, vertloctab, vertloctab + 1, veloloctab, NULL,
		edgelocnbr, edgelocnbr, edgeloctab, NULL, NULL);
	if (rc == 0) {
		*step = "SCOTCH_contextBindDgraph";
		rc = SCOTCH_contextBindDgraph(&ctx, &g, &cg);
	}
	if (rc == 0) {
		*step = "SCOTCH_stratInit";
		rc = SCOTCH_stratInit(&s);
		if (rc == 0) {
			*step = "SCOTCH_stratDgraphMapBuild";
			rc = SCOTCH_stratDgraphMapBuild(&s, SCOTCH_STRATDEFAULT, procnbr, partnbr, balance);
			if (rc == 0) {
				*step = "SCOTCH_dgraphPart";
				rc = SCOTCH_dgraphPart(&cg, partnbr, &s, partloctab);
			}
			SCOTCH_stratExit(&s);
		}
		SCOTCH_dgraphExit(&cg);
	}
	SCOTCH_dgraphExit(&g);
	SCOTCH_contextExit(&ctx);
	return rc;
}

static int check(MPI_Fint fcomm, SCOTCH_Num vertlocnbr, SCOTCH_Num *vertloctab,
		SCOTCH_Num edgelocnbr, SCOTCH_Num *edgeloctab) {
	errbuf[0] = 0;
	SCOTCH_Dgraph g;
	if (SCOTCH_dgraphInit(&g, MPI_Comm_f2c(fcomm)) != 0) return 1;
	int rc = SCOTCH_dgraphBuild(&g, 0, vertlocnbr, vertlocnbr, vertloctab, vertloctab + 1, NULL, NULL,
		edgelocnbr, edgelocnbr, edgeloctab, NULL, NULL);
	if (rc == 0) rc = SCOTCH_dgraphCheck(&g);
	SCOTCH_dgraphExit(&g);
	return rc;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// The Go and C index types must agree (the include path picks the variant).
var (
	_ [unsafe.Sizeof(C.SCOTCH_Num(0)) - unsafe.Sizeof(Num(0))]byte
	_ [unsafe.Sizeof(Num(0)) - unsafe.Sizeof(C.SCOTCH_Num(0))]byte
)

// MaxNum is the largest index PT-Scotch takes: a bound on global arc and
// vertex counts.
const MaxNum = int64(^uint64(0) >> (65 - 8*unsafe.Sizeof(Num(0))))

// Graph is one process's piece of an undirected distributed graph: its
// vertices are a contiguous range of the global ids, in rank order (rank r
// holds the ids after those of ranks < r), and the neighbours of its local
// vertex i are the global ids Adj[Ptr[i]:Ptr[i+1]]. Every edge must appear
// in both directions (at both endpoints' owners), without self loops or
// repeats.
type Graph struct {
	Ptr []Num // len n+1, Ptr[0] = 0, non-decreasing
	Adj []Num // len Ptr[n]: global vertex ids
	// Weights, one per local vertex (>= 0), or nil for all 1.
	Weights []Num
}

// Part partitions the distributed graph into parts parts with PT-Scotch's
// default k-way strategy, within the imbalance ratio balance (0.03: the
// heaviest part at most 3% above the mean), seeding Scotch's random
// generator with seed. fcomm is the Fortran handle (MPI_Comm_c2f) of the
// communicator of the processes that hold the graph, procs of them; every
// one of them must call Part with its piece. It returns the part of every
// local vertex.
func Part(fcomm int32, procs int, g Graph, parts int, seed uint64, balance float64) ([]Num, error) {
	n := len(g.Ptr) - 1
	if n < 0 || g.Ptr[0] != 0 || int(g.Ptr[n]) != len(g.Adj) {
		return nil, fmt.Errorf("ptscotch: the local CSR has %d row pointers and %d neighbours, expected n+1 from 0 to len(adj)", len(g.Ptr), len(g.Adj))
	}
	if g.Weights != nil && len(g.Weights) != n {
		return nil, fmt.Errorf("ptscotch: %d vertex weights for %d vertices", len(g.Weights), n)
	}
	if parts < 1 {
		return nil, fmt.Errorf("ptscotch: %d parts, expected at least 1", parts)
	}
	out := make([]Num, max(n, 1))
	ptr, adj := g.Ptr, g.Adj
	if len(adj) == 0 {
		adj = []Num{0} // a valid address for a process without edges
	}
	var w *C.SCOTCH_Num
	if g.Weights != nil && n > 0 {
		w = (*C.SCOTCH_Num)(unsafe.Pointer(&g.Weights[0]))
	}
	var step *C.char
	// PT-Scotch reads the arrays and writes only out; they hold no Go
	// pointers, so they are passed as they are.
	rc := C.part(C.MPI_Fint(fcomm), C.SCOTCH_Num(n), (*C.SCOTCH_Num)(unsafe.Pointer(&ptr[0])), w,
		C.SCOTCH_Num(len(g.Adj)), (*C.SCOTCH_Num)(unsafe.Pointer(&adj[0])), C.SCOTCH_Num(parts), C.SCOTCH_Num(procs),
		C.SCOTCH_Num(seed&uint64(MaxNum)), C.double(balance), (*C.SCOTCH_Num)(unsafe.Pointer(&out[0])), &step)
	if rc != 0 {
		return nil, failure(C.GoString(step))
	}
	return out[:n], nil
}

// Check builds the distributed graph and runs SCOTCH_dgraphCheck on it
// (for tests: every edge in both directions, ids in range).
func Check(fcomm int32, g Graph) error {
	ptr, adj := g.Ptr, g.Adj
	if len(adj) == 0 {
		adj = []Num{0}
	}
	rc := C.check(C.MPI_Fint(fcomm), C.SCOTCH_Num(len(ptr)-1), (*C.SCOTCH_Num)(unsafe.Pointer(&ptr[0])),
		C.SCOTCH_Num(len(g.Adj)), (*C.SCOTCH_Num)(unsafe.Pointer(&adj[0])))
	if rc != 0 {
		return failure("SCOTCH_dgraphCheck")
	}
	return nil
}

func failure(step string) error {
	msg := strings.TrimSpace(C.GoString(C.last_error()))
	if msg == "" {
		msg = "no message"
	}
	return fmt.Errorf("ptscotch: %s failed: %s", step, msg)
}

// Available reports whether this build links PT-Scotch.
const Available = true
