package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// The multi-host tests make two hosts on this machine, each a network
// namespace, joined by a virtual Ethernet link (10.x.y.1 and .2/24), and
// run mpirun across them with a hostfile and scripts/netns-rsh.sh as the
// rsh agent. Every host runs in a mount namespace of its own, with its own
// directory mounted at the scratch path all hosts share and every other
// host's directory covered: a rank reads and writes only its host's disk.

// hosts is a set of hosts made for a test.
type hosts struct {
	names   []string // host names, as in the hostfile
	netns   []string // their network namespaces
	disk    []string // each host's directory, mounted at scratch on it
	scratch string   // the path every host sees its own directory at
	conf    string   // the rsh agent's hosts file
	file    string   // the hostfile
	subnet  string   // the link's addresses
	links   []string // each host's end of the link (in its namespace)
	agent   string
}

// hostLeftovers lists, for the final check, what a test's hosts leave
// behind: namespaces, links, mounts under root.
func hostLeftovers(netns, links []string, root string) []string {
	var left []string
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && slices.Contains(netns, f[0]) {
			left = append(left, "network namespace "+f[0])
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		for _, v := range links {
			if strings.Contains(l, " "+v+"@") || strings.Contains(l, " "+v+":") {
				left = append(left, "link "+v)
			}
		}
	}
	ms, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, m := range ms {
		if b, err := os.ReadFile(m); err == nil && strings.Contains(string(b), root) {
			left = append(left, "a mount under "+root+" seen by process "+filepath.Base(filepath.Dir(m)))
		}
	}
	return left
}

