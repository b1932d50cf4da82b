//go:build !cpu

// Package cudaprobe checks for a usable CUDA GPU before gorgonia.org/cu's
// init does. cu calls cuInit in its init and exits with an unhelpful message
// when there is no GPU; blank-import this package wherever cu is imported:
//
//	import _ "github.com/gnn-spmd/gnn-spmd/cgo/cudaprobe"
//
// Go runs package inits in import-path order among the packages whose
// imports are initialized, and this package imports nothing cu does not
// (only fmt, os and strings), so "github.com/..." runs before "gorgonia.org/cu".
// Without a GPU, a test binary prints a SKIP line and exits 0; any other
// binary says to build the CPU version and exits 2.
package cudaprobe

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>

static char reason[512];

// probe returns NULL when the driver sees at least one device, else why not.
// libcuda is opened with dlopen so that this package links without it.
static const char *probe(void) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(reason, sizeof reason, "cannot load libcuda.so.1: %s", dlerror());
		return reason;
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
	int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
	int (*errstr)(int, const char **) = (int (*)(int, const char **))dlsym(lib, "cuGetErrorString");
	if (!init || !count) {
		snprintf(reason, sizeof reason, "libcuda.so.1 has no cuInit or cuDeviceGetCount");
		return reason;
	}
	const char *fn = "cuInit";
	int n = 0, rc = init(0);
	if (rc == 0) {
		fn = "cuDeviceGetCount";
		rc = count(&n);
	}
	if (rc != 0) {
		const char *s = NULL;
		if (!errstr || errstr(rc, &s) != 0 || !s) s = "unknown error";
		snprintf(reason, sizeof reason, "%s: CUDA error %d: %s", fn, rc, s);
		return reason;
	}
	if (n < 1) {
		snprintf(reason, sizeof reason, "cuDeviceGetCount found no device");
		return reason;
	}
	return NULL;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
)

var reason string

// Reason says why no usable CUDA GPU was found; it is empty when one was.
func Reason() string { return reason }

func init() {
	if r := C.probe(); r != nil {
		reason = C.GoString(r)
	}
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
