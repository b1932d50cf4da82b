// Package predfile is the predictions file that train --predict and the
// predict command write: a model's output for every node of a dataset, in
// the dataset's node order, so that h5py reads any array of it into a NumPy
// array whose row i is node i. Its rows arrive in node order, block by
// block, so that its writer never holds all of them (Writer).
package predfile

import (
	"math"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5"
)

// Format and Version are the root attributes format and version.
const (
	Format  = "gnn-spmd-predictions"
	Version = 1
)

// Scores says what /scores holds.
const (
	Logits        = "logits"
	Probabilities = "probabilities"
)

// Meta describes a predictions file: the data, the model and its
// parameters, and the accuracies of the predictions on the split.
type Meta struct {
	Dataset     string // for people; Fingerprint identifies the data
	Fingerprint uint64
	Nodes       int64
	Classes     int
	Model       string // sage, gcn or gat
	Checkpoint  string // the checkpoint the parameters came from, "" for train --predict
	Params      string // best or final
	ParamsEpoch int    // best: the kept epoch; final: the epochs trained
	Scores      string // Logits or Probabilities
	// EmbedLayer is the hidden layer whose output /embeddings holds (-1:
	// none), EmbedCols its width.
	EmbedLayer, EmbedCols int
	// The accuracies of /pred on the split's train, validation and test
	// nodes.
	Split                     string
	TrainAcc, ValAcc, TestAcc float64
}

func (m *Meta) attrs() []h5.Attr {
	return []h5.Attr{
		{Name: "format", Val: Format}, {Name: "version", Val: int32(Version)},
		{Name: "dataset_name", Val: m.Dataset}, {Name: "dataset_fingerprint", Val: m.Fingerprint},
		{Name: "num_nodes", Val: m.Nodes}, {Name: "num_classes", Val: int64(m.Classes)},
		{Name: "model", Val: m.Model}, {Name: "checkpoint", Val: m.Checkpoint},
		{Name: "params", Val: m.Params}, {Name: "params_epoch", Val: int64(m.ParamsEpoch)},
		{Name: "scores", Val: m.Scores},
		{Name: "embedding_layer", Val: int64(m.EmbedLayer)}, {Name: "embedding_width", Val: int64(m.EmbedCols)},
		{Name: "split", Val: m.Split},
		{Name: "train_acc", Val: m.TrainAcc}, {Name: "val_acc", Val: m.ValAcc}, {Name: "test_acc", Val: m.TestAcc},
	}
}

// Writer writes a predictions file whose rows arrive in node order.
type Writer struct {
	w    *h5.Writer
	meta Meta
	rows int64
}

// Create starts the file name (in place: the writer of a temporary file)
// with the datasets /pred, /scores and, with embeddings, /embeddings.
func Create(name string, m Meta) (*Writer, error) {
	w, err := h5.NewWriter(name, m.attrs())
	if err != nil {
		return nil, err
	}
	n := uint(m.Nodes)
	w.Begin("/pred", []int32{}, []uint{n})
	w.Begin("/scores", []float32{}, []uint{n, uint(m.Classes)})
	if m.EmbedLayer >= 0 {
		w.Begin("/embeddings", []float32{}, []uint{n, uint(m.EmbedCols)})
	}
	return &Writer{w: w, meta: m}, nil
}

// Rows writes the next rows in node order: their predicted classes,
// scores (Classes per row) and embeddings (EmbedCols per row, nil without
// embeddings).
func (w *Writer) Rows(pred []int32, scores, embeddings []float32) error {
	w.rows += int64(len(pred))
	w.w.Rows("/pred", pred)
	if err := w.w.Rows("/scores", scores); err != nil || w.meta.EmbedLayer < 0 {
		return err
	}
	return w.w.Rows("/embeddings", embeddings)
}

