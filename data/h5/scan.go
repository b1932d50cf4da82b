package h5

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gnn-spmd/gnn-spmd/cgo/h5scan"
	"github.com/gnn-spmd/gnn-spmd/data"
)

// Untrusted files. libhdf5 1.10 is not memory-safe on corrupt metadata: a
// damaged object header or heap can make it crash (SIGSEGV inside H5Aread),
// loop forever, or allocate gigabytes for a file of kilobytes, before any
// check of ours runs. So before this process opens a file, a child process
// (this same program, started with scanEnv set) walks every object of it
// through libhdf5 (cgo/h5scan) under limits of CPU time, wall time and
// memory. A file the
// scan survives is opened here; one that crashes, hangs or bloats the child
// is refused as corrupt, with one line. The child reads metadata and small
// datasets whole, and checks that every contiguous dataset lies inside the
// file, so the reads here only copy bytes libhdf5 has already located.

const (
	scanEnv = "GNN_SPMD_H5_SCAN" // the child's file; set only by scan
	// scanCPU bounds the child's CPU time (a libhdf5 loop spins): the
	// kernel kills it a second after. scanTimeout bounds its wall time,
	// generous for a slow disk, since the scan reads little.
	scanCPU     = 3
	scanTimeout = 30 * time.Second
	scanMemory  = 256 << 20 // bytes the child may map beyond what it starts with
	scanFailed  = 3         // the child's exit code for a file libhdf5 rejects
)

func init() {
	path, ok := os.LookupEnv(scanEnv)
	if !ok {
		return
	}
	limitMemory(scanMemory)
	// At the soft limit the kernel sends SIGXCPU, which the Go runtime
	// ignores; at the hard limit, SIGKILL.
	syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: scanCPU, Max: scanCPU + 1})
	if err := h5scan.Scan(path); err != nil {
		fmt.Println(err)
		os.Exit(scanFailed)
	}
	os.Exit(0)
}

// limitMemory caps the address space of this process at what it maps now
// plus extra bytes, so that a runaway allocation fails instead of taking
// the machine.
func limitMemory(extra uint64) {
	var now uint64
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				now = kb << 10
			}
		}
		f.Close()
	}
	lim := &syscall.Rlimit{Cur: now + extra, Max: now + extra}
	syscall.Setrlimit(syscall.RLIMIT_AS, lim)
}

// scanned remembers the outcome for every file scanned, by path, size and
// modification time, so that a file read twice (a format probe, then the
// read) is scanned once.
var scanned sync.Map

type scanKey struct {
	path  string
	size  int64
	mtime time.Time
}

// check scans the regular file at path (st its stat) in a child process
// and returns a *data.InputError when the scan fails. Where this program
// cannot start itself again, the file is read unscanned.
func check(path string, st os.FileInfo) error {
	key := scanKey{path, st.Size(), st.ModTime()}
	if err, ok := scanned.Load(key); ok {
		err, _ := err.(error)
		return err
	}
	err := Scan(path)
	scanned.Store(key, err)
	return err
}

// Scan reads the HDF5 file at path whole in a child process under limits,
// as Read does before it opens a file (the outcome is not remembered), and
// returns a *data.InputError when libhdf5 fails, crashes, hangs or bloats
// on it. Where this program cannot start itself again it returns nil.
func Scan(path string) error {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), scanEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A child left behind by a killed parent must not spin on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	corrupt := func(format string, args ...any) error {
		return data.InputErrorf(path, 0, "", format+": the file is truncated or corrupt", args...)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return corrupt("libhdf5 did not finish reading its metadata within %v", scanTimeout)
	case errors.As(err, &ee) && ee.ExitCode() == scanFailed:
		return corrupt("%s", strings.TrimSpace(firstLine(out.String())))
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) {
			return corrupt("libhdf5 did not finish reading its metadata within %d s of CPU time", scanCPU)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return corrupt("libhdf5 crashed reading its metadata (%v)", ws.Signal())
		}
		if sig, _, ok := strings.Cut(out.String(), ": "); ok && strings.HasPrefix(sig, "SIG") {
			// The Go runtime's report of a signal inside libhdf5.
			return corrupt("libhdf5 crashed reading its metadata (%s)", sig)
		}
		if strings.Contains(out.String(), "out of memory") {
			return corrupt("libhdf5 took more than %d MiB reading its metadata", scanMemory>>20)
		}
		return corrupt("libhdf5 failed reading its metadata (exit %d: %s)", ee.ExitCode(), strings.TrimSpace(firstLine(out.String())))
	}
	return nil // the child could not start: read unscanned
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
