//go:build !mpich && !nompi && scotch64

package ptscotch

// The 64-bit PT-Scotch (-tags scotch64): graphs beyond 2^31 arcs.

// #cgo CFLAGS: -I/usr/include/scotch-int64
// #cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu/scotch-int64 -Wl,-rpath,/usr/lib/x86_64-linux-gnu/scotch-int64 -lptscotch
import "C"

// Num is PT-Scotch's index type, SCOTCH_Num.
type Num = int64
