// Package cudalib finds the CUDA libraries that the GPU build loads with
// dlopen (cuBLAS, NCCL) where GPU machines keep them: LD_LIBRARY_PATH, the
// CUDA toolkit's lib directories, the system's, and the NVIDIA wheels of a
// Python environment (site-packages/nvidia/*/lib, as PyTorch installs
// them). It only looks at files; the bindings (cgo/cublas, cgo/nccl) load
// the candidates it returns, in order, and say what each attempt gave.
//
// It is pure Go without build tags, so the CPU build can say what a GPU
// build would find. It imports only standard packages that
// gorgonia.org/cu imports too: cgo/cudaprobe imports it and must still
// initialise before cu does (see that package).
package cudalib

import (
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Lib is a library to find: its sonames in order of preference, and the
// companion each needs beside it (libcublasLt for libcublas).
type Lib struct {
	Name      string
	Sonames   []string
	Companion func(soname string) string // nil: none
}

// CuBLAS is tried newest first; a cuBLAS that cannot create a handle on
// this driver gives way to the next (cgo/cublas).
var CuBLAS = Lib{
	Name:    "cuBLAS",
	Sonames: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"},
	Companion: func(soname string) string {
		return strings.Replace(soname, "libcublas.", "libcublasLt.", 1)
	},
}

// NCCL is the runtime soname, then the development link.
var NCCL = Lib{Name: "NCCL", Sonames: []string{"libnccl.so.2", "libnccl.so"}}

// Dir is one directory searched, and what put it on the list.
type Dir struct {
	Path string
	From string // LD_LIBRARY_PATH, CUDA_HOME, CUDA toolkit, system, python3 wheels, ...
}

// Candidate is one way to load a soname: a file found in a search
// directory, or (Path "") the dynamic loader's own search by soname.
type Candidate struct {
	Soname string
	Path   string
	From   string
	// Preload are companions found beside Path, to load first by full path
	// so that the library's own dependency on them resolves to them.
	Preload []string
}

// Name is what to pass to dlopen.
func (c Candidate) Name() string {
	if c.Path == "" {
		return c.Soname
	}
	return c.Path
}

// Where says where the candidate is, for reports.
func (c Candidate) Where() string {
	if c.Path == "" {
		return "the dynamic loader's own search"
	}
	s := c.Path
	if t, err := os.Readlink(c.Path); err == nil && !strings.Contains(t, "/") {
		s += " -> " + t // the versioned file, as the soname's link names it
	}
	return s + " (" + c.From + ")"
}

// Attempt is what loading one candidate gave.
type Attempt struct {
	Candidate
	File   string // the file the loader mapped, when it loaded
	OK     bool   // loaded and usable
	Result string // what it gave: a version and a check, or why it failed
}

// Search is where to look. Default reads this machine; tests point it at
// a temporary tree.
type Search struct {
	Getenv func(string) string
	// Root prefixes the fixed locations (/usr/local/cuda, /usr/lib, ...);
	// "" is the file system's root. Directories named by environment
	// variables and by Python are taken as they are.
	Root string
	// SitePackages lists the Python site-packages directories to look
	// into for NVIDIA wheels.
	SitePackages func() []string
}

// Default is the search of this machine: its environment, file system and
// python3 (asked once per process, for at most three seconds).
func Default() *Search {
	return &Search{Getenv: os.Getenv, SitePackages: pythonSites}
}

// Dirs lists the directories to search, in order, each once (by identity,
// so /usr/local/cuda and the toolkit it links to count once), and only
// those that exist.
func (s *Search) Dirs() []Dir {
	var out []Dir
	seen := map[[2]uint64]bool{}
	add := func(p, from string) {
		if p == "" || !path.IsAbs(p) {
			return
		}
		p = path.Clean(p)
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			return
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			id := [2]uint64{uint64(sys.Dev), uint64(sys.Ino)}
			if seen[id] {
				return
			}
			seen[id] = true
		}
		out = append(out, Dir{Path: p, From: from})
	}
	toolkit := func(root, from string) {
		add(root+"/lib64", from)
		add(root+"/lib", from)
		for _, t := range s.glob(root + "/targets/*/lib") {
			add(t, from)
		}
	}
	for _, p := range strings.Split(s.Getenv("LD_LIBRARY_PATH"), ":") {
		add(p, "LD_LIBRARY_PATH")
	}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := s.Getenv(v); root != "" {
			toolkit(path.Clean(root), v)
		}
	}
	toolkit(s.Root+"/usr/local/cuda", "CUDA toolkit")
	versions := s.glob(s.Root + "/usr/local/cuda-*")
	slices.SortFunc(versions, func(a, b string) int { return compareVersions(b, a) }) // newest first
	for _, v := range versions {
		toolkit(v, "CUDA toolkit")
	}
	for _, p := range systemDirs() {
		add(s.Root+p, "system")
	}
	if conda := s.Getenv("CONDA_PREFIX"); conda != "" {
		add(path.Clean(conda)+"/lib", "CONDA_PREFIX")
	}
	for _, site := range s.sites() {
		for _, p := range s.glob(site + "/nvidia/*/lib") {
			add(p, "python3 wheels")
		}
	}
	return out
}

