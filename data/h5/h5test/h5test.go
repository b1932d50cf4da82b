// Package h5test is the fuzzing support of the project's HDF5 readers: it
// edits the values of small valid files (an Image of them), and calls a
// reader under limits of time, memory and open files (Call).
package h5test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// Fuzzing the HDF5 readers. The fuzzer does not write HDF5 files itself (a
// random byte string is almost never one); it edits valid small files
// written by the package under test. Its input is a list of 4-byte edits,
// each a 24-bit little-endian offset and a byte XORed into the file there,
// and a count of bytes cut off the end of the (last) file.
//
// An offset with its top bit clear addresses the values in the files: the
// data of every dataset, the numeric attribute values and the bytes of the
// strings in the global heap (h5Values finds them), so that the fuzzer
// reaches every check of a value the Go code makes. With the top bit set,
// the other 23 bits address the whole files (modulo their size): object
// headers, heaps, B-trees, the superblock. libhdf5 1.10 can crash, hang or
// allocate without bound on such edits; h5.Read scans every file in a
// child process first (data/h5/scan.go), so that they too must end in an
// *InputError.
//
// Every call must return an *InputError or a result that holds the
// invariants the trainer relies on, without a panic, a hang, an allocation
// out of proportion to the files, or a file descriptor left open (an HDF5
// handle leaked on an error path keeps its file open). libhdf5 is not
// instrumented, so the coverage that guides the fuzzer is the Go checks'.

// MaxEdits bounds the edits applied from one input.
const MaxEdits = 64

// Limits bound one call of a reader under fuzzing.
type Limits struct {
	Time  time.Duration // longer is a hang (the fuzzer kills a worker after 10 s)
	Alloc uint64        // bytes the call may allocate on the Go heap
}

// FileLimits are the limits for reading a file of size bytes: the readers
// allocate nothing before checking it against the file size, and the scan
// of a file that makes libhdf5 spin ends after 4 s of CPU time.
func FileLimits(size int) Limits {
	return Limits{Time: 8 * time.Second, Alloc: 32<<20 + 64*uint64(size)}
}

// openFDs is the number of open file descriptors of the process, -1 when
// /proc is not available.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// Call runs load on its own goroutine and fails t when it panics,
// runs past lim.Time, allocates more than lim.Alloc bytes or leaves more
// file descriptors open than before. It returns load's error.
func Call(t *testing.T, lim Limits, load func() error) error {
	t.Helper()
	fds := openFDs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	type result struct {
		err   error
		panic any
		stack []byte
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.panic, r.stack = p, debug.Stack()
			}
			done <- r
		}()
		r.err = load()
	}()
	timer := time.NewTimer(lim.Time)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		t.Fatalf("still running after %v: a hang", lim.Time)
	}
	if r.panic != nil {
		t.Fatalf("panic: %v\n%s", r.panic, r.stack)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > lim.Alloc {
		t.Fatalf("allocated %d bytes, more than the %d allowed", d, lim.Alloc)
	}
	if n := openFDs(); fds >= 0 && n > fds {
		t.Fatalf("%d file descriptors open after the call, %d before: a leaked handle", n, fds)
	}
	return r.err
}

// RequireInputError fails t unless err is an *InputError naming one of files.
func RequireInputError(t *testing.T, err error, files ...string) {
	t.Helper()
	var ie *data.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T), want a *data.InputError", err, err)
	}
	if ie.Msg == "" || !slices.Contains(files, ie.File) {
		t.Fatalf("error %q names file %q, want one of %q and a message", err, ie.File, files)
	}
}

// pinnedTime replaces the modification times libhdf5 stores in object
// headers, so that the base files, and with them the fuzz corpus, are the
// same bytes on every run.
const pinnedTime = 1_600_000_000

// pinTimes overwrites every 4-byte little-endian value in [t0, t1] (Unix
// seconds around the write; nothing else in the small test files comes
// near) with pinnedTime, and returns how many it replaced. The files use
// the original HDF5 format, whose object headers carry no checksum.
func pinTimes(b []byte, t0, t1 int64) int {
	n := 0
	for i := 0; i+4 <= len(b); i++ {
		if v := int64(binary.LittleEndian.Uint32(b[i:])); v >= t0 && v <= t1 {
			binary.LittleEndian.PutUint32(b[i:], pinnedTime)
			n++
		}
	}
	return n
}

