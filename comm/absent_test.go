package comm

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestAbsent names a stopped and an exited process on this host, and the
// ranks on other hosts when every local one runs.
func TestAbsent(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	syscall.Kill(sleeper.Process.Pid, syscall.SIGSTOP)
	// The signal is delivered asynchronously: wait until /proc shows the stop.
	for deadline := time.Now().Add(10 * time.Second); procState(sleeper.Process.Pid) != "T"; {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not stopped after 10s: state %q", sleeper.Process.Pid, procState(sleeper.Process.Pid))
		}
		time.Sleep(time.Millisecond)
	}
	done := exec.Command("true")
	done.Run()
	here, there := hostID(), hostID()+1
	p := &rankProcs{host: []float64{here, here, here, there}, pid: []int{os.Getpid(), sleeper.Process.Pid, done.Process.Pid, 1}}
	spid, dpid := strconv.Itoa(sleeper.Process.Pid), strconv.Itoa(done.Process.Pid)
	for _, c := range []struct {
		peers []int
		want  string
	}{
		{nil, "rank 1 (pid " + spid + ", this host) is stopped; rank 2 (pid " + dpid + ", this host) has exited"},
		{[]int{2}, "rank 2 (pid " + dpid + ", this host) has exited"},
		{[]int{3}, "every rank on this host runs; rank 3 is on another host"},
	} {
		if got := p.absent(0, c.peers); got != c.want {
			t.Errorf("peers %v: %q, want %q", c.peers, got, c.want)
		}
	}
}
