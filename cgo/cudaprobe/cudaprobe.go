//go:build !cpu

// Package cudaprobe checks for a usable CUDA GPU before gorgonia.org/cu's
// init does, describes the GPUs, picks a rank's, and reports where the
// CUDA libraries are (gnn-spmd devices). cu calls cuInit in its init and
// exits with an unhelpful message when there is no GPU; blank-import this
// package wherever cu is imported:
//
//	import _ "github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe"
//
// Go runs package inits in import-path order among the packages whose
// imports are initialized, and everything this package imports either is
// imported by cu too (fmt, io, os, strings and what cudalib, cublas and
// nccl use) or sorts before it (this module's packages), so its init runs
// before cu's. Without a GPU, a test binary prints a SKIP line and exits 0;
// "gnn-spmd devices" prints its report and exits 1; any other binary says
// to build the CPU version and exits 2.
package cudaprobe

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

static char reason[512];
static int (*p_get)(int *, int);
static int (*p_name)(char *, int, int);
static int (*p_attr)(int *, int, int);
static int (*p_mem)(size_t *, int);
static int (*p_version)(int *);
static int (*p_errstr)(int, const char **);

static const char *errtext(int rc) {
	const char *s = NULL;
	if (!p_errstr || p_errstr(rc, &s) != 0 || !s) s = "unknown error";
	return s;
}

// probe returns NULL when the driver sees at least one device, else why not.
// libcuda is opened with dlopen so that this package links without it.
static const char *probe(int *count) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(reason, sizeof reason, "cannot load libcuda.so.1: %s", dlerror());
		return reason;
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
	int (*dcount)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
	p_errstr = (int (*)(int, const char **))dlsym(lib, "cuGetErrorString");
	p_get = (int (*)(int *, int))dlsym(lib, "cuDeviceGet");
	p_name = (int (*)(char *, int, int))dlsym(lib, "cuDeviceGetName");
	p_attr = (int (*)(int *, int, int))dlsym(lib, "cuDeviceGetAttribute");
	p_mem = (int (*)(size_t *, int))dlsym(lib, "cuDeviceTotalMem_v2");
	p_version = (int (*)(int *))dlsym(lib, "cuDriverGetVersion");
	if (!init || !dcount) {
		snprintf(reason, sizeof reason, "libcuda.so.1 has no cuInit or cuDeviceGetCount");
		return reason;
	}
	const char *fn = "cuInit";
	int n = 0, rc = init(0);
	if (rc == 0) {
		fn = "cuDeviceGetCount";
		rc = dcount(&n);
	}
	if (rc != 0) {
		snprintf(reason, sizeof reason, "%s: CUDA error %d: %s", fn, rc, errtext(rc));
		return reason;
	}
	if (n < 1) {
		snprintf(reason, sizeof reason, "cuDeviceGetCount found no device");
		return reason;
	}
	*count = n;
	return NULL;
}

static int driver_version(void) {
	int v = -1;
	return p_version && p_version(&v) == 0 ? v : -1;
}

// describe fills name, memory and attrs (SMs, cc major, minor, PCI domain,
// bus, device) of device ordinal; it returns NULL or what failed.
static const char *describe(int ordinal, char *name, int len, size_t *mem, int *attrs) {
	static const int which[6] = {16, 75, 76, 50, 33, 34};
	int dev, rc;
	if (!p_get || !p_name || !p_attr || !p_mem) return "libcuda.so.1 lacks a device query";
	if ((rc = p_get(&dev, ordinal)) != 0) return errtext(rc);
	if ((rc = p_name(name, len, dev)) != 0) return errtext(rc);
	if ((rc = p_mem(mem, dev)) != 0) return errtext(rc);
	for (int i = 0; i < 6; i++)
		if ((rc = p_attr(&attrs[i], which[i], dev)) != 0) return errtext(rc);
	return NULL;
}
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/cgo/cublas"
	"github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe/cudalib"
	"github.com/gnn-spmd/gnn-spmd/cgo/nccl"
	"github.com/gnn-spmd/gnn-spmd/internal/oneline"
)

var (
	reason string
	count  int
)

// Reason says why no usable CUDA GPU was found; it is empty when one was.
func Reason() string { return reason }

// scanChildEnv marks the child process in which data/h5 walks an untrusted
// HDF5 file (its scanEnv): that child reads one file and exits from
// data/h5's init, which runs before gorgonia.org/cu's, so it must not start
// the CUDA driver either. cuInit costs it time, and the driver's threads
// mapping memory under the child's address-space limit are one way a sound
// file was refused once on an H200 ("libhdf5 crashed reading its metadata
// (SIGSEGV)", 1 scan of 14 there).
const scanChildEnv = "GNN_SPMD_H5_SCAN"

func init() {
	if _, ok := os.LookupEnv(scanChildEnv); ok {
		reason = "not probed in the HDF5 scan's child process"
		return
	}
	var n C.int
	if r := C.probe(&n); r != nil {
		reason = C.GoString(r)
	}
	count = int(n)
	if reason == "" {
		return
	}
	name := os.Args[0][strings.LastIndexByte(os.Args[0], '/')+1:]
	// This package's own test binary goes on, so its test can check Reason.
	if name == "cudaprobe.test" {
		return
	}
	if isTest(os.Args) {
		fmt.Printf("SKIP: no usable CUDA GPU (%s): the GPU tests of %s did not run\n", reason, name)
		os.Exit(0)
	}
	// The report is for machines without a GPU too; gorgonia.org/cu's
	// init would end the process before main.
	if len(os.Args) > 1 && os.Args[1] == "devices" {
		if err := Report(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "gnn-spmd: %s\n", oneline.String(err.Error()))
		}
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "gnn-spmd: no usable CUDA GPU (%s); this is the GPU build, build the CPU one with \"make cpu\"\n", reason)
	os.Exit(2)
}

