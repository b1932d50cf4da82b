package ogb

// Fast, allocation-free parsing of large CSV-like text files: a reader cuts the
// (decompressed) stream into blocks of whole lines and GOMAXPROCS workers parse
// the blocks concurrently, each writing straight into preallocated output
// rows. Line numbers stay exact because every block knows the number of its
// first line (the reader counts newlines as it cuts).

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// chunkSize is the size of the blocks handed to parsers. A variable so that
// tests can force many block boundaries.
var chunkSize = 1 << 20

// preallocCap caps how many rows an output is preallocated with before it
// grows on demand. Only tests lower it, to exercise growth.
var preallocCap = math.MaxInt

// maxGzipRatio bounds how much deflate can expand its input (258-byte matches
// coded in 2 bits give 1032:1); used to bound preallocation by the file size.
const maxGzipRatio = 1032

// textFile is an open input file, transparently decompressed if gzip'd.
type textFile struct {
	path  string
	r     io.Reader
	f     *os.File
	bound int64 // upper bound on the decompressed size, for preallocation
}

func (t *textFile) Close() error { return t.f.Close() }

// openText opens dir/base.csv.gz, or dir/base.csv when there is no .gz. When
// neither exists it returns (nil, nil) if optional and an *data.InputError if not.
func openText(dir, base string, optional bool) (*textFile, error) {
	for _, ext := range []string{".csv.gz", ".csv"} {
		p := filepath.Join(dir, base+ext)
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, data.InputErrorf(p, 0, "", "cannot open: %v", unwrapPathError(err))
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			err = errors.New("is a directory, expected a file")
		}
		if err != nil {
			f.Close()
			return nil, data.InputErrorf(p, 0, "", "%v", unwrapPathError(err))
		}
		tf := &textFile{path: p, r: f, f: f, bound: st.Size()}
		if ext == ".csv.gz" {
			zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
			if err != nil {
				f.Close()
				return nil, data.InputErrorf(p, 0, "", "not a readable gzip file: %s", describeReadError(err))
			}
			tf.r = zr
			tf.bound = st.Size()*maxGzipRatio + 1024
		}
		return tf, nil
	}
	if optional {
		return nil, nil
	}
	return nil, data.InputErrorf(filepath.Join(dir, base+".csv.gz"), 0, "", "missing: expected %s.csv.gz or %s.csv", base, base)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// describeReadError turns a decompression or read failure into a message.
func describeReadError(err error) string {
	var corrupt flate.CorruptInputError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of file (truncated gzip stream)"
	case errors.Is(err, gzip.ErrChecksum):
		return "gzip checksum mismatch (corrupt file)"
	case errors.Is(err, gzip.ErrHeader):
		return "bad gzip header (not a gzip file, or junk after the compressed data)"
	case errors.As(err, &corrupt):
		return "corrupt gzip data: " + err.Error()
	}
	return "read failed: " + err.Error()
}

// chunkPool keeps block buffers between files: a dataset has dozens of small
// split files, and zeroing a fresh block for each costs more than parsing it.
var chunkPool sync.Pool

// lineChunk is a block of whole lines; only the last block of a file may end
// without '\n'.
type lineChunk struct {
	buf  []byte
	line int // 1-based number of the first line
	n    int // number of lines in buf
}

// lineSink receives the blocks of one file.
type lineSink interface {
	// reserve runs in the reading goroutine, in file order, before c is
	// parsed. It may reallocate the output after calling drain, which waits
	// until no block is being parsed.
	reserve(c *lineChunk, drain func()) *data.InputError
	// parse converts the lines of c into output rows c.line-1 ... It runs
	// concurrently with other calls on other blocks.
	parse(c *lineChunk) *data.InputError
}

