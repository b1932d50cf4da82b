package ogb

// Reading an OGB-layout directory for conversion with bounded memory: the
// CSR is built from two passes over the edge list (counts, then sources in
// place), never holding the edge list itself, and the feature rows are
// handed on in file order, block by block, never held whole.

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/gnn-spmd/gnn-spmd/data"
)

// Stream is an OGB-layout dataset opened for streaming: its Dataset holds
// the graph, labels and splits (Features nil, NumFeatures set), and
// Features hands on the feature rows.
type Stream struct {
	Dataset *data.Dataset
	dir     string
	nRel    string
}

// OpenStream reads dir as Load does, except the feature rows (only their
// count is read): memory is the CSR it builds (8 bytes per node and 4 per
// edge), 16 bytes per node of cursors while building it, one byte per node
// for --self-loops, the labels and the splits, and the blocks being parsed.
// The CSR equals BuildGraph's for the same edge list and options.
func OpenStream(dir string, opt Options) (*Stream, error) {
	h, err := loadHeader(dir)
	if err != nil {
		return nil, err
	}
	n, e, nRel, eRel, labels, numClasses, labelPath := h.n, h.e, h.nRel, h.eRel, h.labels, h.classes, h.labelPath
	f, err := featureWidth(dir)
	if err != nil {
		return nil, err
	}
	g, err := streamGraph(dir, n, e, nRel, eRel, opt.Build)
	if err != nil {
		return nil, err
	}
	splits, err := loadSplits(dir, opt.Splits, labels, relPath(dir, labelPath))
	if err != nil {
		return nil, err
	}
	ds := &data.Dataset{Name: filepath.Base(filepath.Clean(dir)), Graph: g, NumFeatures: f, Labels: labels,
		NumClasses: numClasses, Splits: splits}
	// Validate everything but the features (checked as they stream).
	ds.NumFeatures = 0
	err = ds.Validate(dir)
	ds.NumFeatures = f
	if err != nil {
		return nil, err
	}
	return &Stream{Dataset: ds, dir: dir, nRel: nRel}, nil
}

// featureWidth is the column count of node-feat's first line (0 without
// the file).
func featureWidth(dir string) (int, error) {
	tf, err := openText(dir, "raw/node-feat", true)
	if err != nil || tf == nil {
		return 0, err
	}
	defer tf.Close()
	line, err := bufio.NewReaderSize(tf.r, 1<<20).ReadSlice('\n')
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		if err != nil && len(line) == 0 {
			return 0, data.InputErrorf(tf.path, 1, "", "empty file, expected one feature row per node")
		}
		return 0, data.InputErrorf(tf.path, 1, "", "empty line, expected comma-separated numbers")
	}
	return bytes.Count(line, []byte{','}) + 1, nil
}

// inOrder hands parsed blocks to their user in file order, one at a time:
// a parser that finishes early waits for the blocks before its own, so at
// most one block per parser is held.
type inOrder struct {
	mu     sync.Mutex
	cond   *sync.Cond
	next   int // the first line of the next block to hand on
	failed bool
	err    error // the user's
}

