package job

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data/outfile"
	"github.com/gnn-spmd/gnn-spmd/data/predfile"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
	"github.com/gnn-spmd/gnn-spmd/gnn/metrics"
)

// PredictSpec asks for predictions: a forward pass at full precision over
// the whole graph after training (train --predict), or with a checkpoint's
// parameters (Spec.Weights, the predict command), written to Out.
type PredictSpec struct {
	Out           string // the predictions file; "" for none
	Params        string // "final" or "best" (the kept parameters of the best validation epoch)
	Probabilities bool   // softmax of the logits
	Embeddings    int    // a hidden layer whose output to write too; -1: none
}

// DefaultPredictSpec is the final parameters' logits, without embeddings.
func DefaultPredictSpec() PredictSpec { return PredictSpec{Params: "final", Embeddings: -1} }

func (p *PredictSpec) validate(layers int, predictOnly bool) error {
	switch {
	case p.Out == "":
		return nil
	case p.Params != "final" && p.Params != "best":
		return specErrorf("--params: got %q, expected final or best", p.Params)
	case p.Embeddings < -1:
		return specErrorf("--embeddings: got %d, expected a hidden layer's index (0 is the first)", p.Embeddings)
	case !predictOnly && p.Embeddings >= layers-1:
		return specErrorf("--embeddings: got %d, but the %d-layer model's hidden layers are 0 to %d", p.Embeddings, layers, layers-2)
	}
	return nil
}

// PredictInfo is what a predict run reports: where the file went, its
// rows' accuracies, the accuracies the checkpoint recorded for the same
// parameters (nil where it recorded none), the seconds the forward pass
// and the whole took, and every process's peak memory in MiB.
type PredictInfo struct {
	Out                     string
	Meta                    predfile.Meta
	Recorded                *Recorded
	Seconds, ForwardSeconds float64
	RankRSSMiB              []int64
}

// Recorded is the checkpoint's (or the training run's) full-precision
// accuracies of the parameters predicted with.
type Recorded struct{ Val, Test float64 }

// weights is what the predict command takes from its checkpoint: the
// model, its parameters, and the accuracies recorded for them.
type weights struct {
	path     string
	run      gnn.Config
	data     ckpt.Data
	params   []ckpt.Param
	epoch    int
	recorded *Recorded
}

// readWeights reads the predict command's checkpoint (from the file at
// local, or Spec.Weights itself): the model, the parameters Predict.Params
// names, and what it recorded of them.
func (j *job) readWeights(local string) (*weights, error) {
	s := j.spec
	path := s.Weights
	if local == "" {
		local = path
	}
	c, err := ckpt.Read(local)
	if err != nil {
		return nil, err
	}
	if err := c.Verify(path); err != nil {
		return nil, err
	}
	w := &weights{path: path, run: c.Config.Run, data: c.Config.Data, params: c.Params, epoch: c.Epoch}
	// Predictions exchange raw rows: no compression state to build.
	w.run.Compress = compress.MustPreset(compress.PresetNone)
	if s.Predict.Params == "best" {
		if w.params, w.epoch, err = c.BestParams(path); err != nil {
			return nil, err
		}
	}
	if x := c.Exact; x != nil {
		w.recorded = &Recorded{Val: x.FinalVal, Test: x.FinalTest}
		if s.Predict.Params == "best" {
			w.recorded = &Recorded{Val: x.BestVal, Test: x.BestTest}
		}
	}
	if err := s.Predict.validate(w.run.Layers, false); err != nil {
		return nil, err
	}
	return w, nil
}

// check refuses data the checkpoint's model was not trained on (src, as
// the ranks loaded it): another fingerprint, which covers the features'
// normalisation, or other widths. The partition and the world size may
// differ from training's.
func (w *weights) check(src *source) error {
	switch {
	case src.id.Fingerprint != w.data.Fingerprint:
		return &inputError{file: w.path, field: "dataset_fingerprint", msg: fmt.Sprintf("checkpoint has %016x, the data %016x: it was trained on other data (another dataset, or other --add-inverse or --self-loops)", w.data.Fingerprint, src.id.Fingerprint)}
	case w.run.InDim != src.info.Features || w.run.Classes != src.info.Classes:
		return &inputError{file: w.path, field: "in_dim", msg: fmt.Sprintf("the checkpoint's model takes %d features and %d classes, the data have %d and %d", w.run.InDim, w.run.Classes, src.info.Features, src.info.Classes)}
	}
	return nil
}

