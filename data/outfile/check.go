package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Path is a file or directory a command reads or writes, with the flag
// that names it, for messages.
type Path struct {
	Flag, Name string
	// Versions: an output that Write keeps that many versions of.
	Versions int
	// Dir: an output directory, created if missing (Probe checks where).
	Dir bool
	// Lock: an output that one run at a time may write (Claim locks it).
	Lock bool
	// MakeDirs: its writer creates the directories it lies in.
	MakeDirs bool
}

// Claim checks outputs against inputs and each other (Distinct), probes
// each (Probe) and locks those marked Lock, before any work starts; the
// locks are held until release.
func Claim(inputs, outputs []Path) (release func(), err error) {
	if err := Distinct(inputs, outputs); err != nil {
		return nil, err
	}
	probed := map[string]bool{} // directories that took a file
	for _, o := range outputs {
		if err := probe(o, probed); err != nil {
			return nil, err
		}
	}
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, o := range outputs {
		if !o.Lock || o.Name == "" {
			continue
		}
		r, err := Lock(o.Flag, o.Name)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	return release, nil
}

// Distinct refuses, before anything is written, an output that is an
// input or another output: the same name, the same file (device and
// inode, through links of every kind), or an existing file inside an
// input directory. Empty names are skipped. It takes time linear in the
// number of names (a partition into thousands of parts, many checkpoint
// versions).
func Distinct(inputs, outputs []Path) error {
	type named struct {
		Path
		name string // one of the output's versions
	}
	var outs []named
	for _, o := range outputs {
		if o.Name == "" {
			continue
		}
		for _, v := range Versions(o.Name, max(o.Versions, 1)) {
			outs = append(outs, named{o, v})
		}
	}
	// Every output by each of its keys (its canonical name, and its
	// device and inode when it exists); the first holder of a key.
	byKey := map[string]named{}
	var existing []named
	for _, o := range outs {
		ks := keys(o.name)
		if len(ks) > 1 {
			existing = append(existing, o)
		}
		for _, k := range ks {
			if b, ok := byKey[k]; ok && b.Flag != o.Flag {
				return errorf("%s %s and %s %s are the same file: every output needs a file of its own", b.Flag, b.name, o.Flag, o.name)
			} else if !ok {
				byKey[k] = o
			}
		}
	}
	for _, in := range inputs {
		if in.Name == "" {
			continue
		}
		for _, k := range keys(in.Name) {
			if o, ok := byKey[k]; ok {
				return errorf("%s %s is the input %s %s: an output must never overwrite an input", o.Flag, o.name, in.Flag, in.Name)
			}
		}
		for _, o := range existing {
			if within(o.name, in.Name) {
				return errorf("%s %s is the input %s %s: an output must never overwrite an input", o.Flag, o.name, in.Flag, in.Name)
			}
		}
	}
	return nil
}

// keys names a file for Distinct: its canonical path, and "dev:ino" of
// the file it reaches when that exists.
func keys(name string) []string {
	ks := []string{"path " + canonical(name)}
	if st, err := os.Stat(name); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ks = append(ks, fmt.Sprintf("file %d:%d", sys.Dev, sys.Ino))
		}
	}
	return ks
}

// within reports whether out is an existing file inside the input
// directory dir.
func within(out, dir string) bool {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false
	}
	if _, err := os.Stat(out); err != nil {
		return false
	}
	rel, err := filepath.Rel(canonical(dir), canonical(out))
	return err == nil && rel != "." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != ".."
}

// canonical is path made absolute and clean, its directory's symbolic
// links resolved (the file itself may not exist yet).
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	dir, base := filepath.Split(abs)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if t, err := filepath.EvalSymlinks(abs); err == nil {
		return t
	}
	return filepath.Join(dir, base)
}

// Probe checks, before a run starts, that the output o can be written:
// its directory exists and takes new files, it is not a directory, and
// its name and those of its versions fit the file-name limit.
func Probe(o Path) error { return probe(o, nil) }

