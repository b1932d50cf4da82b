package cudalib

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tree makes the files (empty) and symlinks ("name -> target") under root.
func tree(t *testing.T, root string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		name, target, link := strings.Cut(e, " -> ")
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case link:
			err = os.Symlink(target, p)
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The search order: LD_LIBRARY_PATH, CUDA_HOME, the toolkits (newest
// version first, a link to one counted once), the system, conda, the
// Python wheels; absent and relative directories are skipped.
func TestDirs(t *testing.T) {
	tmp := t.TempDir()
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" {
		t.Skipf("no multiarch directory known for %s", runtime.GOARCH)
	}
	tree(t, tmp,
		"ld1/libcublas.so.12", "ld1/libcublasLt.so.12",
		"home/lib64/libcublas.so.13",
		"root/usr/local/cuda-11.8/targets/"+arch+"-linux/lib/libcublas.so.11",
		"root/usr/local/cuda-11.8/targets/"+arch+"-linux/lib/libcublasLt.so.11",
		"root/usr/local/cuda -> cuda-11.8",
		"root/usr/local/cuda-12.10/lib64/libcublas.so.12",
		"root/usr/local/cuda-12.9/lib64/",
		"root/usr/lib/"+arch+"-linux-gnu/libnccl.so.2",
		"conda/lib/",
		"site/nvidia/cu13/lib/libcublas.so.13", "site/nvidia/cu13/lib/libcublasLt.so.13",
		"site/nvidia/nccl/lib/libnccl.so.2",
		"site/nvidia/nccl/include/",
		"venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/",
	)
	s := &Search{
		Getenv: env(map[string]string{
			"LD_LIBRARY_PATH": tmp + "/ld1::relative/lib:" + tmp + "/absent:" + tmp + "/ld1/",
			"CUDA_HOME":       tmp + "/home",
			"CONDA_PREFIX":    tmp + "/conda",
			"VIRTUAL_ENV":     tmp + "/venv",
		}),
		Root:         tmp + "/root",
		SitePackages: func() []string { return []string{tmp + "/site", tmp + "/absent-site"} },
	}
	got := s.Dirs()
	want := []Dir{
		{tmp + "/ld1", "LD_LIBRARY_PATH"},
		{tmp + "/home/lib64", "CUDA_HOME"},
		{tmp + "/root/usr/local/cuda/targets/" + arch + "-linux/lib", "CUDA toolkit"},
		{tmp + "/root/usr/local/cuda-12.10/lib64", "CUDA toolkit"},
		{tmp + "/root/usr/local/cuda-12.9/lib64", "CUDA toolkit"},
		{tmp + "/root/usr/lib/" + arch + "-linux-gnu", "system"},
		{tmp + "/root/usr/lib", "system"},
		{tmp + "/conda/lib", "CONDA_PREFIX"},
		{tmp + "/site/nvidia/cu13/lib", "python3 wheels"},
		{tmp + "/site/nvidia/nccl/lib", "python3 wheels"},
		{tmp + "/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib", "python3 wheels"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Dirs:\n got %v\nwant %v", got, want)
	}

	// cuBLAS: 13 wherever it is, then 12, then 11, each followed by the
	// loader's own search; libcublasLt beside a libcublas is preloaded.
	cands := CuBLAS.Find(got)
	wantC := []Candidate{
		{Soname: "libcublas.so.13", Path: tmp + "/home/lib64/libcublas.so.13", From: "CUDA_HOME"},
		{Soname: "libcublas.so.13", Path: tmp + "/site/nvidia/cu13/lib/libcublas.so.13", From: "python3 wheels",
			Preload: []string{tmp + "/site/nvidia/cu13/lib/libcublasLt.so.13"}},
		{Soname: "libcublas.so.13"},
		{Soname: "libcublas.so.12", Path: tmp + "/ld1/libcublas.so.12", From: "LD_LIBRARY_PATH",
			Preload: []string{tmp + "/ld1/libcublasLt.so.12"}},
		{Soname: "libcublas.so.12", Path: tmp + "/root/usr/local/cuda-12.10/lib64/libcublas.so.12", From: "CUDA toolkit"},
		{Soname: "libcublas.so.12"},
		{Soname: "libcublas.so.11", Path: tmp + "/root/usr/local/cuda/targets/" + arch + "-linux/lib/libcublas.so.11",
			From: "CUDA toolkit", Preload: []string{tmp + "/root/usr/local/cuda/targets/" + arch + "-linux/lib/libcublasLt.so.11"}},
		{Soname: "libcublas.so.11"},
		{Soname: "libcublas.so"},
	}
	if !reflect.DeepEqual(cands, wantC) {
		t.Errorf("CuBLAS.Find:\n got %+v\nwant %+v", cands, wantC)
	}
	nccl := NCCL.Find(got)
	wantN := []Candidate{
		{Soname: "libnccl.so.2", Path: tmp + "/root/usr/lib/" + arch + "-linux-gnu/libnccl.so.2", From: "system"},
		{Soname: "libnccl.so.2", Path: tmp + "/site/nvidia/nccl/lib/libnccl.so.2", From: "python3 wheels"},
		{Soname: "libnccl.so.2"},
		{Soname: "libnccl.so"},
	}
	if !reflect.DeepEqual(nccl, wantN) {
		t.Errorf("NCCL.Find:\n got %+v\nwant %+v", nccl, wantN)
	}
}

// A broken link or a directory of the soname's name is not a candidate;
// a link to the versioned file is, and the report names its target.
func TestFindFiles(t *testing.T) {
	tmp := t.TempDir()
	tree(t, tmp, "a/libnccl.so.2 -> missing.so", "b/libnccl.so.2/", "c/libnccl.so.2.21.5", "c/libnccl.so.2 -> libnccl.so.2.21.5")
	dirs := []Dir{{tmp + "/a", "x"}, {tmp + "/b", "y"}, {tmp + "/c", "z"}}
	got := NCCL.Find(dirs)
	if len(got) != 3 || got[0].Path != tmp+"/c/libnccl.so.2" || got[1].Path != "" || got[2].Soname != "libnccl.so" {
		t.Fatalf("Find: %+v", got)
	}
	if w, want := got[0].Where(), tmp+"/c/libnccl.so.2 -> libnccl.so.2.21.5 (z)"; w != want {
		t.Errorf("Where: %q, want %q", w, want)
	}
	if got[1].Name() != "libnccl.so.2" || got[1].Where() != "the dynamic loader's own search" {
		t.Errorf("loader candidate: %q, %q", got[1].Name(), got[1].Where())
	}
	var b bytes.Buffer
	WriteAttempts(&b, NCCL, nil, got)
	if want := "NCCL (libnccl.so.2, libnccl.so):\n  libnccl.so.2     " + tmp + "/c/libnccl.so.2 -> libnccl.so.2.21.5 (z)\n"; b.String() != want {
		t.Errorf("WriteAttempts:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	WriteAttempts(&b, NCCL, []Attempt{{Candidate: got[1], Result: "libnccl.so.2: cannot open shared object file"}}, got)
	if want := "NCCL (libnccl.so.2, libnccl.so):\n  libnccl.so.2     the dynamic loader's own search: libnccl.so.2: cannot open shared object file\n"; b.String() != want {
		t.Errorf("WriteAttempts of a failed load:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{{"/x/cuda-11.8", "/x/cuda-12.4", true}, {"/x/cuda-12.4", "/x/cuda-12.10", true}, {"/x/cuda-12", "/x/cuda-12.0", true},
		{"/x/cuda-13.0", "/x/cuda-12.9", false}} {
		if got := compareVersions(c.a, c.b) < 0; got != c.less {
			t.Errorf("compareVersions(%s, %s) < 0 = %v", c.a, c.b, got)
		}
	}
}

// python3 is asked for its site directories; a python3 that hangs is
// killed at the timeout and gives none.
func TestAskPython(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho /opt/venv/lib/python3.12/site-packages\necho relative\necho\necho /opt/venv/lib/python3.12/site-packages\necho /usr/lib/python3/dist-packages\n"
	if err := os.WriteFile(bin+"/python3", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	want := []string{"/opt/venv/lib/python3.12/site-packages", "/usr/lib/python3/dist-packages"}
	if got := askPython(5 * time.Second); !reflect.DeepEqual(got, want) {
		t.Errorf("askPython: %q, want %q", got, want)
	}
	if err := os.WriteFile(bin+"/python3", []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := askPython(200 * time.Millisecond); got != nil {
		t.Errorf("askPython of a hanging python3: %q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("askPython waited %v for a hanging python3", d)
	}
	t.Setenv("PATH", t.TempDir())
	if got := askPython(time.Second); got != nil {
		t.Errorf("askPython without python3: %q", got)
	}
}

// cgo/cudaprobe imports this package and must initialise before
// gorgonia.org/cu, which Go guarantees only while everything it imports is
// also imported by cu: this package's imports stay within that list.
func TestImportsWithinCu(t *testing.T) {
	allowed := map[string]bool{}
	for _, p := range strings.Fields("bytes errors fmt io os path runtime slices strconv strings sync syscall time unsafe") {
		allowed[p] = true
	}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); !allowed[p] {
				t.Errorf("%s imports %s, which gorgonia.org/cu does not import", f, p)
			}
		}
	}
}
