package job

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A rank that ends the job (a --comm-timeout, a failure MPI cannot pass
// on) reports the cause and calls MPI_Abort or exits; mpirun then ends the
// other ranks. When a host's link has died, mpirun cannot reach that
// host's daemon and its abort hangs for minutes ("abort is already in
// progress") before it crashes, and a batch job sits until its wall time.
// So before it exits, such a rank starts a reaper: a process of this same
// binary, in a session of its own (mpirun's kill of the rank does not reach
// it), that waits reaperGrace for the launcher process that started the
// rank (mpirun, orted, prted, Hydra's proxy) to end the job on its own,
// and kills it otherwise. The launcher's death ends the job: mpirun itself
// exits, and an orted's mpirun ends the job on a lost daemon.

// reaperEnv names the launcher's pid, the rank's and the grace,
// "launcher:rank:duration": set only for the reaper.
const reaperEnv = "GNN_SPMD_REAPER"

// reaperGrace is how long the launcher has to end the job after the rank
// has reported the cause and exited.
var reaperGrace = 5 * time.Second

// launcherNames are the processes that start MPI ranks and can end a job:
// the rank's parent is one of them under mpirun or mpiexec (never under
// srun, whose slurmstepd is left alone).
var launcherNames = []string{"mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "hydra_pmi_proxy", "mpiexec.hydra", "prte"}

func init() {
	v, ok := os.LookupEnv(reaperEnv)
	if !ok {
		return
	}
	f := strings.Split(v, ":")
	if len(f) != 3 {
		os.Exit(2)
	}
	pid, err1 := strconv.Atoi(f[0])
	rank, err2 := strconv.Atoi(f[1])
	grace, err3 := time.ParseDuration(f[2])
	if err1 != nil || err2 != nil || err3 != nil || pid <= 1 || rank <= 1 {
		os.Exit(2)
	}
	name, rankName := procName(pid), procName(rank)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if procName(pid) != name {
			os.Exit(0) // the launcher ended the job
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The rank too, should it still be inside MPI_Abort.
	if rankName != "" && procName(rank) == rankName {
		syscall.Kill(rank, syscall.SIGKILL)
	}
	if procName(pid) == name {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	os.Exit(0)
}

// procName is the command name of process pid, "" when there is none.
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// startReaper starts the reaper of this rank's launcher, when the rank's
// parent is one; it returns at once.
func startReaper() {
	ppid := os.Getppid()
	name := procName(ppid)
	known := false
	for _, n := range launcherNames {
		known = known || name == n
	}
	if !known {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", reaperEnv, ppid, os.Getpid(), reaperGrace))
	// No stdio: the launcher waits for the rank's streams to close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		cmd.Process.Release()
	}
}