// scanLines feeds r to s block by block and returns the number of lines. The
// error is the parse error with the lowest line number (so the first bad line
// of the file, whatever the scheduling), else the read error.
func scanLines(path string, r io.Reader, s lineSink) (int, error) {
	w := runtime.GOMAXPROCS(0)
	free := make(chan []byte, 2*w+1) // buffer tokens; bounds memory in flight
	for range cap(free) {
		free <- nil
	}
	defer func() { // recycle the buffers for the next file
		for range cap(free) {
			if b := <-free; cap(b) == chunkSize {
				chunkPool.Put(&b)
			}
		}
	}()
	work := make(chan *lineChunk, w)
	var (
		inflight, workers sync.WaitGroup
		mu                sync.Mutex
		first             *data.InputError
		firstLine         atomic.Int64 // line of first, for skipping later blocks
	)
	firstLine.Store(math.MaxInt64)
	record := func(e *data.InputError) {
		mu.Lock()
		if first == nil || e.Line < first.Line {
			first = e
			firstLine.Store(int64(e.Line))
		}
		mu.Unlock()
	}
	for range w {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c := range work {
				if int64(c.line) < firstLine.Load() {
					if e := s.parse(c); e != nil {
						record(e)
					}
				}
				free <- c.buf[:0]
				inflight.Done()
			}
		}()
	}

	line := 1         // number of the next line to dispatch
	var carry []byte  // incomplete last line of the previous block
	var readErr error // first read failure
	for firstLine.Load() == math.MaxInt64 {
		buf := <-free
		if buf == nil {
			if p, ok := chunkPool.Get().(*[]byte); ok && cap(*p) == chunkSize {
				buf = *p
			}
		}
		if need := len(carry) + chunkSize; cap(buf) < need {
			// Only a line longer than a block gets here; doubling keeps
			// reading it linear in its length.
			buf = make([]byte, max(need, 2*len(carry)))
		}
		buf = buf[:cap(buf)]
		n := copy(buf, carry)
		eof := false
		for n < len(buf) && !eof && readErr == nil {
			m, err := r.Read(buf[n:])
			n += m
			if err == io.EOF {
				eof = true
			} else if err != nil {
				readErr = err
			}
		}
		data := buf[:n]
		cut := bytes.LastIndexByte(data, '\n') + 1
		if eof {
			cut = n // the last line may lack its '\n'
		}
		carry = append(carry[:0], data[cut:]...)
		if limit := maxLine(s); len(carry) > limit && !eof && readErr == nil {
			// A line longer than the file's rows can be: refused before
			// the buffer doubles without bound (a gigabyte of digits
			// with no newline).
			free <- buf[:0]
			record(lineTooLong(path, line+bytes.Count(data[:cut], []byte{'\n'}), limit, s))
			break
		}
		if cut == 0 {
			free <- buf[:0]
			if eof || readErr != nil {
				break
			}
			continue // a line longer than the block: read on with a bigger one
		}
		c := &lineChunk{buf: data[:cut], line: line, n: bytes.Count(data[:cut], []byte{'\n'})}
		if data[cut-1] != '\n' {
			c.n++
		}
		if e := s.reserve(c, inflight.Wait); e != nil {
			// Too many lines: a header or a blank line among those
			// before the one refused is the cause to name, on its own
			// line, so those are parsed first.
			if head := headOf(c, e.Line); head != nil && s.reserve(head, inflight.Wait) == nil {
				if pe := s.parse(head); pe != nil {
					record(pe)
				}
			}
			free <- buf[:0]
			record(e)
			break
		}
		line += c.n
		inflight.Add(1)
		work <- c
		if eof || readErr != nil {
			break
		}
	}
	close(work)
	workers.Wait()
	if first != nil {
		return 0, first
	}
	if readErr != nil {
		return 0, data.InputErrorf(path, line, "", "%s", describeReadError(readErr))
	}
	return line - 1, nil
}

// fieldBytes is the most bytes one number of a text file may take (a
// float32 in its longest decimal form is under 50): a line longer than its
// fields allow is no valid line.
const fieldBytes = 256

// anyLine caps the line of a file whose width is not yet known (a
// feature file's first line): a million features' worth of fields... capped
// at 256 MiB.
const anyLine = 256 << 20

// maxLine is the longest line s can accept: its fields' worth of bytes.
func maxLine(s lineSink) int {
	if c, ok := s.(interface{ lineCap() int }); ok {
		return c.lineCap()
	}
	return anyLine
}

// lineTooLong is the error of line number line of path, longer than limit.
func lineTooLong(path string, line, limit int, s lineSink) *data.InputError {
	return data.InputErrorf(path, line, "", "line longer than %d bytes, more than %s", limit, lineWhat(s))
}