// inputError is a checkpoint that does not fit the data: bad input.
type inputError struct{ file, field, msg string }

func (e *inputError) Error() string { return fmt.Sprintf("%s: %s: %s", e.file, e.field, e.msg) }
func (e *inputError) ExitCode() int { return ExitBadInput }

// load copies the checkpoint's parameters into a rank's model.
func (w *weights) load(t *gnn.Trainer) error {
	ps := t.Model.Params
	if len(ps) != len(w.params) {
		return fmt.Errorf("the model has %d parameters, the checkpoint %d", len(ps), len(w.params))
	}
	for i, p := range ps {
		q := w.params[i]
		if p.Name != q.Name || len(p.W) != len(q.W) {
			return fmt.Errorf("parameter %s [%d, %d], the checkpoint has %s [%d, %d]", p.Name, p.Rows, p.Cols, q.Name, q.Rows, q.Cols)
		}
		copy(p.W, q.W)
	}
	t.Model.SyncToDevice()
	return nil
}

// predict is every rank's part of writing predictions: the forward pass
// with the parameters the trainer holds, and the file, which rank 0 writes
// from every rank's rows (writePredictions). meta says what they come
// from; rank 0 reports through the observer.
func (j *job) predict(l launcher, c comm.Comm, t *gnn.Trainer, meta predfile.Meta, recorded *Recorded, info *Info) error {
	ps := j.spec.Predict
	start := time.Now()
	p, err := t.Predict(ps.Embeddings)
	if err != nil {
		return &rankError{rank: c.Rank(), err: err}
	}
	forward := time.Since(start).Seconds()
	pred := gnn.Predicted(p.Logits, p.Classes)
	if ps.Probabilities {
		gnn.Softmax(p.Logits, p.Classes)
		meta.Scores = predfile.Probabilities
	} else {
		meta.Scores = predfile.Logits
	}
	meta.Nodes, meta.Classes, meta.Model = info.Nodes, p.Classes, j.spec.Run.Model
	meta.Split, meta.Dataset = info.Split, info.Dataset
	meta.EmbedLayer, meta.EmbedCols = ps.Embeddings, p.EmbedCols
	meta.TrainAcc, meta.ValAcc, meta.TestAcc = p.Train, p.Val, p.Test
	if err := writePredictions(c, ps.Out, meta, p, pred); err != nil {
		return &predictWriteError{err}
	}
	seconds := time.Since(start).Seconds()
	rss, err := l.peakRSS(c)
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		j.env.Observer.Predicted(&PredictInfo{Out: ps.Out, Meta: meta, Recorded: recorded, Seconds: seconds, ForwardSeconds: forward, RankRSSMiB: rss})
	}
	return nil
}

// predictWriteError is the agreed outcome of writing the predictions
// (every rank returns it or an *Exit alike), where any other error of
// predict is one rank's own.
type predictWriteError struct{ err error }

func (e *predictWriteError) Error() string { return e.err.Error() }
func (e *predictWriteError) Unwrap() error { return e.err }

// endPredict ends a rank after predict: an agreed outcome together, a
// rank's own failure by ending the job from there.
func endPredict(l launcher, c comm.Comm, err error) error {
	if err == nil {
		return nil
	}
	var we *predictWriteError
	if errors.As(err, &we) {
		return l.endTogether(c, we.err, ExitCode(we.err))
	}
	return l.abort(c, err)
}

