package job

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gnn-spmd/gnn-spmd/gnn"
)

// checkMemory refuses, before the first large allocation, a run whose
// ranks on this machine would need more memory than it has: the model and
// halo buffers of the ranks in this process (gnn.Footprint), times the
// processes a launcher put on this node (sharing). The data are loaded
// already; their size is bounded by the files'.
func (j *job) checkMemory(src *source, sharing int) error {
	cfg := j.spec.Run
	cfg.InDim, cfg.Classes = max(src.info.Features, 1), src.info.Classes
	mc := cfg.ModelConfig()
	plan := &cfg.Compress
	host, residual := j.spec.Device == "cpu", plan.CodesResiduals()
	// Evaluation passes of their own (gnn.Trainer.Epoch).
	exactEval := plan.ExactEval() || cfg.Dropout > 0
	var need float64
	rows := 0
	if v := src.single; v != nil {
		need, rows = gnn.Footprint(mc, v.NumOwned, v.NumHalo, 0, int(v.Adj.Ptr[v.NumOwned])+v.NumOwned, host, false, false, false), v.NumOwned
	}
	for _, sh := range src.shards {
		halo, sent := len(sh.Halo), sh.NumSent()
		if j.spec.NoComm {
			halo, sent = 0, 0
		}
		// Self loops come on top of the shard's edges (GCN, GAT).
		need += gnn.Footprint(mc, sh.NumOwned(), halo, sent, len(sh.Indices)+sh.NumOwned(), host, residual, exactEval, plan.CacheInput)
		rows += sh.NumOwned()
	}
	need *= float64(sharing)
	avail, from := availableMemory("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup")
	if avail <= 0 || need <= avail {
		return nil
	}
	ranks := fmt.Sprintf("%d ranks", j.spec.Ranks)
	if sharing > 1 {
		ranks = fmt.Sprintf("%d ranks on this node", sharing)
	} else if j.spec.Ranks == 1 {
		ranks = "1 rank"
	}
	return specErrorf("train: the model and halo buffers need an estimated %s (--model %s, --layers %d, --hidden %d, %d classes, %d rows on %s) but %s is available (%s): use a smaller model or more machines",
		binaryBytes(need), cfg.Model, cfg.Layers, cfg.Hidden, cfg.Classes, rows, ranks, binaryBytes(avail), from)
}

// processesOnNode is how many ranks of an MPI job share this node, from
// the launcher's environment (Open MPI, MPICH's Hydra), else 1.
func processesOnNode() int {
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
	}
	return 1
}

// AvailableMemory is the memory this process may still take, in bytes,
// and where that figure comes from (availableMemory); 0 when unknown.
func AvailableMemory() (float64, string) {
	return availableMemory("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup")
}

// availableMemory is the memory this process may still take, in bytes,
// and where that figure comes from: the least of MemAvailable in meminfo
// and, for every cgroup from this process's up to the root, its limit less
// its usage (cgroup v2; v1's memory controller likewise). 0 when none can
// be read.
func availableMemory(meminfo, selfCgroup, cgroupRoot string) (float64, string) {
	best, from := math.Inf(1), ""
	consider := func(v float64, src string) {
		if v >= 0 && v < best {
			best, from = v, src
		}
	}
	if v, ok := meminfoAvailable(meminfo); ok {
		consider(v, "MemAvailable in "+meminfo)
	}
	b, _ := os.ReadFile(selfCgroup)
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var base, limit, usage string
		switch {
		case f[0] == "0" && f[1] == "": // v2
			base, limit, usage = cgroupRoot, "memory.max", "memory.current"
		case strings.Contains(","+f[1]+",", ",memory,"): // v1
			base, limit, usage = filepath.Join(cgroupRoot, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		for dir := filepath.Join(base, f[2]); strings.HasPrefix(dir, base); dir = filepath.Dir(dir) {
			l, okL := readNumber(filepath.Join(dir, limit))
			u, okU := readNumber(filepath.Join(dir, usage))
			if okL && okU && l < 1<<60 { // v1 writes "no limit" as ~2^63
				consider(max(l-u, 0), "the limit less the usage of cgroup "+dir)
			}
			if dir == base {
				break
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0, ""
	}
	return best, from
}

func meminfoAvailable(path string) (float64, bool) {
	kb, ok := procKB(path, "MemAvailable")
	return float64(kb) * 1024, ok
}

// procKB reads the line "key: N kB" of a /proc file such as meminfo or
// status.
func procKB(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// readNumber reads a cgroup file holding one number ("max" = none).
func readNumber(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return v, err == nil
}

// binaryBytes writes n bytes in binary units: "1.5 GiB".
func binaryBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// PeakRSSMiB is this process's peak resident memory since it started its
// program: VmHWM in /proc/self/status. getrusage's maxrss is the fallback
// only, because Linux carries the parent's peak into a child started by
// vfork and exec (as Go's os/exec and many launchers start it).
func PeakRSSMiB() int64 {
	if kb, ok := procKB("/proc/self/status", "VmHWM"); ok {
		return kb >> 10
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Maxrss) >> 10 // kilobytes on Linux
}
