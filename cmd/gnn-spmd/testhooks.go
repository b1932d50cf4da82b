package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
)

// Test-only hooks. The fault tests (faults_test.go) set them through the
// environment of a subprocess; nothing else does, and unset they cost one
// comparison per epoch.
//
//	GNN_SPMD_TEST_STALL=R:E
//	    rank R stops calling the communicator in epoch E, before the
//	    epoch's metrics all-reduce, as a hung rank would: under MPI it
//	    sleeps until killed, a goroutine rank until its group has failed.
//	GNN_SPMD_TEST_PAUSE_CHECKPOINT=N
//	    the N-th checkpoint write of the process stops for good once its
//	    temporary file exists, after printing
//	    "test hook: checkpoint write paused: pid P, temporary file F"
//	    on stderr, so that a test can kill the writer there.
var stallRank, stallEpoch = parseStall(os.Getenv("GNN_SPMD_TEST_STALL"))

func parseStall(v string) (rank, epoch int) {
	r, e, ok := strings.Cut(v, ":")
	rank, err1 := strconv.Atoi(r)
	epoch, err2 := strconv.Atoi(e)
	if !ok || err1 != nil || err2 != nil {
		return -1, -1
	}
	return rank, epoch
}

func testStall(rank, epoch int) bool { return rank == stallRank && epoch == stallEpoch }

// stalledAt is when stallForever began (Unix ns), for the tests' timing.
var stalledAt atomic.Int64

// stallForever blocks the calling rank: for good under MPI, and until the
// group has failed for a goroutine rank (so that the process can end).
func stallForever(c comm.Comm) {
	stalledAt.Store(time.Now().UnixNano())
	if w, ok := c.(*comm.Watchdog); ok {
		c = w.Comm()
	}
	for {
		time.Sleep(10 * time.Millisecond)
		if l, ok := c.(*comm.Local); ok && l.Err() != nil {
			return
		}
	}
}

// setTestHooks installs GNN_SPMD_TEST_PAUSE_CHECKPOINT; the returned
// function removes it.
func setTestHooks() func() {
	n, err := strconv.Atoi(os.Getenv("GNN_SPMD_TEST_PAUSE_CHECKPOINT"))
	if err != nil || n < 1 {
		return func() {}
	}
	writes := 0
	data.TestHookTempCreated = func(tmp string) {
		if writes++; writes == n {
			fmt.Fprintf(os.Stderr, "test hook: checkpoint write paused: pid %d, temporary file %s\n", os.Getpid(), tmp)
			for {
				time.Sleep(time.Hour)
			}
		}
	}
	return func() { data.TestHookTempCreated = nil }
}