// lineWhat says what a line of s holds, for the error of one too long.
func lineWhat(s lineSink) string {
	if c, ok := s.(interface{ lineCap() int }); ok && c.lineCap() < anyLine {
		return fmt.Sprintf("its comma-separated numbers can take (%d bytes each)", fieldBytes)
	}
	return "any line of numbers this reader takes"
}

// headOf is the part of c before line number end, nil when that is none.
func headOf(c *lineChunk, end int) *lineChunk {
	k := end - c.line // lines to keep
	if k <= 0 || k >= c.n {
		return nil
	}
	at := 0
	for range k {
		at += bytes.IndexByte(c.buf[at:], '\n') + 1
	}
	return &lineChunk{buf: c.buf[:at], line: c.line, n: k}
}

// growRows returns the new row count of an output that has cur rows and must
// hold need rows, out of at most limit; the first allocation is capped by
// bound, the most rows the file's size allows.
func growRows(cur, need, limit, bound int) int {
	s := 2 * cur
	if cur == 0 {
		s = min(bound, preallocCap)
	}
	return min(limit, max(s, need))
}

// rowBound is how many lines of at least minLine bytes (newline included) a
// text of at most textBound bytes can hold.
func rowBound(textBound int64, minLine int) int {
	r := textBound/int64(minLine) + 1
	if r > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(r)
}

// endLine consumes an optional '\r' and the '\n' (or end of block) that must
// end the line at b[i].
func endLine(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '\r' {
		i++
	}
	if i == len(b) {
		return i, true
	}
	if b[i] == '\n' {
		return i + 1, true
	}
	return i, false
}

// lineAt returns the text (without "\r\n") and line number of the line of c
// that starts at byte start. Only used to build error messages.
func lineAt(c *lineChunk, start int) ([]byte, int) {
	line := c.line + bytes.Count(c.buf[:start], []byte{'\n'})
	text := c.buf[start:]
	if k := bytes.IndexByte(text, '\n'); k >= 0 {
		text = text[:k]
	}
	return bytes.TrimSuffix(text, []byte{'\r'}), line
}