// predictTrained writes the predictions of a run that trained (train
// --predict) with the parameters Predict.Params names, checked against the
// accuracies the run measured for them (its summary s).
func (j *job) predictTrained(l launcher, c comm.Comm, t *gnn.Trainer, s *metrics.Summary, src *source, info *Info) error {
	meta := predfile.Meta{Fingerprint: src.id.Fingerprint, Params: j.spec.Predict.Params, ParamsEpoch: j.spec.Run.Epochs}
	recorded := &Recorded{Val: s.FinalValAcc, Test: s.FinalTestAcc}
	if meta.Params == "best" {
		epoch, err := t.UseKept("acc")
		if err != nil {
			return &rankError{rank: c.Rank(), err: err}
		}
		meta.ParamsEpoch, recorded = epoch, &Recorded{Val: s.BestValAcc, Test: s.TestAtBestVal}
	}
	if !t.ExactSummary() {
		recorded = nil
	}
	return j.predict(l, c, t, meta, recorded, info)
}

// predictBlock bounds the bytes of the rows rank 0 takes in at a time.
const predictBlock = 32 << 20

var (
	opPredictCounts = comm.Op{Name: "predictions' row counts all-reduce"}
	opPredictRows   = comm.Op{Name: "predictions' rows to rank 0"}
	opPredictDone   = comm.Op{Name: "predictions' outcome all-reduce"}
)

// writePredictions has rank 0 write the predictions file from every rank's
// rows (p, pred): the ranks send it their rows of one block of node ids at
// a time, in node order, so that no rank holds more than its own rows and
// one block, and rank 0 streams each block into the file, which appears at
// path complete or not at all. Every rank returns the same outcome.
func writePredictions(c comm.Comm, path string, meta predfile.Meta, p *gnn.Predictions, pred []int32) error {
	rows := newRowSource(p, pred)
	if c.Rank() != 0 {
		return finishTogether(c, gatherRows(c, meta.Nodes, rows, nil))
	}
	err := outfile.WriteAtomic(path, func(tmp string) error {
		w, cerr := predfile.Create(tmp, meta)
		err := gatherRows(c, meta.Nodes, rows, func(b *rowBlock) error {
			if cerr != nil {
				return cerr
			}
			return w.Rows(b.pred, b.scores, b.embeddings)
		})
		switch {
		case cerr != nil:
			return cerr
		case err != nil:
			w.Abort()
			return err
		}
		return w.Close()
	})
	return finishTogether(c, err)
}

// finishTogether ends a collective write alike on every rank: rank 0's
// error is the outcome, reported by rank 0 (the others return an *Exit).
func finishTogether(c comm.Comm, err error) error {
	flag := []float64{0}
	if err != nil && c.Rank() == 0 {
		flag[0] = 1
	}
	comm.Label(c, &opPredictDone)
	if rerr := c.AllReduceFloat64(flag); rerr != nil {
		return rerr
	}
	switch {
	case flag[0] == 0:
		return nil
	case c.Rank() == 0:
		return err
	}
	return &Exit{Code: ExitFailure}
}

// rowSource is a rank's rows in node order, handed out block by block.
type rowSource struct {
	p     *gnn.Predictions
	pred  []int32
	order []int // row indices by ascending node id
	next  int
	buf   []byte // the last block's rows, packed (reused)
}

func newRowSource(p *gnn.Predictions, pred []int32) *rowSource {
	order := make([]int, len(p.IDs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(p.IDs[a]) - int(p.IDs[b]) })
	return &rowSource{p: p, pred: pred, order: order}
}

// rowBytes is one row on the wire: its node id, class, scores, embedding.
func (r *rowSource) rowBytes() int { return 4 * (2 + r.p.Classes + r.p.EmbedCols) }

// take is the rows with node ids below hi not taken yet, packed.
func (r *rowSource) take(hi int64) []byte {
	lo := r.next
	for r.next < len(r.order) && int64(r.p.IDs[r.order[r.next]]) < hi {
		r.next++
	}
	c, e := r.p.Classes, r.p.EmbedCols
	buf := r.buf[:0]
	for _, i := range r.order[lo:r.next] {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(r.p.IDs[i]))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(r.pred[i]))
		for _, v := range r.p.Logits[i*c : (i+1)*c] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		if e > 0 {
			for _, v := range r.p.Embeddings[i*e : (i+1)*e] {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
	}
	r.buf = buf
	return buf
}

