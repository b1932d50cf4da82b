// Package outfile is how every command writes its outputs: completely or
// not at all (a temporary file beside the output, fsynced, then renamed
// over it), keeping older versions on request (Write with keep), never over
// an input (Distinct), found unwritable before any work starts (Probe),
// owned by one run at a time (Lock), and without leaving temporary files
// of a killed run behind for good (the next writer of the path removes
// them).
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Error is an output that cannot be written as asked: a usage error.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// ExitCode is 2, the exit code of bad input.
func (e *Error) ExitCode() int { return 2 }

func errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// nameMax is the longest file name (one path element) Linux file systems
// take.
const nameMax = 255

// stem names the hidden files that belong to path (its temporary files
// and its lock) within path's directory: a readable prefix of its base
// name and a hash of all of it, so that the names fit the file-name limit
// however long the output's name is.
func stem(path string) string {
	base := filepath.Base(path)
	h := fnv.New32a()
	h.Write([]byte(base))
	prefix := base
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return fmt.Sprintf(".%s~%08x", prefix, h.Sum32())
}

// TempName is the temporary file that process pid writes path through.
func TempName(path string, pid int) string {
	return filepath.Join(filepath.Dir(path), fmt.Sprintf("%s.%d.tmp", stem(path), pid))
}

// Write writes the file at path through its temporary file: write creates
// and fills the file it is given, which is then fsynced; only then are the
// older versions rotated (with keep > 1, path becomes path.1, path.1
// becomes path.2, ... up to path.<keep-1>) and the temporary file renamed
// over path, and the directory fsynced. A reader never sees a half-written
// path, and a failed write (a full disk, a signal) leaves path and every
// older version as they were; the temporary file is removed.
func Write(path string, keep int, write func(tmp string) error) error {
	tmp := TempName(path, os.Getpid())
	track(tmp)
	defer untrack(tmp)
	err := write(tmp)
	if err == nil {
		err = syncPath(tmp)
	}
	if err == nil {
		err = rotate(path, keep)
	}
	if err == nil {
		err = publish(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		var e *Error
		if errors.As(err, &e) {
			return err
		}
		return fmt.Errorf("write %s: %w", path, explain(path, err))
	}
	syncPath(filepath.Dir(path))
	return nil
}

// publish renames tmp over path, after checking once more that path is
// nothing an output may not replace (Replaceable: a device, a FIFO that
// appeared since the probe), and moves path's identity lock to the new
// file.
func publish(tmp, path string) error {
	if err := Replaceable("output", path); err != nil {
		return err
	}
	relock(path, tmp)
	return os.Rename(tmp, path)
}

// Publish renames the complete (or, for a file that grows, the first
// complete part of the) temporary file tmp over path, as Write does, and
// fsyncs the directory: a log that goes on growing in place after it
// (a metrics file) publishes this way.
func Publish(tmp, path string) error {
	if err := publish(tmp, path); err != nil {
		return err
	}
	syncPath(filepath.Dir(path))
	return nil
}

// WriteAtomic is Write keeping no older version.
func WriteAtomic(path string, write func(tmp string) error) error { return Write(path, 1, write) }

// rotate shifts path.i to path.i+1 for i < keep-1 and links path as
// path.1, so that path keeps its content until the new file replaces it.
// Every step is a rename or a link: a failure leaves every version there.
func rotate(path string, keep int) error {
	if _, err := os.Stat(path); keep < 2 || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	old := func(i int) string { return path + "." + strconv.Itoa(i) }
	// Only the versions there move: they run path.1, path.2, ... up to
	// the first missing one.
	top := 0
	for top < keep-2 {
		if _, err := os.Lstat(old(top + 1)); err != nil {
			break
		}
		top++
	}
	for i := top; i >= 1; i-- {
		if err := os.Rename(old(i), old(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", old(i), err)
		}
	}
	// path.1 is path.2 by now (or keep is 2 and it is the oldest): replace
	// it by a link to path, through a temporary name so that it is never
	// missing.
	link := TempName(old(1), os.Getpid())
	os.Remove(link)
	if err := os.Link(path, link); err != nil {
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	if err := os.Rename(link, old(1)); err != nil {
		os.Remove(link)
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	return nil
}

// Versions are the names Write with keep uses for path: path, then
// path.1 ... path.<keep-1>.
func Versions(path string, keep int) []string {
	v := []string{path}
	for i := 1; i < keep; i++ {
		v = append(v, path+"."+strconv.Itoa(i))
	}
	return v
}

// explain turns a write error caused by a full file system into one that
// says so: libhdf5 reports a failed write without its errno ("code -1").
func explain(path string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return err
	}
	if free, ok := FreeBytes(filepath.Dir(path)); ok && free < 1<<20 {
		return fmt.Errorf("no space left on device (%d bytes free in %s): %w", free, filepath.Dir(path), err)
	}
	return err
}

// FreeBytes is the space an unprivileged writer has left on the file
// system of dir; ok is false where it cannot be read.
func FreeBytes(dir string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RemoveStale removes the temporary files of path that a writer left
// behind: those whose process is gone. It returns what it removed.
func RemoveStale(path string) []string {
	prefix := stem(path) + "."
	return removeDead(filepath.Dir(path), func(name string) bool { return strings.HasPrefix(name, prefix) })
}

// removeDead removes the temporary files in dir whose name match accepts
// and whose writer (the pid in the name) is gone, and returns them.
func removeDead(dir string, match func(name string) bool) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		name := e.Name()
		// ".<prefix>~<hash>.<pid>.tmp"; the prefix may hold dots.
		f := strings.Split(name, ".")
		if len(f) < 4 || f[0] != "" || f[len(f)-1] != "tmp" || !strings.Contains(name, "~") || !match(name) {
			continue
		}
		if n, err := strconv.Atoi(f[len(f)-2]); err != nil || n <= 0 || alive(n) && n != os.Getpid() {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			removed = append(removed, filepath.Join(dir, name))
		}
	}
	return removed
}

// Alive reports whether process pid exists and has not exited: a zombie
// (a dead process whose parent, or an init that does not reap, has not
// collected it) is gone.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: kill's answer stands
	}
	// "pid (comm) S ...": the state follows the last ')'.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

func alive(pid int) bool { return Alive(pid) }

// The temporary files this process is writing, removed by RemoveTemps
// when a signal ends it.
var (
	tempMu sync.Mutex
	temps  = map[string]bool{}
)

func track(tmp string) {
	tempMu.Lock()
	temps[tmp] = true
	tempMu.Unlock()
}

func untrack(tmp string) {
	tempMu.Lock()
	delete(temps, tmp)
	tempMu.Unlock()
}

// Track registers a temporary file that a writer outside this package
// creates (TempName), so that RemoveTemps removes it; Untrack once it has
// been renamed or removed.
func Track(tmp string) { track(tmp) }

// Untrack: see Track.
func Untrack(tmp string) { untrack(tmp) }

// RemoveTemps removes every temporary file this process is writing: what a
// signal handler calls before the process ends.
func RemoveTemps() {
	tempMu.Lock()
	defer tempMu.Unlock()
	for t := range temps {
		os.Remove(t)
	}
}

// RemoveTempsOnSignal makes SIGINT, SIGTERM and SIGHUP (those not
// ignored) remove the temporary files of the writes in progress and end
// the process with 128 + the signal, until the returned function restores
// the default handling: for a command that has no use for the signal but
// to stop (gen, convert, partition, export, the analysis tools).
func RemoveTempsOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	// A signal the process was started ignoring (nohup's SIGHUP, a
	// background job's SIGINT) stays ignored.
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			signal.Notify(ch, s)
		}
	}
	go func() {
		select {
		case s := <-ch:
			RemoveTemps()
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// WriteStream is WriteAtomic for content written as a stream (text,
// figures, archives), buffered.
func WriteStream(path string, write func(w io.Writer) error) error {
	return WriteAtomic(path, func(tmp string) error {
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		bw := bufio.NewWriter(f)
		err = write(bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// RemoveStaleIn removes, in dir, the temporary files of every output that
// writers now gone left behind; for a directory one run owns (a
// partition), whose file names a killed run may have used are not known.
func RemoveStaleIn(dir string) []string {
	return removeDead(dir, func(string) bool { return true })
}
