package job

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/gnn-spmd/gnn-spmd/comm"
	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/datafile"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
	"github.com/gnn-spmd/gnn-spmd/data/partition"
	"github.com/gnn-spmd/gnn-spmd/gnn"
	"github.com/gnn-spmd/gnn-spmd/gnn/ckpt"
)

// source is what the ranks of this process train on: the shards of the
// ranks it runs (or, for one rank on the whole graph, its view without a
// shard copy), with the run's description and the data's identity.
type source struct {
	info   Info
	id     ckpt.Data
	single *gnn.View                // one rank, whole graph
	shards map[int]*partition.Shard // by rank
}

// load reads the data for the given ranks of a q-rank job: their part
// files, or the dataset, partitioned on the fly. One rank on the whole
// graph (oneProcess) trains on the dataset itself. dist, the communicator
// of an MPI rank (nil elsewhere), partitions by slices with the other
// ranks where the method allows (distributable).
func (j *job) load(ranks []int, q int, oneProcess bool, dist comm.Comm) (*source, error) {
	s := j.spec
	src := &source{shards: map[int]*partition.Shard{}}
	src.info.Ranks, src.info.Partition, src.id.Ranks = q, s.Partition, q
	if s.Parts != "" {
		for _, r := range ranks {
			sh, meta, err := partition.ReadShard(s.Parts, r, q)
			if err != nil {
				if !oneProcess {
					// An MPI rank's part file is on its own host's disk:
					// say which host looked.
					host, _ := os.Hostname()
					return nil, fmt.Errorf("on host %s: %w", host, err)
				}
				return nil, err
			}
			src.shards[r] = sh
			src.fromMeta(meta)
		}
		src.identify(s)
		return src, nil
	}
	if !oneProcess && q > 1 && dist != nil && distributable(s) {
		return j.loadDistributed(dist, ranks[0], q) // every rank reads only its slice
	}
	ds, split, err := loadDataset(s)
	if err != nil {
		return nil, err
	}
	if q > ds.Graph.N {
		return nil, specErrorf("train: %d ranks for %d nodes: every rank needs a node of its own", q, ds.Graph.N)
	}
	src.fromDataset(ds, split)
	var parts []int32
	if oneProcess && q == 1 && !s.NoComm {
		// One rank, whole graph: no shard copies.
		if src.single, err = gnn.SingleProcess(ds, split, s.Run.Model); err != nil {
			return nil, specErrorf("train: %v", err)
		}
	} else {
		if parts, err = partition.Partition(ds, split, q, s.Partition, s.PartitionSeed); err != nil {
			return nil, err
		}
		if w := partition.EmptyPartsText(parts, q, s.Partition); w != "" && ranks[0] == 0 {
			j.rankLog(0).Warn(w)
		}
		if oneProcess {
			shards, err := partition.BuildShards(ds, split, parts, q)
			if err != nil {
				return nil, err
			}
			for r, sh := range shards {
				src.shards[r] = sh
			}
		} else {
			for _, r := range ranks {
				if src.shards[r], err = partition.BuildShard(ds, split, parts, q, r); err != nil {
					return nil, err
				}
			}
		}
	}
	if s.checkpointing() || !oneProcess {
		// A checkpoint records the data's identity; MPI ranks compare it.
		src.id.PartitionMethod, src.id.PartitionSeed = s.Partition, s.PartitionSeed
		if q == 1 {
			src.id.PartitionMethod, src.id.PartitionSeed, parts = "none", 0, nil
		}
		src.id.Fingerprint = ds.Fingerprint()
		src.id.PartitionID = partition.PartitionID(ds, src.id.Fingerprint, split, parts, q)
	}
	src.identify(s)
	return src, nil
}

// identify completes the data's identity with the run's own settings.
func (src *source) identify(s *Spec) {
	src.id.Split, src.id.NormalizeFeatures, src.id.NoComm = src.info.Split, s.Normalize, s.NoComm
}

// view turns rank r's shard into its model view, dropping the cut edges
// first for --no-comm, with its rows in the --reorder order; reordered says
// whether that moved them.
func (j *job) view(src *source, r int) (v *gnn.View, reordered bool, err error) {
	var plain *gnn.View
	if src.single != nil {
		plain = src.single
	} else {
		sh := src.shards[r]
		if j.spec.NoComm {
			sh = sh.NoComm()
		}
		if plain, err = gnn.FromShard(sh, j.spec.Run.Model); err != nil {
			return nil, false, specErrorf("train: %v", err)
		}
	}
	if v, err = plain.Reorder(j.spec.Reorder); err != nil {
		return nil, false, specErrorf("train: %v", err)
	}
	return v, v != plain, nil
}

// process is what the ranks of this process share: their data and the
// checkpoint to resume, read once by the first rank that asks, and kept
// until every rank has built its model from them.
type process struct {
	j       *job
	ranks   []int // the ranks whose data this process reads
	all     bool  // the process holds every rank (load's oneProcess)
	sharing int   // processes whose ranks share this node's memory

	once sync.Once
	src  *source
	ck   *checkpointer
	// weights is the predict command's model and parameters (Spec.Weights).
	weights *weights
	err     error

	claimed  sync.Once
	claimErr error
	unclaim  func()

	mu        sync.Mutex
	reorder   map[int]bool // ranks whose rows --reorder moved
	remaining int          // ranks yet to build their models
}

