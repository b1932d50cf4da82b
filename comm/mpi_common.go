package comm

import "errors"

// Declarations shared by the MPI communicator and its nompi stand-in.

// AllToAllVMode selects the MPI call behind MPI.AllToAllV. Every rank must
// use the same mode.
type AllToAllVMode int

const (
	// AllToAllVContiguous uses MPI_Alltoallv with displacements measured
	// from the lowest-addressed buffer of each side: no copies while each
	// side's buffers lie within 2 GiB of each other (carve them from one
	// allocation to be sure once the heap outgrows 2 GiB). A side spread
	// wider is copied through a contiguous buffer, and then its total must
	// stay below 2 GiB.
	AllToAllVContiguous AllToAllVMode = iota
	// AllToAllVScattered uses MPI_Alltoallw from MPI_BOTTOM with one byte
	// type per buffer: never a copy and no limit on the total, but with
	// Open MPI 4.1 and 2 ranks it took 1.2-2x as long as Alltoallv from
	// 512 B to 2 MiB per peer.
	AllToAllVScattered
)

// ErrNoMPILauncher says the process was not started by an MPI launcher.
var ErrNoMPILauncher = errors.New("comm: MPI: this process was not started by mpirun; run the job as " +
	"`mpirun -np Q <command>` (as root with OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment, " +
	"and --oversubscribe for more ranks than cores), or use the local communicator for ranks in one process")
