package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

// Writer writes a metrics file: one JSON line per epoch, then the summary.
// The first line goes to a temporary file beside the path, which is then
// renamed over it (outfile.Publish): until the run has an epoch to show,
// the previous file at the path (a complete earlier run) stays as it was,
// a run that fails during setup leaves it untouched, and a symbolic link
// at the path is replaced, never written through. Every later line is
// appended to the published file at once, so that a user tailing it sees
// each epoch; a line that cannot be written whole (a full disk) is cut off
// again, so the file never ends in a torn line.
type Writer struct {
	path string
	f    *os.File
	size int64 // bytes of the complete lines written
}

// NewWriter writes to path ("" writes nothing).
func NewWriter(path string) *Writer { return &Writer{path: path} }

// Epoch writes an epoch's line.
func (w *Writer) Epoch(e *Epoch) error { return w.line(e) }

// Summary writes the summary line.
func (w *Writer) Summary(s *Summary) error { return w.line(s) }

func (w *Writer) line(v any) error {
	if w.path == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if w.f == nil {
		return w.publish(b)
	}
	if _, err := w.f.WriteAt(b, w.size); err != nil {
		w.f.Truncate(w.size)
		return fmt.Errorf("writing metrics to %s: %w", w.path, err)
	}
	w.size += int64(len(b))
	return nil
}

// publish writes the first line to a temporary file and renames it over
// the path.
func (w *Writer) publish(b []byte) error {
	tmp := outfile.TempName(w.path, os.Getpid())
	outfile.Track(tmp)
	defer outfile.Untrack(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err == nil {
		if _, err = f.Write(b); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = outfile.Publish(tmp, w.path)
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}
	if err != nil {
		var oe *outfile.Error
		if errors.As(err, &oe) {
			return err
		}
		return fmt.Errorf("writing metrics to %s: %w", w.path, err)
	}
	w.f, w.size = f, int64(len(b))
	return nil
}

// Close closes the file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}

// Log is a metrics file as read: its epochs in order and, once the run has
// finished, its summary.
type Log struct {
	Path     string
	Epochs   []Epoch
	Complete bool // the summary line is present
	Summary  Summary
}

// required holds the keys an epoch line must have: a missing one is an
// error rather than a silent zero.
type required struct {
	Epoch    *int            `json:"epoch"`
	ValAcc   json.RawMessage `json:"val_acc"`
	TestAcc  json.RawMessage `json:"test_acc"`
	BytesCum *int64          `json:"bytes_cum"`
	Ratio    json.RawMessage `json:"ratio"` // one number for every layer in older files
	Summary  bool            `json:"summary"`
}

const wantFile = "expected a metrics file written by train --metrics"

// ReadFile reads a metrics file. A run without a summary line comes back
// with Complete unset: it is still running or was killed.
func ReadFile(path string) (*Log, error) {
	f, err := outfile.OpenRegular(path)
	if err != nil {
		return nil, &data.InputError{File: path, Msg: "cannot open (" + reason(err) + "): " + wantFile}
	}
	defer f.Close()
	r := &Log{Path: path}
	br := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := readLine(br, MaxLine)
		if errors.Is(err, errLineTooLong) {
			return nil, &data.InputError{File: path, Line: line, Msg: fmt.Sprintf("line longer than %d bytes: %s", MaxLine, wantFile)}
		}
		if err != nil && err != io.EOF {
			// Reading a directory fails here, not at the open.
			return nil, &data.InputError{File: path, Line: line, Msg: "cannot read (" + reason(err) + "): " + wantFile}
		}
		// The trainer flushes whole lines, so a last line without its
		// newline that is not valid JSON is a write cut short by a kill:
		// the run is incomplete, not malformed.
		partial := err == io.EOF && !json.Valid(b)
		if len(bytes.TrimSpace(b)) > 0 && !partial {
			if err := r.add(b, line); err != nil {
				return nil, err
			}
		}
		if err == io.EOF {
			return r, nil
		}
	}
}

// MaxLine is the longest line a metrics file may have: an epoch's line
// holds a few numbers per layer.
const MaxLine = 16 << 20

var errLineTooLong = errors.New("line too long")

// readLine reads a line (with its newline, if any) of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		if len(line)+len(b) > max {
			return nil, errLineTooLong
		}
		line = append(line, b...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// reason is a file error without the path, which the InputError names.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// add parses line number line and appends its epoch or sets the summary.
func (r *Log) add(b []byte, line int) error {
	bad := func(field, format string, args ...any) error {
		return &data.InputError{File: r.Path, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if r.Complete {
		return bad("", "line after the summary line: expected the summary to be last")
	}
	var req required
	if err := json.Unmarshal(b, &req); err != nil {
		return bad("", "malformed metrics line: %v", err)
	}
	if req.Summary {
		r.Complete = true
		if err := json.Unmarshal(b, &r.Summary); err != nil {
			return bad("", "malformed summary line: %v", err)
		}
		return nil
	}
	want := len(r.Epochs)
	switch {
	case req.Epoch == nil:
		return bad("epoch", "missing")
	case *req.Epoch != want:
		return bad("epoch", "%d where %d was expected: epochs must run 0, 1, 2, ...", *req.Epoch, want)
	case req.BytesCum == nil || *req.BytesCum < 0:
		return bad("bytes_cum", "missing or negative: expected the cumulative halo byte count")
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"val_acc", req.ValAcc}, {"test_acc", req.TestAcc}} {
		var x *float64
		if len(f.v) == 0 || json.Unmarshal(f.v, &x) != nil || x != nil && !(*x >= 0 && *x <= 1) {
			return bad(f.name, "missing or outside [0, 1]: expected a fraction (null: not evaluated)")
		}
	}
	if (string(req.ValAcc) == "null") != (string(req.TestAcc) == "null") {
		return bad("test_acc", "null where val_acc is not, or the reverse: expected both measured or both null (not evaluated)")
	}
	var scalar *float64
	if len(req.Ratio) > 0 && req.Ratio[0] != '[' {
		if err := json.Unmarshal(req.Ratio, &scalar); err != nil {
			return bad("ratio", "%v: expected an array of rates or one rate", err)
		}
		b = withoutRatio(b)
	}
	var e Epoch
	if err := json.Unmarshal(b, &e); err != nil {
		return bad("", "malformed metrics line: %v", err)
	}
	if scalar != nil {
		// One number for every layer: spread it over as many layers as the
		// line's other per-layer fields describe.
		e.Rates = slices.Repeat([]float64{*scalar}, max(len(e.Bits), len(e.CompError), 1))
	}
	for _, v := range e.Rates {
		if !(v > 0) || math.IsInf(v, 0) {
			return bad("ratio", "%v: expected positive finite rates (1 = raw)", v)
		}
	}
	if n := len(r.Epochs); n > 0 && e.BytesCum < r.Epochs[n-1].BytesCum {
		return bad("bytes_cum", "%d is less than the previous epoch's %d: expected a cumulative count", e.BytesCum, r.Epochs[n-1].BytesCum)
	}
	r.Epochs = append(r.Epochs, e)
	return nil
}

// withoutRatio is an epoch line with its ratio key set to null.
func withoutRatio(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	m["ratio"] = json.RawMessage("null")
	out, _ := json.Marshal(m)
	return out
}
