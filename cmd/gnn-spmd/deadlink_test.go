package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/partition"
)

// TestDeadLink cuts, mid-training, one host's link across the two
// namespace hosts of TestHosts: every packet host1 sends is dropped (one
// direction), or every packet either host sends (both). The job must end
// within --comm-timeout plus 15 s, exit non-zero, with the program's one
// line naming the rank and the exchange that timed out. Open MPI's abort
// cannot reach the daemon behind the dead link and used to hang for
// minutes; the rank's reaper ends the launcher (gnn/job/reaper.go).
// Each case takes 15 to 25 s: `go test` runs one of the three, chosen by
// the clock; GNN_SPMD_DEADLINK=all (make test-deadlink) runs them all, and
// =long only the case with --comm-timeout 60s, which Open MPI ends first.
func TestDeadLink(t *testing.T) {
	h := makeHosts(t)
	needTools(t, "traffic control", "tc")
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	const q = 4
	parts := filepath.Join(dir, "parts")
	if code, _, stderr := runCLI("partition", "--data", g, "--parts", strconv.Itoa(q), "--method", "random", "--out", parts); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	all, _ := os.ReadDir(parts)
	for _, e := range all {
		for i := range h.names {
			copyFile(t, filepath.Join(parts, e.Name()), filepath.Join(h.disk[i], "parts", e.Name()))
		}
	}
	_ = partition.PartFileName
	cases := []struct {
		name    string
		hosts   []int         // the hosts whose sending is cut
		timeout time.Duration // --comm-timeout
	}{{"host1-sends-nothing", []int{1}, 10 * time.Second}, {"both-directions", []int{0, 1}, 10 * time.Second},
		// Open MPI notices the lost daemon before a long timeout fires and
		// ends the job itself: the ranks it signals say what they waited in.
		{"host1-sends-nothing-60s", []int{1}, time.Minute}}
	switch os.Getenv("GNN_SPMD_DEADLINK") {
	case "all":
	case "long":
		cases = cases[2:]
	default:
		cases = cases[time.Now().Unix()%3:][:1]
	}
	for _, c := range cases {
		timeout := c.timeout
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+timeout)
			defer cancel()
			cmd := h.mpirun(ctx, t, q, "train", "--parts", filepath.Join(h.scratch, "parts"), "--epochs", "100000", "--hidden", "8",
				"--progress", "lines", "--comm-timeout", timeout.String())
			watch, seen := lineSeen("epoch    3")
			r := start(t, cmd, watch)
			select {
			case <-seen:
			case <-time.After(time.Minute):
				r.cmd.Process.Kill()
				_, out, errOut := r.wait()
				t.Fatalf("no epoch 3 within a minute:\n%s\n%s", strings.Join(out, "\n"), strings.Join(errOut, "\n"))
			}
			for _, i := range c.hosts {
				// A rate of 8 bit/s with a one-byte queue drops every packet.
				if b, err := exec.Command("ip", "netns", "exec", h.netns[i], "tc", "qdisc", "add", "dev", h.links[i], "root",
					"tbf", "rate", "8bit", "burst", "1", "limit", "1").CombinedOutput(); err != nil {
					t.Fatalf("tc: %v: %s", err, b)
				}
			}
			cut := time.Now()
			defer func() {
				for _, i := range c.hosts {
					exec.Command("ip", "netns", "exec", h.netns[i], "tc", "qdisc", "del", "dev", h.links[i], "root").Run()
				}
			}()
			err, out, errOut := r.wait()
			took := time.Since(cut)
			lines := gnnLines(append(out, errOut...))
			t.Logf("link cut (%v): mpirun exited %d after %v; %q", c.hosts, exitCodeOf(err), took.Round(time.Millisecond), lines)
			if err == nil {
				t.Errorf("mpirun exited 0 after the link died")
			}
			if took > timeout+15*time.Second {
				t.Errorf("the job took %v to end after the link died, want < %v", took, timeout+15*time.Second)
			}
			// Every process on host0 (where mpirun and ranks 0 and 1 ran)
			// ends too: the ranks, and their reapers once mpirun is gone.
			var left []string
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				b, _ := exec.Command("ip", "netns", "pids", h.netns[0]).Output()
				left = left[:0]
				for _, p := range strings.Fields(string(b)) {
					cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline")
					left = append(left, p+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
				}
				if len(left) == 0 || time.Now().After(end) {
					break
				}
			}
			if len(left) > 0 {
				t.Errorf("processes left on host0 10 s after the job ended: %q", left)
			}
			found := false
			for _, l := range lines {
				// The watchdog's line, or, when the launcher ended the job
				// first, the line of a rank its signal found waiting.
				found = found || (strings.Contains(l, "did not complete within the "+timeout.String()+" timeout") ||
					strings.Contains(l, " received after waiting ") && strings.Contains(l, "before the "+timeout.String()+" --comm-timeout")) &&
					strings.Contains(l, "rank ") && (strings.Contains(l, "exchange") || strings.Contains(l, "all-reduce"))
			}
			if !found {
				t.Errorf("no line names the rank and the exchange that timed out:\n%s\n%s", strings.Join(out, "\n"), strings.Join(errOut, "\n"))
			}
		})
	}
}