// makeHosts makes n = 2 hosts and removes them at the test's end, checking
// that no namespace, link, mount or process of theirs is left.
func makeHosts(t *testing.T) *hosts {
	t.Helper()
	if launcher.name != "mpirun" {
		// Measured with mpiexec.mpich -launcher ssh -launcher-exec
		// scripts/netns-rsh.sh: the run trains, but with UCX on TCP alone
		// (UCX_TLS=tcp or tcp,self) it hangs in MPI_Finalize in 2 runs of 3,
		// and UCX's default transports may use shared memory between the
		// hosts, which share a kernel.
		t.Skip("across the namespace hosts MPICH 4.0.2 (ch4:ucx) either hangs at exit over TCP or may bypass the link; Open MPI's build runs this test")
	}
	needTools(t, "network namespaces", "ip", "unshare", "nsenter", "mount", "mpirun", "orted")
	root := t.TempDir()
	id := strconv.Itoa(os.Getpid() % 100000)
	h := &hosts{scratch: filepath.Join(root, "scratch"), conf: filepath.Join(root, "hosts.conf"),
		file: filepath.Join(root, "hostfile"), agent: repoScript(t, "netns-rsh.sh"),
		subnet: fmt.Sprintf("10.%d.%d.0/24", 200+os.Getpid()%50, os.Getpid()/50%250)}
	links := []string{"gnn" + id + "v0", "gnn" + id + "v1"}
	h.links = links
	for i := range 2 {
		h.names = append(h.names, "host"+strconv.Itoa(i))
		h.netns = append(h.netns, "gnn"+id+"h"+strconv.Itoa(i))
		h.disk = append(h.disk, filepath.Join(root, "disks", h.names[i]))
		if err := os.MkdirAll(h.disk[i], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(h.scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ns := range h.netns {
			out, _ := exec.Command("ip", "netns", "pids", ns).Output()
			for _, p := range strings.Fields(string(out)) {
				pid, _ := strconv.Atoi(p)
				t.Logf("killing process %d left in %s", pid, ns)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			for _, p := range strings.Fields(string(out)) {
				for !exited(p) {
					time.Sleep(50 * time.Millisecond)
				}
			}
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", links[0]).Run() // gone with its namespace, unless that failed
		if left := hostLeftovers(h.netns, links, root); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	ipCmd := func(args ...string) {
		t.Helper()
		if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			missingTool(t, fmt.Sprintf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(b))))
		}
	}
	for _, ns := range h.netns {
		ipCmd("netns", "add", ns)
	}
	ipCmd("link", "add", links[0], "type", "veth", "peer", "name", links[1])
	var lines []string
	for i, ns := range h.netns {
		addr := strings.TrimSuffix(h.subnet, "0/24") + strconv.Itoa(i+1) + "/24"
		ipCmd("link", "set", links[i], "netns", ns)
		ipCmd("-n", ns, "addr", "add", addr, "dev", links[i])
		ipCmd("-n", ns, "link", "set", "lo", "up")
		ipCmd("-n", ns, "link", "set", links[i], "up")
		lines = append(lines, strings.Join([]string{h.names[i], ns, h.disk[i], h.scratch, filepath.Join(root, "disks")}, " "))
	}
	if err := os.WriteFile(h.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.file, []byte("host0 slots=2\nhost1 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// mpirun runs q ranks of this binary as the CLI across the hosts, mpirun
// itself on host0, the ranks over TCP on the link.
func (h *hosts) mpirun(ctx context.Context, t *testing.T, q int, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"mpirun", "-np", strconv.Itoa(q), "--hostfile", h.file, "--mca", "plm_rsh_agent", h.agent,
		"--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", h.subnet, "--mca", "oob_tcp_if_include", h.subnet,
		"-x", "GNN_SPMD_AS_CLI", self}
	var quoted []string
	for _, a := range append(argv, args...) {
		quoted = append(quoted, shellQuote(a))
	}
	cmd := exec.CommandContext(ctx, h.agent, "host0", strings.Join(quoted, " "))
	cmd.Env = append(append(os.Environ(), "GNN_SPMD_AS_CLI=1", "NETNS_RSH_HOSTS="+h.conf,
		fmt.Sprintf("NETNS_RSH_MNT=/proc/%d/ns/mnt", os.Getpid())), launcher.env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// files lists the files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, p)
			out = append(out, r)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHosts trains across two hosts without a shared filesystem (network
// namespaces joined by a virtual link, a private disk each; see makeHosts):
// ranks 0 and 1 on host0, 2 and 3 on host1, each host holding only its
// ranks' part files.
func TestHosts(t *testing.T) {
	h := makeHosts(t)
	dir := t.TempDir()
	g := genGraph(t, dir, "3")
	const q = 4
	parts, other := filepath.Join(dir, "parts"), filepath.Join(dir, "other")
	for _, p := range []struct{ dir, seed string }{{parts, "0"}, {other, "5"}} {
		if code, _, stderr := runCLI("partition", "--data", g, "--parts", strconv.Itoa(q), "--method", "random", "--seed", p.seed, "--out", p.dir); code != 0 {
			t.Fatalf("partition: %s", stderr)
		}
	}
	// Every host gets the partition's metadata and its own ranks' part files.
	rankHost := []int{0, 0, 1, 1}
	all, err := os.ReadDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		for i := range h.names {
			mine := !strings.HasPrefix(e.Name(), "part-")
			for r, hr := range rankHost {
				mine = mine || hr == i && e.Name() == partition.PartFileName(r)
			}
			if mine {
				copyFile(t, filepath.Join(parts, e.Name()), filepath.Join(h.disk[i], "parts", e.Name()))
			}
		}
	}
	host1Files := files(t, h.disk[1])
	t.Logf("host0 has %v, host1 %v", files(t, h.disk[0]), host1Files)
	sparts := filepath.Join(h.scratch, "parts")
	run := func(t *testing.T, args ...string) (code int, out string, took time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		b, err := h.mpirun(ctx, t, q, append([]string{"train", "--parts", sparts}, args...)...).CombinedOutput()
		return exitCodeOf(err), string(b), time.Since(start)
	}

	t.Run("tcp-equals-one-process", func(t *testing.T) {
		common := []string{"--epochs", "20", "--hidden", "8", "--seed", "3"}
		ref := filepath.Join(dir, "ref.jsonl")
		if code, _, stderr := runCLI(append([]string{"train", "--data", g, "--quiet", "--metrics", ref}, common...)...); code != 0 {
			t.Fatalf("one process: %s", stderr)
		}
		code, out, took := run(t, append(common, "--metrics", filepath.Join(h.scratch, "m.jsonl"))...)
		t.Logf("mpirun across the hosts: exit %d in %v", code, took.Round(time.Millisecond))
		if code != 0 || !strings.Contains(out, "ranks 4, partition random (from file)") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		sameRun(t, readMetrics(t, filepath.Join(h.disk[0], "m.jsonl")), readMetrics(t, ref))
		if got := files(t, h.disk[1]); !slices.Equal(got, host1Files) {
			t.Errorf("host1 holds %v, want only its part files %v", got, host1Files)
		}
	})

	// A part file missing on host1, or one of another partition there:
	// every rank stops at setup (exit 2), with one line naming the host,
	// the rank and the file.
	for _, c := range []struct{ name, from, says string }{
		{"part-file-missing", "", "missing"},
		{"part-file-of-another-partition", filepath.Join(other, partition.PartFileName(3)), "belongs to another partition"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(h.disk[1], "parts", partition.PartFileName(3))
			saved, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(file, saved, 0o644)
			os.Remove(file)
			if c.from != "" {
				copyFile(t, c.from, file)
			}
			code, out, took := run(t, "--epochs", "5", "--hidden", "8")
			lines := gnnLines(strings.Split(out, "\n"))
			t.Logf("exit %d in %v: %q", code, took.Round(time.Millisecond), lines)
			if code != job.ExitBadInput || len(lines) != 1 {
				t.Fatalf("exit %d with %d gnn-spmd lines, want %d and one:\n%s", code, len(lines), job.ExitBadInput, out)
			}
			for _, w := range []string{"rank 3:", "on host host1:", filepath.Join(sparts, partition.PartFileName(3)), c.says} {
				if !strings.Contains(lines[0], w) {
					t.Errorf("%q does not say %q", lines[0], w)
				}
			}
			if epochLines(strings.Split(out, "\n")) != 0 {
				t.Errorf("training started:\n%s", out)
			}
		})
	}

	// Checkpoints: rank 0 writes them, on its host only; a run resumed from
	// one equals the uninterrupted run (TestMPIResume's setting), when every
	// host has a copy and when only rank 0's host has it.
	ckArgs := []string{"--epochs", "8", "--hidden", "8", "--quiet", "--codec", "quant", "--schedule", "adaptive"}
	var want []string
	t.Run("checkpoint-on-rank-0-host", func(t *testing.T) {
		code, out, _ := run(t, append(ckArgs, "--metrics", filepath.Join(h.scratch, "saved.jsonl"),
			"--checkpoint", filepath.Join(h.scratch, "c.h5"), "--checkpoint-every", "5", "--keep", "2")...)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		want = untimedMetrics(t, filepath.Join(h.disk[0], "saved.jsonl"))
		for file, epoch := range map[string]int{"c.h5": 8, "c.h5.1": 5} {
			if e := verified(t, filepath.Join(h.disk[0], file)); e != epoch {
				t.Errorf("%s holds epoch %d, want %d", file, e, epoch)
			}
		}
		if got := files(t, h.disk[1]); !slices.Equal(got, host1Files) {
			t.Errorf("host1 holds %v, want only its part files %v", got, host1Files)
		}
	})
	resume := func(t *testing.T, metrics string) (int, string) {
		t.Helper()
		if want == nil {
			t.Skip("no checkpoint (checkpoint-on-rank-0-host failed)")
		}
		code, out, took := run(t, append(ckArgs, "--metrics", filepath.Join(h.scratch, metrics),
			"--resume", filepath.Join(h.scratch, "c.h5.1"))...)
		t.Logf("resumed: exit %d in %v", code, took.Round(time.Millisecond))
		return code, out
	}
	sameMetrics := func(t *testing.T, metrics string) {
		t.Helper()
		got := untimedMetrics(t, filepath.Join(h.disk[0], metrics))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("resumed metrics\n%s\nuninterrupted\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	t.Run("resume-copy-on-every-host", func(t *testing.T) {
		if want == nil {
			t.Skip("no checkpoint (checkpoint-on-rank-0-host failed)")
		}
		copyFile(t, filepath.Join(h.disk[0], "c.h5.1"), filepath.Join(h.disk[1], "c.h5.1"))
		defer os.Remove(filepath.Join(h.disk[1], "c.h5.1"))
		if code, out := resume(t, "every.jsonl"); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		sameMetrics(t, "every.jsonl")
	})
	t.Run("resume-only-on-rank-0-host", func(t *testing.T) {
		// Rank 0 reads it and sends the state to the others.
		if got := files(t, h.disk[1]); !slices.Equal(got, host1Files) {
			t.Fatalf("host1 holds %v, want only its part files %v", got, host1Files)
		}
		code, out := resume(t, "only0.jsonl")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		sameMetrics(t, "only0.jsonl")
		if got := files(t, h.disk[1]); !slices.Equal(got, host1Files) {
			t.Errorf("after the run host1 holds %v, want only its part files %v", got, host1Files)
		}
	})

	// Every process on host1 (its orted and ranks 2 and 3) killed, as when
	// the host fails: mpirun loses its daemon there and ends the job, and
	// host0's ranks are gone, within 30 s (README, "Running on a cluster").
	t.Run("host-killed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := h.mpirun(ctx, t, q, "train", "--parts", sparts, "--epochs", "100000", "--hidden", "8")
		watch, seen := lineSeen("epoch    2")
		r := start(t, cmd, watch)
		select {
		case <-seen:
		case <-time.After(time.Minute):
			t.Fatal("no epoch 2 within a minute")
		}
		ranks := rankPids(cmd.Process.Pid)
		out, _ := exec.Command("ip", "netns", "pids", h.netns[1]).Output()
		victims := strings.Fields(string(out))
		if len(ranks) != q || len(victims) < 3 {
			t.Fatalf("ranks %v, processes on host1 %v", ranks, victims)
		}
		killed := time.Now()
		for _, p := range victims {
			pid, _ := strconv.Atoi(p)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		err, _, stderr := r.wait()
		took := time.Since(killed)
		t.Logf("killed %d processes on host1; mpirun exited %d after %v", len(victims), exitCodeOf(err), took.Round(time.Millisecond))
		if err == nil {
			t.Errorf("mpirun exited 0 after host1 died:\n%s", strings.Join(stderr, "\n"))
		}
		for r, p := range ranks {
			for !exited(strconv.Itoa(p)) && time.Since(killed) < 30*time.Second {
				time.Sleep(100 * time.Millisecond)
			}
			if !exited(strconv.Itoa(p)) {
				t.Errorf("rank %d (pid %d) still running %v after host1 died", r, p, time.Since(killed))
			}
		}
		if took > 30*time.Second {
			t.Errorf("the job took %v to end, want < 30s", took)
		}
	})
}
