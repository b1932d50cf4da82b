//go:build !mpich

package main

// The launcher of the MPI tests in the default build: Open MPI's mpirun,
// which the binary is linked against (cgo/mpi/ompi.go).
var launcher = mpiLauncher{
	name:     "mpirun",
	install:  "scripts/deps.sh installs openmpi-bin",
	np:       "-np",
	rankEnv:  "OMPI_COMM_WORLD_RANK",
	localEnv: "OMPI_COMM_WORLD_LOCAL_RANK",
	srunMPI:  "pmix",
	env: []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_rmaps_base_oversubscribe=1",
		// More ranks than cores: waiting ranks must yield, not spin.
		"OMPI_MCA_mpi_yield_when_idle=1"},
}