// rowBlock is the rows [lo, lo+len(pred)) of the file.
type rowBlock struct {
	lo                 int64
	pred               []int32
	scores, embeddings []float32
	seen               []bool
}

// gatherRows sends every rank's rows to rank 0 one block of node ids at a
// time, where sink (rank 0's, nil elsewhere) takes each block in order; a
// block must get every one of its nodes exactly once. A sink error stops
// the rounds on every rank.
func gatherRows(c comm.Comm, nodes int64, rows *rowSource, sink func(*rowBlock) error) error {
	q, rank := c.Size(), c.Rank()
	width := rows.rowBytes()
	block := int64(max(1, predictBlock/width))
	// The buffers are reused from block to block: what the ranks hold
	// beyond their rows stays one block, not garbage that grows the heap.
	send, recv, room := make([][]byte, q), make([][]byte, q), make([][]byte, q)
	counts := make([]float64, q+1)
	var b *rowBlock
	if rank == 0 {
		cl, e := rows.p.Classes, rows.p.EmbedCols
		b = &rowBlock{pred: make([]int32, block), scores: make([]float32, block*int64(cl)), embeddings: make([]float32, block*int64(e)), seen: make([]bool, block)}
	}
	var failed error
	for lo := int64(0); lo < nodes; lo += block {
		hi := min(lo+block, nodes)
		payload := rows.take(hi)
		// Every rank's row count, and whether rank 0's sink failed.
		clear(counts)
		counts[rank] = float64(len(payload) / width)
		if failed != nil {
			counts[q] = 1
		}
		comm.Label(c, &opPredictCounts)
		if err := c.AllReduceFloat64(counts); err != nil {
			return err
		}
		if counts[q] != 0 {
			if failed == nil {
				failed = errors.New("rank 0 could not write the predictions")
			}
			return failed
		}
		for r := range q {
			send[r], recv[r] = nil, nil
		}
		send[0] = payload
		if rank == 0 {
			for r := range q {
				n := int(counts[r]) * width
				if cap(room[r]) < n {
					room[r] = make([]byte, n)
				}
				recv[r] = room[r][:n]
			}
		}
		comm.Label(c, &opPredictRows)
		if err := c.AllToAllV(send, recv); err != nil {
			return err
		}
		if rank != 0 {
			continue
		}
		if err := b.fill(lo, hi, recv, rows.p.Classes, rows.p.EmbedCols); err != nil {
			return err // a rank sent what the partition does not hold: a bug
		}
		if failed == nil {
			failed = sink(b)
		}
	}
	if rows.next != len(rows.order) {
		return fmt.Errorf("predictions: %d rows with node ids past %d", len(rows.order)-rows.next, nodes)
	}
	return failed
}

// fill sets the block to rows [lo, hi) from the ranks' payloads, each row
// exactly once.
func (b *rowBlock) fill(lo, hi int64, payloads [][]byte, classes, embed int) error {
	n := int(hi - lo)
	b.lo = lo
	b.pred, b.scores, b.embeddings = b.pred[:n], b.scores[:n*classes], b.embeddings[:n*embed]
	clear(b.seen[:n])
	got := 0
	for r, buf := range payloads {
		for len(buf) > 0 {
			id := int64(binary.LittleEndian.Uint32(buf))
			k := int(id - lo)
			if k < 0 || k >= n || b.seen[k] {
				return fmt.Errorf("predictions: rank %d sent node %d, outside rows [%d, %d) or twice", r, id, lo, hi)
			}
			b.seen[k] = true
			got++
			b.pred[k] = int32(binary.LittleEndian.Uint32(buf[4:]))
			buf = buf[8:]
			for j := range classes {
				b.scores[k*classes+j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
			}
			buf = buf[4*classes:]
			for j := range embed {
				b.embeddings[k*embed+j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
			}
			buf = buf[4*embed:]
		}
	}
	if got != n {
		return fmt.Errorf("predictions: %d of the %d nodes in [%d, %d) arrived", got, n, lo, hi)
	}
	return nil
}