// Find lists lib's candidates: for each soname in order, the files of
// that name in dirs, then the soname alone for the dynamic loader.
func (lib Lib) Find(dirs []Dir) []Candidate {
	var out []Candidate
	for _, so := range lib.Sonames {
		for _, d := range dirs {
			p := d.Path + "/" + so
			if !isFile(p) {
				continue
			}
			c := Candidate{Soname: so, Path: p, From: d.From}
			if lib.Companion != nil {
				if comp := d.Path + "/" + lib.Companion(so); isFile(comp) {
					c.Preload = []string{comp}
				}
			}
			out = append(out, c)
		}
		out = append(out, Candidate{Soname: so})
	}
	return out
}

// sites are the site-packages directories: Python's own answer, then the
// usual places of virtual environments and user installs.
func (s *Search) sites() []string {
	var out []string
	if s.SitePackages != nil {
		out = append(out, s.SitePackages()...)
	}
	if v := s.Getenv("VIRTUAL_ENV"); v != "" {
		out = append(out, s.glob(path.Clean(v)+"/lib/python3*/site-packages")...)
	}
	if v := s.Getenv("CONDA_PREFIX"); v != "" {
		out = append(out, s.glob(path.Clean(v)+"/lib/python3*/site-packages")...)
	}
	if h := s.Getenv("HOME"); h != "" {
		out = append(out, s.glob(path.Clean(h)+"/.local/lib/python3*/site-packages")...)
	}
	out = append(out, s.glob(s.Root+"/usr/local/lib/python3*/dist-packages")...)
	out = append(out, s.glob(s.Root+"/usr/local/lib/python3*/site-packages")...)
	out = append(out, s.glob(s.Root+"/usr/lib/python3/dist-packages")...)
	return out
}

