package comm

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
)

// procState is the state letter of process pid in /proc/<pid>/stat ("R",
// "S", "T" for stopped, ...), "" when there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// hostID is this host's name hashed to 52 bits, which a float64 holds
// exactly (the ranks exchange it with an all-reduce).
func hostID() float64 {
	name, _ := os.Hostname()
	h := fnv.New64a()
	h.Write([]byte(name))
	return float64(h.Sum64() >> 12)
}

// rankProcs is where every rank of a job runs: its host and process id.
type rankProcs struct {
	host []float64
	pid  []int
}

// absent describes the peers (nil: all ranks but self) that a call waited
// for: those on this host whose process is stopped or gone, else which
// ranks run elsewhere and could not be looked at.
func (p *rankProcs) absent(self int, peers []int) string {
	if p == nil || len(p.pid) == 0 {
		return ""
	}
	if peers == nil {
		for r := range p.pid {
			if r != self {
				peers = append(peers, r)
			}
		}
	}
	var found, remote []string
	for _, r := range peers {
		if p.host[r] != p.host[self] {
			remote = append(remote, fmt.Sprint(r))
			continue
		}
		switch st := procState(p.pid[r]); st {
		case "T", "t":
			found = append(found, fmt.Sprintf("rank %d (pid %d, this host) is stopped", r, p.pid[r]))
		case "", "Z", "X":
			found = append(found, fmt.Sprintf("rank %d (pid %d, this host) has exited", r, p.pid[r]))
		}
	}
	switch {
	case len(found) > 0:
		return strings.Join(found, "; ")
	case len(remote) == 1:
		return "every rank on this host runs; rank " + remote[0] + " is on another host"
	case len(remote) > 1:
		return "every rank on this host runs; ranks " + strings.Join(remote, ", ") + " are on other hosts"
	}
	return ""
}