// Close ends the datasets, which must hold a row for every node, and
// closes the file with the digests of its arrays.
func (w *Writer) Close() error {
	w.w.End("/pred")
	w.w.End("/scores")
	if w.meta.EmbedLayer >= 0 {
		w.w.End("/embeddings")
	}
	return w.w.Close()
}

// Abort closes the file without finishing it (its temporary file is
// removed by the caller).
func (w *Writer) Abort() { w.w.Abort() }

// ReadMeta reads a predictions file's attributes, checking them.
func ReadMeta(path string) (*Meta, error) {
	var m *Meta
	err := h5.Read(path, Format, Version, "write it with gnn-spmd predict --out "+path, func(f *h5.File) error {
		m = readMeta(f)
		return f.Err()
	})
	return m, err
}

// File is a predictions file read whole.
type File struct {
	Meta
	Pred               []int32
	Scores, Embeddings []float32
}

// Read reads a whole predictions file, checking every shape against its
// attributes and every array against its digest.
func Read(path string) (*File, error) {
	p := &File{}
	err := h5.Read(path, Format, Version, "write it with gnn-spmd predict --out "+path, func(f *h5.File) error {
		p.Meta = *readMeta(f)
		if f.Err() != nil {
			return f.Err()
		}
		n := p.Nodes
		p.Pred = h5.ReadArray[int32](f, "/pred", "[num_nodes]", n)
		p.Scores = h5.ReadArray[float32](f, "/scores", "[num_nodes, num_classes]", n, int64(p.Classes))
		if p.EmbedLayer >= 0 {
			p.Embeddings = h5.ReadArray[float32](f, "/embeddings", "[num_nodes, embedding_width]", n, int64(p.EmbedCols))
		}
		for i, c := range p.Pred {
			if f.Err() == nil && (c < 0 || int(c) >= p.Classes) {
				f.Errorf("/pred", "row %d is %d, expected a class in [0, %d)", i, c, p.Classes)
			}
		}
		return f.Err()
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func readMeta(f *h5.File) *Meta {
	m := &Meta{}
	m.Dataset, m.Fingerprint = f.String("dataset_name"), f.Uint64("dataset_fingerprint")
	// The counts are bounded by the file's size (4 bytes per node in /pred)
	// before a reader allocates by them.
	m.Nodes = f.Int("num_nodes", 1, max(1, f.Size()/4))
	m.Classes = int(f.Int("num_classes", 1, int64(data.MaxClasses(int(min(m.Nodes, math.MaxInt32))))))
	m.Model, m.Checkpoint = f.String("model"), f.String("checkpoint")
	m.Params, m.ParamsEpoch = f.String("params"), int(f.Int("params_epoch", 0, math.MaxInt32))
	m.Scores = f.String("scores")
	m.EmbedLayer = int(f.Int("embedding_layer", -1, 1<<10))
	m.EmbedCols = int(f.Int("embedding_width", 0, math.MaxInt32))
	m.Split = f.String("split")
	for _, a := range []struct {
		name string
		v    *float64
	}{{"train_acc", &m.TrainAcc}, {"val_acc", &m.ValAcc}, {"test_acc", &m.TestAcc}} {
		if *a.v = f.Float64(a.name); f.Err() == nil && !(*a.v >= 0 && *a.v <= 1) {
			f.Errorf("attribute "+a.name, "is %v, expected an accuracy in [0, 1]", *a.v)
		}
	}
	switch {
	case f.Err() != nil:
	case m.Scores != Logits && m.Scores != Probabilities:
		f.Errorf("attribute scores", "is %q, expected %s or %s", m.Scores, Logits, Probabilities)
	case m.Params != "best" && m.Params != "final":
		f.Errorf("attribute params", "is %q, expected best or final", m.Params)
	case (m.EmbedLayer < 0) != (m.EmbedCols == 0):
		f.Errorf("attribute embedding_width", "is %d with embedding_layer %d: expected a width exactly where a layer is named", m.EmbedCols, m.EmbedLayer)
	}
	return m
}
