package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/gnn/job"
)

// The corrupt-byte sweep: every byte of a small dataset, part file and
// checkpoint set to 0x00 and to 0xff in turn, each read by the command that
// reads it. Every run must end within sweepTimeout and sweepMemory, with
// exit 0 or exit 2 and one line naming the file, leave the file as it was
// and, on exit 2, write no output. A run that exits 0 must print what the
// unmodified file gives, unless the file's content as h5py reads it changed
// (a changed feature or weight value is a valid, different file).
//
// go test samples every sweepStride-th byte (GNN_SPMD_SWEEP_STRIDE) from a
// phase drawn per run and logged (GNN_SPMD_SWEEP_PHASE repeats one);
// `make fuzz-h5` sweeps every byte.
const (
	sweepTimeout = 10 * time.Second
	sweepMemory  = 1 << 30 // bytes of resident memory
	sweepStride  = 37
)

// sweepCase is one file and the command that reads it.
type sweepCase struct {
	name   string
	target string                         // the swept file, relative to the case's directory
	args   func(dir, out string) []string // the command line; out is its metrics file or ""
}

// sweepFiles writes the swept files into dir: d.h5 (50 nodes, 4 features),
// parts/ (2 parts of it) and ck.h5 (a checkpoint of a width-4 model on 2
// ranks with the recommended compression, so that it holds residual state).
func sweepFiles(t *testing.T, dir string) {
	for _, args := range [][]string{
		{"gen", "--out", filepath.Join(dir, "d.h5"), "--nodes", "50", "--features", "4", "--seed", "1"},
		{"partition", "--data", filepath.Join(dir, "d.h5"), "--parts", "2", "--out", filepath.Join(dir, "parts")},
		{"train", "--data", filepath.Join(dir, "d.h5"), "--epochs", "2", "--hidden", "4", "--ranks", "2", "--compress", "recommended", "--quiet",
			"--checkpoint", filepath.Join(dir, "ck.h5")},
	} {
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%s: %s", args[0], stderr)
		}
	}
}

var sweepCases = []sweepCase{
	{"dataset", "d.h5", func(dir, out string) []string {
		return []string{"train", "--data", filepath.Join(dir, "d.h5"), "--epochs", "1", "--hidden", "4", "--threads", "1", "--quiet", "--metrics", out}
	}},
	{"part file", "parts/part-1.h5", func(dir, out string) []string {
		return []string{"train", "--parts", filepath.Join(dir, "parts"), "--ranks", "2", "--epochs", "1", "--hidden", "4", "--threads", "1", "--quiet", "--metrics", out}
	}},
	{"checkpoint", "ck.h5", func(dir, _ string) []string {
		return []string{"inspect", "--json", filepath.Join(dir, "ck.h5")}
	}},
}

func TestCorruptByteSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	stride := envInt(t, "GNN_SPMD_SWEEP_STRIDE", sweepStride)
	phase := envInt(t, "GNN_SPMD_SWEEP_PHASE", rand.IntN(stride))
	t.Logf("every %d-th byte from offset %d (GNN_SPMD_SWEEP_STRIDE=%d GNN_SPMD_SWEEP_PHASE=%d repeats this)", stride, phase, stride, phase)
	src := t.TempDir()
	sweepFiles(t, src)
	for _, c := range sweepCases {
		t.Run(c.name, func(t *testing.T) { sweepFile(t, src, c, stride, phase) })
	}
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

// sweepRun is one run on a file with one byte changed.
type sweepRun struct {
	off  int
	val  byte
	code int
	out  string // the normalised output, on exit 0
}

func sweepFile(t *testing.T, src string, c sweepCase, stride, phase int) {
	good, err := os.ReadFile(filepath.Join(src, c.target))
	if err != nil {
		t.Fatal(err)
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	dirs := make([]string, workers)
	for w := range dirs {
		dirs[w] = t.TempDir()
		copyTree(t, src, dirs[w])
	}
	want, err := sweepOnce(dirs[0], c, good)
	if err != nil || want.code != 0 {
		t.Fatalf("the unmodified file: exit %d, %v", want.code, err)
	}

	type flip struct {
		off int
		val byte
	}
	jobs := make(chan flip)
	var (
		mu      sync.Mutex
		changed []sweepRun // exit 0 with another output
		n, bad  int
		codes   = map[int]int{}
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(good))
			for j := range jobs {
				copy(buf, good)
				buf[j.off] = j.val
				r, err := sweepOnce(dirs[w], c, buf)
				r.off, r.val = j.off, j.val
				mu.Lock()
				n++
				codes[r.code]++
				if err != nil {
					bad++
					if bad <= 20 {
						t.Errorf("byte %d = %#02x: %v", j.off, j.val, err)
					}
				} else if r.code == 0 && r.out != want.out {
					changed = append(changed, r)
				}
				mu.Unlock()
			}
		}()
	}
	for off := phase; off < len(good); off += max(stride, 1) {
		for _, v := range []byte{0x00, 0xff} {
			if good[off] != v {
				jobs <- flip{off, v}
			}
		}
	}
	close(jobs)
	wg.Wait()
	t.Logf("%s: %d bytes, %d runs: exit codes %v; %d accepted with another output", c.target, len(good), n, codes, len(changed))
	if bad > 20 {
		t.Errorf("%d failing runs in all", bad)
	}
	sameContent(t, good, changed)
}

