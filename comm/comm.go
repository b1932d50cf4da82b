// Package comm moves bytes between the ranks of one SPMD job: the
// transports (MPI across processes, Local across goroutines, NCCL and
// device copies between GPUs) and the watchdog that bounds every wait. The
// halo exchange over them is comm/halo, its codecs comm/codec; comm never
// interprets what it moves.
package comm

// Comm is the transport of one rank. All ranks call the collectives in the
// same order; a call returns an error (never hangs) when a peer has failed,
// where the transport can detect it. Watchdog bounds the wait where it
// cannot (a peer that hangs, or stops calling).
type Comm interface {
	Rank() int
	Size() int
	// AllToAllV sends send[p] to rank p and fills recv[p] with exactly
	// len(recv[p]) bytes from rank p, for every p (self included: a rank's
	// send[r] is copied into its recv[r]). Both sides must agree on sizes.
	AllToAllV(send, recv [][]byte) error
	// AllToAllVShort is AllToAllV for messages whose size only their
	// sender knows: recv[p] bounds what rank p may send (a longer message
	// is an error) and got[p] is set to the bytes that came from it.
	AllToAllVShort(send, recv [][]byte, got []int) error
	// AllReduceFloat32 and AllReduceFloat64 replace x by its element-wise
	// sum over all ranks. The result is bit-identical on every rank and
	// depends only on the inputs and the world size (a fixed summation
	// order), so replicated parameters never drift apart.
	AllReduceFloat32(x []float32) error
	AllReduceFloat64(x []float64) error
	// Bcast copies root's buf into every rank's buf (same length everywhere).
	Bcast(buf []byte, root int) error
	Barrier() error
	// Abort ends the whole job with the given exit code, from any rank.
	Abort(code int)
	// Close releases the transport (MPI_Finalize for MPI).
	Close() error
}

// Native is a Comm over MPI that lends its communicator to a C library
// making MPI calls of its own (PT-Scotch): CallNative runs f with the
// communicator's Fortran handle (MPI_Comm_f2c turns it back) as one
// blocking call of the Comm, which no other call overlaps. The Watchdog
// of a Native Comm times it like any other.
type Native interface {
	CallNative(f func(fcomm int32) error) error
}