// Base writes one or more files with write(dir), reads them back with
// pinned times, checks that check(dir) accepts the pinned copies, and
// returns their bytes by name.
func Base(f *testing.F, names []string, write func(dir string) error, check func(dir string) error) map[string][]byte {
	f.Helper()
	dir := filepath.Join(f.TempDir(), "base")
	t0 := time.Now().Unix() - 2
	if err := write(dir); err != nil {
		f.Fatal(err)
	}
	t1 := time.Now().Unix() + 2
	out := map[string][]byte{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		pinTimes(b, t0, t1)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			f.Fatal(err)
		}
		out[name] = b
	}
	if err := check(dir); err != nil { // also initialises libhdf5 before fds are counted
		f.Fatalf("base files with pinned times: %v", err)
	}
	return out
}

// anywhere marks an edit's offset as one into the whole files.
const anywhere = 1 << 23

// Image is the base files of an HDF5 fuzz target, concatenated into one
// address space, with the ranges of it that the fuzzer edits.
type Image struct {
	Data    []byte
	starts  []int    // where each file begins in data, then len(data)
	regions [][2]int // editable ranges of data, ascending
	total   int      // their total length
}

func NewImage(files ...[]byte) *Image {
	im := &Image{}
	for _, b := range files {
		im.starts = append(im.starts, len(im.Data))
		for _, r := range Values(b) {
			im.regions = append(im.regions, [2]int{len(im.Data) + r[0], len(im.Data) + r[1]})
			im.total += r[1] - r[0]
		}
		im.Data = append(im.Data, b...)
	}
	im.starts = append(im.starts, len(im.Data))
	return im
}

// offset maps an edit's 24-bit offset to a byte of data.
func (im *Image) offset(x int) int {
	if x&anywhere != 0 {
		return (x &^ anywhere) % len(im.Data)
	}
	x %= im.total
	for _, r := range im.regions {
		if x < r[1]-r[0] {
			return r[0] + x
		}
		x -= r[1] - r[0]
	}
	panic("unreachable")
}

// Apply returns the files with the edits applied and cut bytes (modulo its
// size) removed from the end of the last one.
func (im *Image) Apply(edits []byte, cut uint16) [][]byte {
	b := slices.Clone(im.Data)
	for k := 0; k+4 <= len(edits) && k < 4*MaxEdits; k += 4 {
		b[im.offset(int(edits[k])|int(edits[k+1])<<8|int(edits[k+2])<<16)] ^= edits[k+3]
	}
	var files [][]byte
	for i := range len(im.starts) - 1 {
		files = append(files, b[im.starts[i]:im.starts[i+1]])
	}
	last := files[len(files)-1]
	files[len(files)-1] = last[:len(last)-int(cut)%len(last)]
	return files
}

// editTo returns the edits that write val at data[off:]: value offsets
// where it lies among the values, else offsets into the whole files.
func (im *Image) editTo(off int, val []byte) ([]byte, bool) {
	var e []byte
	for i, v := range val {
		x := im.Data[off+i] ^ v
		if x == 0 {
			continue
		}
		o, ok := 0, false
		for _, r := range im.regions {
			if off+i >= r[0] && off+i < r[1] {
				o, ok = o+off+i-r[0], true
				break
			}
			o += r[1] - r[0]
		}
		if !ok {
			if off+i >= anywhere {
				return nil, false
			}
			o = (off + i) | anywhere
		}
		e = append(e, byte(o), byte(o>>8), byte(o>>16), x)
	}
	return e, true
}

// Seeds collects seed edits, found by content in the base files.
type Seeds struct {
	F     *testing.F
	Im    *Image
	Edits [][]byte
}

func (s *Seeds) add(what string, off int, val []byte) {
	if off >= 0 {
		if e, ok := s.Im.editTo(off, val); ok {
			s.Edits = append(s.Edits, e)
			return
		}
	}
	s.F.Logf("fuzz seed %s: not found among the values of the base files; skipped", what)
}

// Array adds the edit that writes val over the first occurrence of old in
// file i's editable ranges.
func (s *Seeds) Array(i int, old, val []byte) {
	off := -1
	for _, r := range s.Im.regions {
		if r[0] >= s.Im.starts[i] && r[1] <= s.Im.starts[i+1] {
			if k := bytes.Index(s.Im.Data[r[0]:r[1]], old); k >= 0 {
				off = r[0] + k
				break
			}
		}
	}
	s.add(string(old), off, val)
}

// Attr adds the edit that changes an integer attribute of file i (4 or 8
// bytes) from old to val.
func (s *Seeds) Attr(i int, name string, old, val int64) {
	b := s.Im.Data[s.Im.starts[i]:s.Im.starts[i+1]]
	enc := func(x int64, n int) []byte {
		if n == 4 {
			return LE(int32(x))
		}
		return LE(x)
	}
	off, n := -1, 0
	if v, ok := Attrs(b)[name]; ok {
		if n = v[1] - v[0]; bytes.Equal(b[v[0]:v[1]], enc(old, n)) {
			off = s.Im.starts[i] + v[0]
		}
	}
	s.add(name, off, enc(val, n))
}

