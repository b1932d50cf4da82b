package job

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAvailableMemory reads the least of MemAvailable and every cgroup's
// limit less usage, up the v2 hierarchy and in v1's memory controller.
func TestAvailableMemory(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n")
	write("self-v2", "0::/job/step\n")
	write("cg/job/memory.max", "3000000000\n")
	write("cg/job/memory.current", "1000000000\n")
	write("cg/job/step/memory.max", "max\n")
	write("cg/job/step/memory.current", "500\n")
	write("self-v1", "12:cpu,cpuacct:/x\n7:memory:/slurm/job1\n")
	write("cg/memory/slurm/job1/memory.limit_in_bytes", "9223372036854771712\n") // no limit
	write("cg/memory/slurm/job1/memory.usage_in_bytes", "100\n")
	write("cg/memory/slurm/memory.limit_in_bytes", "1500000000\n")
	write("cg/memory/slurm/memory.usage_in_bytes", "500000000\n")
	for _, c := range []struct {
		self string
		want float64
		from string
	}{
		{"self-v2", 2e9, "cgroup " + filepath.Join(dir, "cg/job")},
		{"self-v1", 1e9, "cgroup " + filepath.Join(dir, "cg/memory/slurm")},
		{"none", 20000000 * 1024, "MemAvailable"},
	} {
		got, from := availableMemory(filepath.Join(dir, "meminfo"), filepath.Join(dir, c.self), filepath.Join(dir, "cg"))
		if got != c.want || !strings.Contains(from, c.from) {
			t.Errorf("%s: %v bytes from %q, want %v from %q", c.self, got, from, c.want, c.from)
		}
	}
	if got, _ := availableMemory(filepath.Join(dir, "missing"), filepath.Join(dir, "missing"), dir); got != 0 {
		t.Errorf("nothing readable: %v, want 0", got)
	}
}

// TestMemoryRefused: a width no machine holds is refused before anything
// is allocated or written, with both figures, as bad input.
func TestMemoryRefused(t *testing.T) {
	for _, ranks := range []int{1, 2} {
		s := DefaultSpec()
		s.Data, s.Ranks, s.Run.Epochs, s.Run.Hidden = genData(t), ranks, 1, 1_000_000_000
		s.Metrics = filepath.Join(t.TempDir(), "m.jsonl")
		err := Run(s, Env{})
		var se *SpecError
		if !errors.As(err, &se) || ExitCode(err) != ExitBadInput {
			t.Fatalf("%d ranks: %v, want a SpecError", ranks, err)
		}
		for _, w := range []string{"need an estimated", "EiB", "--hidden 1000000000", "is available"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q lacks %q", err, w)
			}
		}
		if _, err := os.Stat(s.Metrics); err == nil {
			t.Errorf("a metrics file was written")
		}
	}
}

// PeakRSSMiB counts in MiB what this process has resident: at least the
// 128 MiB touched here, at most the machine's memory. (The peak before
// may be higher already: other tests ran in this process.)
func TestPeakRSSMiB(t *testing.T) {
	b := make([]byte, 128<<20)
	for i := range b {
		b[i] = byte(i)
	}
	peak := PeakRSSMiB()
	totalKB, _ := procKB("/proc/meminfo", "MemTotal")
	if peak < 128 || (totalKB > 0 && peak > totalKB>>10) {
		t.Errorf("PeakRSSMiB() = %d with 128 MiB touched, on a machine of %d MiB", peak, totalKB>>10)
	}
	t.Logf("%d MiB (%d touched)", peak, b[len(b)-1])
}
