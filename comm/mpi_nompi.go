//go:build nompi

package comm

import "errors"

// MPI stands in for the MPI communicator in builds with -tags nompi, which
// link no MPI library (for machines that have none, such as a GPU host that
// runs its ranks in one process); NewMPI always fails there.
type MPI struct{}

var _ Comm = (*MPI)(nil)

var errNoMPI = errors.New("comm: MPI: this binary was built with -tags nompi; rebuild it without the tag to use MPI, or use the local communicator")

// NewMPI returns an error: this build has no MPI.
func NewMPI() (*MPI, error) { return nil, errNoMPI }

// The methods of the stand-in are never reached: NewMPI returns no MPI.

func (m *MPI) Rank() int                                           { return 0 }
func (m *MPI) Size() int                                           { return 1 }
func (m *MPI) SetAllToAllVMode(AllToAllVMode)                      {}
func (m *MPI) AllToAllV(send, recv [][]byte) error                 { return errNoMPI }
func (m *MPI) AllToAllVShort(send, recv [][]byte, got []int) error { return errNoMPI }
func (m *MPI) AllReduceFloat32(x []float32) error                  { return errNoMPI }
func (m *MPI) AllReduceFloat64(x []float64) error                  { return errNoMPI }
func (m *MPI) Bcast(buf []byte, root int) error                    { return errNoMPI }
func (m *MPI) Barrier() error                                      { return errNoMPI }
func (m *MPI) CallNative(func(int32) error) error                  { return errNoMPI }
func (m *MPI) Abort(code int)                                      { panic(errNoMPI) }
func (m *MPI) Close() error                                        { return nil }
