//go:build mpich

package mpi

// MPICH (Debian: libmpich-dev), selected with -tags mpich. The flags apply to
// every cgo file of the package.

// #cgo pkg-config: mpich
import "C"
