package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// Fuzzing the HDF5 readers. The fuzzer does not write HDF5 files itself (a
// random byte string is almost never one); it edits valid small files
// written by this package. Its input is a list of 4-byte edits, each a
// 24-bit little-endian offset and a byte XORed into the file there, and a
// count of bytes cut off the end of the (last) file.
//
// The offsets address the values in the files, not their HDF5 structure:
// the data of every dataset, the numeric attribute values and the bytes of
// the strings in the global heap (h5Values finds them). libhdf5 1.10 is not
// memory-safe on corrupt structural metadata: an edited object header or
// global heap size can crash the process inside H5Aread (SIGSEGV in
// H5HG_read) before any Go check runs, and whether it crashes depends on the
// heap layout, so such inputs cannot even be screened out reliably. The Go
// code cannot guard against that; what it must get right is every value it
// reads, and those are what the fuzzer edits. With GNN_SPMD_FUZZ_H5_RAW=1 the
// offsets address the whole files instead (modulo their size), which
// exercises libhdf5 itself and finds such crashes within seconds.
//
// Every call must return an *InputError or a result that holds the
// invariants the trainer relies on, without a panic, a hang, an allocation
// out of proportion to the files, or a file descriptor left open (an HDF5
// handle leaked on an error path keeps its file open). libhdf5 is not
// instrumented, so the coverage that guides the fuzzer is the Go checks'.

// maxFuzzEdits bounds the edits applied from one input.
const maxFuzzEdits = 64

// fuzzLimits bound one call of a reader under fuzzing.
type fuzzLimits struct {
	time  time.Duration // longer is a hang (the fuzzer kills a worker after 10 s)
	alloc uint64        // bytes the call may allocate on the Go heap
}

// h5Limits are the limits for reading a file of size bytes: the readers
// allocate nothing before checking it against the file size.
func h5Limits(size int) fuzzLimits {
	return fuzzLimits{time: 5 * time.Second, alloc: 32<<20 + 64*uint64(size)}
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

// guardedCall runs load on its own goroutine and fails t when it panics,
// runs past lim.time, allocates more than lim.alloc bytes or leaves more
// file descriptors open than before. It returns load's error.
func guardedCall(t *testing.T, lim fuzzLimits, load func() error) error {
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
	timer := time.NewTimer(lim.time)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		t.Fatalf("still running after %v: a hang", lim.time)
	}
	if r.panic != nil {
		t.Fatalf("panic: %v\n%s", r.panic, r.stack)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > lim.alloc {
		t.Fatalf("allocated %d bytes, more than the %d allowed", d, lim.alloc)
	}
	if n := openFDs(); fds >= 0 && n > fds {
		t.Fatalf("%d file descriptors open after the call, %d before: a leaked handle", n, fds)
	}
	return r.err
}

// requireInputError fails t unless err is an *InputError naming one of files.
func requireInputError(t *testing.T, err error, files ...string) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T), want an *InputError", err, err)
	}
	if ie.Msg == "" || !slices.Contains(files, ie.File) {
		t.Fatalf("error %q names file %q, want one of %q and a message", err, ie.File, files)
	}
}

// pinnedTime replaces the modification times libhdf5 stores in object
// headers, so that the base files, and with them the fuzz corpus, are the
// same bytes on every run.
const pinnedTime = 1_600_000_000

// pinH5Times overwrites every 4-byte little-endian value in [t0, t1] (Unix
// seconds around the write; nothing else in the small test files comes
// near) with pinnedTime, and returns how many it replaced. The files use
// the original HDF5 format, whose object headers carry no checksum.
func pinH5Times(b []byte, t0, t1 int64) int {
	n := 0
	for i := 0; i+4 <= len(b); i++ {
		if v := int64(binary.LittleEndian.Uint32(b[i:])); v >= t0 && v <= t1 {
			binary.LittleEndian.PutUint32(b[i:], pinnedTime)
			n++
		}
	}
	return n
}