func newInOrder() *inOrder {
	o := &inOrder{next: 1}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// hand runs use on block c once every block before it has been handed on;
// nothing runs after a failure.
func (o *inOrder) hand(c *lineChunk, use func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.next != c.line && !o.failed {
		o.cond.Wait()
	}
	if o.failed {
		return
	}
	if err := use(); err != nil {
		o.err, o.failed = err, true
	}
	o.next = c.line + c.n
	o.cond.Broadcast()
}

// fail stops the handing on (a block did not parse).
func (o *inOrder) fail() {
	o.mu.Lock()
	o.failed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// rowLimit refuses a streamed file's block past its last allowed row:
// the reserve of the streaming sinks, which hold no output to grow.
type rowLimit struct {
	path    string
	max     int
	tooMany string
}

func (l *rowLimit) reserve(c *lineChunk, drain func()) *data.InputError {
	if c.line-1+c.n > l.max {
		return &data.InputError{File: l.path, Line: l.max + 1, Msg: l.tooMany}
	}
	return nil
}

// edgeSink parses edge.csv's blocks into per-block buffers and hands them
// on in order.
type edgeSink struct {
	rowLimit
	t    intTable // the checks; its columns are each block's own
	ord  *inOrder
	use  func(src, dst []int32)
	bufs sync.Pool
}

func (s *edgeSink) lineCap() int { return s.t.lineCap() }

func (s *edgeSink) parse(c *lineChunk) *data.InputError {
	buf, _ := s.bufs.Get().(*[2][]int32)
	if buf == nil {
		buf = new([2][]int32)
	}
	defer s.bufs.Put(buf)
	for k := range buf {
		if cap(buf[k]) < c.n {
			buf[k] = make([]int32, c.n)
		}
		buf[k] = buf[k][:c.n]
	}
	t := s.t
	t.cols, t.base = buf[:], c.line-1
	if e := t.parse(c); e != nil {
		s.ord.fail()
		return e
	}
	s.ord.hand(c, func() error { s.use(buf[0], buf[1]); return nil })
	return nil
}

// scanEdges runs use over edge.csv's edges in file order.
func scanEdges(dir string, n, e int, nRel, eRel string, use func(src, dst []int32)) error {
	tf, err := openText(dir, "raw/edge", false)
	if err != nil {
		return err
	}
	defer tf.Close()
	s := &edgeSink{t: *newIntTable(tf.path, "src", "dst"), ord: newInOrder(), use: use}
	s.t.lo, s.t.hi = 0, int64(n)
	s.t.expect = fmt.Sprintf("a node id in [0, %d) (%s declares %d nodes)", n, nRel, n)
	s.t.max = e
	s.t.tooMany = fmt.Sprintf("more than %d lines, expected one edge per line (%s declares %d edges)", e, eRel, e)
	s.rowLimit = rowLimit{path: tf.path, max: s.t.max, tooMany: s.t.tooMany}
	lines, err := scanLines(tf.path, tf.r, s)
	if err != nil {
		return err
	}
	if lines < e {
		return data.InputErrorf(tf.path, lines+1, "", "file ends after %d lines, expected %d edges (%s declares %d)", lines, e, eRel, e)
	}
	return nil
}

// streamGraph builds BuildGraph's CSR from two passes over edge.csv: the
// rows' lengths, then every source written at its row's cursor, in file
// order (self loops first in a row, then the edges into it, then with
// AddInverse the reverses of the edges out of it).
func streamGraph(dir string, n, e int, nRel, eRel string, opt data.BuildOptions) (*data.Graph, error) {
	fwd := make([]int64, n) // edges into each node
	var inv []int64         // edges out of each node (AddInverse)
	if opt.AddInverse {
		inv = make([]int64, n)
	}
	var hasLoop []bool
	if opt.AddSelfLoops {
		hasLoop = make([]bool, n)
	}
	err := scanEdges(dir, n, e, nRel, eRel, func(src, dst []int32) {
		for k, d := range dst {
			fwd[d]++
			if inv != nil {
				inv[src[k]]++
			}
			if hasLoop != nil && src[k] == d {
				hasLoop[d] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	// indptr, then the cursors in place of the counts.
	indptr := make([]int64, n+1)
	for i := range n {
		row := fwd[i]
		if inv != nil {
			row += inv[i]
		}
		if hasLoop != nil && !hasLoop[i] {
			row++
		}
		indptr[i+1] = indptr[i] + row
	}
	indices := make([]int32, indptr[n])
	for i := range n {
		at := indptr[i]
		if hasLoop != nil && !hasLoop[i] {
			indices[at] = int32(i)
			at++
		}
		if inv != nil {
			inv[i] = at + fwd[i]
		}
		fwd[i] = at
	}
	hasLoop = nil
	err = scanEdges(dir, n, e, nRel, eRel, func(src, dst []int32) {
		for k, d := range dst {
			indices[fwd[d]] = src[k]
			fwd[d]++
			if inv != nil {
				s := src[k]
				indices[inv[s]] = d
				inv[s]++
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return &data.Graph{N: n, Indptr: indptr, Indices: indices}, nil
}

// featureSink parses node-feat.csv's blocks and hands them on in order.
type featureSink struct {
	rowLimit
	t    floatTable
	ord  *inOrder
	use  func(rows []float32) error
	bufs sync.Pool
}

func (s *featureSink) lineCap() int { return s.t.lineCap() }

func (s *featureSink) parse(c *lineChunk) *data.InputError {
	buf, _ := s.bufs.Get().(*[]float32)
	if buf == nil {
		buf = new([]float32)
	}
	defer s.bufs.Put(buf)
	if cap(*buf) < c.n*s.t.f {
		*buf = make([]float32, c.n*s.t.f)
	}
	*buf = (*buf)[:c.n*s.t.f]
	t := s.t
	t.data, t.base = *buf, c.line-1
	if e := t.parse(c); e != nil {
		s.ord.fail()
		return e
	}
	s.ord.hand(c, func() error { return s.use(*buf) })
	return nil
}

// Features hands node-feat's rows to use in file order, a block of whole
// rows at a time (the block's memory is reused once use returns), checked
// as Load checks them. Without the file it does nothing.
func (s *Stream) Features(use func(rows []float32) error) error {
	f := s.Dataset.NumFeatures
	if f == 0 {
		return nil
	}
	tf, err := openText(s.dir, "raw/node-feat", false)
	if err != nil {
		return err
	}
	defer tf.Close()
	n := s.Dataset.Graph.N
	sink := &featureSink{t: floatTable{path: tf.path, max: n, f: f}, ord: newInOrder(), use: use}
	sink.t.tooMany = fmt.Sprintf("more than %d lines, expected one feature row per node (%s declares %d nodes)", n, s.nRel, n)
	sink.rowLimit = rowLimit{path: tf.path, max: n, tooMany: sink.t.tooMany}
	lines, err := scanLines(tf.path, tf.r, sink)
	if err != nil {
		return err
	}
	if sink.ord.err != nil {
		return sink.ord.err
	}
	if lines < n {
		return data.InputErrorf(tf.path, lines+1, "", "file ends after %d lines, expected one feature row per node (%s declares %d nodes)", lines, s.nRel, n)
	}
	return nil
}