func newProcess(j *job, l launcher, q int) *process {
	ranks, all := l.loads(q)
	return &process{j: j, ranks: ranks, all: all, sharing: l.sharing(), reorder: map[int]bool{}, remaining: len(ranks)}
}

// setup reads the data of the job's ranks of this process (c, the
// calling rank's communicator: nil before the ranks start), checks that
// their models fit this node's memory, and reads --resume (from the file at
// resume, "" for the flag's): once, whichever rank asks first. A failure is
// the first rank's of the process to report; the others fail with it,
// silently.
func (p *process) setup(rank int, c comm.Comm, q int, resume string) error {
	if err := p.read(c, q, resume); err != nil && rank != p.ranks[0] {
		return &Exit{Code: ExitCode(err)}
	}
	return p.err
}

func (p *process) read(c comm.Comm, q int, resume string) error {
	p.once.Do(func() {
		j := p.j
		if j.spec.Weights != "" {
			// The checkpoint says how the data were prepared and what the
			// model is: the ranks of this process share the spec.
			if p.weights, p.err = j.readWeights(resume); p.err != nil {
				return
			}
			j.spec.Normalize, j.spec.Run = p.weights.data.NormalizeFeatures, p.weights.run
		}
		var dist comm.Comm
		if !p.all {
			dist = c // an MPI rank: the ranks may read the data together
		}
		if p.src, p.err = j.load(p.ranks, q, p.all, dist); p.err != nil {
			return
		}
		if p.weights != nil {
			if p.err = p.weights.check(p.src); p.err != nil {
				return
			}
		}
		if p.err = j.checkMemory(p.src, p.sharing); p.err != nil {
			return
		}
		if p.weights != nil {
			p.ck = &checkpointer{log: j.rankLog(0)} // writes nothing
			return
		}
		p.ck, p.err = newCheckpointer(j.spec, resume, j.identity(p.src), p.src.info.Dataset, j.rankLog(0))
	})
	return p.err
}

// claim claims rank 0's outputs (Spec.claimOutputs), once: the process
// that holds rank 0 calls it before reading any data.
func (p *process) claim() error {
	p.claimed.Do(func() { p.unclaim, p.claimErr = p.j.spec.claimOutputs() })
	return p.claimErr
}

// release lets go of the outputs claimed, if any.
func (p *process) release() {
	if p.unclaim != nil {
		p.unclaim()
	}
}

// view is rank r's view of the data read.
func (p *process) view(r int) (*gnn.View, error) {
	v, reordered, err := p.j.view(p.src, r)
	p.mu.Lock()
	p.reorder[r] = reordered
	p.mu.Unlock()
	return v, err
}

// reordered reports whether --reorder moved rank r's rows.
func (p *process) reordered(r int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reorder[r]
}

// loaded says that rank r has built its model: after the last rank, what
// loading left (read buffers, the dataset when partitioning on the fly) is
// handed back, which the epochs, allocating nothing, would never make the
// collector return, as ranks share the node's memory.
func (p *process) loaded(int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.remaining--; p.remaining == 0 {
		p.src.shards = nil
		debug.FreeOSMemory()
	}
}

// loadDataset reads --data, applies --normalize-features and picks the split.
func loadDataset(s *Spec) (*data.Dataset, string, error) {
	ds, err := datafile.Load(s.Data, ogb.Options{Build: s.Build})
	if err != nil {
		return nil, "", err
	}
	if s.Normalize {
		ds.NormalizeFeatureRows()
	}
	split, err := PickSplit(ds, s.command(), s.Data, s.Split)
	if err != nil {
		return nil, "", err
	}
	if ds.NumFeatures == 0 {
		return nil, "", data.InputErrorf(s.Data, 0, "features", "the dataset has none: training needs node features")
	}
	return ds, split, nil
}

// PickSplit returns the named split, or the dataset's only or first split;
// path is where the dataset was read from, cmd the command that asks (for
// the message).
func PickSplit(ds *data.Dataset, cmd, path, name string) (string, error) {
	names := ds.SplitNames()
	if name == "" {
		if len(names) == 0 {
			return "", data.InputErrorf(path, 0, "splits", "the dataset has none, expected a train/valid/test split")
		}
		return names[0], nil
	}
	if _, ok := ds.Splits[name]; !ok {
		return "", specErrorf("%s: --split %q: %s has no such split (it has %v)", cmd, name, path, names)
	}
	return name, nil
}

func (src *source) fromDataset(ds *data.Dataset, split string) {
	sp, i := ds.Splits[split], &src.info
	i.Dataset, i.Nodes, i.Edges = ds.Name, int64(ds.Graph.N), ds.Graph.NumEdges()
	i.Features, i.Classes, i.Split = ds.NumFeatures, ds.NumClasses, split
	i.Train, i.Valid, i.Test = len(sp.Train), len(sp.Valid), len(sp.Test)
}

func (src *source) fromMeta(m *partition.PartitionMeta) {
	i := &src.info
	i.Dataset, i.Nodes, i.Edges = m.DatasetName, int64(m.NumNodes), m.NumEdges
	i.Features, i.Classes, i.Split = m.NumFeatures, m.NumClasses, m.Split
	i.Train, i.Valid, i.Test = m.GlobalTrain, m.GlobalValid, m.GlobalTest
	i.Partition = m.Method + " (from file)"
	src.id.PartitionMethod, src.id.PartitionSeed = m.Method, m.Seed
	src.id.Fingerprint, src.id.PartitionID = m.Fingerprint, m.PartitionID
}
