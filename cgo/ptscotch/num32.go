//go:build !mpich && !nompi && !scotch64

package ptscotch

// Debian's default PT-Scotch: 32-bit SCOTCH_Num.

// #cgo CFLAGS: -I/usr/include/scotch
// #cgo LDFLAGS: -lptscotch
import "C"

// Num is PT-Scotch's index type, SCOTCH_Num.
type Num = int32