// sweepOnce writes file as the case's target in dir, runs the case's
// command on it and checks the contract; err says what broke it.
func sweepOnce(dir string, c sweepCase, file []byte) (sweepRun, error) {
	target := filepath.Join(dir, c.target)
	if err := os.WriteFile(target, file, 0o644); err != nil {
		return sweepRun{}, err
	}
	out := filepath.Join(dir, "metrics.jsonl")
	os.Remove(out)
	args := c.args(dir, out)
	if !strings.Contains(strings.Join(args, " "), "--metrics") {
		out = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		return sweepRun{}, err
	}
	peak := filepath.Join(dir, "peak")
	os.Remove(peak)
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "GNN_SPMD_AS_CLI=1", "GNN_SPMD_PEAK_FILE="+peak)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	r := sweepRun{code: exitCodeOf(runErr)}
	if ctx.Err() != nil {
		return r, fmt.Errorf("did not end within %v", sweepTimeout)
	}
	if b, err := os.ReadFile(peak); err != nil {
		return r, fmt.Errorf("exit %d without its peak memory: %.300q", r.code, stderr.String())
	} else if mib, _ := strconv.ParseInt(string(b), 10, 64); mib<<20 > sweepMemory {
		return r, fmt.Errorf("used %d MiB", mib)
	}
	if now, _ := os.ReadFile(target); !bytes.Equal(now, file) {
		return r, fmt.Errorf("the input file changed")
	}
	switch r.code {
	case 0:
		// The metrics file of a run (its console output holds timings),
		// else what the command printed.
		r.out = strings.ReplaceAll(stdout.String(), dir, "DIR")
		if out != "" {
			b, err := os.ReadFile(out)
			if err != nil {
				return r, fmt.Errorf("exit 0 without a metrics file")
			}
			r.out = untimed(string(b))
		}
	case job.ExitBadInput:
		msg := stderr.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
			return r, fmt.Errorf("exit 2 without a one-line error: %q", msg)
		}
		if !strings.Contains(msg, target) {
			return r, fmt.Errorf("the error does not name %s: %q", target, msg)
		}
		if out != "" && exists(out) {
			return r, fmt.Errorf("exit 2 left a metrics file")
		}
	default:
		return r, fmt.Errorf("exit %d: %.300q", r.code, stderr.String())
	}
	return r, nil
}

// untimed is a metrics file without its timings and memory figures.
func untimed(metrics string) string {
	var sb strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(metrics), "\n") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(l), &m) != nil {
			sb.WriteString("unparsable: " + l + "\n")
			continue
		}
		for k := range m {
			if strings.HasSuffix(k, "seconds") || strings.HasSuffix(k, "rss_mb") {
				delete(m, k)
			}
		}
		e, _ := json.Marshal(m)
		sb.Write(append(e, '\n'))
	}
	return sb.String()
}

// sameContent checks, with h5py as the independent reader, that every run
// accepted with an output other than the unmodified file's read a file
// whose content did change.
func sameContent(t *testing.T, good []byte, runs []sweepRun) {
	if len(runs) == 0 {
		return
	}
	const py = "/usr/bin/python3"
	if exec.Command(py, "-c", "import h5py").Run() != nil {
		t.Logf("%d accepted runs changed the output; not checked: /usr/bin/python3 with h5py is needed", len(runs))
		return
	}
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.h5")
	os.WriteFile(orig, good, 0o644)
	var list strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&list, "%d %d\n", r.off, r.val)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(runs)+30)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", h5pyContent, orig, filepath.Join(dir, "x.h5"))
	cmd.Stdin = strings.NewReader(list.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("h5py content check: %v: %s", err, out)
	}
	for _, l := range strings.Fields(string(out)) {
		t.Errorf("byte %s: the output changed, but the content h5py reads did not", l)
	}
}

// h5pyContent reads offset/value pairs on stdin, writes the original file
// with each change, and prints offset:value for every change after which
// h5py reads the same objects, attributes and values as in the original.
const h5pyContent = `
import h5py, sys, hashlib
def content(path):
    h = hashlib.sha256()
    with h5py.File(path, 'r') as f:
        def obj(name, o):
            h.update(name.encode())
            for k in sorted(o.attrs):
                h.update(k.encode()); h.update(repr(o.attrs[k]).encode())
            if isinstance(o, h5py.Dataset):
                h.update(str(o.dtype).encode()); h.update(repr(o.shape).encode()); h.update(o[()].tobytes() if o.shape != () else repr(o[()]).encode())
        obj('/', f)
        f.visititems(obj)
    return h.hexdigest()
orig, x = sys.argv[1], sys.argv[2]
good = open(orig, 'rb').read()
want = content(orig)
for line in sys.stdin:
    off, val = map(int, line.split())
    b = bytearray(good); b[off] = val
    open(x, 'wb').write(b)
    try:
        same = content(x) == want
    except Exception:
        same = False
    if same:
        print('%d:%#04x' % (off, val))
`

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