// isTest tells a test binary by go test's naming or its -test.* flags.
func isTest(args []string) bool {
	if len(args) == 0 {
		return false
	}
	if strings.HasSuffix(args[0], ".test") {
		return true
	}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-test.") {
			return true
		}
	}
	return false
}

// Device describes one GPU the driver shows.
type Device struct {
	Ordinal int
	Name    string
	PCI     string // domain:bus:device.0, as nvidia-smi writes it
	Memory  int64  // bytes
	SMs     int
	CC      [2]int // compute capability
}

func (d Device) String() string {
	return fmt.Sprintf("GPU %d: %s, PCI %s, %.1f GiB, compute capability %d.%d, %d SMs",
		d.Ordinal, d.Name, d.PCI, float64(d.Memory)/(1<<30), d.CC[0], d.CC[1], d.SMs)
}

// Count is the number of GPUs the driver shows (CUDA_VISIBLE_DEVICES
// applied): 0 without a usable one.
func Count() int { return count }

// Describe asks the driver about GPU ordinal.
func Describe(ordinal int) (Device, error) {
	if reason != "" {
		return Device{}, fmt.Errorf("cudaprobe: no usable CUDA GPU (%s)", reason)
	}
	if ordinal < 0 || ordinal >= count {
		return Device{}, fmt.Errorf("cudaprobe: GPU %d: the driver shows %d", ordinal, count)
	}
	var name [256]C.char
	var mem C.size_t
	var a [6]C.int
	if r := C.describe(C.int(ordinal), &name[0], C.int(len(name)), &mem, &a[0]); r != nil {
		return Device{}, fmt.Errorf("cudaprobe: GPU %d: %s", ordinal, C.GoString(r))
	}
	return Device{Ordinal: ordinal, Name: C.GoString(&name[0]), Memory: int64(mem), SMs: int(a[0]),
		CC: [2]int{int(a[1]), int(a[2])}, PCI: fmt.Sprintf("%04x:%02x:%02x.0", int(a[3]), int(a[4]), int(a[5]))}, nil
}

// Ordinal picks a rank's GPU among the visible ones: override when it is
// >= 0 (--gpu), else the node-local rank modulo the visible count, so that
// both a launcher that shows every rank all of a node's GPUs and one that
// shows each rank its own (Slurm's CUDA_VISIBLE_DEVICES per task) work.
func Ordinal(localRank, override, visible int) (int, error) {
	switch {
	case visible < 1:
		return 0, fmt.Errorf("no GPU is visible (CUDA_VISIBLE_DEVICES=%q)", os.Getenv("CUDA_VISIBLE_DEVICES"))
	case override >= visible:
		return 0, fmt.Errorf("--gpu %d: this node shows %d GPU(s), ordinals 0 to %d (CUDA_VISIBLE_DEVICES=%q)",
			override, visible, visible-1, os.Getenv("CUDA_VISIBLE_DEVICES"))
	case override >= 0:
		return override, nil
	}
	return max(localRank, 0) % visible, nil
}

// Report prints what the GPU build finds here: the driver and its GPUs,
// the library search and what loading cuBLAS (with a GPU, creating a
// handle) and NCCL gave. It returns an error naming what is missing.
func Report(w io.Writer) error {
	var missing []string
	fmt.Fprintln(w, "GPU build (CUDA kernels, cuBLAS and NCCL loaded with dlopen)")
	vis, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	visText := "unset"
	if set {
		visText = fmt.Sprintf("%q", vis)
	}
	if reason != "" {
		fmt.Fprintf(w, "CUDA driver: no usable GPU: %s (CUDA_VISIBLE_DEVICES %s)\n", reason, visText)
		missing = append(missing, "a GPU")
	} else {
		v := int(C.driver_version())
		fmt.Fprintf(w, "CUDA driver: libcuda.so.1, CUDA %d.%d; %d GPU(s) visible (CUDA_VISIBLE_DEVICES %s)\n",
			v/1000, v%1000/10, count, visText)
		for i := range count {
			if d, err := Describe(i); err != nil {
				fmt.Fprintf(w, "  %v\n", err)
			} else {
				fmt.Fprintf(w, "  %v\n", d)
			}
		}
	}
	dirs := cudalib.Default().Dirs()
	cudalib.WriteDirs(w, dirs)
	var err error
	if reason == "" {
		var h *cublas.Handle
		if h, err = cublas.Open(); err == nil {
			_ = h.Close()
		}
	} else {
		err = cublas.Load() // a handle needs a GPU
	}
	cudalib.WriteAttempts(w, cudalib.CuBLAS, cublas.Attempts(), nil)
	if err != nil {
		fmt.Fprintf(w, "  %v\n", err)
		missing = append(missing, "cuBLAS")
	}
	_, err = nccl.Version()
	cudalib.WriteAttempts(w, cudalib.NCCL, nccl.Attempts(), nil)
	if err != nil {
		missing = append(missing, "NCCL (MPI ranks only)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("devices: missing %s", strings.Join(missing, ", "))
	}
	fmt.Fprintln(w, "ready: one rank, goroutine ranks sharing a GPU, and MPI ranks with a GPU each")
	return nil
}