// probe is Probe, creating a file only in a directory that probed does
// not hold yet (and adding it): one probe per directory.
func probe(o Path, probed map[string]bool) error {
	if o.Name == "" {
		return nil
	}
	if o.Dir {
		return probeDir(o)
	}
	dir := filepath.Dir(o.Name)
	for _, v := range Versions(o.Name, max(o.Versions, 1)) {
		if n := len(filepath.Base(v)); n > nameMax {
			return errorf("%s %s: the file name has %d bytes, more than the %d a file system takes", o.Flag, v, n, nameMax)
		}
	}
	if err := Replaceable(o.Flag, o.Name); err != nil {
		return err
	}
	if st, err := os.Stat(o.Name); err == nil && st.IsDir() {
		return errorf("%s %s: is a directory, expected a file name", o.Flag, o.Name)
	}
	st, err := os.Stat(dir)
	for o.MakeDirs && errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		// The writer makes the missing directories: the nearest one that
		// exists must take them.
		dir = filepath.Dir(dir)
		st, err = os.Stat(dir)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf("%s %s: the directory %s does not exist", o.Flag, o.Name, dir)
	case err != nil:
		return errorf("%s %s: %v", o.Flag, o.Name, err)
	case !st.IsDir():
		return errorf("%s %s: %s is not a directory", o.Flag, o.Name, dir)
	}
	if probed[dir] {
		return nil
	}
	// Creating a file is the one test of permissions, read-only mounts
	// and quotas that does not guess.
	probeName := filepath.Join(dir, fmt.Sprintf("%s.%d.probe", stem(o.Name), os.Getpid()))
	f, err := os.OpenFile(probeName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return errorf("%s %s: cannot create files in %s: %v", o.Flag, o.Name, dir, err)
	}
	f.Close()
	os.Remove(probeName)
	if probed != nil {
		probed[dir] = true
	}
	return nil
}

// probeDir is Probe for an output directory, created if missing, as its
// writer will: it must not be a file, and it (if it exists) or the
// directory it is in must take new files.
func probeDir(o Path) error {
	if st, err := os.Lstat(o.Name); err == nil && !st.IsDir() && st.Mode()&fs.ModeSymlink == 0 && !st.Mode().IsRegular() {
		return errorf("%s %s: is %s, expected a directory", o.Flag, o.Name, Kind(st.Mode()))
	}
	if st, err := os.Stat(o.Name); err == nil {
		if !st.IsDir() {
			return errorf("%s %s: is a file, expected a directory", o.Flag, o.Name)
		}
		return Probe(Path{Flag: o.Flag, Name: filepath.Join(o.Name, "probe")})
	}
	return Probe(Path{Flag: o.Flag, Name: filepath.Clean(o.Name), MakeDirs: o.MakeDirs})
}

// Lock makes this process the one writer of path until release: a second
// process asking for it gets an error naming the holder. The lock is an
// flock on a hidden file beside path; the kernel drops it when the process
// dies, however it dies. The file path names (through links) is locked
// too, by identity (an open-file-description lock on it, which follows
// the file each Write publishes), so that two runs cannot write one file
// under two names (a hard or a symbolic link). Once the lock is held,
// temporary files of path left by dead writers are removed.
func Lock(flag, path string) (release func(), err error) {
	lockName := filepath.Join(filepath.Dir(path), stem(path)+".lock")
	for {
		f, err := os.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, errorf("%s %s: cannot create its lock file: %v", flag, path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder := make([]byte, 32)
			n, _ := f.ReadAt(holder, 0)
			f.Close()
			who := "another process"
			if pid, err := strconv.Atoi(strings.TrimSpace(string(holder[:n]))); err == nil {
				who = fmt.Sprintf("another process (pid %d)", pid)
			}
			return nil, errorf("%s %s: %s is writing it: give each run its own file", flag, path, who)
		}
		// The holder before us may have removed the file after we opened
		// it: the lock counts only on the file that has the name.
		held, e1 := f.Stat()
		now, e2 := os.Stat(lockName)
		if e1 != nil || e2 != nil || !os.SameFile(held, now) {
			f.Close()
			continue
		}
		if err := lockIdentity(flag, path); err != nil {
			f.Close()
			return nil, err
		}
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		RemoveStale(path)
		return func() {
			unlockIdentity(path)
			os.Remove(lockName)
			f.Close()
		}, nil
	}
}
