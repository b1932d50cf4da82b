//go:build !mpich

package mpi

// Open MPI (Debian: libopenmpi-dev). The flags apply to every cgo file of the
// package.

// #cgo pkg-config: ompi-c
import "C"
