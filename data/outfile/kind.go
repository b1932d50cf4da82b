package outfile

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// Kind names what a file mode is, for messages: "a directory", "a FIFO",
// "a character device", "a block device", "a socket", "a symbolic link",
// "a regular file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Replaceable checks that an output file may be written at path: nothing
// is there, or a regular file, or a symbolic link (which the write replaces:
// it never writes through a link). A directory, a device, a FIFO or a
// socket is refused with one line: renaming a file over it would replace a
// device node (as root, /dev/null), and writing through it would block or
// feed whatever reads it.
func Replaceable(flag, path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil // absent (or unreachable: the probe of its directory says why)
	}
	m := st.Mode()
	if m.IsRegular() || m&fs.ModeSymlink != 0 {
		return nil
	}
	if m.IsDir() {
		return errorf("%s %s: is a directory, expected a file name", flag, path)
	}
	return errorf("%s %s: is %s, expected a regular file or a new name: an output never replaces or writes through it", flag, path, Kind(m))
}

// Identity locks: an open descriptor of the file a locked output's name
// holds, with an open-file-description write lock (fcntl F_OFD_SETLK) on
// it, so that a second run naming the same file under another name (a
// hard link, a symbolic link) is refused too. They are not flock locks:
// libhdf5 flocks the files it opens, and a checkpoint is read (--resume)
// by the run that holds it. Keyed by the output's path as Lock got it.
var (
	idMu    sync.Mutex
	idLocks = map[string]*os.File{}
)

// fOFDSetlk is F_OFD_SETLK on Linux.
const fOFDSetlk = 37

// lockFile takes the identity lock on the regular file at path (following
// links): nil, nil when there is no such file or it cannot be opened for
// writing (nothing to share then).
func lockFile(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), fOFDSetlk, &lk); err != nil {
		f.Close()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, errBusy
		}
		return nil, nil // a file system without such locks: the name lock stands
	}
	return f, nil
}

var errBusy = errors.New("busy")

// lockIdentity takes the identity lock of the locked output path.
func lockIdentity(flag, path string) error {
	f, err := lockFile(path)
	if err == errBusy {
		return errorf("%s %s: another run is writing the same file (under this name or another: a hard or symbolic link): give each run its own file", flag, path)
	}
	idMu.Lock()
	idLocks[path] = f
	idMu.Unlock()
	return nil
}

// relock moves path's identity lock, if it holds one, to file (the
// temporary file about to be renamed over path), so that the lock follows
// the content the name will hold.
func relock(path, file string) {
	idMu.Lock()
	defer idMu.Unlock()
	old, ok := idLocks[path]
	if !ok {
		return
	}
	f, err := lockFile(file)
	if err != nil || f == nil {
		return
	}
	if old != nil {
		old.Close()
	}
	idLocks[path] = f
}

// unlockIdentity drops path's identity lock.
func unlockIdentity(path string) {
	idMu.Lock()
	defer idMu.Unlock()
	if f := idLocks[path]; f != nil {
		f.Close()
	}
	delete(idLocks, path)
}

// OpenRegular opens an input file for reading, following links, and
// refuses anything but a regular file without blocking on it (a FIFO
// would block the open or the read, /dev/zero never ends): the error says
// what the file is ("is a FIFO, expected a regular file"), or is the
// open's own, which says why (no such file, permission denied, file name
// too long).
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("is " + Kind(st.Mode()) + ", expected a regular file")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
