//go:build mpich

package main

// The launcher of the MPI tests in the mpich build (go test -tags "cpu
// mpich"): MPICH's Hydra, mpiexec.mpich, which Debian installs beside Open
// MPI's mpirun; the binary is linked against libmpich (cgo/mpi/mpich.go).
// Hydra passes the whole environment to the ranks and puts each rank's
// number in PMI_RANK; its ranks are children of hydra_pmi_proxy, not of
// mpiexec.
var launcher = mpiLauncher{
	name:     "mpiexec.mpich",
	install:  "scripts/deps.sh installs mpich and libmpich-dev",
	np:       "-n",
	rankEnv:  "PMI_RANK",
	localEnv: "MPI_LOCALRANKID",
	srunMPI:  "pmi2",
}