// quote renders a field for an error message, shortened if long.
func quote(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

// digitRun parses the run of up to 8 decimal digits at b[i:] and returns its
// value and length. With 8 bytes available it works on all of them at once
// (SWAR), which avoids a loop whose exit mispredicts on every number.
func digitRun(b []byte, i int) (uint64, int) {
	if i+8 > len(b) {
		return digitRunTail(b, i)
	}
	// Byte k of a is b[i+k]-'0'. It is a digit iff it is < 10: bit 7 of a or
	// of a+0x76 is set otherwise. Borrows and carries only move towards later
	// bytes, so the first non-digit is found exactly.
	a := binary.LittleEndian.Uint64(b[i:]) - 0x3030303030303030
	n := bits.TrailingZeros64((a|(a+0x7676767676767676))&0x8080808080808080) >> 3
	if n == 0 {
		return 0, 0
	}
	// Keep the n digits in the top bytes (zeros below act as leading
	// zeros), then combine pairs, quads and octets of digits.
	a <<= 64 - 8*uint(n)
	a = (a & 0x0F0F0F0F0F0F0F0F) * (10<<8 + 1) >> 8
	a = (a & 0x00FF00FF00FF00FF) * (100<<16 + 1) >> 16
	a = (a & 0x0000FFFF0000FFFF) * (10000<<32 + 1) >> 32
	return a, n
}

// digitRunTail is digitRun for the last 7 bytes of a block, byte by byte.
func digitRunTail(b []byte, i int) (uint64, int) {
	var v uint64
	n := 0
	for ; n < 8 && i+n < len(b); n++ {
		d := b[i+n] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	return v, n
}

var pow10u64 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// scanInt parses an optional '-' and decimal digits at b[i:]; it returns the
// value (saturated at 1<<62 in magnitude), the index past it, and ok = false
// when there is no digit.
func scanInt(b []byte, i int) (int64, int, bool) {
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	u, n := digitRun(b, i)
	i += n
	v := int64(u)
	if n == 8 { // rare: more than 8 digits
		for ; i < len(b); i++ {
			d := b[i] - '0'
			if d > 9 {
				break
			}
			if v < 1<<58 {
				v = v*10 + int64(d)
			} else {
				v = 1 << 62
			}
		}
	}
	if neg {
		v = -v
	}
	return v, i, n > 0
}

// scanDecimal parses [+-]digits[.digits][(e|E)[+-]digits] at b[i:], with at
// least one mantissa digit, as (-1)^neg * mant * 10^exp. ok = false when b[i:]
// does not start with that form or has more than 19 mantissa digits (leading
// zeros included); the callers then fall back to strconv.
func scanDecimal(b []byte, i int) (mant uint64, exp int, neg bool, j int, ok bool) {
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	nd := 0 // mantissa digits so far; 19 always fit in a uint64
	for {
		v, n := digitRun(b, i)
		if nd+n > 19 {
			return 0, 0, neg, i, false
		}
		mant = mant*pow10u64[n] + v
		nd += n
		i += n
		if n < 8 || i >= len(b) || b[i]-'0' > 9 {
			break
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		for {
			v, n := digitRun(b, i)
			if nd+n > 19 {
				return 0, 0, neg, i, false
			}
			mant = mant*pow10u64[n] + v
			nd += n
			exp -= n
			i += n
			if n < 8 || i >= len(b) || b[i]-'0' > 9 {
				break
			}
		}
	}
	if nd == 0 {
		return 0, 0, neg, i, false
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		start, e := i, 0
		for ; i < len(b); i++ {
			d := b[i] - '0'
			if d > 9 {
				break
			}
			if e < 100000 {
				e = e*10 + int(d)
			}
		}
		if i == start {
			return 0, 0, neg, i, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	return mant, exp, neg, i, true
}

var pow10f64 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// scanFloat32 parses a finite decimal number at b[i:] and returns it
// correctly rounded to float32 (bit-identical to strconv.ParseFloat(s, 32)),
// the index past it, and ok = false for malformed, NaN, infinite or
// out-of-range values.
func scanFloat32(b []byte, i int) (float32, int, bool) {
	mant, exp, neg, j, ok := scanDecimal(b, i)
	if ok {
		if mant == 0 {
			if neg {
				return float32(math.Copysign(0, -1)), j, true
			}
			return 0, j, true
		}
		if mant <= 1<<53 && exp >= -22 && exp <= 22 {
			// mant and 10^|exp| are exact in float64, so d is x correctly
			// rounded to float64; 1e-22 <= d < 2^127, so float32(d) is normal.
			// Rounding d again to float32 gives x's correct float32 unless d
			// landed exactly halfway between two float32s (double rounding):
			// then the low 29 of its 52 fraction bits are 1000...0.
			d := float64(mant)
			if exp >= 0 {
				d *= pow10f64[exp]
			} else {
				d /= pow10f64[-exp]
			}
			if math.Float64bits(d)&(1<<29-1) != 1<<28 {
				f := float32(d)
				if neg {
					f = -f
				}
				return f, j, true
			}
		}
	} else {
		j = fieldEnd(b, i) // "nan", "inf", or too many digits
	}
	v, err := strconv.ParseFloat(string(b[i:j]), 32)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, j, false
	}
	return float32(v), j, true
}

// fieldEnd is the index of the ',', '\r' or '\n' that ends the field at b[i:].
func fieldEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == ',' || c == '\n' || c == '\r' {
			break
		}
	}
	return i
}

// scanIntegral parses a decimal with an integral value ("3", "3.0",
// "3.000000000000000000e+00": label files written from float arrays).
func scanIntegral(b []byte, i int) (int64, int, bool) {
	mant, exp, neg, j, ok := scanDecimal(b, i)
	if !ok {
		return 0, j, false
	}
	v := mant
	switch {
	case mant == 0:
	case exp > 0:
		for ; exp > 0 && v < 1<<58; exp-- {
			v *= 10
		}
		if exp > 0 {
			v = 1 << 62
		}
	case exp < 0:
		if exp < -19 {
			return 0, j, false
		}
		p := uint64(1)
		for range -exp {
			p *= 10
		}
		if v%p != 0 {
			return 0, j, false
		}
		v /= p
	}
	if v > 1<<62 {
		v = 1 << 62
	}
	if neg {
		return -int64(v), j, true
	}
	return int64(v), j, true
}

// intTable is a sink for files of integer columns, one row per line; column
// k of row r goes to cols[k][r].
type intTable struct {
	path           string
	names          []string // column names for messages, e.g. "src", "dst"
	lo, hi         int64    // accepted values: [lo, hi)
	expect         string   // what a value must be, for messages
	max            int      // most rows accepted
	tooMany        string   // message for a file with more than max rows
	bound          int      // rows the file size allows, for preallocation
	integralFloats bool     // also accept "3.0"-style integral decimals

	cols [][]int32
	base int // the row of cols[k][0]: 0, or a streamed block's first
}

func newIntTable(path string, names ...string) *intTable {
	return &intTable{path: path, names: names, cols: make([][]int32, len(names))}
}

// run reads tf into the table and trims the columns to the line count.
func (t *intTable) run(tf *textFile) (int, error) {
	t.bound = rowBound(tf.bound, 2*len(t.names))
	lines, err := scanLines(tf.path, tf.r, t)
	if err != nil {
		return 0, err
	}
	for k := range t.cols {
		t.cols[k] = t.cols[k][:lines]
	}
	return lines, nil
}

func (t *intTable) lineCap() int { return fieldBytes * (len(t.names) + 1) }

func (t *intTable) reserve(c *lineChunk, drain func()) *data.InputError {
	end := c.line - 1 + c.n
	if end > t.max {
		return &data.InputError{File: t.path, Line: t.max + 1, Msg: t.tooMany}
	}
	if cur := len(t.cols[0]); end > cur {
		drain()
		size := growRows(cur, end, t.max, t.bound)
		for k, col := range t.cols {
			t.cols[k] = make([]int32, size)
			copy(t.cols[k], col)
		}
	}
	return nil
}

func (t *intTable) parse(c *lineChunk) *data.InputError {
	b := c.buf
	row := c.line - 1 - t.base
	last := len(t.cols) - 1
	for i := 0; i < len(b); row++ {
		start := i
		for k, col := range t.cols {
			v, j, ok := scanInt(b, i)
			if t.integralFloats && j < len(b) && (b[j] == '.' || b[j]|0x20 == 'e') {
				v, j, ok = scanIntegral(b, i)
			}
			if !ok || v < t.lo || v >= t.hi {
				return t.diagnose(c, start)
			}
			col[row] = int32(v)
			i = j
			if k < last {
				if i >= len(b) || b[i] != ',' {
					return t.diagnose(c, start)
				}
				i++
			}
		}
		var ok bool
		if i, ok = endLine(b, i); !ok {
			return t.diagnose(c, start)
		}
	}
	return nil
}

// field parses one whole field the way parse does.
func (t *intTable) field(f []byte) (int64, bool) {
	v, j, ok := scanInt(f, 0)
	if t.integralFloats && j < len(f) && (f[j] == '.' || f[j]|0x20 == 'e') {
		v, j, ok = scanIntegral(f, 0)
	}
	return v, ok && j == len(f)
}

// diagnose explains why the line starting at c.buf[start] was rejected.
func (t *intTable) diagnose(c *lineChunk, start int) *data.InputError {
	text, line := lineAt(c, start)
	e := &data.InputError{File: t.path, Line: line}
	form := strings.Join(t.names, ",")
	if len(text) == 0 {
		e.Msg = "empty line, expected " + form
		return e
	}
	fields := bytes.Split(text, []byte{','})
	if len(fields) != len(t.cols) {
		e.Msg = fmt.Sprintf("has %d comma-separated fields, expected %d (%s)", len(fields), len(t.cols), form)
		return e
	}
	for k, f := range fields {
		e.Field = t.names[k]
		v, ok := t.field(f)
		if !ok {
			e.Msg = fmt.Sprintf("is %s, expected %s", quote(f), t.expect)
			return e
		}
		if v < t.lo || v >= t.hi {
			e.Msg = fmt.Sprintf("is %s, expected %s", f, t.expect)
			return e
		}
	}
	e.Field = ""
	e.Msg = "malformed line " + quote(text)
	return e
}

// floatTable is a sink for a dense matrix of finite float32 values, one row
// per line; the column count is taken from line 1.
type floatTable struct {
	path    string
	max     int    // most rows accepted
	tooMany string // message for a file with more than max rows
	bound   int64  // bound on the decompressed size, for preallocation

	f    int       // columns, set by the first reserve
	data []float32 // rows*f values
	base int       // the row of data[0]: 0, or a streamed block's first
}

func (t *floatTable) run(tf *textFile) (int, error) {
	t.bound = tf.bound
	lines, err := scanLines(tf.path, tf.r, t)
	if err != nil {
		return 0, err
	}
	t.data = t.data[:lines*t.f]
	return lines, nil
}

func (t *floatTable) lineCap() int {
	if t.f == 0 {
		return anyLine
	}
	return min(anyLine, fieldBytes*(t.f+1))
}

func (t *floatTable) reserve(c *lineChunk, drain func()) *data.InputError {
	if t.f == 0 {
		first, _ := lineAt(c, 0)
		if len(first) == 0 {
			return &data.InputError{File: t.path, Line: 1, Msg: "empty line, expected comma-separated numbers"}
		}
		t.f = bytes.Count(first, []byte{','}) + 1
	}
	end := c.line - 1 + c.n
	if end > t.max {
		return &data.InputError{File: t.path, Line: t.max + 1, Msg: t.tooMany}
	}
	if cur := len(t.data) / t.f; end > cur {
		drain()
		size := growRows(cur, end, t.max, rowBound(t.bound, 2*t.f))
		old := t.data
		t.data = make([]float32, size*t.f)
		copy(t.data, old)
	}
	return nil
}

func (t *floatTable) parse(c *lineChunk) *data.InputError {
	b := c.buf
	f := t.f
	out := t.data[(c.line-1-t.base)*f : (c.line-1-t.base+c.n)*f]
	o := 0
	for i := 0; i < len(b); {
		start := i
		for k := 0; k < f; k++ {
			// Fast path for one-digit integers followed by ',' (the 0/1
			// entries of bag-of-words features, most of the text).
			if k < f-1 && i+1 < len(b) && b[i+1] == ',' && b[i]-'0' <= 9 {
				out[o] = float32(b[i] - '0')
				o++
				i += 2
				continue
			}
			v, j, ok := scanFloat32(b, i)
			if !ok {
				return t.diagnose(c, start)
			}
			out[o] = v
			o++
			i = j
			if k < f-1 {
				if i >= len(b) || b[i] != ',' {
					return t.diagnose(c, start)
				}
				i++
			}
		}
		var ok bool
		if i, ok = endLine(b, i); !ok {
			return t.diagnose(c, start)
		}
	}
	return nil
}

func (t *floatTable) diagnose(c *lineChunk, start int) *data.InputError {
	text, line := lineAt(c, start)
	e := &data.InputError{File: t.path, Line: line}
	if len(text) == 0 {
		e.Msg = fmt.Sprintf("empty line, expected %d comma-separated numbers", t.f)
		return e
	}
	fields := bytes.Split(text, []byte{','})
	if len(fields) != t.f {
		e.Msg = fmt.Sprintf("has %d columns, expected %d like line 1", len(fields), t.f)
		return e
	}
	for k, f := range fields {
		if _, j, ok := scanFloat32(f, 0); ok && j == len(f) {
			continue
		}
		e.Field = fmt.Sprintf("column %d", k+1)
		v, err := strconv.ParseFloat(string(f), 32)
		switch {
		case errors.Is(err, strconv.ErrRange):
			e.Msg = fmt.Sprintf("is %s, outside the float32 range", quote(f))
		case err == nil && (math.IsNaN(v) || math.IsInf(v, 0)):
			e.Msg = fmt.Sprintf("is %s, expected a finite number", quote(f))
		default:
			e.Msg = fmt.Sprintf("is %s, expected a decimal number", quote(f))
		}
		return e
	}
	e.Msg = "malformed line " + quote(text)
	return e
}