// h5FuzzBase writes one or more files with write(dir), reads them back with
// pinned times, checks that check(dir) accepts the pinned copies, and
// returns their bytes by name.
func h5FuzzBase(f *testing.F, names []string, write func(dir string) error, check func(dir string) error) map[string][]byte {
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
		pinH5Times(b, t0, t1)
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

// h5RawEnv set to 1 makes the HDF5 fuzz targets edit anywhere in the files.
const h5RawEnv = "GNN_SPMD_FUZZ_H5_RAW"

// h5Image is the base files of an HDF5 fuzz target, concatenated into one
// address space, with the ranges of it that the fuzzer edits.
type h5Image struct {
	data    []byte
	starts  []int    // where each file begins in data, then len(data)
	regions [][2]int // editable ranges of data, ascending
	total   int      // their total length
	raw     bool     // edit anywhere (h5RawEnv)
}

func newH5Image(files ...[]byte) *h5Image {
	im := &h5Image{raw: os.Getenv(h5RawEnv) == "1"}
	for _, b := range files {
		im.starts = append(im.starts, len(im.data))
		for _, r := range h5Values(b) {
			im.regions = append(im.regions, [2]int{len(im.data) + r[0], len(im.data) + r[1]})
			im.total += r[1] - r[0]
		}
		im.data = append(im.data, b...)
	}
	im.starts = append(im.starts, len(im.data))
	return im
}

// offset maps an edit's 24-bit offset to a byte of data.
func (im *h5Image) offset(x int) int {
	if im.raw {
		return x % len(im.data)
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

// apply returns the files with the edits applied and cut bytes (modulo its
// size) removed from the end of the last one.
func (im *h5Image) apply(edits []byte, cut uint16) [][]byte {
	b := slices.Clone(im.data)
	for k := 0; k+4 <= len(edits) && k < 4*maxFuzzEdits; k += 4 {
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

// editTo returns the edits that write val at data[off:], which must lie in
// the editable ranges.
func (im *h5Image) editTo(off int, val []byte) ([]byte, bool) {
	var e []byte
	for i, v := range val {
		x := im.data[off+i] ^ v
		if x == 0 {
			continue
		}
		o, ok := off+i, im.raw
		if !im.raw {
			o = 0
			for _, r := range im.regions {
				if off+i >= r[0] && off+i < r[1] {
					o, ok = o+off+i-r[0], true
					break
				}
				o += r[1] - r[0]
			}
		}
		if !ok {
			return nil, false
		}
		e = append(e, byte(o), byte(o>>8), byte(o>>16), x)
	}
	return e, true
}

// h5Seeds collects seed edits, found by content in the base files.
type h5Seeds struct {
	f     *testing.F
	im    *h5Image
	edits [][]byte
}

func (s *h5Seeds) add(what string, off int, val []byte) {
	if off >= 0 {
		if e, ok := s.im.editTo(off, val); ok {
			s.edits = append(s.edits, e)
			return
		}
	}
	s.f.Logf("fuzz seed %s: not found among the values of the base files; skipped", what)
}

// array adds the edit that writes val over the first occurrence of old in
// file i's editable ranges.
func (s *h5Seeds) array(i int, old, val []byte) {
	off := -1
	for _, r := range s.im.regions {
		if r[0] >= s.im.starts[i] && r[1] <= s.im.starts[i+1] {
			if k := bytes.Index(s.im.data[r[0]:r[1]], old); k >= 0 {
				off = r[0] + k
				break
			}
		}
	}
	s.add(string(old), off, val)
}

// attr adds the edit that changes an integer attribute of file i (4 or 8
// bytes) from old to val.
func (s *h5Seeds) attr(i int, name string, old, val int64) {
	b := s.im.data[s.im.starts[i]:s.im.starts[i+1]]
	enc := func(x int64, n int) []byte {
		if n == 4 {
			return leBytes(int32(x))
		}
		return leBytes(x)
	}
	off, n := -1, 0
	if v, ok := h5Attrs(b)[name]; ok {
		if n = v[1] - v[0]; bytes.Equal(b[v[0]:v[1]], enc(old, n)) {
			off = s.im.starts[i] + v[0]
		}
	}
	s.add(name, off, enc(val, n))
}

// h5Attrs finds the attribute messages of an HDF5 file (version 1
// messages, as libhdf5 1.10 writes by default) and returns the byte range of
// each numeric attribute's value by name. A message is: type 0x000C, its
// size, flags and 3 reserved bytes; then version 1, a reserved byte, the
// sizes of the name, datatype and dataspace, and the three, each padded to
// 8 bytes; then the value.
func h5Attrs(b []byte) map[string][2]int {
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

// h5Values returns the byte ranges of an HDF5 file's values, ascending: the
// data of its contiguous datasets (from their layout messages: type 0x0008,
// size 24, version 3, class 1, address, size), its numeric attribute values
// and the objects of its global heap collections (signature "GCOL", version
// 1, collection size; objects of index, reference count, reserved and size,
// up to the free-space object 0), which hold the variable-length strings.
func h5Values(b []byte) [][2]int {
	var r [][2]int
	for i := 0; i+26 <= len(b); i++ {
		if bytes.HasPrefix(b[i:], []byte{8, 0, 24, 0}) && b[i+5] == 0 && b[i+6] == 0 && b[i+7] == 0 && b[i+8] == 3 && b[i+9] == 1 {
			addr, size := binary.LittleEndian.Uint64(b[i+10:]), binary.LittleEndian.Uint64(b[i+18:])
			if size > 0 && addr < uint64(len(b)) && size <= uint64(len(b))-addr {
				r = append(r, [2]int{int(addr), int(addr + size)})
			}
		}
	}
	for _, v := range h5Attrs(b) {
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

func leBytes(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzReadH5 reads edited copies of a small dataset file: ReadH5 returns an
// *InputError or a dataset that passes Validate.
func FuzzReadH5(f *testing.F) {
	ds := randomDataset(f, 5, 12, 30, 3, 3, "s")
	files := h5FuzzBase(f, []string{"d.h5"},
		func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return WriteH5(filepath.Join(dir, "d.h5"), ds)
		},
		func(dir string) error { _, err := ReadH5(filepath.Join(dir, "d.h5")); return err })
	im := newH5Image(files["d.h5"])

	s := &h5Seeds{f: f, im: im}
	g, sp := ds.Graph, ds.Splits["s"]
	s.attr(0, "num_nodes", int64(g.N), math.MaxInt32)
	s.attr(0, "num_nodes", int64(g.N), -1)
	s.attr(0, "num_nodes", int64(g.N), int64(g.N-1))
	s.attr(0, "num_edges", g.NumEdges(), 1<<40)
	s.attr(0, "num_edges", g.NumEdges(), g.NumEdges()+1)
	s.attr(0, "num_features", int64(ds.NumFeatures), math.MaxInt32)
	s.attr(0, "num_features", int64(ds.NumFeatures), 0)
	s.attr(0, "num_classes", int64(ds.NumClasses), 1)
	s.attr(0, "version", 1, 2)
	s.array(0, []byte(h5Format), []byte("gnn-spmd-datasex"))
	s.array(0, byteView(g.Indptr[1:3]), leBytes([]int64{g.Indptr[2] + 1, g.Indptr[2]}))
	s.array(0, byteView(g.Indices[:4]), leBytes([]int32{g.Indices[0], g.Indices[1], int32(g.N), -5}))
	s.array(0, byteView(ds.Features[:4]), leBytes([]float32{ds.Features[0], float32(math.NaN()), float32(math.Inf(-1)), ds.Features[3]}))
	s.array(0, byteView(ds.Labels), leBytes(append([]int32{int32(ds.NumClasses)}, ds.Labels[1:]...)))
	s.array(0, byteView(sp.Valid), leBytes(slices.Repeat([]int32{sp.Train[0]}, len(sp.Valid))))
	s.array(0, byteView(sp.Test), leBytes(slices.Repeat([]int32{sp.Test[0]}, len(sp.Test))))
	f.Add([]byte(nil), uint16(0))
	for _, e := range s.edits {
		f.Add(e, uint16(0))
	}
	f.Add([]byte(nil), uint16(len(im.data)/2))
	f.Add([]byte(nil), uint16(1))

	path := filepath.Join(f.TempDir(), "d.h5") // rewritten for each input
	f.Fuzz(func(t *testing.T, edits []byte, cut uint16) {
		b := im.apply(edits, cut)[0]
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var got *Dataset
		err := guardedCall(t, h5Limits(len(b)), func() (err error) {
			got, err = ReadH5(path)
			return err
		})
		if err != nil {
			requireInputError(t, err, path)
			return
		}
		if err := got.Validate(path); err != nil {
			t.Fatalf("ReadH5 returned a dataset that fails Validate: %v", err)
		}
	})
}

// The part FuzzReadShard reads, of how many.
const fuzzShardPart, fuzzShardParts = 1, 3

// FuzzReadShard reads edited copies of a partition: meta.h5 and the file of
// part 1 of 3, edited as one address space (meta.h5 first). ReadShard
// returns an *InputError or a shard that holds the invariants the trainer
// relies on.
func FuzzReadShard(f *testing.F) {
	const q, part = fuzzShardParts, fuzzShardPart
	partName := PartFileName(part)
	ds, parts := tinyPartitioned(f)
	files := h5FuzzBase(f, []string{partMetaName, partName},
		func(dir string) error { return WritePartition(dir, ds, "s", MethodRandom, 1, parts, q) },
		func(dir string) error { _, _, err := ReadShard(dir, part, q); return err })
	im := newH5Image(files[partMetaName], files[partName])

	shards, err := BuildShards(ds, "s", parts, q)
	if err != nil {
		f.Fatal(err)
	}
	sh, g := shards[part], ds.Graph
	s := &h5Seeds{f: f, im: im}
	s.attr(0, "num_parts", q, math.MaxInt32)
	s.attr(0, "num_parts", q, int64(g.N+1))
	s.attr(0, "num_nodes", int64(g.N), math.MaxInt32)
	s.attr(0, "num_edges", g.NumEdges(), -1)
	s.attr(0, "global_train", int64(len(ds.Splits["s"].Train)), int64(g.N+1))
	s.array(0, []byte(partMetaFormat), []byte("gnn-spmd-partitiox"))
	s.array(0, byteView(parts), leBytes(append([]int32{q}, parts[1:]...)))
	s.attr(1, "part", part, part+1)
	s.attr(1, "num_features", int64(ds.NumFeatures), int64(ds.NumFeatures+1))
	s.array(1, byteView(sh.Owned), leBytes(slices.Repeat([]int32{sh.Owned[0]}, len(sh.Owned))))
	s.array(1, byteView(sh.Halo), leBytes(slices.Repeat([]int32{-1}, len(sh.Halo))))
	s.array(1, byteView(sh.Indptr), leBytes(append([]int64{1}, sh.Indptr[1:]...)))
	s.array(1, byteView(sh.Indices), leBytes(append([]int32{int32(sh.NumCols())}, sh.Indices[1:]...)))
	s.array(1, byteView(sh.LoopDegree), leBytes(append(slices.Clone(sh.LoopDegree[:len(sh.LoopDegree)-1]), 0)))
	s.array(1, byteView(sh.Features), leBytes(append([]float32{float32(math.Inf(1))}, sh.Features[1:]...)))
	s.array(1, byteView(sh.Labels), leBytes(append([]int32{int32(ds.NumClasses)}, sh.Labels[1:]...)))
	f.Add([]byte(nil), uint16(0))
	for _, e := range s.edits {
		f.Add(e, uint16(0))
	}
	f.Add([]byte(nil), uint16(len(files[partName])/3))

	dir := f.TempDir() // rewritten for each input
	f.Fuzz(func(t *testing.T, edits []byte, cut uint16) {
		fs := im.apply(edits, cut)
		metaPath, partPath := filepath.Join(dir, partMetaName), filepath.Join(dir, partName)
		if err := os.WriteFile(metaPath, fs[0], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(partPath, fs[1], 0o644); err != nil {
			t.Fatal(err)
		}
		var s *Shard
		var m *PartitionMeta
		err := guardedCall(t, h5Limits(len(fs[0])+len(fs[1])), func() (err error) {
			s, m, err = ReadShard(dir, part, q)
			return err
		})
		if err != nil {
			requireInputError(t, err, metaPath, partPath)
			return
		}
		if err := checkFuzzedShard(s, m, part); err != nil {
			t.Fatalf("ReadShard returned a shard that breaks an invariant: %v", err)
		}
	})
}

// checkFuzzedShard restates the invariants the trainer relies on for a
// shard read from a file.
func checkFuzzedShard(s *Shard, m *PartitionMeta, part int) error {
	q, own, cols := m.NumParts, s.NumOwned(), s.NumCols()
	bad := func(format string, args ...any) error { return inputErrorf("shard", 0, "", format, args...) }
	switch {
	case s.Part != part || s.NumParts != q || len(m.Parts) != m.NumNodes || len(m.Stats.Parts) != q:
		return bad("part %d of %d, meta with %d parts for %d nodes and %d part stats", s.Part, s.NumParts, len(m.Parts), m.NumNodes, len(m.Stats.Parts))
	case len(s.Indptr) != own+1 || s.Indptr[0] != 0 || s.Indptr[own] != int64(len(s.Indices)):
		return bad("indptr %v for %d rows and %d indices", s.Indptr, own, len(s.Indices))
	case len(s.LoopDegree) != cols || len(s.Labels) != own || len(s.Features) != cols*s.NumFeatures:
		return bad("%d loop degrees, %d labels, %d features for %d rows, %d columns", len(s.LoopDegree), len(s.Labels), len(s.Features), own, cols)
	case len(s.RecvStart) != q+1 || s.RecvStart[0] != 0 || s.RecvStart[q] != len(s.Halo) || len(s.Send) != q:
		return bad("recv start %v, %d send lists for %d halo rows", s.RecvStart, len(s.Send), len(s.Halo))
	case len(s.Send[part]) != 0 || s.RecvStart[part] != s.RecvStart[part+1]:
		return bad("the part sends to or receives from itself")
	}
	for _, p := range m.Parts {
		if p < 0 || int(p) >= q {
			return bad("node in part %d", p)
		}
	}
	for i, v := range s.Owned {
		if v < 0 || int(v) >= m.NumNodes || int(m.Parts[v]) != part {
			return bad("owned node %d is %d", i, v)
		}
	}
	for o := range q {
		if s.RecvStart[o] > s.RecvStart[o+1] {
			return bad("recv start %v decreases", s.RecvStart)
		}
		for _, v := range s.Halo[s.RecvStart[o]:s.RecvStart[o+1]] {
			if v < 0 || int(v) >= m.NumNodes || int(m.Parts[v]) != o {
				return bad("halo node %d is not in part %d", v, o)
			}
		}
		for _, r := range s.Send[o] {
			if r < 0 || int(r) >= own {
				return bad("send row %d to part %d", r, o)
			}
		}
	}
	for i := range own {
		if s.Indptr[i+1] < s.Indptr[i] {
			return bad("indptr decreases at %d", i)
		}
	}
	for _, c := range s.Indices {
		if c < 0 || int(c) >= cols {
			return bad("column %d of %d", c, cols)
		}
	}
	for _, d := range s.LoopDegree {
		if d < 1 {
			return bad("loop degree %d", d)
		}
	}
	for _, y := range s.Labels {
		if y < -1 || int(y) >= s.NumClasses {
			return bad("label %d of %d classes", y, s.NumClasses)
		}
	}
	for _, v := range s.Features {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return bad("feature %v", v)
		}
	}
	for _, ids := range [][]int32{s.Train, s.Valid, s.Test} {
		for _, r := range ids {
			if r < 0 || int(r) >= own {
				return bad("split row %d of %d", r, own)
			}
		}
	}
	return nil
}