// Structure adds edits of file i's HDF5 structure: one byte of the end-of-
// file address in the superblock, and of the field after the signature of
// the first local heap, B-tree node, symbol table node and global heap.
func (s *Seeds) Structure(i int) {
	b := s.Im.Data[s.Im.starts[i]:s.Im.starts[i+1]]
	offs := []int{40}
	for _, sig := range []string{"HEAP", "TREE", "SNOD", "GCOL"} {
		if k := bytes.Index(b, []byte(sig)); k >= 0 {
			offs = append(offs, k+8)
		}
	}
	for _, off := range offs {
		if off < len(b) {
			s.add("structure", s.Im.starts[i]+off, []byte{b[off] ^ 0xff})
		}
	}
}

// Attrs finds the attribute messages of an HDF5 file (version 1
// messages, as libhdf5 1.10 writes by default) and returns the byte range of
// each numeric attribute's value by name. A message is: type 0x000C, its
// size, flags and 3 reserved bytes; then version 1, a reserved byte, the
// sizes of the name, datatype and dataspace, and the three, each padded to
// 8 bytes; then the value.
func Attrs(b []byte) map[string][2]int {
	attrs := map[string][2]int{}
	pad := func(n int) int { return (n + 7) &^ 7 }
	for i := 0; i+16 <= len(b); i++ {
		if b[i] != 0x0c || b[i+1] != 0 || b[i+5] != 0 || b[i+6] != 0 || b[i+7] != 0 || b[i+8] != 1 || b[i+9] != 0 {
			continue
		}
		end := i + 8 + int(binary.LittleEndian.Uint16(b[i+2:]))
		ns := int(binary.LittleEndian.Uint16(b[i+10:]))
		dt := i + 16 + pad(ns)
		if ns < 2 || dt+8 > end || end > len(b) || b[i+16+ns-1] != 0 {
			continue
		}
		val := dt + pad(int(binary.LittleEndian.Uint16(b[i+12:]))) + pad(int(binary.LittleEndian.Uint16(b[i+14:])))
		size := int(binary.LittleEndian.Uint32(b[dt+4:]))
		if class := b[dt] & 0x0f; (class == 0 || class == 1) && size <= 8 && val+size <= end {
			attrs[string(b[i+16:i+16+ns-1])] = [2]int{val, val + size}
		}
	}
	return attrs
}

// Values returns the byte ranges of an HDF5 file's values, ascending: the
// data of its contiguous datasets (from their layout messages: type 0x0008,
// size 24, version 3, class 1, address, size), its numeric attribute values
// and the objects of its global heap collections (signature "GCOL", version
// 1, collection size; objects of index, reference count, reserved and size,
// up to the free-space object 0), which hold the variable-length strings.
func Values(b []byte) [][2]int {
	var r [][2]int
	for i := 0; i+26 <= len(b); i++ {
		if bytes.HasPrefix(b[i:], []byte{8, 0, 24, 0}) && b[i+5] == 0 && b[i+6] == 0 && b[i+7] == 0 && b[i+8] == 3 && b[i+9] == 1 {
			addr, size := binary.LittleEndian.Uint64(b[i+10:]), binary.LittleEndian.Uint64(b[i+18:])
			if size > 0 && addr < uint64(len(b)) && size <= uint64(len(b))-addr {
				r = append(r, [2]int{int(addr), int(addr + size)})
			}
		}
	}
	for _, v := range Attrs(b) {
		r = append(r, v)
	}
	for i := 0; ; i++ {
		k := bytes.Index(b[i:], []byte("GCOL\x01"))
		if k < 0 || i+k+16 > len(b) {
			break
		}
		i += k
		end := i + int(min(binary.LittleEndian.Uint64(b[i+8:]), uint64(len(b)-i)))
		for p := i + 16; p+16 <= end && binary.LittleEndian.Uint16(b[p:]) != 0; {
			size := int(min(binary.LittleEndian.Uint64(b[p+8:]), uint64(end-p-16)))
			r = append(r, [2]int{p + 16, p + 16 + size})
			p += 16 + (size+7)&^7
		}
	}
	slices.SortFunc(r, func(x, y [2]int) int { return x[0] - y[0] })
	// Drop empty and overlapping ranges (none in a sound file).
	out := r[:0]
	for _, x := range r {
		if x[1] > x[0] && (len(out) == 0 || x[0] >= out[len(out)-1][1]) {
			out = append(out, x)
		}
	}
	return out
}

func LE(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}