// glob expands the '*' components of pattern (path.Match syntax), in
// lexical order; path/filepath is not imported (see the package comment).
func (s *Search) glob(pattern string) []string {
	parts := strings.Split(pattern, "/")
	matches := []string{""}
	for i, part := range parts {
		if i == 0 {
			continue // the empty name before the leading '/'
		}
		var next []string
		for _, m := range matches {
			if !strings.ContainsAny(part, "*?[") {
				next = append(next, m+"/"+part)
				continue
			}
			ents, err := os.ReadDir(m + "/")
			if err != nil {
				continue
			}
			for _, e := range ents {
				if ok, _ := path.Match(part, e.Name()); ok {
					next = append(next, m+"/"+e.Name())
				}
			}
		}
		matches = next
	}
	var out []string
	for _, m := range matches {
		if _, err := os.Stat(m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// systemDirs are the dynamic loader's usual directories on Linux.
func systemDirs() []string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "powerpc64le"}[runtime.GOARCH]
	dirs := []string{"/usr/lib64", "/usr/lib", "/lib64"}
	if arch != "" {
		dirs = append([]string{"/usr/lib/" + arch + "-linux-gnu", "/lib/" + arch + "-linux-gnu"}, dirs...)
	}
	return dirs
}

// compareVersions orders ".../cuda-11.8" before ".../cuda-12.4" before
// ".../cuda-12.10" (numbers compared as numbers).
func compareVersions(a, b string) int {
	va, vb := versionOf(a), versionOf(b)
	for i := 0; i < len(va) && i < len(vb); i++ {
		if va[i] != vb[i] {
			return va[i] - vb[i]
		}
	}
	if len(va) != len(vb) {
		return len(va) - len(vb)
	}
	return strings.Compare(a, b)
}

func versionOf(dir string) []int {
	name := dir[strings.LastIndexByte(dir, '/')+1:]
	name = strings.TrimPrefix(name, "cuda-")
	var out []int
	for _, f := range strings.Split(name, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	return out
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

var (
	sitesOnce sync.Once
	sitesList []string
)

// pythonSites asks python3 (on PATH) for its site-packages directories,
// once per process. No python3, a failure or a hang (killed after three
// seconds) gives none.
func pythonSites() []string {
	sitesOnce.Do(func() { sitesList = askPython(3 * time.Second) })
	return sitesList
}

const pythonQuery = `import site, sys
try:
    dirs = site.getsitepackages()
except AttributeError:
    dirs = []
try:
    dirs.append(site.getusersitepackages())
except AttributeError:
    pass
print("\n".join(d for d in dirs + sys.path if d))`

func askPython(timeout time.Duration) []string {
	exe := lookPath("python3")
	if exe == "" {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return nil
	}
	defer null.Close()
	p, err := os.StartProcess(exe, []string{exe, "-c", pythonQuery},
		&os.ProcAttr{Files: []*os.File{null, w, null}})
	w.Close()
	if err != nil {
		return nil
	}
	kill := time.AfterFunc(timeout, func() { _ = p.Kill() })
	defer kill.Stop()
	var buf []byte
	chunk := make([]byte, 4096)
	for len(buf) < 1<<20 {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			break
		}
	}
	st, err := p.Wait()
	if err != nil || !st.Success() {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(buf), "\n") {
		if l = strings.TrimSpace(l); path.IsAbs(l) && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// lookPath finds an executable on PATH (os/exec is not imported: see the
// package comment).
func lookPath(name string) string {
	for _, d := range strings.Split(os.Getenv("PATH"), ":") {
		if d == "" {
			continue
		}
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// WriteDirs prints the search directories, one a line.
func WriteDirs(w io.Writer, dirs []Dir) {
	fmt.Fprintln(w, "library search, in order:")
	for _, d := range dirs {
		fmt.Fprintf(w, "  %-16s %s\n", d.From, d.Path)
	}
	fmt.Fprintln(w, "  then the dynamic loader's own search by soname (ld.so.cache)")
}

// WriteAttempts prints what loading lib gave, candidate by candidate, or,
// when nothing was tried, the candidates found.
func WriteAttempts(w io.Writer, lib Lib, tried []Attempt, found []Candidate) {
	fmt.Fprintf(w, "%s (%s):\n", lib.Name, strings.Join(lib.Sonames, ", "))
	for _, a := range tried {
		where := a.Where()
		if a.Path == "" && a.File != "" {
			where = a.File + " (the dynamic loader's own search)"
		}
		fmt.Fprintf(w, "  %-16s %s: %s\n", a.Soname, where, a.Result)
	}
	if len(tried) > 0 {
		return
	}
	for _, c := range found {
		if c.Path != "" {
			fmt.Fprintf(w, "  %-16s %s\n", c.Soname, c.Where())
		}
	}
	if len(found) == len(lib.Sonames) { // only the loader's search is left
		fmt.Fprintln(w, "  not in the search directories")
	}
}
